// SPDX-License-Identifier: MIT
// A task's life: what starts one (rt.start, rt.call, tasks.start), its status, how it ends, its results (rt.call, tasks.wait) and the taskdone/taskerror events.
'use strict';
const { makeRuntime, sleep, turn, until } = require('../helpers');

let rt;
beforeEach(() => {
  rt = makeRuntime({
    modules: { mod: 'return { fn = function(x) coroutine.yield() return x * 2 end }' },
  });
});

describe('what rt.start accepts', () => {
  test.each([
    ['a global name', () => rt.load('function double(x) coroutine.yield() return x * 2 end'), () => 'double'],
    [
      'a dotted path into a global table',
      () => rt.load('tbl = { fn = function(x) coroutine.yield() return x * 2 end }'),
      () => 'tbl.fn',
    ],
    [
      'a deeper dotted path into nested global tables',
      () => rt.load('a = { b = { c = function(x) coroutine.yield() return x * 2 end } }'),
      () => 'a.b.c',
    ],
    [
      'a module.fn path of a module from the modules option (already required)',
      () => rt.load('require "mod"'),
      () => 'mod.fn',
    ],
    ['a Lua function', () => {}, () => rt.load('return function(x) coroutine.yield() return x * 2 end')[0]],
  ])('starts a task from %s', async (_, setup, target) => {
    setup();
    const task = rt.start(target(), 21);
    expect(task.status).toBe('waiting');
    expect(await task.result).toBe(42);
    expect(task.status).toBe('done');
  });

  // The path is read into a 64-byte buffer when it fits: these lie around
  // and past its end, in bytes (é is two).
  test.each([57, 58, 59, 60, 61, 62, 63, 64, 65, 200])('starts a global whose name is %i bytes long', async (bytes) => {
    const name = `f${'y'.repeat(bytes - 9)}${'é'.repeat(4)}`; // two-byte characters across the edge
    expect(Buffer.byteLength(name)).toBe(bytes);
    rt.set(name, rt.load('return function(x) return x + 1 end')[0]);
    expect(await rt.call(name, 1)).toBe(2);
    expect(() => rt.start(name.slice(0, -1))).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_VALUE' }));
  });

  // Regression: PushTarget used to look only in package.loaded, so a module
  // declared in `modules` but never required was "not a Lua function".
  test('starts a module.fn path of a module from the modules option without requiring it first', async () => {
    expect(await rt.call('mod.fn', 21)).toBe(42);
  });

  test.each([
    ['an unknown global', 'nope', /"nope" is not a Lua function/],
    ['a path through a missing table', 'nope.fn', /"nope\.fn" is not a Lua function/],
    ['a global that is not a function', 'math.pi', /"math\.pi" is not a Lua function/],
    ['a path starting with a dot (it looped for ever)', '.x', /"\.x" is not a Lua function/],
    ['a lone dot', '.', /"\." is not a Lua function/],
    ['a path ending with a dot (it named print)', 'print.', /"print\." is not a Lua function/],
    ['an empty part', 'math..max', /"math\.\.max" is not a Lua function/],
  ])('refuses %s with ERR_INVALID_ARG_VALUE', (_, name, message) => {
    expect(() => rt.start(name)).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_ARG_VALUE', message: expect.stringMatching(message) }),
    );
    expect(rt.tasks()).toEqual([]);
  });

  test('a module.fn path whose module fails to load gives the module\'s error, not "not a Lua function"', () => {
    const r = makeRuntime({ modules: { bad: 'error("broken module")' } });
    expect(() => r.start('bad.fn')).toThrow(
      expect.objectContaining({ code: 'ERR_LUA_RUNTIME', message: expect.stringMatching(/^bad:1: broken module/) }),
    );
    expect(r.tasks()).toEqual([]);
  });

  test.each([[42], [null], [{}], [undefined]])('refuses %p as the function with ERR_INVALID_ARG_TYPE', (fn) => {
    expect(() => rt.start(fn)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_TYPE' }));
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
    while (rt.task(id).status === 'waiting') await turn();
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
    [
      'a number',
      'tasks.start(42)',
      /bad argument #1 to 'start' \(function, coroutine or entry name expected, got number\)/,
    ],
    [
      'nothing',
      'tasks.start()',
      /bad argument #1 to 'start' \(function, coroutine or entry name expected, got no value\)/,
    ],
    ['a name of no function', 'tasks.start("nowhere")', /tasks\.start: "nowhere" is not a function/],
    [
      'a coroutine already started',
      'local co = coroutine.create(function() coroutine.yield() end) coroutine.resume(co) tasks.start(co)',
      /coroutine already started, running or a task/,
    ],
    [
      'a dead coroutine',
      'local co = coroutine.create(function() end) coroutine.resume(co) tasks.start(co)',
      /coroutine already started, running or a task/,
    ],
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

  test('tasks.start runs at once and tasks.wait joins', async () => {
    rt.load(`function fan()
      local ids = {}
      for i = 1, 3 do ids[i] = tasks.start(function(n) coroutine.yield("FOR", n * 5, "MILLISECONDS") return n * 10 end, i) end
      local sum = 0
      for _, id in ipairs(ids) do sum = sum + tasks.wait(id) end
      return sum
    end`);
    expect(await rt.call('fan')).toBe(60);
  });
});

describe('namazu.coroutine', () => {
  test('is one module whether required or not, with current_task_id, start and resume', () => {
    expect(
      rt.load(`local n = require "namazu.coroutine"
      return n == require("namazu.coroutine"), type(n.current_task_id), type(n.start), type(n.resume)`),
    ).toEqual([true, 'function', 'function', 'function']);
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
});

describe('tasks.current_id', () => {
  test('is nil outside a task, for tasks and namazu.coroutine alike', () => {
    expect(rt.load('return tasks.current_id() == nil, require("namazu.coroutine").current_task_id() == nil')).toEqual([
      true,
      true,
    ]);
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

describe('task.status', () => {
  test('is running while the task runs, waiting while it waits, then done', async () => {
    const seen = [];
    rt.set('peek', (id) => {
      seen.push(rt.task(id).status);
    });
    rt.load(
      'function t() peek(tasks.current_id()) coroutine.yield("FOR", 5, "MILLISECONDS") peek(tasks.current_id()) return "ok" end',
    );
    const task = rt.start('t');
    expect(task.status).toBe('waiting');
    expect(await task.result).toBe('ok');
    expect(seen).toEqual(['running', 'running']);
    expect(task.status).toBe('done');
    expect(task.waiting).toBeUndefined();
  });

  test('goes from waiting to failed when the task raises', async () => {
    rt.load('function t() coroutine.yield() error("broken") end');
    const task = rt.start('t');
    expect(task.status).toBe('waiting');
    await expect(task.result).rejects.toMatchObject({
      code: 'ERR_LUA_RUNTIME',
      message: expect.stringContaining('broken'),
    });
    expect(task.status).toBe('failed');
  });

  test('goes from waiting to cancelled when the task is cancelled', async () => {
    rt.load('function t() coroutine.yield("INDEFINITELY") end');
    const task = rt.start('t');
    expect(task.status).toBe('waiting');
    expect(rt.cancel(task.id)).toBe(true);
    expect(task.status).toBe('cancelled');
    await expect(task.result).rejects.toMatchObject({ code: 'ERR_TASK_CANCELLED' });
  });

  test('is done at once for a task that never yields', async () => {
    rt.load('function t(a, b) return a + b end');
    const task = rt.start('t', 1, 2);
    expect(task.status).toBe('done');
    expect(await task.result).toBe(3);
  });

  test('is failed at once for a task that raises before its first yield', async () => {
    rt.load('function t() error("early") end');
    const task = rt.start('t');
    expect(task.status).toBe('failed');
    await expect(task.result).rejects.toMatchObject({
      code: 'ERR_LUA_RUNTIME',
      message: expect.stringContaining('early'),
    });
  });
});

describe('tasks.status', () => {
  test('tasks.status follows a task from waiting to done, failed or cancelled; nil for unknown', async () => {
    rt.on('taskerror', () => {});
    rt.load(`
      w = tasks.start(function() coroutine.yield("INDEFINITELY") end)
      d = tasks.start(function() return 1 end)
      f = tasks.start(function() error("x") end)
      c = tasks.start(function() coroutine.yield("INDEFINITELY") end)
    `);
    expect(
      rt.load('return tasks.status(w), tasks.status(d), tasks.status(f), tasks.status(c), tasks.status("nope")'),
    ).toEqual(['waiting', 'done', 'failed', 'waiting', null]);
    expect(rt.load('return tasks.cancel(c)')).toEqual([true]);
    expect(rt.load('return tasks.status(c)')).toEqual(['cancelled']);
    expect(rt.load('return tasks.cancel(c)')).toEqual([null, 'no such task (unknown or finished)']);
    expect(rt.load('return tasks.cancel("nope")')).toEqual([null, 'no such task (unknown or finished)']);
  });
});

// Regression: rt.task(id) said 'done' (what Lua saw) while the task said
// 'failed' and its result rejected.
test.each([
  ['inside rt.start', ''],
  ['later', 'coroutine.yield()'],
])('a task whose result cannot cross to JS ends failed (ERR_CONVERSION) for every JS view, %s', async (_, wait) => {
  const fn = rt.load(`return function() ${wait} return {[print] = 1} end`)[0];
  const task = rt.start(fn);
  const err = await task.result.catch((e) => e);
  expect(err.code).toBe('ERR_CONVERSION');
  expect(task.status).toBe('failed');
  expect(rt.task(task.id).status).toBe('failed');
  // Lua still sees it done, with its result.
  expect(rt.load(`return tasks.status("${task.id}")`)).toEqual(['done']);
});

describe('rt.call', () => {
  test('resolves with the first return value', async () => {
    rt.load('function t(x) coroutine.yield() return x, "second" end');
    await expect(rt.call('t', 'first')).resolves.toBe('first');
  });

  test('rejects with the task error as a LuaError', async () => {
    rt.load('function t() coroutine.yield() error("bad thing") end', { name: 'call.lua' });
    await expect(rt.call('t')).rejects.toMatchObject({
      name: 'LuaError',
      code: 'ERR_LUA_RUNTIME',
      message: expect.stringMatching(/^call\.lua:1: bad thing/),
    });
  });

  test('throws synchronously-started errors through the promise, not out of call', async () => {
    const p = rt.call('missing');
    await expect(p).rejects.toMatchObject({ code: 'ERR_INVALID_ARG_VALUE' });
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
    rt.load(
      `function t()
      local id = tasks.start(function() ${body} end)
      return { pcall(tasks.wait, id) }
    end`,
      { name: 'w.lua' },
    );
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

  test("a joiner woken by a task's end sees it ended: cancel does nothing, a second wait answers at once", async () => {
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
});

describe("the 'taskdone' and 'taskerror' events", () => {
  test('taskdone fires once per finished task with the task and its value', async () => {
    const done = [];
    rt.on('taskdone', (task, value) => done.push([task.id, value]));
    rt.load('function t(x) coroutine.yield() return x end function now(x) return x end');
    const a = rt.start('t', 'later');
    const b = rt.start('now', 'at once');
    await a.result;
    await sleep(5);
    expect(done).toEqual([
      [b.id, 'at once'],
      [a.id, 'later'],
    ]);
  });

  test('inside its taskdone listener a task reads as ended: cancel says false, rt.task says done, rt.tasks leaves it out', async () => {
    rt.load('function b() coroutine.yield() return 7 end');
    const seen = [];
    rt.on('taskdone', (task) => {
      seen.push(
        rt.cancel(task.id),
        rt.task(task.id).status,
        rt.tasks().map((t) => t.id),
      );
    });
    const b = rt.start('b');
    expect(await b.result).toBe(7);
    expect(seen).toEqual([false, 'done', []]);
    expect(rt.stats().tasks).toBe(0);
  });

  test('taskerror fires once per failed task with the task and its error', async () => {
    const errs = [];
    rt.on('taskerror', (task, err) => errs.push([task.id, err.code, err.message]));
    rt.load('function t() coroutine.yield() error("late") end function now() error("early") end');
    const a = rt.start('t');
    const b = rt.start('now');
    await until(() => errs.length >= 2);
    await sleep(5); // room for a second event, if one were coming
    expect(errs).toEqual([
      [b.id, 'ERR_LUA_RUNTIME', expect.stringContaining('early')],
      [a.id, 'ERR_LUA_RUNTIME', expect.stringContaining('late')],
    ]);
  });

  test('taskerror reports a task started from Lua by its id', async () => {
    const errs = [];
    rt.on('taskerror', (task, err) => errs.push([task.id, err.message]));
    const [id] = rt.load('return tasks.start(function() coroutine.yield() error("child failed") end)');
    await until(() => errs.length >= 1);
    await sleep(5);
    expect(errs).toEqual([[id, expect.stringContaining('child failed')]]);
  });

  test('neither event fires for a cancelled task', async () => {
    const seen = [];
    rt.on('taskdone', () => seen.push('done'));
    rt.on('taskerror', () => seen.push('error'));
    rt.load('function w() coroutine.yield("INDEFINITELY") end');
    const task = rt.start('w');
    rt.cancel(task.id);
    await expect(task.result).rejects.toMatchObject({ code: 'ERR_TASK_CANCELLED' });
    expect(seen).toEqual([]);
  });
});

describe('unhandled rejections', () => {
  let seen;
  const onUnhandled = (r) => seen.push(r);
  beforeEach(() => {
    seen = [];
    process.on('unhandledRejection', onUnhandled);
  });
  afterEach(() => process.off('unhandledRejection', onUnhandled));

  test.each([
    ['fails after a yield', 'function bad() coroutine.yield() error("oops") end'],
    ['fails before its first yield', 'function bad() error("oops") end'],
    ['is cancelled', 'function bad() coroutine.yield("INDEFINITELY") end'],
  ])('a task that %s, whose result nobody took, causes none', async (_, src) => {
    rt.load(src);
    const task = rt.start('bad');
    rt.cancel(task.id);
    await sleep(20);
    await turn();
    expect(seen).toEqual([]);
    expect(['failed', 'cancelled']).toContain(task.status);
  });

  test('a failed task whose result nobody took causes no unhandled rejection', async () => {
    const seen = [];
    const onUnhandled = (r) => seen.push(r);
    process.on('unhandledRejection', onUnhandled);
    rt.load('function bad() coroutine.yield() error("oops") end');
    const task = rt.start('bad');
    // Wait for the failure itself, not a fixed time (and without a taskerror
    // listener, which would change the case); one more turn after it, Node has
    // reported any unhandled rejection.
    while (task.status === 'waiting') await turn();
    await turn();
    process.off('unhandledRejection', onUnhandled);
    expect(task.status).toBe('failed');
    expect(seen).toEqual([]);
    await expect(task.result).rejects.toMatchObject({ code: 'ERR_LUA_RUNTIME' });
  });
});
