// SPDX-License-Identifier: MIT
// Thousands of values onto a task's stack: start arguments, resume values, joined results, and the stack's limit.
'use strict';
const { makeRuntime, sleep } = require('../helpers');

let rt;
beforeEach(() => (rt = makeRuntime()));

describe("many values onto a task's stack (a new thread has about 40 slots; Lua checks no room outside debug builds)", () => {
  const N = 5000;
  const sumTo = (n) => (n * (n + 1)) / 2;
  beforeEach(() => {
    rt.load(`
      function sum(...) local s = 0 for i = 1, select('#', ...) do s = s + select(i, ...) end return select('#', ...), s end
      function upto(n) local t = {} for i = 1, n do t[i] = i end return t end
      function sumresumed() return sum(coroutine.yield("INDEFINITELY")) end
      function many(n) coroutine.yield() return table.unpack(upto(n)) end`);
  });

  test('tasks.start and rt.start pass every argument', async () => {
    expect(
      rt.load(`local id = tasks.start(function(...) n, s = sum(...) end, table.unpack(upto(${N}))) return n, s`),
    ).toEqual([N, sumTo(N)]);
    const args = Array.from({ length: N }, (_, i) => i + 1);
    rt.load('function both(...) return {sum(...)} end');
    expect(await rt.start('both', ...args).result).toEqual([N, sumTo(N)]);
  });

  test('tasks.resume, namazu.coroutine.resume and rt.resume pass every value', async () => {
    expect(
      rt.load(`local id = tasks.start(function() n, s = sumresumed() end)
      tasks.resume(id, table.unpack(upto(${N}))) return n, s`),
    ).toEqual([N, sumTo(N)]);
    expect(
      rt.load(`local nc = require("namazu.coroutine")
      local id = nc.start(coroutine.create(function() n, s = sumresumed() end))
      nc.resume(id, table.unpack(upto(${N}))) return n, s`),
    ).toEqual([N, sumTo(N)]);
    rt.load('function both() return {sumresumed()} end');
    const task = rt.start('both');
    expect(rt.resume(task.id, ...Array.from({ length: N }, (_, i) => i + 1))).toBe(true);
    expect(await task.result).toEqual([N, sumTo(N)]);
  });

  test('a task waiting on one that returns thousands of values gets them all', async () => {
    rt.load(`got = nil
      local id = tasks.start(many, ${N})
      tasks.start(function() got = {sum(tasks.wait(id))} end)
      tasks.start(function() got2 = select('#', tasks.wait(id)) end)`);
    await sleep(30);
    expect(rt.get('got')).toEqual([N, sumTo(N)]);
    expect(rt.get('got2')).toBe(N);
  });

  test('a resume past the stack limit is an error and leaves the task waiting', async () => {
    // The task holds 999,000 values on its stack; Lua's limit is about a million.
    rt.load(`function deep() local t = upto(999000)
      local function hold(...) return coroutine.yield("INDEFINITELY") end
      return select('#', hold(table.unpack(t))) end`);
    const task = rt.start('deep');
    const more = Array.from({ length: 20000 }, () => 0);
    expect(() => rt.resume(task.id, ...more)).toThrow(
      expect.objectContaining({
        code: 'ERR_LUA_RUNTIME',
        message: expect.stringContaining('no room for 20000 more values'),
      }),
    );
    expect(() => rt.load(`tasks.resume("${task.id}", table.unpack(upto(20000)))`)).toThrow(
      /tasks.resume: the task's stack has no room for 20000 more values/,
    );
    expect(task.status).toBe('waiting');
    expect(rt.resume(task.id, 1, 2, 3)).toBe(true);
    expect(await task.result).toBe(3);
  });
});
