// SPDX-License-Identifier: MIT
// Runtimes inside worker_threads, including terminate() with waiting tasks.
'use strict';
const path = require('node:path');
const { Worker } = require('node:worker_threads');

const entry = path.join(__dirname, '..', '..');

function worker(code) {
  return new Worker(`const { Runtime } = require(${JSON.stringify(entry)});\n${code}`, { eval: true });
}

test('a runtime works inside a Worker and posts results back', async () => {
  const w = worker(`
    const { parentPort } = require('node:worker_threads');
    const rt = new Runtime();
    rt.set('twice', (x) => x * 2);
    rt.load('function f(n) coroutine.yield("FOR", 5, "MILLISECONDS") return twice(n) end');
    rt.call('f', 21).then((v) => { parentPort.postMessage(v); rt.closeSync(); });
  `);
  const [msg] = await Promise.all([new Promise((r) => w.once('message', r)), new Promise((r) => w.once('exit', r))]);
  expect(msg).toBe(42);
});

test('terminate() with thousands of waiting tasks neither crashes nor hangs', async () => {
  const w = worker(`
    const { parentPort } = require('node:worker_threads');
    const rt = new Runtime();
    rt.load('function w() coroutine.yield("FOR", 60) end function i() coroutine.yield("INDEFINITELY") end');
    for (let k = 0; k < 3000; k++) { rt.start('w'); rt.start('i'); }
    parentPort.postMessage(rt.stats().tasks);
  `);
  const count = await new Promise((r) => w.once('message', r));
  expect(count).toBe(6000);
  const code = await w.terminate();
  expect(code).toBe(1);
});
