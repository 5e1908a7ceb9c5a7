// SPDX-License-Identifier: MIT
// Garbage collection: unreachable runtimes are freed; handles keep their state alive.
// Forcing a GC needs --expose-gc, so the measurements run in a child process.
'use strict';
const { Runtime } = require('../../..');
const { fixture, runNode, expectCleanExit, sleep } = require('../helpers');

async function runFixture(...args) {
  const r = await runNode(['--expose-gc', fixture('gc-runtimes.js'), ...args], { timeout: 120000 });
  expectCleanExit(r);
  return JSON.parse(r.stdout);
}

test('500 dropped runtimes with data, functions and waiting tasks are all finalized, in bounded memory', async () => {
  const out = await runFixture('churn');
  expect(out.created).toBe(500);
  // FinalizationRegistry callbacks are not guaranteed, but after gc() and
  // several turns of the loop nearly all of them have run.
  expect(out.finalized).toBeGreaterThanOrEqual(450);
  // 300 runtimes of ~1.5 MB each, if kept, would add ~450 MiB.
  expect(out.rssGrownMiB).toBeLessThan(150);
  expect(out.externalGrownMiB).toBeLessThan(150);
}, 120000);

test('a runtime collected without close() lets go of what Node-API holds for it: its async resource is destroyed', async () => {
  const r = await runNode(['--expose-gc', fixture('gc-async-resources.js'), '200'], { timeout: 120000 });
  expectCleanExit(r);
  const out = JSON.parse(r.stdout);
  expect(out.initialised).toBe(200);
  expect(out.collected).toBeGreaterThanOrEqual(180);
  // Each collected runtime's resource is destroyed (before, none was).
  expect(out.destroyed).toBeGreaterThanOrEqual(out.collected);
}, 120000);

test('a Lua function handle keeps working after its Runtime object is unreachable', async () => {
  const out = await runFixture('churn', '10', '100');
  expect(out.f).toBe(2); // inc(1) from JS, through Lua, back to JS
}, 120000);

// Issue 2: "A runtime that becomes unreachable is freed by the GC". A runtime
// whose Lua globals hold a JS closure that refers to the runtime (a common
// pattern: rt.set('log', (m) => rt.emit('log', m))) is reachable only from
// itself, yet none of them is ever finalized and their Lua states leak (with
// 100 runtimes per round instead of 20, RSS grows by ~900 MiB).
test.failing(
  'a runtime whose Lua state holds a JS closure over the runtime itself is still freed',
  async () => {
    const out = await runFixture('cycle', '20', '3000');
    expect(out.finalized).toBeGreaterThanOrEqual(out.created / 2);
  },
  120000,
);

test('a runtime with a pending timed task is kept alive until the task ends', async () => {
  const results = [];
  (() => {
    const rt = new Runtime();
    rt.load('function t() coroutine.yield("FOR", 30, "MILLISECONDS") return "finished" end');
    rt.on('taskdone', (task, v) => results.push(v));
    rt.start('t');
  })();
  if (global.gc) global.gc();
  await sleep(80);
  expect(results).toEqual(['finished']);
});
