// SPDX-License-Identifier: MIT
// Code that runs while the runtime is in the middle of its own work: task-end listeners, getters
// read during a conversion, <close> handlers, __gc finalizers, AbortSignals, odd promises. Each
// of these crashed Node or lost a task before; each test asserts the outcome, not just survival.
'use strict';
const { Runtime } = require('../../..');
const { makeRuntime, makeRuntimeWithLines, sleep } = require('../helpers');

describe('close() from code the runtime is running waits until that work returns', () => {
  test('from a taskdone listener while a timer batch runs', async () => {
    const rt = new Runtime();
    rt.load('function f() coroutine.yield("FOR", 1, "MILLISECONDS") return 1 end');
    const a = rt.start('f');
    const b = rt.start('f');
    const heard = [];
    rt.on('taskdone', (task, value) => {
      heard.push(value);
      rt.closeSync();
      expect(() => rt.load('return 1')).toThrow(expect.objectContaining({ code: 'ERR_RUNTIME_CLOSED' }));
    });
    const results = await Promise.allSettled([a.result, b.result]);
    // The batch the first end came in finishes before the close takes effect:
    // the second task, due in it too, ends done or is cancelled, never lost.
    expect(heard.length).toBeGreaterThanOrEqual(1);
    expect(heard.every((v) => v === 1)).toBe(true);
    expect(results[0]).toEqual({ status: 'fulfilled', value: 1 });
    expect(results[1].status === 'fulfilled' ? results[1].value : results[1].reason.code).toBe(
      heard.length === 2 ? 1 : 'ERR_TASK_CANCELLED',
    );
  });

  test('from a taskerror listener while an immediate batch runs', async () => {
    const rt = new Runtime();
    rt.load('function f() coroutine.yield() error("boom") end');
    const tasks = [rt.start('f'), rt.start('f')];
    let calls = 0;
    rt.on('taskerror', () => {
      calls += 1;
      rt.closeSync();
    });
    const results = await Promise.allSettled(tasks.map((t) => t.result));
    expect(calls).toBeGreaterThanOrEqual(1);
    for (const r of results) expect(r.status).toBe('rejected');
    expect(() => rt.load('return 1')).toThrow(expect.objectContaining({ code: 'ERR_RUNTIME_CLOSED' }));
  });

  test('from a getter read while a Lua function handle converts its arguments: the close completes', async () => {
    for (const throws of [false, true]) {
      const lines = [];
      const rt = new Runtime({ print: (l) => lines.push(l) });
      rt.load(`function f(t) return 1 end
        function w() local x <close> = setmetatable({}, {__close = function() print("closed") end}) tasks.sleep(5) end`);
      const task = rt.start('w');
      const f = rt.get('f');
      const arg = {
        get x() {
          rt.close();
          if (throws) throw new Error('boom');
          return 1;
        },
      };
      expect(() => f(arg)).toThrow(throws ? 'boom' : 'This Lua runtime is closed.');
      // The close happened: the waiting task's <close> ran and its result settled.
      await expect(task.result).rejects.toMatchObject({ code: 'ERR_TASK_CANCELLED' });
      expect(lines).toEqual(['closed']);
    }
  });

  test('from a getter read while a value converts: the call that converts fails, nothing is freed under it', () => {
    for (const how of ['set', 'start', 'resume', 'call']) {
      const rt = new Runtime();
      rt.load('function f(x) return type(x) end function w() return coroutine.yield("INDEFINITELY") end');
      const waiting = rt.start('w');
      const f = rt.get('f');
      const evil = {
        a: 1,
        get b() {
          rt.closeSync();
          return { c: 'x'.repeat(100) };
        },
      };
      const run = {
        set: () => rt.set('x', evil),
        start: () => rt.start('f', evil),
        resume: () => rt.resume(waiting.id, evil),
        call: () => f(evil),
      }[how];
      try {
        run();
      } catch (e) {
        expect(e.code).toBe('ERR_RUNTIME_CLOSED');
      }
      expect(() => rt.load('return 1')).toThrow(expect.objectContaining({ code: 'ERR_RUNTIME_CLOSED' }));
      waiting.result.catch(() => {});
    }
  });
});

test('a <close> handler that cancels its own task runs to its end and the task ends cancelled', async () => {
  const { rt, lines } = makeRuntimeWithLines();
  rt.load(`function f()
    local me = tasks.current_id()
    local x <close> = setmetatable({}, {__close = function()
      print("status " .. tasks.status(me), tasks.cancel(me))
      print("after")
    end})
    coroutine.yield("INDEFINITELY")
  end`);
  const task = rt.start('f');
  expect(rt.cancel(task.id)).toBe(true);
  await expect(task.result).rejects.toMatchObject({ code: 'ERR_TASK_CANCELLED' });
  expect(lines).toEqual(['status running\ttrue', 'after']);
  expect(rt.stats().tasks).toBe(0);
});

test('a task killed by taskTimeout does not run its <close> handlers (one raising aborted Node, one looping hung it)', async () => {
  const rt = makeRuntime({ taskTimeout: 30 });
  rt.load(`ran = 0
    function raises() local x <close> = setmetatable({}, {__close = function() ran = ran + 1 error("x") end}) while true do end end
    function loops() local x <close> = setmetatable({}, {__close = function() ran = ran + 1 while true do end end}) while true do end end`);
  for (const fn of ['raises', 'loops']) {
    await expect(rt.call(fn)).rejects.toMatchObject({ code: 'ERR_TASK_TIMEOUT' });
  }
  expect(rt.get('ran')).toBe(0);
  expect(rt.load('return 1 + 1')).toEqual([2]);
  expect(rt.stats().tasks).toBe(0);
});

// libs 'all': the 'safe' profile refuses __gc.
test('__gc finalizers that start tasks while a start makes room for its anchor keep every task', () => {
  const rt = makeRuntime({ libs: 'all' });
  rt.load(`for i = 1, 50 do
      setmetatable({}, {__gc = function() tasks.start(function() coroutine.yield("INDEFINITELY") end) end})
    end
    function f() coroutine.yield("INDEFINITELY") end`);
  rt.start('f');
  rt.load('collectgarbage() collectgarbage()');
  expect(rt.stats().tasks).toBe(51);
  rt.load('for i = 1, 2000 do local t = {} for j = 1, 50 do t[j] = {} end end collectgarbage()');
  expect(rt.tasks().every((t) => t.status === 'waiting')).toBe(true);
});

test("a __gc finalizer cancelling a task while its promise's value converts", async () => {
  const rt = makeRuntime({ libs: 'all' });
  let resolve;
  rt.set(
    'p',
    () =>
      new Promise((r) => {
        resolve = r;
      }),
  );
  rt.load(`function f()
    ME = tasks.current_id()
    for i = 1, 200 do
      setmetatable({}, {__gc = function() if ME then tasks.cancel(ME) ME = nil end end})
    end
    local v = p()
    return type(v)
  end`);
  const task = rt.start('f');
  const outcome = task.result.then(
    (v) => ['done', v],
    (e) => ['failed', e.code],
  );
  await sleep(5);
  resolve(Array.from({ length: 20000 }, (_, i) => ({ a: i, b: `x${i}` })));
  const [how, what] = await outcome;
  // Whether the collector ran during the conversion decides which; both are whole outcomes.
  expect([
    ['done', 'table'],
    ['failed', 'ERR_TASK_CANCELLED'],
  ]).toContainEqual([how, what]);
  expect(rt.stats().tasks).toBe(0);
});

test('an AbortSignal aborted while the task runs its first part cancels it', async () => {
  const rt = makeRuntime();
  const ac = new AbortController();
  rt.set('abort', () => ac.abort('stop'));
  rt.load('function h() abort() coroutine.yield("INDEFINITELY") end');
  const task = rt.start('h', ac.signal);
  await expect(task.result).rejects.toMatchObject({ code: 'ABORT_ERR', cause: 'stop' });
  expect(rt.stats().tasks).toBe(0);
});

test('a coroutine the CPU budget killed is never closed later (its <close> handlers would run with no hooks)', async () => {
  const rt = makeRuntime({ taskTimeout: 30 });
  rt.load(`ran = 0
    local function guarded() local x <close> = setmetatable({}, {__close = function() ran = ran + 1 while true do end end}) while true do end end
    function viawrap() coroutine.wrap(guarded)() end
    function viaclose() local c = coroutine.create(guarded) coroutine.resume(c) return coroutine.close(c) end
    function saving() saved = coroutine.running() guarded() end`);
  for (const fn of ['viawrap', 'viaclose', 'saving']) {
    await expect(rt.call(fn)).rejects.toMatchObject({ code: 'ERR_TASK_TIMEOUT' });
  }
  expect(rt.load('return coroutine.close(saved)')).toEqual([
    false,
    'killed: CPU budget exceeded (its <close> handlers are not run)',
  ]);
  expect(rt.get('ran')).toBe(0);
  // Coroutines made afterwards close as usual.
  expect(
    rt.load(
      'local c = coroutine.create(function() local x <close> = setmetatable({}, {__close = function() ran = 10 end}) coroutine.yield() end) coroutine.resume(c) return coroutine.close(c), ran',
    ),
  ).toEqual([true, 10]);
});

test("libs 'safe' refuses a metatable with __gc: no CPU budget could stop a finalizer that loops", async () => {
  const rt = makeRuntime({ taskTimeout: 30 });
  expect(() => rt.load('setmetatable({}, {__gc = function() while true do end end}) collectgarbage()')).toThrow(
    /setmetatable: __gc finalizers are not available with libs 'safe'/,
  );
  expect(rt.load('local t = setmetatable({}, {__index = {a = 1}}) return t.a')).toEqual([1]);
  expect(() => rt.load('setmetatable(setmetatable({}, {__metatable = false}), {})')).toThrow(
    /cannot change a protected metatable/,
  );
});

test('a Promise subclass whose then calls back at once still wakes the task', async () => {
  const rt = makeRuntime();
  class Eager extends Promise {
    then(ok) {
      ok(42);
      return this;
    }
  }
  rt.set('eager', () => Eager.resolve(42));
  rt.load('function f() return eager() end');
  expect(await rt.call('f')).toBe(42);
});
