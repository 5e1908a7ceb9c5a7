// SPDX-License-Identifier: MIT
// Awaiting JS promises from Lua tasks: transparent await, tasks.await, errors, cancel.
'use strict';
const { makeRuntime, sleep } = require('../helpers');

let rt;
beforeEach(() => {
  rt = makeRuntime();
  rt.set('delay', (ms, v) => new Promise((r) => setTimeout(() => r(v), ms)));
});

test('a JS function returning a Promise suspends the task until it fulfils', async () => {
  rt.load('function t() local v = delay(10, "later") return v .. "!" end');
  const task = rt.start('t');
  expect(task.status).toBe('waiting');
  expect(task.waiting).toEqual({ instruction: 'PROMISE' });
  expect(await task.result).toBe('later!');
});

test.each([
  [
    'a coroutine.wrap iterator',
    'local g = coroutine.wrap(function() coroutine.yield(delay(5, 1)) coroutine.yield(delay(5, 2)) end) return g() + g()',
  ],
  [
    'a nested tasks.resume_inline',
    'local c = coroutine.create(function() return delay(5, 3) end) local ok, v = tasks.resume_inline(c) return v',
  ],
  [
    'a coroutine detached by coroutine.resume',
    'local v local c = coroutine.create(function() v = delay(5, 3) end) coroutine.resume(c) while not v do coroutine.yield() end return v',
  ],
  ['pcall', 'local ok, v = pcall(delay, 5, 3) return v'],
  ['xpcall', 'local ok, v = xpcall(delay, debug and debug.traceback or print, 5, 3) return v'],
])('awaiting works inside %s', async (_, body) => {
  rt.load(`function t() ${body} end`);
  expect(await rt.call('t')).toBe(3);
});

test('a rejection raises a Lua error that pcall sees and that keeps the JS Error', async () => {
  const err = new Error('nope');
  rt.set('fail', () => Promise.reject(err));
  rt.load('function t() local ok, e = pcall(fail) return { ok, e.message, tostring(e) } end');
  expect(await rt.call('t')).toEqual([false, 'nope', 'Error: nope']);
  rt.load('function u() fail() end');
  await expect(rt.call('u')).rejects.toBe(err);
});

test('tasks.await waits for a promise value and passes other values through', async () => {
  rt.set('p', Promise.resolve(41));
  rt.load('function t() return tasks.await(p) + tasks.await(1) end');
  expect(await rt.call('t')).toBe(42);
});

test('outside a task a returned Promise is ERR_NOT_IN_TASK, not a hang', () => {
  expect(() => rt.load('return delay(1, 1)')).toThrow(expect.objectContaining({ code: 'ERR_NOT_IN_TASK' }));
  expect(rt.load('return 1')).toEqual([1]);
});

test('cancel while awaiting ends the task at once and the late settlement is ignored', async () => {
  let settled = false;
  rt.set(
    'slow',
    () =>
      new Promise((r) =>
        setTimeout(() => {
          settled = true;
          r(1);
        }, 20),
      ),
  );
  rt.load('function t() slow() error("must not continue") end');
  const task = rt.start('t');
  expect(rt.resume(task.id)).toBe(false); // awaiting a promise is not resumable by id
  expect(rt.cancel(task.id)).toBe(true);
  await expect(task.result).rejects.toMatchObject({ code: 'ERR_TASK_CANCELLED' });
  await sleep(40);
  expect(settled).toBe(true);
  expect(rt.stats().tasks).toBe(0);
});

test('a Lua function handed to JS runs later from the loop and can resume a task', async () => {
  rt.set('later', (fn) => setTimeout(() => fn('from the loop'), 5));
  rt.load(`function t()
    local me = tasks.current_id()
    later(function(msg) tasks.resume(me, msg) end)
    return coroutine.yield("INDEFINITELY")
  end`);
  expect(await rt.call('t')).toBe('from the loop');
});

test('many sequential awaits of a resolved promise give the right sum', async () => {
  rt.set('one', Promise.resolve(1));
  rt.load('function t(n) local s = 0 for i = 1, n do s = s + tasks.await(one) end return s end');
  expect(await rt.call('t', 10000)).toBe(10000);
});
