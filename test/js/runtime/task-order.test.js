// SPDX-License-Identifier: MIT
// Ordering: FIFO among tasks ready at once; IMMEDIATE batches leave room for the rest of the loop.
'use strict';
const fs = require('node:fs');
const { makeRuntime, sleep } = require('../helpers');

let rt;
beforeEach(() => {
  rt = makeRuntime();
});

test.each([
  ['FOR 20 MILLISECONDS', 'coroutine.yield("FOR", 20, "MILLISECONDS")'],
  ['tasks.sleep(0.02)', 'tasks.sleep(0.02)'],
  ['IMMEDIATE', 'coroutine.yield("IMMEDIATE")'],
  ['UNTIL_TIME in the past', 'coroutine.yield("UNTIL_TIME", 0)'],
  ['FOR 0', 'coroutine.yield("FOR", 0)'],
])('100 tasks started in order with the same %s wake in start order', async (_, wait) => {
  rt.load(`log = {} function t(i) ${wait} log[#log + 1] = i end`);
  const tasks = [];
  for (let i = 1; i <= 100; i++) tasks.push(rt.start('t', i));
  await Promise.all(tasks.map((t) => t.result));
  expect(rt.get('log')).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
});

test('tasks resumed by id then re-yielding IMMEDIATE run in the order they were resumed', async () => {
  rt.load('log = {} function t(i) coroutine.yield("INDEFINITELY") coroutine.yield() log[#log + 1] = i end');
  const tasks = [];
  for (let i = 1; i <= 10; i++) tasks.push(rt.start('t', i));
  const order = [3, 1, 10, 2, 9, 4, 8, 5, 7, 6];
  for (const i of order) rt.resume(tasks[i - 1].id);
  await Promise.all(tasks.map((t) => t.result));
  expect(rt.get('log')).toEqual(order);
});

test('shorter waits wake first whatever the start order', async () => {
  rt.load('log = {} function t(i, ms) coroutine.yield("FOR", ms, "MILLISECONDS") log[#log + 1] = i end');
  const tasks = [];
  for (let i = 1; i <= 5; i++) tasks.push(rt.start('t', i, (6 - i) * 15));
  await Promise.all(tasks.map((t) => t.result));
  expect(rt.get('log')).toEqual([5, 4, 3, 2, 1]);
});

test('tasks that yield IMMEDIATE repeatedly run round by round, FIFO within each round', async () => {
  rt.load('log = {} function t(i) for round = 1, 3 do coroutine.yield() log[#log + 1] = round .. ":" .. i end end');
  const tasks = [];
  for (let i = 1; i <= 4; i++) tasks.push(rt.start('t', i));
  await Promise.all(tasks.map((t) => t.result));
  const expected = [];
  for (let round = 1; round <= 3; round++) for (let i = 1; i <= 4; i++) expected.push(`${round}:${i}`);
  expect(rt.get('log')).toEqual(expected);
});

test('a setImmediate chain from JS runs between IMMEDIATE batches', async () => {
  const log = [];
  rt.set('mark', (s) => {
    log.push(s);
  });
  rt.load('function t(i) for round = 1, 5 do coroutine.yield() mark("lua" .. round) end end');
  let running = true;
  const tick = () => {
    log.push('js');
    if (running) setImmediate(tick);
  };
  setImmediate(tick);
  const tasks = [rt.start('t', 1), rt.start('t', 2)];
  await Promise.all(tasks.map((t) => t.result));
  running = false;
  // Each round is one batch (both tasks), and JS gets a turn between batches.
  const lua = log.filter((s) => s !== 'js');
  expect(lua).toEqual(['lua1', 'lua1', 'lua2', 'lua2', 'lua3', 'lua3', 'lua4', 'lua4', 'lua5', 'lua5']);
  for (let round = 1; round < 5; round++) {
    const lastOfRound = log.lastIndexOf(`lua${round}`);
    const firstOfNext = log.indexOf(`lua${round + 1}`);
    expect(log.slice(lastOfRound, firstOfNext)).toContain('js');
  }
});

test('a task spinning on IMMEDIATE does not starve I/O or timers', async () => {
  rt.load(
    'stop = false spins = 0 function t() while not stop do coroutine.yield() spins = spins + 1 end return spins end',
  );
  const task = rt.start('t');
  const t0 = Date.now();
  await fs.promises.readFile(__filename);
  await sleep(10);
  rt.set('stop', true);
  const spins = await task.result;
  expect(spins).toBeGreaterThan(0);
  expect(Date.now() - t0).toBeLessThan(5000);
});

test('IMMEDIATE and past UNTIL_TIME waits share one FIFO queue', async () => {
  rt.load(`log = {}
    function a(i) coroutine.yield() log[#log + 1] = "a" .. i end
    function b(i) coroutine.yield("UNTIL_TIME", os.time() - 1) log[#log + 1] = "b" .. i end`);
  const tasks = [rt.start('a', 1), rt.start('b', 2), rt.start('a', 3), rt.start('b', 4)];
  await Promise.all(tasks.map((t) => t.result));
  expect(rt.get('log')).toEqual(['a1', 'b2', 'a3', 'b4']);
});
