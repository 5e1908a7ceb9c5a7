// SPDX-License-Identifier: MIT
// clockOffsetMs and rt.setClockOffset: the runtime's wall clock is the process's plus an offset.
'use strict';
const { Runtime } = require('../../..');
const { makeRuntime, expectOnTime, LATE_MS } = require('../helpers');

const HOUR = 3600 * 1000;

test('os.time() reads the offset clock', () => {
  const rt = makeRuntime({ clockOffsetMs: -HOUR });
  const [t] = rt.load('return os.time()');
  const expected = Math.floor((Date.now() - HOUR) / 1000);
  expect(t).toBeGreaterThanOrEqual(expected - 1);
  expect(t).toBeLessThanOrEqual(expected);
});

test('an UNTIL_TIME target is on the offset clock, and so is waiting.until', async () => {
  const rt = makeRuntime({ clockOffsetMs: 5000 });
  rt.load('function t(at) coroutine.yield("UNTIL_TIME", at, "MILLISECONDS") return true end');
  const at = Date.now() + 5000 + 100; // 100 ms ahead on the offset clock, 5.1 s on the process's
  const start = Date.now();
  const task = rt.start('t', at);
  // (A ms target passes through ns in a double: it may read back 1 ms less.)
  expect(Math.abs(task.waiting.until.getTime() - at)).toBeLessThanOrEqual(1);
  await task.result;
  expect(Date.now() - start).toBeGreaterThanOrEqual(100 - 5);
  expect(Date.now() - start).toBeLessThan(100 + LATE_MS);
});

test('setClockOffset forward wakes an armed wall-clock wait by its deadline', async () => {
  const rt = makeRuntime();
  rt.load('function t(at) coroutine.yield("UNTIL_TIME", at, "MILLISECONDS") return true end');
  const task = rt.start('t', Date.now() + 10000);
  const start = Date.now();
  expect(rt.setClockOffset(9900)).toBe(rt); // 100 ms left now
  await task.result;
  expect(Date.now() - start).toBeLessThan(100 + LATE_MS);
});

test('setClockOffset back never wakes a wall-clock wait early', async () => {
  const rt = makeRuntime();
  rt.load('function t(at) coroutine.yield("UNTIL_TIME", at, "MILLISECONDS") return os.time() end');
  const start = Date.now();
  const task = rt.start('t', start + 150);
  rt.setClockOffset(-200); // 350 ms left now
  await task.result;
  expect(Date.now() - start).toBeGreaterThanOrEqual(350 - 5);
});

// A durable task's FOR is on the wall clock (test/js/durable/durable-lazy-clock.test.js).
test.each([
  ['back', -2000],
  ['forward', 2000],
])('setClockOffset %s does not move an ephemeral FOR: it measures elapsed time', async (_, by) => {
  const rt = makeRuntime();
  rt.load('function t(ms) coroutine.yield("FOR", ms, "MILLISECONDS") return true end');
  const start = Date.now();
  const task = rt.start('t', 300);
  rt.setClockOffset(by);
  await task.result;
  expectOnTime(Date.now() - start, 300);
});

test.each([
  ['a string', '5', 'ERR_INVALID_ARG_TYPE'],
  ['NaN', NaN, 'ERR_OUT_OF_RANGE'],
  ['Infinity', Infinity, 'ERR_OUT_OF_RANGE'],
  ['more than a year', 366 * 24 * HOUR, 'ERR_OUT_OF_RANGE'],
  ['less than minus a year', -366 * 24 * HOUR, 'ERR_OUT_OF_RANGE'],
])('an offset that is %s is refused, as the option and by setClockOffset', (_, v, code) => {
  expect(() => new Runtime({ clockOffsetMs: v })).toThrow(expect.objectContaining({ code }));
  expect(() => new Runtime({ clockOffsetMs: v })).toThrow(/clockOffsetMs/);
  const rt = makeRuntime();
  expect(() => rt.setClockOffset(v)).toThrow(expect.objectContaining({ code }));
});

test('setClockOffset on a closed runtime throws ERR_RUNTIME_CLOSED', () => {
  const rt = new Runtime();
  rt.closeSync();
  expect(() => rt.setClockOffset(0)).toThrow(expect.objectContaining({ code: 'ERR_RUNTIME_CLOSED' }));
});
