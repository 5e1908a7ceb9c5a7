// SPDX-License-Identifier: MIT
// The Lua face of tasks: the tasks and namazu.coroutine modules, and nested user coroutines.
'use strict';
const { Runtime } = require('../..');

let rt;
let lines;
beforeEach(() => {
  lines = [];
  rt = new Runtime({ print: (l) => lines.push(l) });
});
afterEach(() => {
  rt.closeSync();
  if (global.gc) global.gc();
});

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

describe('tasks.current_id', () => {
  test('is nil outside a task, for tasks and namazu.coroutine alike', () => {
    expect(rt.load('return tasks.current_id() == nil, require("namazu.coroutine").current_task_id() == nil')).toEqual([true, true]);
  });

  test('is the id of the running task, also inside a nested coroutine', async () => {
    rt.load(`function t()
      local a = tasks.current_id()
      local b = coroutine.wrap(function() return tasks.current_id() end)()
      local c = require("namazu.coroutine").current_task_id()
      coroutine.yield()
      return { a, b, c, tasks.current_id() }
    end`);
    const task = rt.start('t');
    expect(await task.result).toEqual([task.id, task.id, task.id, task.id]);
  });

  test('is nil again in a JS function called after the task yielded', async () => {
    rt.load('function t() coroutine.yield("FOR", 5, "MILLISECONDS") end');
    const task = rt.start('t');
    expect(rt.load('return tasks.current_id()')).toEqual([null]);
    await task.result;
  });
});

describe('tasks.start', () => {
  test('runs the function now until its first yield and returns its id', async () => {
    rt.load(`log = {}
    function parent()
      local id = tasks.start(function(a, b)
        log[#log + 1] = "child " .. a .. b
        coroutine.yield()
        log[#log + 1] = "child resumed"
      end, "x", "y")
      log[#log + 1] = "parent after start " .. tasks.status(id)
      return id
    end`);
    const id = await rt.call('parent');
    expect(typeof id).toBe('string');
    expect(rt.get('log').slice(0, 2)).toEqual(['child xy', 'parent after start waiting']);
    while (rt.task(id).status === 'waiting') await new Promise((r) => setImmediate(r));
    expect(rt.get('log')).toEqual(['child xy', 'parent after start waiting', 'child resumed']);
    expect(rt.task(id)).toEqual({ id, status: 'done' });
  });

  test('works outside a task too (from rt.load)', async () => {
    const [id] = rt.load('return tasks.start(function() coroutine.yield("INDEFINITELY") end)');
    expect(rt.task(id)).toEqual({ id, status: 'waiting', waiting: { instruction: 'INDEFINITELY' } });
    expect(rt.resume(id)).toBe(true);
    expect(rt.task(id).status).toBe('done');
  });

  // Regression: Scheduler::Start used to refuse a thread when
  // lua_isyieldable(co) was true, which it is for every fresh coroutine.
  test('accepts a coroutine made by coroutine.create', async () => {
    rt.load(`function t()
      local co = coroutine.create(function(n) coroutine.yield() return n + 1 end)
      local id = tasks.start(co, 41)
      return tasks.wait(id)
    end`);
    expect(await rt.call('t')).toBe(42);
  });

  test.each([
    ['a number', 'tasks.start(42)', /bad argument #1 to 'start' \(function or coroutine expected, got number\)/],
    ['nothing', 'tasks.start()', /bad argument #1 to 'start' \(function or coroutine expected, got no value\)/],
    ['a coroutine already started', 'local co = coroutine.create(function() coroutine.yield() end) coroutine.resume(co) tasks.start(co)', /coroutine already started, running or a task/],
    ['a dead coroutine', 'local co = coroutine.create(function() end) coroutine.resume(co) tasks.start(co)', /coroutine already started, running or a task/],
    ['the running task itself', 'tasks.start(coroutine.running())', /coroutine already started, running or a task/],
  ])('refuses %s with a catchable error', async (_, code, pattern) => {
    rt.load(`function t() return { pcall(function() ${code} end) } end`);
    const [ok, err] = await rt.call('t');
    expect(ok).toBe(false);
    expect(err).toMatch(pattern);
  });

  test('a coroutine that is already a task is refused the second time', async () => {
    rt.load(`function t()
      local co = coroutine.create(function() coroutine.yield("INDEFINITELY") end)
      local id = tasks.start(co)
      return { id, pcall(tasks.start, co) }
    end`);
    const [id, ok, err] = await rt.call('t');
    expect(typeof id).toBe('string');
    expect(ok).toBe(false);
    expect(err).toMatch(/coroutine already started, running or a task/);
  });

  test('an error before the first yield fails the new task, not the caller', async () => {
    rt.on('taskerror', () => {});
    rt.load('function t() local id = tasks.start(function() error("child boom") end) return tasks.status(id) end');
    expect(await rt.call('t')).toBe('failed');
  });

  // Regression: while rt.start/rt.call was on the stack, a Lua-started child's
  // failure was parked under its own key and never reported (nor freed).
  test('a Lua-started task failing inside a task started from JS is reported as taskerror', async () => {
    const errs = [];
    rt.on('taskerror', (t, e) => errs.push(e.message));
    rt.load('function t() local id = tasks.start(function() error("child boom") end) return tasks.status(id) end');
    expect(await rt.call('t')).toBe('failed');
    expect(errs).toEqual([expect.stringContaining('child boom')]);
  });
});

describe('tasks.resume', () => {
  test('returns true and hands the values to the waiting task, which runs before resume returns', async () => {
    rt.load(`got = nil
    function waiter() got = { coroutine.yield("INDEFINITELY") } end
    function waker(id) local ok = tasks.resume(id, "a", 2) return { ok, got } end`);
    const w = rt.start('waiter');
    const [ok, got] = await rt.call('waker', w.id);
    expect(ok).toBe(true);
    expect(got).toEqual(['a', 2]);
    expect(w.status).toBe('done');
  });

  test.each([
    ['an unknown id', '"no-such-task"', 'no such task (unknown or finished)'],
    ['a number', '12345', 'no such task (unknown or finished)'],
    ['a finished task', 'done_id', 'no such task (unknown or finished)'],
    ['a task awaiting a JS promise', 'promise_id', 'task is not waiting on a yield instruction'],
  ])('returns nil and a message for %s', async (_, arg, message) => {
    rt.set('never', () => new Promise(() => {}));
    rt.load(`done_id = tasks.start(function() end)
      promise_id = tasks.start(function() never() end)`);
    expect(rt.load(`return tasks.resume(${arg})`)).toEqual([null, message]);
  });

  test('a task resuming itself gets a clear error and stays registered', async () => {
    rt.load(`function t()
      local id = tasks.current_id()
      local ok, err = pcall(tasks.resume, id, "x")
      local r = coroutine.yield("FOR", 10, "MILLISECONDS")
      return { ok, err, tasks.status(id), r }
    end`);
    const task = rt.start('t');
    expect(rt.task(task.id).status).toBe('waiting');
    const [ok, err, status, r] = await task.result;
    expect(ok).toBe(false);
    expect(err).toMatch(/a task cannot resume itself/);
    expect(status).toBe('running');
    expect(r).toBe('SCHEDULER');
  });

  test('a task resumed by a task it resumed cannot resume its resumer (it is running)', async () => {
    rt.load(`function a()
      local me = tasks.current_id()
      local b = tasks.start(function() return { tasks.resume(me) } end)
      return tasks.wait(b)
    end`);
    const out = await rt.call('a');
    expect(out).toEqual({ 2: 'task is not waiting on a yield instruction' }); // { nil, message }
  });
});

describe('tasks.cancel and tasks.status', () => {
  test('tasks.status follows a task from waiting to done, failed or cancelled; nil for unknown', async () => {
    rt.on('taskerror', () => {});
    rt.load(`
      w = tasks.start(function() coroutine.yield("INDEFINITELY") end)
      d = tasks.start(function() return 1 end)
      f = tasks.start(function() error("x") end)
      c = tasks.start(function() coroutine.yield("INDEFINITELY") end)
    `);
    expect(rt.load('return tasks.status(w), tasks.status(d), tasks.status(f), tasks.status(c), tasks.status("nope")'))
      .toEqual(['waiting', 'done', 'failed', 'waiting', null]);
    expect(rt.load('return tasks.cancel(c)')).toEqual([true]);
    expect(rt.load('return tasks.status(c)')).toEqual(['cancelled']);
    expect(rt.load('return tasks.cancel(c)')).toEqual([null, 'no such task (unknown or finished)']);
    expect(rt.load('return tasks.cancel("nope")')).toEqual([null, 'no such task (unknown or finished)']);
  });

  test('a joiner woken by a task\'s end sees it ended: cancel does nothing, a second wait answers at once', async () => {
    rt.load(`
      function b() coroutine.yield() return 7 end
      function a(bid) local v = tasks.wait(bid) said = tasks.cancel(bid) seen = tasks.status(bid)
        again = tasks.wait(bid) return v end`);
    const b = rt.start('b');
    const a = rt.start('a', b.id);
    expect(await b.result).toBe(7);
    expect(await a.result).toBe(7);
    expect(rt.get('said')).toBeUndefined(); // nil: not cancelled, it had ended
    expect(rt.get('seen')).toBe('done');
    expect(rt.get('again')).toBe(7); // waiting on it again answers at once
    expect(rt.load(`return tasks.status("${b.id}")`)).toEqual(['done']);
    expect(rt.stats().tasks).toBe(0);
    // The runtime goes on working.
    expect(await rt.call(() => 1)).toBe(1);
  });

  test('tasks.cancel from Lua cancels a task started from JS: its result rejects', async () => {
    rt.load('function w() coroutine.yield("INDEFINITELY") end function killer(id) return tasks.cancel(id) end');
    const task = rt.start('w');
    expect(await rt.call('killer', task.id)).toBe(true);
    await expect(task.result).rejects.toMatchObject({ code: 'ERR_TASK_CANCELLED' });
  });

  test.each([
    ['returns', 'return "finished anyway"'],
    ['fails', 'error("failed anyway")'],
  ])('a running task that is cancelled and then %s ends cancelled: the cancel said true', async (_, ending) => {
    rt.on('taskerror', () => {});
    rt.load(`closed = 0
      function self() local c <close> = setmetatable({}, { __close = function() closed = closed + 1 end })
        said = tasks.cancel(tasks.current_id()) ${ending} end
      function outer() local me = tasks.current_id()
        tasks.start(function() said_by_child = tasks.cancel(me) end) ${ending} end`);
    await expect(rt.start('self').result).rejects.toMatchObject({ code: 'ERR_TASK_CANCELLED' });
    expect(rt.get('said')).toBe(true);
    expect(rt.get('closed')).toBe(1);
    await expect(rt.start('outer').result).rejects.toMatchObject({ code: 'ERR_TASK_CANCELLED' });
    expect(rt.get('said_by_child')).toBe(true);
  });
});

describe('tasks.wait', () => {
  test('returns all values of a task still running, once it finishes', async () => {
    rt.load(`function t()
      local id = tasks.start(function() coroutine.yield("FOR", 10, "MILLISECONDS") return 1, "two", nil, 4 end)
      return table.pack(tasks.wait(id))
    end`);
    const packed = await rt.call('t');
    expect(packed).toEqual({ 1: 1, 2: 'two', 4: 4, n: 4 });
  });

  test('returns the values of a task that already finished', async () => {
    rt.load(`function t()
      local id = tasks.start(function() return "a", "b" end)
      coroutine.yield()
      return { tasks.wait(id) }
    end`);
    expect(await rt.call('t')).toEqual(['a', 'b']);
  });

  test.each([
    ['no values', 'return', { n: 0 }],
    ['one value', 'return { 1 }', { 1: [1], n: 1 }],
    ['values with holes', 'return nil, 2, nil', { 2: 2, n: 3 }],
  ])('keeps %s of a finished task exactly', async (_, body, packed) => {
    rt.load(`function t()
      local id = tasks.start(function() ${body} end)
      coroutine.yield()
      return table.pack(tasks.wait(id))
    end`);
    expect(await rt.call('t')).toEqual(packed);
  });

  test('works outside a task for a finished task', () => {
    expect(rt.load('return tasks.wait(tasks.start(function() return 5 end))')).toEqual([5]);
  });

  test.each([
    ['still running', 'coroutine.yield() error("boom")'],
    ['already finished', 'error("boom")'],
  ])('re-raises the error of a task %s', async (_, body) => {
    rt.on('taskerror', () => {});
    rt.load(`function t()
      local id = tasks.start(function() ${body} end)
      return { pcall(tasks.wait, id) }
    end`, { name: 'w.lua' });
    const [ok, err] = await rt.call('t');
    expect(ok).toBe(false);
    expect(err).toMatch(/^w\.lua:2: boom/);
  });

  test('re-raises a non-string error value as it was', async () => {
    rt.on('taskerror', () => {});
    rt.load(`function t()
      local id = tasks.start(function() coroutine.yield() error({ code = 7 }) end)
      local ok, err = pcall(tasks.wait, id)
      return { ok, type(err), err.code }
    end`);
    expect(await rt.call('t')).toEqual([false, 'table', 7]);
  });

  test.each([
    ['while it waits', 'coroutine.yield() tasks.cancel(id)'],
    ['before the join', 'tasks.cancel(id)'],
  ])('raises "task cancelled" for a task cancelled %s', async (_, how) => {
    rt.load(`function t()
      local id = tasks.start(function() coroutine.yield("INDEFINITELY") end)
      tasks.start(function() ${how} end)
      return { pcall(tasks.wait, id) }
    end`);
    expect(await rt.call('t')).toEqual([false, 'task cancelled']);
  });

  test('answers nil and a message for an unknown id', async () => {
    expect(rt.load('return tasks.wait("nope")')).toEqual([null, 'no such task (unknown, or finished too long ago)']);
  });

  test('a task cannot wait for itself', async () => {
    rt.load('function t() return { pcall(tasks.wait, tasks.current_id()) } end');
    const [ok, err] = await rt.call('t');
    expect(ok).toBe(false);
    expect(err).toMatch(/a task cannot wait for itself/);
  });

  test('outside a task, waiting for a live task is an error, not a hang', () => {
    rt.load('id = tasks.start(function() coroutine.yield("INDEFINITELY") end)');
    expect(() => rt.load('return tasks.wait(id)')).toThrow(/tasks\.wait: not inside a task/);
  });

  test('several tasks can join the same task and all get its values', async () => {
    rt.load(`function t()
      local id = tasks.start(function() coroutine.yield("FOR", 5, "MILLISECONDS") return "v" end)
      local a = tasks.start(function() return tasks.wait(id) .. "a" end)
      local b = tasks.start(function() return tasks.wait(id) .. "b" end)
      return { tasks.wait(a), tasks.wait(b) }
    end`);
    expect(await rt.call('t')).toEqual(['va', 'vb']);
  });
});

describe('namazu.coroutine (seed semantics)', () => {
  test('is the same module whether required or not, with the three seed functions', () => {
    expect(rt.load(`local n = require "namazu.coroutine"
      return n == require("namazu.coroutine"), type(n.current_task_id), type(n.start), type(n.resume)`))
      .toEqual([true, 'function', 'function', 'function']);
  });

  // Regression: the same refusal of fresh coroutines as tasks.start(co).
  test('start(co) runs the coroutine now until its first yield and returns its task id', async () => {
    rt.load(`local nc = require "namazu.coroutine"
    log = {}
    function t()
      local co = coroutine.create(function()
        log[#log + 1] = "in " .. nc.current_task_id()
        coroutine.yield("FOR", 5, "MILLISECONDS")
        log[#log + 1] = "done"
        return "result"
      end)
      local id = nc.start(co)
      log[#log + 1] = "started " .. id
      return id
    end`);
    const id = await rt.call('t');
    expect(rt.get('log')).toEqual([`in ${id}`, `started ${id}`]);
    await sleep(30);
    expect(rt.get('log')).toEqual([`in ${id}`, `started ${id}`, 'done']);
  });

  test.each([
    ['an unknown id', '"t-unknown"'],
    ['a number', '7'],
    ['a finished task', 'tasks.start(function() end)'],
  ])('resume of %s returns nil and never throws', (_, arg) => {
    expect(rt.load(`return require("namazu.coroutine").resume(${arg})`)).toEqual([null, 'no such task (unknown or finished)']);
  });

  test('resume wakes an INDEFINITELY task with the values given', async () => {
    rt.load(`local nc = require "namazu.coroutine"
      function block() return { coroutine.yield("INDEFINITELY") } end
      function wake(id) return nc.resume(id, "go", 1) end`);
    const b = rt.start('block');
    expect(await rt.call('wake', b.id)).toBe(true);
    expect(await b.result).toEqual(['go', 1]);
  });
});

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
    rt.load(`function t()
      local gen = coroutine.wrap(function() for i = 1, 3 do coroutine.yield(i * i) end end)
      local sq = { gen(), gen(), gen() }
      local inside = coroutine.wrap(function() return coroutine.isyieldable(), select(2, coroutine.running()) end)
      local y, main = inside()
      local bad = coroutine.wrap(function() error("in wrap") end)
      local ok, err = pcall(bad)
      return { sq, y, main, ok, err }
    end`, { name: 'wrap.lua' });
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

  test('tasks.sleep two coroutines deep suspends the task and values flow back in place', async () => {
    rt.load(`function t()
      local inner = coroutine.create(function(x)
        tasks.sleep(0.01)
        local y = coroutine.yield(x + 1)
        tasks.sleep(0.01)
        return y * 3
      end)
      local outer = coroutine.create(function(x)
        local ok, a = coroutine.resume(inner, x)
        local b = coroutine.yield(a * 2)
        local ok2, c = coroutine.resume(inner, b)
        return c + 1
      end)
      local ok1, v1 = coroutine.resume(outer, 4)    -- inner: 5, outer: 10
      local ok2, v2 = coroutine.resume(outer, v1)   -- inner: 30, outer: 31
      return { ok1, v1, ok2, v2, coroutine.status(outer), coroutine.status(inner) }
    end`);
    expect(await rt.call('t')).toEqual([true, 10, true, 31, 'dead', 'dead']);
  });

  test('a resume by id reaches a task sleeping inside a nested coroutine: the sleep returns the values', async () => {
    rt.load(`function t()
      local gen = coroutine.wrap(function()
        local got = { tasks.sleep(60) }
        coroutine.yield(got)
      end)
      return gen()
    end`);
    const task = rt.start('t');
    expect(rt.resume(task.id, 'woken', 5)).toBe(true);
    expect(await task.result).toEqual(['woken', 5]);
  });

  test('a sleep inside a nested coroutine returns the scheduler reason when it wakes by itself', async () => {
    rt.load(`function t()
      local co = coroutine.create(function() return tasks.sleep(0.01) end)
      return { coroutine.resume(co) }
    end`);
    const [ok, reason] = await rt.call('t');
    expect(ok).toBe(true);
    expect(reason).toBe('SCHEDULER');
  });

  test('an error after a nested sleep reaches the task with its position', async () => {
    rt.load(`function t()
      local co = coroutine.wrap(function()
        tasks.sleep(0.005)
        error("after sleep")
      end)
      return { pcall(co) }
    end`, { name: 'nest.lua' });
    const [ok, err] = await rt.call('t');
    expect(ok).toBe(false);
    expect(err).toMatch(/^nest\.lua:4: after sleep/);
  });

  test('tasks.sleep outside a task is an error, not a hang', () => {
    expect(() => rt.load('tasks.sleep(0.01)')).toThrow(/tasks\.sleep: not inside a task/);
    expect(() => rt.load('coroutine.wrap(function() tasks.sleep(0.01) end)()')).toThrow(/not inside a task/);
  });
});
