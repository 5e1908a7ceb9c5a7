// SPDX-License-Identifier: MIT
// A headless Chromium for the dashboard's tests, driven over the DevTools protocol on a pipe (no driver package).
'use strict';

// Chromium's --remote-debugging-pipe reads commands on fd 3 and writes
// replies and events on fd 4, each a JSON message ended by a NUL byte.
// Without CHROMIUM (a path) the browser is /usr/bin/chromium, Debian's.
// LUA_TASKS_REQUIRE_BROWSER=1 (set by .ci/run) makes a missing browser a
// failure, not a skip, so CI never skips the browser tests.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');

const BROWSER = process.env.CHROMIUM || '/usr/bin/chromium';
const required = process.env.LUA_TASKS_REQUIRE_BROWSER === '1';

/**
 * describe(title, fn) when Chromium is there; otherwise one skipped test
 * whose title says why (or, with LUA_TASKS_REQUIRE_BROWSER=1, one failing test).
 */
function describeBrowser(title, fn) {
  if (fs.existsSync(BROWSER)) return describe(title, fn);
  if (required) {
    return describe(title, () => {
      test(`Chromium is required (LUA_TASKS_REQUIRE_BROWSER=1) but ${BROWSER} is absent`, () => {
        throw new Error(`LUA_TASKS_REQUIRE_BROWSER=1 and no ${BROWSER}: apt-get install chromium (or set CHROMIUM).`);
      });
    });
  }
  process.stderr.write(`${title}: skipped, no Chromium at ${BROWSER} (apt-get install chromium runs it)\n`);
  return describe.skip(title, fn);
}

// How long one DevTools command may go unanswered.
const SEND_MS = 20000;

class Browser {
  #proc;
  #dir;
  #next = 1;
  #pending = new Map(); // id -> { resolve, reject }
  #waiters = []; // [sessionId, method, resolve]
  #buffer = '';
  #exited;

  static async launch() {
    const b = new Browser();
    await b.#start();
    return b;
  }

  async #start() {
    this.#dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lua-tasks-chromium-'));
    this.#proc = spawn(
      BROWSER,
      [
        '--headless=new',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-dev-shm-usage',
        '--no-first-run',
        '--no-default-browser-check',
        '--remote-debugging-pipe',
        `--user-data-dir=${this.#dir}`,
        'about:blank',
      ],
      { stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'] },
    );
    let stderr = '';
    this.#proc.stderr.on('data', (d) => (stderr = (stderr + d).slice(-4000)));
    this.#exited = new Promise((resolve) => this.#proc.once('exit', resolve));
    this.#exited.then((code) => {
      for (const { reject } of this.#pending.values()) reject(new Error(`Chromium exited (${code}): ${stderr}`));
      this.#pending.clear();
    });
    this.#proc.stdio[4].setEncoding('utf8');
    this.#proc.stdio[4].on('data', (chunk) => this.#read(chunk));
  }

  #read(chunk) {
    this.#buffer += chunk;
    for (let end = this.#buffer.indexOf('\0'); end >= 0; end = this.#buffer.indexOf('\0')) {
      const msg = JSON.parse(this.#buffer.slice(0, end));
      this.#buffer = this.#buffer.slice(end + 1);
      if (msg.id !== undefined) {
        const p = this.#pending.get(msg.id);
        this.#pending.delete(msg.id);
        if (!p) continue;
        if (msg.error) p.reject(new Error(`${msg.error.message} (${JSON.stringify(msg.error.data || '')})`));
        else p.resolve(msg.result);
      } else {
        this.#waiters = this.#waiters.filter(([session, method, resolve]) => {
          if (method !== msg.method || session !== msg.sessionId) return true;
          resolve(msg.params);
          return false;
        });
      }
    }
  }

  /** One DevTools command; its result. */
  send(method, params = {}, sessionId) {
    const id = this.#next++;
    const msg = { id, method, params };
    if (sessionId) msg.sessionId = sessionId;
    // Bounded: a command the browser never answers fails, naming itself,
    // rather than holding the test until Jest's timeout.
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        reject(new Error(`DevTools ${method} got no answer within ${SEND_MS} ms`));
      }, SEND_MS);
      const done = (f) => (v) => {
        clearTimeout(timer);
        f(v);
      };
      this.#pending.set(id, { resolve: done(resolve), reject: done(reject) });
      this.#proc.stdio[3].write(`${JSON.stringify(msg)}\0`);
    });
  }

  /** The next event `method` of `sessionId`. */
  event(method, sessionId) {
    return new Promise((resolve) => this.#waiters.push([sessionId, method, resolve]));
  }

  /** A new tab: a Page. */
  async newPage() {
    const { targetId } = await this.send('Target.createTarget', { url: 'about:blank' });
    const { sessionId } = await this.send('Target.attachToTarget', { targetId, flatten: true });
    const page = new Page(this, sessionId);
    await page.send('Page.enable');
    await page.send('Runtime.enable');
    return page;
  }

  async close() {
    if (this.#proc.exitCode === null) {
      this.send('Browser.close').catch(() => {});
      const killer = setTimeout(() => this.#proc.kill('SIGKILL'), 5000);
      await this.#exited;
      clearTimeout(killer);
    }
    fs.rmSync(this.#dir, { recursive: true, force: true });
  }
}

class Page {
  #browser;
  #session;

  constructor(browser, session) {
    this.#browser = browser;
    this.#session = session;
  }

  send(method, params) {
    return this.#browser.send(method, params, this.#session);
  }

  // Loaded once the document at `url` is complete: asked of the page, not
  // taken from a load event (the blank page the tab opened with has one too).
  async goto(url) {
    const r = await this.send('Page.navigate', { url });
    if (r.errorText) throw new Error(`Cannot load ${url}: ${r.errorText}`);
    await this.waitFor(`location.href === ${JSON.stringify(url)} && document.readyState === 'complete'`);
  }

  /** `expression`'s value in the page (awaited if a promise). */
  async evaluate(expression) {
    const r = await this.send('Runtime.evaluate', { expression, awaitPromise: true, returnByValue: true });
    if (r.exceptionDetails) {
      throw new Error(`In the page: ${r.exceptionDetails.exception?.description || r.exceptionDetails.text}`);
    }
    return r.result.value;
  }

  /**
   * Polls `expression` until it is truthy; its value. After `ms` it fails,
   * saying what the page shows (a page navigating meanwhile is asked again).
   */
  async waitFor(expression, ms = 20000) {
    const deadline = Date.now() + ms;
    for (;;) {
      const v = await this.evaluate(expression).catch((e) => {
        if (/context|navigat/i.test(e.message)) return undefined;
        throw e;
      });
      if (v) return v;
      if (Date.now() > deadline) {
        const shown = await this.evaluate('document.body ? document.body.innerText.slice(0, 400) : ""').catch(
          (e) => e.message,
        );
        throw new Error(`The page did not come to show ${expression} within ${ms} ms; it shows: ${shown}`);
      }
      await new Promise((r) => setTimeout(r, 25));
    }
  }

  /** A mouse click, as a person's, at the middle of the element `selector` names. */
  async click(selector) {
    const box = await this.waitFor(
      `(() => { const e = document.querySelector(${JSON.stringify(selector)}); if (!e) return null;
        e.scrollIntoView(); const r = e.getBoundingClientRect(); return { x: r.x + r.width / 2, y: r.y + r.height / 2 }; })()`,
    );
    for (const type of ['mousePressed', 'mouseReleased']) {
      await this.send('Input.dispatchMouseEvent', { type, x: box.x, y: box.y, button: 'left', clickCount: 1 });
    }
  }
}

module.exports = { Browser, describeBrowser };
