// SPDX-License-Identifier: MIT
// createDashboard: an HTTP request handler, mounted by the embedder in its own server, that shows what runs.
'use strict';

// Design: the handler serves one static page (page.html, page.js,
// page.css: no build step, no framework) and a small JSON API the page
// reads. Everything it shows is what inspection already gives as
// summaries: rt.tasks(), rt.inspect(id, { where, history }), listTasks and
// store.names(); no Lua runs for it, and a task's `meta` (any JS value) is
// shown only as summarize() puts it. The page builds its DOM with
// textContent, never with HTML from the data, and is served under a
// Content-Security-Policy that allows only its own script.
//
// Actions (cancel, resume) exist only with allowActions: true. They are
// POSTs that must carry the header X-Lua-Tasks-Dashboard and a JSON body:
// a page of another origin cannot send that header without a CORS
// preflight, which this handler never grants; a request a browser marks
// cross-site (Sec-Fetch-Site) or whose Origin is not this host's is refused
// too. Authentication is the embedder's: mount the handler behind it
// (docs/operations.md#the-dashboard).

const { checkOptionKeys } = require('../validate');
const fs = require('node:fs');
const path = require('node:path');
const { makeError, invalidType } = require('../errors');
const { summarize, openDecoder } = require('../runtime/inspect');
const { listTasks } = require('../runtime/task_list');
const { Task } = require('../runtime/task');
const { wasRestored } = require('../runtime/durable_restore');
const { checkName } = require('../store/contract');

const OPTIONS = ['runtimes', 'fleet', 'store', 'allowActions', 'prefix'];
const FAILURES_KEPT = 50;
const MESSAGE_MAX = 500;
const BODY_MAX = 4096;
const ACTION_HEADER = 'x-lua-tasks-dashboard';

const STATIC = {
  '/': ['page.html', 'text/html; charset=utf-8'],
  '/page.js': ['page.js', 'text/javascript; charset=utf-8'],
  '/page.css': ['page.css', 'text/css; charset=utf-8'],
};
const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; " +
  "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

function cut(s, max = MESSAGE_MAX) {
  const text = String(s);
  return text.length > max ? `${text.slice(0, max)}... (${text.length} characters)` : text;
}

// The runtimes option as [label, Runtime] pairs.
function runtimeList(runtimes) {
  if (runtimes === undefined) return [];
  const pairs =
    runtimes instanceof Map
      ? [...runtimes]
      : Array.isArray(runtimes)
        ? runtimes.map((rt, i) => [String(i), rt])
        : runtimes !== null && typeof runtimes === 'object'
          ? Object.entries(runtimes)
          : null;
  if (pairs === null) throw invalidType('options.runtimes', 'an object of label: Runtime, a Map or an array', runtimes);
  for (const [label, rt] of pairs) {
    if (!rt || typeof rt.tasks !== 'function' || typeof rt.inspect !== 'function') {
      throw invalidType(`options.runtimes[${JSON.stringify(label)}]`, 'a Runtime', rt);
    }
  }
  return pairs;
}

function checkOptions(options) {
  checkOptionKeys(options, OPTIONS, 'a dashboard', 'an object ({ runtimes, fleet, store, allowActions })');
  const { fleet, store, allowActions = false, prefix = '' } = options;
  if (typeof allowActions !== 'boolean') throw invalidType('options.allowActions', 'a boolean', allowActions);
  if (typeof prefix !== 'string' || (prefix !== '' && (!prefix.startsWith('/') || prefix.endsWith('/')))) {
    throw invalidType('options.prefix', "a path like '/tasks' (no trailing slash), or ''", prefix);
  }
  if (fleet !== undefined && (!fleet || typeof fleet.hosted !== 'function' || typeof fleet.runtime !== 'function')) {
    throw invalidType('options.fleet', 'a fleet Member (Fleet.join)', fleet);
  }
  if (store !== undefined && (!store || typeof store.scan !== 'function' || typeof store.names !== 'function')) {
    throw invalidType('options.store', 'a store with scan() and names() (a DirectoryStore, a PostgresStore)', store);
  }
  if (runtimeList(options.runtimes).length === 0 && fleet === undefined && store === undefined) {
    throw makeError('ERR_INVALID_ARG_VALUE', 'A dashboard needs something to show: give runtimes, fleet or store.');
  }
  return { runtimes: runtimeList(options.runtimes), fleet, store, allowActions, prefix };
}

// What the page may see of a task snapshot: its meta only summarised.
function shown(snapshot) {
  const out = { ...snapshot };
  if ('meta' in out) out.meta = summarize(out.meta);
  if (out.waiting && out.waiting.until instanceof Date) out.waiting = { ...out.waiting };
  return out;
}

function send(res, status, type, body, extra = {}) {
  res.writeHead(status, {
    'Content-Type': type,
    'Content-Length': Buffer.byteLength(body),
    'Cache-Control': 'no-store',
    'X-Content-Type-Options': 'nosniff',
    'X-Frame-Options': 'DENY',
    'Referrer-Policy': 'no-referrer',
    ...extra,
  });
  res.end(body);
}

function json(res, status, value) {
  send(res, status, 'application/json; charset=utf-8', JSON.stringify(value));
}

class HttpError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let size = 0;
    req.on('data', (c) => {
      size += c.length;
      if (size > BODY_MAX) reject(new HttpError(413, `The body is over ${BODY_MAX} bytes.`));
      else chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

// An action request, checked: the header, same-origin, a JSON body.
async function actionBody(req) {
  if (req.headers[ACTION_HEADER] !== '1') {
    throw new HttpError(403, `An action needs the header ${ACTION_HEADER}: 1 (the dashboard's page sends it).`);
  }
  if (req.headers['sec-fetch-site'] === 'cross-site') throw new HttpError(403, 'A cross-site action is refused.');
  const origin = req.headers.origin;
  if (origin !== undefined && origin !== 'null') {
    let host;
    try {
      host = new URL(origin).host;
    } catch {
      host = null;
    }
    if (host !== req.headers.host) {
      throw new HttpError(403, `An action from the origin ${cut(origin, 100)} is refused.`);
    }
  }
  if (!/^application\/json\b/.test(req.headers['content-type'] || '')) {
    throw new HttpError(415, 'An action is a JSON body (Content-Type: application/json).');
  }
  let body;
  try {
    body = JSON.parse(await readBody(req));
  } catch (e) {
    if (e instanceof HttpError) throw e;
    throw new HttpError(400, 'The body is not JSON.');
  }
  if (!body || typeof body.runtime !== 'string' || typeof body.id !== 'string') {
    throw new HttpError(400, 'An action names { runtime, id }.');
  }
  return body;
}

/**
 * A dashboard: an HTTP request handler `(req, res, next?)` for node:http,
 * Express (app.use('/tasks', handler)) or Fastify (handler(req.raw, reply.raw)),
 * serving a page that lists runtimes, tasks, waits, tracebacks, histories and
 * recent failures (docs/operations.md#the-dashboard).
 * @param {object} options
 * @param {Object<string, Runtime>|Map<string, Runtime>|Runtime[]} [options.runtimes] runtimes of this
 *   process, by the label the page shows
 * @param {object} [options.fleet] a fleet Member: the runtimes it hosts now
 * @param {object} [options.store] a store: its names and their durable tasks, read without activating any
 * @param {boolean} [options.allowActions=false] offer cancel and resume (POST, see above)
 * @param {string} [options.prefix=''] the path the handler is mounted at when the server does not strip it
 *   (node:http); '' when it does (Express's app.use)
 * @returns {Function & { close(): void }} the handler; close() stops keeping failures
 * @throws {TypeError} for bad options
 */
function createDashboard(options) {
  const o = checkOptions(options);
  const failures = []; // the latest FAILURES_KEPT { runtime, id, name?, message, at }
  const listeners = [];
  for (const [label, rt] of o.runtimes) {
    // With this listener attached, a runtime no longer warns about a failure
    // nobody hears: when it is the only one, it warns as the runtime would
    // (for a task nobody holds: started from Lua, restored, a callback).
    const onError = (task, err) => {
      failures.push({ runtime: label, id: task.id, name: task.name, message: cut(err && err.message), at: new Date() });
      if (failures.length > FAILURES_KEPT) failures.shift();
      if (rt.listenerCount('taskerror') === 1 && (!(task instanceof Task) || wasRestored(task))) {
        const what = task.callback ? 'a Lua callback failed' : `task ${task.id} failed`;
        process.emitWarning(`lua-tasks: ${what}: ${err && err.message}`, { code: 'LUA_TASK_FAILED' });
      }
    };
    rt.on('taskerror', onError);
    listeners.push([rt, onError]);
  }

  async function runtimes() {
    const list = [...o.runtimes];
    if (o.fleet) {
      // Each name hosted() gives is still active at its runtime() call
      // (nothing else runs in between), so runtime() activates nothing.
      for (const name of o.fleet.hosted()) {
        try {
          list.push([name, await o.fleet.runtime(name)]);
        } catch {
          // moved away meanwhile
        }
      }
    }
    return list;
  }

  async function runtimeOf(label) {
    const found = (await runtimes()).find(([l]) => l === label);
    if (!found) throw new HttpError(404, `No runtime ${JSON.stringify(cut(label, 100))} here.`);
    return found[1];
  }

  async function overview() {
    const out = { allowActions: o.allowActions, runtimes: [], failures: failures.slice().reverse(), names: null };
    for (const [label, rt] of await runtimes()) {
      let tasks;
      try {
        tasks = rt.tasks().map(shown);
      } catch (e) {
        tasks = [];
        out.runtimes.push({ label, error: cut(e.message), tasks });
        continue;
      }
      out.runtimes.push({ label, tasks });
    }
    if (o.store) out.names = await o.store.names('*', '', 1000);
    return out;
  }

  async function taskDetail(q) {
    const id = q.get('id') || '';
    if (q.has('runtime')) {
      const rt = await runtimeOf(q.get('runtime'));
      const info = await rt.inspect(id, { where: true, history: true });
      if (info === undefined) throw new HttpError(404, `No task ${JSON.stringify(cut(id, 100))} in that runtime.`);
      return shown(info);
    }
    if (!o.store) throw new HttpError(404, 'This dashboard has no store.');
    const name = q.get('name') || '';
    checkName(name);
    const decoder = openDecoder();
    try {
      const { history, skipped } = await decoder.history(o.store, name, id);
      if (history.length === 0) throw new HttpError(404, `"${name}" holds no journal of task ${cut(id, 100)}.`);
      return { id, history, historySkipped: skipped || undefined };
    } finally {
      decoder.close();
    }
  }

  async function storeTasks(q) {
    if (!o.store) throw new HttpError(404, 'This dashboard has no store.');
    const opts = { name: q.get('name') || '', limit: 100 };
    for (const key of ['status', 'entry', 'label', 'after']) if (q.get(key)) opts[key] = q.get(key);
    return listTasks(o.store, opts);
  }

  async function action(req, kind) {
    if (!o.allowActions) {
      throw new HttpError(403, 'Actions are off: createDashboard({ allowActions: true }) offers them.');
    }
    const body = await actionBody(req);
    const rt = await runtimeOf(body.runtime);
    const ok = kind === 'cancel' ? rt.cancel(body.id, 'cancelled from the dashboard') : rt.resume(body.id);
    return { ok };
  }

  const GETS = { '/api/overview': overview, '/api/task': taskDetail, '/api/tasks': storeTasks };

  async function route(req, res, rel, q) {
    if (req.method === 'GET' || req.method === 'HEAD') {
      const file = STATIC[rel];
      if (file) {
        const body = fs.readFileSync(path.join(__dirname, file[0]), 'utf8');
        send(res, 200, file[1], body, { 'Content-Security-Policy': CSP });
        return true;
      }
      const get = GETS[rel];
      if (get !== undefined) {
        json(res, 200, await get(q));
        return true;
      }
    }
    if (req.method === 'POST' && (rel === '/api/cancel' || rel === '/api/resume')) {
      json(res, 200, await action(req, rel.slice(5)));
      return true;
    }
    if (rel in STATIC || rel in GETS || rel === '/api/cancel' || rel === '/api/resume') {
      throw new HttpError(405, `${req.method} is not allowed here.`);
    }
    return undefined;
  }

  const handler = (req, res, next) => {
    const url = new URL(req.url, 'http://dashboard.invalid');
    let rel = url.pathname;
    if (o.prefix !== '') {
      if (rel === o.prefix) rel = '';
      else if (rel.startsWith(`${o.prefix}/`)) rel = rel.slice(o.prefix.length);
      else rel = null;
    }
    const done = (handled) => {
      if (handled || res.headersSent) return;
      if (typeof next === 'function') next();
      else json(res, 404, { error: 'Not found.' });
    };
    if (rel === null) return done(false);
    const full = (req.originalUrl || req.url).split('?')[0];
    if (rel === '' || (rel === '/' && !full.endsWith('/'))) {
      // The page's links are relative: it is served at the mount path with a slash.
      res.writeHead(308, { Location: `${full}/` });
      return res.end();
    }
    route(req, res, rel, url.searchParams).then(
      (handled) => done(handled),
      (e) => {
        if (res.headersSent) return res.destroy(e);
        const status = e instanceof HttpError ? e.status : e && /^ERR_(INVALID|OUT_OF)/.test(e.code) ? 400 : 500;
        json(res, status, { error: cut(e && e.message) });
      },
    );
    return undefined;
  };
  handler.close = () => {
    for (const [rt, fn] of listeners.splice(0)) rt.off('taskerror', fn);
  };
  return handler;
}

module.exports = { createDashboard };
