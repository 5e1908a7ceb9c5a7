// SPDX-License-Identifier: MIT
// Tasks from JavaScript: rt.start / call / task / tasks, status and waiting, events, AbortSignal.
'use strict';
const { Runtime } = require('../..');

let rt;
let lines;
beforeEach(() => {
  lines = [];
  rt = new Runtime({
    print: (l) => lines.push(l),
    modules: { mod: 'return { fn = function(x) coroutine.yield() return x * 2 end }' },
  });
});
afterEach(() => {
  rt.closeSync();
  if (global.gc) global.gc();
});

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const turn = () => new Promise((r) => setImmediate(r));
// Loop turns until pred() holds: for what follows loop work of unknown length
// (a sanitizer build is several times slower than any fixed sleep allows).
const until = async (pred) => {
  while (!pred()) await turn();
};

describe('what rt.start accepts', () => {
  test.each([
    ['a global name', () => rt.load('function double(x) coroutine.yield() return x * 2 end'), () => 'double'],
    ['a dotted path into a global table', () => rt.load('tbl = { fn = function(x) coroutine.yield() return x * 2 end }'), () => 'tbl.fn'],
    ['a deeper dotted path into nested global tables', () => rt.load('a = { b = { c = function(x) coroutine.yield() return x * 2 end } }'), () => 'a.b.c'],
    ['a module.fn path of a module from the modules option (already required)', () => rt.load('require "mod"'), () => 'mod.fn'],
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
    expect(() => rt.start(name)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_VALUE', message: expect.stringMatching(message) }));
    expect(rt.tasks()).toEqual([]);
  });

  test('a module.fn path whose module fails to load gives the module\'s error, not "not a Lua function"', () => {
    const r = new Runtime({ modules: { bad: 'error("broken module")' } });
    expect(() => r.start('bad.fn')).toThrow(expect.objectContaining({ code: 'ERR_LUA_RUNTIME', message: expect.stringMatching(/^bad:1: broken module/) }));
    expect(r.tasks()).toEqual([]);
    r.closeSync();
  });

  test.each([[42], [null], [{}], [undefined]])('refuses %p as the function with ERR_INVALID_ARG_TYPE', (fn) => {
    expect(() => rt.start(fn)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_TYPE' }));
  });
});

// Regression: rt.task(id) said 'done' (what Lua saw) while the task said
// 'failed' and its result rejected.
test.each([['inside rt.start', ''], ['later', 'coroutine.yield()']])(
  'a task whose result cannot cross to JS ends failed (ERR_CONVERSION) for every JS view, %s',
  async (_, wait) => {
    const fn = rt.load(`return function() ${wait} return {[print] = 1} end`)[0];
    const task = rt.start(fn);
    const err = await task.result.catch((e) => e);
    expect(err.code).toBe('ERR_CONVERSION');
    expect(task.status).toBe('failed');
    expect(rt.task(task.id).status).toBe('failed');
    // Lua still sees it done, with its result.
    expect(rt.load(`return tasks.status("${task.id}")`)).toEqual(['done']);
  });

test('task ids are strings, unique within a runtime and across runtimes', () => {
  rt.load('function w() coroutine.yield("INDEFINITELY") end');
  const other = new Runtime();
  other.load('function w() coroutine.yield("INDEFINITELY") end');
  try {
    const ids = [];
    for (let i = 0; i < 200; i++) {
      ids.push(rt.start('w').id, other.start('w').id);
    }
    for (const id of ids) expect(typeof id).toBe('string');
    expect(new Set(ids).size).toBe(ids.length);
    // An id of another runtime is unknown here.
    expect(rt.task(ids[1])).toBeUndefined();
    expect(rt.resume(ids[1])).toBe(false);
  } finally {
    other.closeSync();
  }
});

describe('task.id', () => {
  test('is the id Lua sees, 41 characters, and a runtime\'s ids sort in start order', () => {
    const seen = [];
    rt.set('peek', (id) => { seen.push(id); });
    rt.load('function t() peek(tasks.current_id()) coroutine.yield("INDEFINITELY") end');
    const tasks = [];
    for (let i = 0; i < 40; i++) tasks.push(rt.start('t'));
    expect(seen).toEqual(tasks.map((t) => t.id));
    for (const t of tasks) expect(t.id).toMatch(/^t[0-9a-z]{26}-[0-9a-z]{13}$/);
    expect([...seen].sort()).toEqual(seen);
    const [fromLua] = rt.load('return tasks.start(t)');
    expect(fromLua).toBe(seen[40]);
    expect(rt.resume(fromLua)).toBe(true);
    expect(rt.resume(`${fromLua.slice(0, 28)}${fromLua.slice(28).replace(/^0+/, '')}`)).toBe(false);  // not the canonical form
    const other = new Runtime();
    try {
      expect(other.start('tostring').id.slice(0, 28)).not.toBe(tasks[0].id.slice(0, 28));
    } finally {
      other.closeSync();
    }
  });
});

describe('task.status', () => {
  test('is running while the task runs, waiting while it waits, then done', async () => {
    const seen = [];
    rt.set('peek', (id) => { seen.push(rt.task(id).status); });
    rt.load('function t() peek(tasks.current_id()) coroutine.yield("FOR", 5, "MILLISECONDS") peek(tasks.current_id()) return "ok" end');
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
    await expect(task.result).rejects.toMatchObject({ code: 'ERR_LUA_RUNTIME', message: expect.stringContaining('broken') });
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

  test('a result taken after the cancel rejects with the reason, the same error each time', async () => {
    rt.load('function t() coroutine.yield("INDEFINITELY") end');
    const task = rt.start('t');
    expect(rt.cancel(task.id, 'later')).toBe(true);
    await new Promise(setImmediate);
    const err = await task.result.catch((e) => e);
    expect(err).toBeInstanceOf(Error);
    expect(err).toMatchObject({ code: 'ERR_TASK_CANCELLED', reason: 'later', message: `Task ${task.id} was cancelled: later` });
    expect(await task.result.catch((e) => e)).toBe(err);
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
    await expect(task.result).rejects.toMatchObject({ code: 'ERR_LUA_RUNTIME', message: expect.stringContaining('early') });
  });
});

describe('task.waiting', () => {
  test.each([
    ['coroutine.yield()', 'IMMEDIATE', false],
    ['coroutine.yield("IMMEDIATE")', 'IMMEDIATE', false],
    ['coroutine.yield("FOR", 1)', 'FOR', true],
    ['tasks.sleep(1)', 'FOR', true],
    ['coroutine.yield("INDEFINITELY")', 'INDEFINITELY', false],
  ])('after %s is { instruction: %p }', async (wait, instruction, timed) => {
    rt.load(`function t() ${wait} end`);
    const task = rt.start('t');
    // A timed wait also has until (test/js/task-api.test.js checks its value).
    const expected = timed ? { instruction, until: expect.anything() } : { instruction };
    expect(task.waiting).toEqual(expected);
    expect(rt.task(task.id).waiting).toEqual(expected);
    rt.cancel(task.id);
    await expect(task.result).rejects.toMatchObject({ code: 'ERR_TASK_CANCELLED' });
  });

  test('after UNTIL_TIME carries the wall-clock deadline as until', async () => {
    const at = Math.floor(Date.now() / 1000) + 60;
    rt.load('function t(at) coroutine.yield("UNTIL_TIME", at) end');
    const task = rt.start('t', at);
    expect(task.waiting.instruction).toBe('UNTIL_TIME');
    expect(Object.prototype.toString.call(task.waiting.until)).toBe('[object Date]'); // Jest realms: no instanceof
    expect(task.waiting.until.getTime()).toBe(at * 1000);
    rt.cancel(task.id);
    await expect(task.result).rejects.toMatchObject({ code: 'ERR_TASK_CANCELLED' });
  });
});

describe('rt.call', () => {
  test('resolves with the first return value', async () => {
    rt.load('function t(x) coroutine.yield() return x, "second" end');
    await expect(rt.call('t', 'first')).resolves.toBe('first');
  });

  test('rejects with the task error as a LuaError', async () => {
    rt.load('function t() coroutine.yield() error("bad thing") end', { name: 'call.lua' });
    await expect(rt.call('t')).rejects.toMatchObject({ name: 'LuaError', code: 'ERR_LUA_RUNTIME', message: expect.stringMatching(/^call\.lua:1: bad thing/) });
  });

  test('throws synchronously-started errors through the promise, not out of call', async () => {
    const p = rt.call('missing');
    await expect(p).rejects.toMatchObject({ code: 'ERR_INVALID_ARG_VALUE' });
  });
});

describe('rt.task and rt.tasks', () => {
  test('rt.tasks lists the live tasks, oldest first, as snapshots', async () => {
    rt.load('function w() coroutine.yield("INDEFINITELY") end function f() coroutine.yield("FOR", 60) end');
    const a = rt.start('w');
    const b = rt.start('f');
    const c = rt.start('w');
    expect(rt.tasks()).toEqual([
      { id: a.id, status: 'waiting', waiting: { instruction: 'INDEFINITELY' } },
      { id: b.id, status: 'waiting', waiting: { instruction: 'FOR', until: expect.anything() } },
      { id: c.id, status: 'waiting', waiting: { instruction: 'INDEFINITELY' } },
    ]);
    expect(rt.task(b.id)).toEqual({ id: b.id, status: 'waiting', waiting: { instruction: 'FOR', until: expect.anything() } });
    const snapshot = rt.task(a.id);
    rt.resume(a.id);
    await a.result;
    expect(snapshot.status).toBe('waiting'); // a snapshot, not a live view
    expect(rt.tasks().map((t) => t.id)).toEqual([b.id, c.id]);
    rt.cancel(b.id);
    rt.cancel(c.id);
    await Promise.allSettled([b.result, c.result]);
    expect(rt.tasks()).toEqual([]);
  });

  test.each([['an unknown id', 'no-such-task'], ['an empty id', '']])('rt.task answers undefined for %s', (_, id) => {
    expect(rt.task(id)).toBeUndefined();
  });

  test('an id with a character more, one less, or one changed names no task', () => {
    rt.load('function park() coroutine.yield("INDEFINITELY") end');
    const { id } = rt.start('park');
    const last = id[id.length - 1];
    for (const other of [`${id}0`, `${id}${id}`, id.slice(0, -1), id.slice(0, -1) + (last === '0' ? '1' : '0'), id.toUpperCase(), `${id.slice(0, -1)}é`, `${id}é`, `${id}😀`, `${id}\u0800`]) {
      expect(rt.task(other)).toBeUndefined();
      expect(rt.resume(other)).toBe(false);
      expect(rt.cancel(other)).toBe(false);
    }
    expect(rt.task(id).status).toBe('waiting');
    expect(rt.cancel(id)).toBe(true);
  });

  test('rt.task, rt.resume and rt.cancel refuse a non-string id', () => {
    for (const m of ['task', 'resume', 'cancel']) {
      expect(() => rt[m](42)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_TYPE' }));
    }
  });
});

describe('events', () => {
  test('taskdone fires once per finished task with the task and its value', async () => {
    const done = [];
    rt.on('taskdone', (task, value) => done.push([task.id, value]));
    rt.load('function t(x) coroutine.yield() return x end function now(x) return x end');
    const a = rt.start('t', 'later');
    const b = rt.start('now', 'at once');
    await a.result;
    await sleep(5);
    expect(done).toEqual([[b.id, 'at once'], [a.id, 'later']]);
  });

  test('inside its taskdone listener a task reads as ended: cancel says false, rt.task says done, rt.tasks leaves it out', async () => {
    rt.load('function b() coroutine.yield() return 7 end');
    const seen = [];
    rt.on('taskdone', (task) => {
      seen.push(rt.cancel(task.id), rt.task(task.id).status, rt.tasks().map((t) => t.id));
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
    await new Promise((r) => setImmediate(r));
    expect(seen).toEqual([]);
    expect(['failed', 'cancelled']).toContain(task.status);
  });
});

describe('AbortSignal as the last argument', () => {
  // Regression: start() used to Object.assign a name onto an error whose name
  // is a prototype getter, and threw a TypeError instead.
  test('an already aborted signal throws an AbortError and starts nothing', () => {
    rt.load('ran = false function t() ran = true coroutine.yield("INDEFINITELY") end');
    const ac = new AbortController();
    ac.abort('too late');
    expect(() => rt.start('t', ac.signal)).toThrow(expect.objectContaining({ name: 'AbortError', code: 'ABORT_ERR', cause: 'too late' }));
    expect(rt.get('ran')).toBe(false);
    expect(rt.tasks()).toEqual([]);
  });

  test('an already aborted signal makes rt.call reject with an AbortError', async () => {
    rt.load('function t() coroutine.yield("INDEFINITELY") end');
    await expect(rt.call('t', AbortSignal.abort('nope'))).rejects.toMatchObject({ name: 'AbortError', code: 'ABORT_ERR', cause: 'nope' });
  });

  test('an already aborted signal still starts nothing even though the error is wrong', () => {
    rt.load('ran = false function t() ran = true coroutine.yield("INDEFINITELY") end');
    expect(() => rt.start('t', AbortSignal.abort('too late'))).toThrow();
    expect(rt.get('ran')).toBe(false);
    expect(rt.tasks()).toEqual([]);
  });

  test('aborting later cancels the task, runs its <close> variables and rejects with the reason', async () => {
    rt.load(`function t(a, b)
      local c <close> = setmetatable({}, { __close = function() print("closed " .. a .. b) end })
      coroutine.yield("FOR", 60)
    end`);
    const ac = new AbortController();
    const task = rt.start('t', 'x', 'y', ac.signal);
    setTimeout(() => ac.abort('stop now'), 10);
    await expect(task.result).rejects.toMatchObject({ name: 'AbortError', code: 'ABORT_ERR', cause: 'stop now', message: expect.stringContaining('stop now') });
    expect(lines).toEqual(['closed xy']);
    expect(task.status).toBe('cancelled');
  });

  test('AbortSignal.timeout cancels a call that waits too long', async () => {
    rt.load('function t() coroutine.yield("INDEFINITELY") end');
    const t0 = Date.now();
    await expect(rt.call('t', AbortSignal.timeout(20))).rejects.toMatchObject({ code: 'ABORT_ERR', cause: expect.objectContaining({ name: 'TimeoutError' }) });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(15);
  });

  test('aborting after the task finished changes nothing', async () => {
    rt.load('function t(x) coroutine.yield() return x end');
    const ac = new AbortController();
    const task = rt.start('t', 7, ac.signal);
    expect(await task.result).toBe(7);
    ac.abort();
    expect(task.status).toBe('done');
    await expect(task.result).resolves.toBe(7);
  });

  test('a signal that is not the last argument is passed to Lua as a value', async () => {
    rt.load('function t(s, x) coroutine.yield() return s ~= nil and x end');
    const ac = new AbortController();
    await expect(rt.call('t', ac.signal, 'last')).resolves.toBe('last');
  });
});
