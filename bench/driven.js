// SPDX-License-Identifier: MIT
// Bench processes driven over stdin and stdout, a JSON line each way: the child's side (serve) and the parent's (DrivenProcess).
'use strict';

const { spawn } = require('child_process');
const readline = require('readline');

/**
 * In the child: answers the commands `cmds` ({ name: async (args) => value })
 * read from stdin, one JSON line { seq, cmd, args } each, with { seq, value }
 * or { seq, error }; says { ready, pid } first. When stdin ends `close()`
 * runs, then the process exits (1 if it failed).
 */
function serve(cmds, close, ready = true) {
  const say = (obj) => process.stdout.write(`${JSON.stringify(obj)}\n`);
  const lines = readline.createInterface({ input: process.stdin });
  lines.on('line', (line) => {
    const { seq, cmd, args } = JSON.parse(line);
    Promise.resolve()
      .then(() => cmds[cmd](args))
      .then(
        (value) => say({ seq, value }),
        (e) => say({ seq, error: e && e.stack ? e.stack : String(e) }),
      );
  });
  lines.on('close', () => {
    close().then(
      () => process.exit(0),
      (e) => {
        process.stderr.write(`${e && e.stack ? e.stack : e}\n`);
        process.exit(1);
      },
    );
  });
  say({ ready, pid: process.pid });
}

/** In the parent: `node <script> member <spec as JSON>`, its commands as calls. */
class DrivenProcess {
  #p;
  #seq = 0;
  #pending = new Map();
  #err = '';
  #ready;
  #timeoutMs;
  exited = false;

  /**
   * @param {string} script the workload file, run as `member`
   * @param {object} spec what the child is told
   * @param {number} timeoutMs how long a call may go unanswered
   */
  constructor(script, spec, timeoutMs) {
    this.#timeoutMs = timeoutMs;
    this.#p = spawn(process.execPath, [script, 'member', JSON.stringify(spec)], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    this.pid = this.#p.pid;
    this.#p.stderr.on('data', (d) => {
      this.#err = (this.#err + d).slice(-2000);
    });
    let ready;
    this.#ready = new Promise((resolve, reject) => {
      ready = { resolve, reject };
    });
    readline.createInterface({ input: this.#p.stdout }).on('line', (line) => {
      let msg;
      try {
        msg = JSON.parse(line);
      } catch {
        return; // not ours
      }
      if (msg.ready) return ready.resolve(msg);
      const p = this.#pending.get(msg.seq);
      if (!p) return;
      this.#pending.delete(msg.seq);
      clearTimeout(p.timer);
      if (msg.error) p.reject(new Error(`member ${this.pid}: ${msg.error}`));
      else p.resolve(msg.value);
    });
    this.#p.on('exit', (code, signal) => {
      this.exited = true;
      const why = new Error(`member ${this.pid} exited (${signal || code}): ${this.#err.trim()}`);
      ready.reject(why);
      for (const p of this.#pending.values()) {
        clearTimeout(p.timer);
        p.reject(why);
      }
      this.#pending.clear();
    });
    this.#p.stdin.on('error', () => {}); // written after it died: its exit says why
  }

  ready() {
    return this.#ready;
  }

  call(cmd, args = {}) {
    const seq = ++this.#seq;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(seq);
        reject(new Error(`member ${this.pid}: ${cmd} not answered within ${this.#timeoutMs} ms`));
      }, this.#timeoutMs);
      this.#pending.set(seq, { resolve, reject, timer });
      this.#p.stdin.write(`${JSON.stringify({ seq, cmd, args })}\n`);
    });
  }

  // Its stdin ends: it closes what it opened and exits.
  async stop() {
    if (this.exited) return;
    const gone = new Promise((resolve) => this.#p.once('exit', resolve));
    this.#p.stdin.end();
    const timer = setTimeout(() => this.kill(), 10000);
    await gone;
    clearTimeout(timer);
  }

  kill() {
    if (!this.exited) this.#p.kill('SIGKILL');
  }
}

module.exports = { serve, DrivenProcess };
