// SPDX-License-Identifier: MIT
// worker-pool: an HTTP server hands requests to a pool of Lua runtimes, one per worker thread.
'use strict';
const http = require('node:http');
const path = require('node:path');
const { Worker, isMainThread, parentPort } = require('node:worker_threads');

const RULES = `
  function handle(req)
    coroutine.yield("FOR", 5, "MILLISECONDS")     -- pretend to do I/O; the worker keeps serving
    local n = tonumber(req.n) or 0
    return { n = n, square = n * n, served_by = worker_id }
  end
`;

if (!isMainThread) {
  const { Runtime } = require('..');
  const rt = new Runtime();
  rt.set('worker_id', require('node:worker_threads').threadId);
  rt.load(RULES);
  parentPort.on('message', async ({ id, req }) => {
    try {
      parentPort.postMessage({ id, ok: true, value: await rt.call('handle', req) });
    } catch (e) {
      parentPort.postMessage({ id, ok: false, error: e.message });
    }
  });
} else {
  const size = 2;
  const workers = Array.from({ length: size }, () => new Worker(__filename));
  const pending = new Map();
  let seq = 0;
  for (const w of workers) w.on('message', (m) => pending.get(m.id)(m) || pending.delete(m.id));
  const ask = (req) =>
    new Promise((resolve) => {
      const id = ++seq;
      pending.set(id, resolve);
      workers[id % size].postMessage({ id, req });
    });

  const server = http.createServer(async (req, res) => {
    const n = new URL(req.url, 'http://localhost').searchParams.get('n');
    const answer = await ask({ n });
    res.writeHead(answer.ok ? 200 : 500, { 'content-type': 'application/json' });
    res.end(JSON.stringify(answer.ok ? answer.value : { error: answer.error }));
  });

  server.listen(0, '127.0.0.1', async () => {
    const { port } = server.address();
    const get = (n) =>
      new Promise((resolve, reject) => {
        http
          .get({ host: '127.0.0.1', port, path: `/?n=${n}` }, (res) => {
            let body = '';
            res.on('data', (c) => {
              body += c;
            });
            res.on('end', () => resolve(JSON.parse(body)));
          })
          .on('error', reject);
      });
    const answers = await Promise.all([1, 2, 3, 4, 5, 6].map(get));
    const workersUsed = new Set(answers.map((a) => a.served_by)).size;
    console.log(answers.map((a) => `${a.n}^2=${a.square}`).join(' '), `(${workersUsed} workers)`);
    server.close();
    for (const w of workers) await w.terminate();
  });
}
void path;
