// SPDX-License-Identifier: MIT
// Lua coroutines inside tasks: plain coroutines keep Lua's semantics, a wait inside coroutine.wrap or tasks.resume_inline suspends the whole task, and the task's own coroutine runs only under the scheduler.
'use strict';
const { Runtime } = require('../../..');
const { makeRuntime, closeAfterTest, sleep, until } = require('../helpers');

let rt;
beforeEach(() => (rt = makeRuntime()));

describe('nested coroutines', () => {
  test('a plain coroutine.yield in a user coroutine keeps standard Lua semantics inside a task', async () => {
    rt.load(`function t()
      local co = coroutine.create(function(a)
        local b = coroutine.yield(a + 1, "FOR", 1)
        local c, d = coroutine.yield("INDEFINITELY")
        return b * 2, c, d
      end)
      local out = {}
      out[#out + 1] = { coroutine.resume(co, 1) }
      out[#out + 1] = coroutine.status(co)
      out[#out + 1] = { coroutine.resume(co, 10) }
      out[#out + 1] = { coroutine.resume(co, "x", "y") }
      out[#out + 1] = coroutine.status(co)
      out[#out + 1] = { coroutine.resume(co) }
      return out
    end`);
    expect(await rt.call('t')).toEqual([
      [true, 2, 'FOR', 1],
      'suspended',
      [true, 'INDEFINITELY'],
      [true, 20, 'x', 'y'],
      'dead',
      [false, 'cannot resume dead coroutine'],
    ]);
  });

  test('coroutine.wrap generators, isyieldable, running and errors behave as in plain Lua', async () => {
    rt.load(
      `function t()
      local gen = coroutine.wrap(function() for i = 1, 3 do coroutine.yield(i * i) end end)
      local sq = { gen(), gen(), gen() }
      local inside = coroutine.wrap(function() return coroutine.isyieldable(), select(2, coroutine.running()) end)
      local y, main = inside()
      local bad = coroutine.wrap(function() error("in wrap") end)
      local ok, err = pcall(bad)
      return { sq, y, main, ok, err }
    end`,
      { name: 'wrap.lua' },
    );
    expect(await rt.call('t')).toEqual([[1, 4, 9], true, false, false, expect.stringMatching(/^wrap\.lua:6: in wrap/)]);
  });

  test('a generator that sleeps between items suspends the whole task and resumes in place', async () => {
    rt.load(`function t()
      local gen = coroutine.wrap(function()
        for i = 1, 4 do
          tasks.sleep(0.015)
          coroutine.yield(i * 10)
        end
      end)
      local out = {}
      for _ = 1, 4 do out[#out + 1] = gen() end
      return out
    end`);
    const t0 = Date.now();
    const task = rt.start('t');
    expect(task.waiting).toEqual({ instruction: 'FOR', until: expect.anything() });
    expect(await task.result).toEqual([10, 20, 30, 40]);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(55);
  });

  test('a generic for over a sleeping coroutine.wrap iterator yields every item in order', async () => {
    rt.load(`function t()
      local function items(n)
        return coroutine.wrap(function()
          for i = 1, n do coroutine.yield("FOR", 1) tasks.sleep(0.002) coroutine.yield(i) end
        end)
      end
      local seen = {}
      for kind, v in items(3) do seen[#seen + 1] = tostring(kind) .. ":" .. tostring(v) end
      return seen
    end`);
    // A plain yield with "FOR" inside the generator is a value for the loop, not a wait.
    expect(await rt.call('t')).toEqual(['FOR:1', '1:nil', 'FOR:1', '2:nil', 'FOR:1', '3:nil']);
  });

  test('tasks.sleep two coroutines deep under tasks.resume_inline suspends the task and values flow back in place', async () => {
    rt.load(`function t()
      local inner = coroutine.create(function(x)
        tasks.sleep(0.01)
        local y = coroutine.yield(x + 1)
        tasks.sleep(0.01)
        return y * 3
      end)
      local outer = coroutine.create(function(x)
        local ok, a = tasks.resume_inline(inner, x)
        local b = coroutine.yield(a * 2)
        local ok2, c = tasks.resume_inline(inner, b)
        return c + 1
      end)
      local ok1, v1 = tasks.resume_inline(outer, 4)    -- inner: 5, outer: 10
      local ok2, v2 = tasks.resume_inline(outer, v1)   -- inner: 30, outer: 31
      return { ok1, v1, ok2, v2, coroutine.status(outer), coroutine.status(inner) }
    end`);
    expect(await rt.call('t')).toEqual([true, 10, true, 31, 'dead', 'dead']);
  });

  test('a sleep inside a nested coroutine returns the scheduler reason when it wakes by itself', async () => {
    rt.load(`function t()
      local co = coroutine.create(function() return tasks.sleep(0.01) end)
      return { tasks.resume_inline(co) }
    end`);
    const [ok, reason] = await rt.call('t');
    expect(ok).toBe(true);
    expect(reason).toBe('SCHEDULER');
  });

  test('an error after a nested sleep reaches the task with its position', async () => {
    rt.load(
      `function t()
      local co = coroutine.wrap(function()
        tasks.sleep(0.005)
        error("after sleep")
      end)
      return { pcall(co) }
    end`,
      { name: 'nest.lua' },
    );
    const [ok, err] = await rt.call('t');
    expect(ok).toBe(false);
    expect(err).toMatch(/^nest\.lua:4: after sleep/);
  });
});

describe("a task's coroutine runs only under the scheduler (coroutine.running() hands it out)", () => {
  test('coroutine.resume refuses it and coroutine.close raises, from anywhere; the task stays resumable by id', async () => {
    rt.load(`function w() leaked = coroutine.running() local v = coroutine.yield("INDEFINITELY") return v end`);
    const task = rt.start('w');
    expect(rt.load('return coroutine.resume(leaked)')).toEqual([
      false,
      "cannot resume a task's coroutine (resume the task: tasks.resume(id))",
    ]);
    expect(() => rt.load('coroutine.close(leaked)', { name: 'closer' })).toThrow(
      /closer"?\]?:1: cannot close a task's coroutine \(cancel the task: tasks.cancel\(id\)\)/,
    );
    // From another task too, and its own coroutine from inside.
    rt.load(`tasks.start(function() other = {coroutine.resume(leaked)} end)
      mine = tasks.start(function() self_ok, self_err = coroutine.resume(coroutine.running()) end)`);
    expect(rt.get('other')).toEqual([false, "cannot resume a task's coroutine (resume the task: tasks.resume(id))"]);
    expect(rt.get('self_ok')).toBe(false);
    expect(task.status).toBe('waiting');
    expect(rt.resume(task.id, 'by id')).toBe(true);
    expect(await task.result).toBe('by id');
    // Ended: a plain dead coroutine again.
    expect(rt.load('return coroutine.resume(leaked)')).toEqual([false, 'cannot resume dead coroutine']);
    expect(rt.load('return coroutine.close(leaked)')).toEqual([true]);
  });

  test('a JS call cancelling the task cannot reset its coroutine under a resume from Lua', async () => {
    // Before the refusal, Lua resumed the waiting task's coroutine itself,
    // poke() cancelled that task from JS, and the reset freed the stack the
    // interpreter was running on (Node crashed).
    rt.set('poke', () => rt.cancel(id)); // id is set before anything can call poke
    rt.load(`function w() leaked = coroutine.running() coroutine.yield("INDEFINITELY") poke() return "ran" end`);
    const task = rt.start('w');
    const id = task.id;
    expect(rt.load('return coroutine.resume(leaked)')[0]).toBe(false);
    expect(rt.cancel(id)).toBe(true);
    await expect(task.result).rejects.toMatchObject({ code: 'ERR_TASK_CANCELLED' });
    expect(rt.load('return 1 + 1')).toEqual([2]);
  });

  test('a start deferred by a COMMIT cannot be closed or resumed before it runs', async () => {
    rt.closeSync();
    let release;
    const store = {
      load: async () => null,
      save: () =>
        new Promise((r) => {
          release = r;
        }),
    };
    rt = closeAfterTest(await Runtime.open({ name: 'deferred', store }));
    rt.load(`co = coroutine.create(function(...) return select('#', ...) end)
      big = {} for i = 1, 5000 do big[i] = i end`);
    const committed = rt.commit(); // the snapshot lock is held until this JS yields to a microtask
    const [id, status] = rt.load('local id = tasks.start(co, table.unpack(big)) return id, tasks.status(id)');
    expect(status).toBe('waiting');
    expect(() => rt.load('coroutine.close(co)')).toThrow(/cannot close a task's coroutine/);
    expect(rt.load('return coroutine.resume(co)')[0]).toBe(false);
    await until(() => release !== undefined); // the snapshot is taken: the save has begun
    release();
    await committed;
    await sleep(10);
    expect(rt.task(id)).toMatchObject({ status: 'done' });
    expect(rt.load(`return tasks.wait("${id}")`)).toEqual([5000]);
  });
});
