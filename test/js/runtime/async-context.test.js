// SPDX-License-Identifier: MIT
// Async context per task: JS a task calls runs in the context the task was started in, across all its waits.
'use strict';
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { AsyncLocalStorage, createHook } = require('node:async_hooks');
const { Runtime } = require('../../..');
const { makeRuntime, sleep } = require('../helpers');

const als = new AsyncLocalStorage();
// What a JS function called from Lua sees: the store, or 'none'.
const seen = () => als.getStore() ?? 'none';

let rt;
beforeEach(() => {
  // Made inside a store of its own: the Runtime's creation context must not
  // leak into its tasks (JS called from the loop used to run in it).
  rt = als.run('runtime', () => makeRuntime());
  rt.set('seen', seen);
});

test('a JS function called after a FOR wait sees the store the task was started in', async () => {
  rt.load(`function f()
    local first = seen()
    coroutine.yield("FOR", 1, "MILLISECONDS")
    local second = seen()
    tasks.sleep(0.001)
    return { first, second, seen() }
  end`);
  const task = als.run('A', () => rt.start('f'));
  expect(await task.result).toEqual(['A', 'A', 'A']);
});

test('IMMEDIATE yields and a preempted task keep the store', async () => {
  const sliced = als.run('runtime', () => makeRuntime({ timeSlice: 2 }));
  sliced.set('seen', seen);
  sliced.load(`function f()
    coroutine.yield("IMMEDIATE")
    local a = seen()
    local t = os.clock()
    while os.clock() - t < 0.02 do end  -- preempted after its 2 ms slice
    return { a, seen() }
  end`);
  const task = als.run('A', () => sliced.start('f'));
  expect(await task.result).toEqual(['A', 'A']);
  expect(sliced.stats().preemptions).toBeGreaterThan(0);
});

test('after tasks.await of a promise, and in the callbacks a JS function registers then', async () => {
  // The promise is made and settled outside any store.
  let settle;
  const outside = new Promise((r) => {
    settle = r;
  });
  setTimeout(() => settle('v'), 2);
  rt.set('later', () => new Promise((r) => setTimeout(() => r(seen()), 1)));
  rt.load(`function f(p)
    coroutine.yield("IMMEDIATE")  -- so the await below begins in a loop turn
    local v = tasks.await(p)
    local a = seen()
    local b = later()       -- a JS function returning a promise: awaited
    return { v, a, b, seen() }
  end`);
  const task = als.run('A', () => rt.start('f', outside));
  expect(await task.result).toEqual(['v', 'A', 'A', 'A']);
});

test('after a wake by rt.resume from another store, and by rt.send from the loop', async () => {
  rt.load(`function f()
    coroutine.yield("INDEFINITELY")
    local a = seen()
    local msg = tasks.receive()
    return { a, msg, seen() }
  end`);
  const task = als.run('A', () => rt.start('f'));
  await sleep(1);
  // rt.resume runs the task inside this call: in B's context, yet it sees A.
  expect(als.run('B', () => rt.resume(task.id))).toBe(true);
  expect(als.run('B', () => rt.send(task.id, 'm'))).toBe(true);
  expect(await task.result).toEqual(['A', 'm', 'A']);
});

describe('with a store', () => {
  let dir;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lua-tasks-async-context-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  test('after a COMMIT', async () => {
    const game = await als.run('runtime', () => Runtime.open({ name: 'ctx', store: dir }));
    try {
      game.set('seen', seen);
      game.load(`function f()
        tasks.state.n = 1
        coroutine.yield("COMMIT")
        local a = seen()
        coroutine.yield("COMMIT")
        return { a, seen() }
      end`);
      const task = als.run('A', () => game.start('f'));
      expect(await task.result).toEqual(['A', 'A']);
    } finally {
      await game.close();
    }
  });
});

test('a task started from Lua by a JS-started task inherits its store, before and after the starter waits', async () => {
  rt.load(`
  local function child()
    coroutine.yield("FOR", 1, "MILLISECONDS")
    return seen()
  end
  function parent()
    local before = tasks.start(child)
    coroutine.yield("FOR", 1, "MILLISECONDS")
    local after = tasks.start(child)
    return { tasks.wait(before), tasks.wait(after) }
  end`);
  const task = als.run('A', () => rt.start('parent'));
  expect(await task.result).toEqual(['A', 'A']);
});

test("two concurrent tasks started under different stores never see each other's", async () => {
  rt.load(`function f(n)
    local out = {}
    for i = 1, n do
      if i % 2 == 0 then coroutine.yield("IMMEDIATE") else coroutine.yield("FOR", 1, "MILLISECONDS") end
      out[#out + 1] = seen()
    end
    return out
  end`);
  const a = als.run('A', () => rt.start('f', 10));
  const b = als.run('B', () => rt.start('f', 10));
  const c = rt.start('f', 10);
  expect(await a.result).toEqual(Array(10).fill('A'));
  expect(await b.result).toEqual(Array(10).fill('B'));
  expect(await c.result).toEqual(Array(10).fill('none'));
});

test('tasks started by the top level of rt.load see the store of that rt.load call, and no other', async () => {
  rt.load(`function spawn(n)
    local ids = {}
    for i = 1, n do ids[i] = tasks.start(function() coroutine.yield("FOR", 1, "MILLISECONDS") return seen() end) end
    return ids
  end
  function collect(ids) local r = {} for i, id in ipairs(ids) do r[i] = tasks.wait(id) end return r end`);
  const a = als.run('A', () => rt.load('return spawn(3)')[0]);
  const b = als.run('B', () => rt.load('return spawn(3)')[0]);
  const none = rt.load('return spawn(3)')[0];
  expect(await rt.call('collect', [...a, ...b, ...none])).toEqual([
    'A',
    'A',
    'A',
    'B',
    'B',
    'B',
    'none',
    'none',
    'none',
  ]);
});

test("a task started outside any store sees none, not the Runtime's creation store", async () => {
  rt.load(`function f()
    coroutine.yield("FOR", 1, "MILLISECONDS")
    return seen()
  end`);
  expect(await rt.start('f').result).toBe('none');
  expect(await als.run('A', () => rt.call('f'))).toBe('A');
});

test('a store a JS function enters around a Lua callback holds inside it, and for tasks started there', async () => {
  // The task's context applies to its own calls; a JS function it calls may
  // run Lua again inside a store of its own, and that Lua's calls see that.
  rt.set('within', (store, fn) => als.run(store, () => fn()));
  rt.load(`
  local function child()
    coroutine.yield("FOR", 1, "MILLISECONDS")
    return seen()
  end
  function f()
    coroutine.yield("FOR", 1, "MILLISECONDS")
    local r = within("C", function() return { seen(), tasks.start(child) } end)
    return { r[1], seen(), tasks.wait(r[2]) }
  end`);
  const task = als.run('A', () => rt.start('f'));
  expect(await task.result).toEqual(['C', 'A', 'C']);
});

test('a JS function that throws after a wait still raises its error in Lua', async () => {
  rt.set('boom', () => {
    throw new TypeError(`boom in ${seen()}`);
  });
  rt.load(`function f()
    coroutine.yield("FOR", 1, "MILLISECONDS")
    local ok, err = pcall(boom)
    return { ok, err.name, err.message }
  end`);
  const task = als.run('A', () => rt.start('f'));
  expect(await task.result).toEqual([false, 'TypeError', 'boom in A']);
});

test('a context is made only for a task that outlives its first run, shared by the tasks it starts, and destroyed with the last', async () => {
  const made = new Set();
  let destroyed = 0;
  const hook = createHook({
    init(id, type) {
      if (type === 'lua-tasks.task') made.add(id);
    },
    destroy(id) {
      if (made.has(id)) destroyed++;
    },
  }).enable();
  try {
    rt.load(`function quick() return 1 end
    function parent(n)
      local ids = {}
      for i = 1, n do ids[i] = tasks.start(function() coroutine.yield("IMMEDIATE") return i end) end
      local sum = 0
      for i = 1, n do sum = sum + tasks.wait(ids[i]) end
      return sum
    end`);
    for (let i = 0; i < 100; i++) rt.start('quick');
    expect(made.size).toBe(0);
    expect(await rt.call('parent', 100)).toBe(5050);
    expect(made.size).toBe(1);
    // The top level of one rt.load: one context for all the tasks it starts.
    const ids = als.run(
      'L',
      () =>
        rt.load(`local ids = {}
      for i = 1, 100 do ids[i] = tasks.start(function() coroutine.yield("IMMEDIATE") return seen() end) end
      return ids`)[0],
    );
    expect(made.size).toBe(2);
    const seenByThem = await rt.call(
      rt.load(
        'return function(ids) local r = {} for i, id in ipairs(ids) do r[i] = tasks.wait(id) end return r end',
      )[0],
      ids,
    );
    expect(seenByThem).toEqual(Array(100).fill('L'));
    await sleep(5); // destroy hooks run from an immediate
    expect(destroyed).toBe(2);
  } finally {
    hook.disable();
  }
});

test('a coroutine detached at a wait sees the store its task was started in, after a sleep and a promise', async () => {
  rt.set('later', () => new Promise((resolve) => setTimeout(resolve, 2)));
  rt.load(`function f()
    local got = {}
    local function part(i)
      coroutine.resume(coroutine.create(function()
        if i == 1 then tasks.sleep(0.001) else later() end
        got[i] = seen()
      end))
    end
    part(1) part(2)
    while not (got[1] and got[2]) do coroutine.yield() end
    return got
  end`);
  const task = als.run('A', () => rt.start('f'));
  expect(await task.result).toEqual(['A', 'A']);
});
