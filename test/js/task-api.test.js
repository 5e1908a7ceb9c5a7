// SPDX-License-Identifier: MIT
// The Node-like task API: task.cancel / task.resume, rt.spawn with options,
// waiting.until for FOR and tasks.sleep, AbortError on aborts, 'taskcancel'.
'use strict';
const { Runtime, Task, AbortError } = require('../..');
const { codes } = require('../../lib/errors');

let rt;
let lines;
beforeEach(() => {
  lines = [];
  rt = new Runtime({ print: (l) => lines.push(l) });
  rt.load(`
    function forever() coroutine.yield("INDEFINITELY") end
    function echo() return coroutine.yield("INDEFINITELY") end
    function count(...) return select("#", ...) end
    function guarded(tag)
      local c <close> = setmetatable({}, { __close = function() print("closed " .. tag) end })
      coroutine.yield("INDEFINITELY")
    end`);
});
afterEach(() => {
  rt.closeSync();
});

const turn = () => new Promise((r) => setImmediate(r));

describe('task.cancel and task.resume', () => {
  test('task.cancel(reason) cancels as rt.cancel(task.id, reason) does', async () => {
    const task = rt.start('guarded', 'a');
    expect(task.cancel('enough')).toBe(true);
    await expect(task.result).rejects.toMatchObject({ code: 'ERR_TASK_CANCELLED', reason: 'enough' });
    expect(lines).toEqual(['closed a']);
    expect(task.status).toBe('cancelled');
    expect(task.cancel('again')).toBe(false);
  });

  test('task.resume(...values) resumes as rt.resume(task.id, ...values) does', async () => {
    rt.load('function pair() local a, b = coroutine.yield("INDEFINITELY") return a .. b end');
    const task = rt.start('pair');
    expect(task.resume('x', 'y')).toBe(true);
    expect(await task.result).toBe('xy');
    expect(task.resume('z')).toBe(false);
  });

  test('both are methods of every Task', () => {
    expect(typeof Task.prototype.cancel).toBe('function');
    expect(typeof Task.prototype.resume).toBe('function');
  });
});

describe('rt.spawn(fn, options)', () => {
  test('passes options.args, and an AbortSignal among them is an argument, not a signal', async () => {
    const ac = new AbortController();
    const task = rt.spawn('count', { args: [1, 'two', ac.signal] });
    expect(await task.result).toBe(3);
    expect(await rt.spawn('count').result).toBe(0);
    expect(await rt.spawn('count', {}).result).toBe(0);
  });

  test('options.signal cancels the task when aborted', async () => {
    const ac = new AbortController();
    const task = rt.spawn('guarded', { args: ['s'], signal: ac.signal });
    expect(task.status).toBe('waiting');
    ac.abort('stop');
    await expect(task.result).rejects.toMatchObject({ name: 'AbortError', code: 'ABORT_ERR', cause: 'stop' });
    expect(lines).toEqual(['closed s']);
  });

  test('name and meta show on the Task and in rt.task(id) and rt.tasks()', async () => {
    const meta = { owner: 'billing', retry: () => 1, big: 10n };
    const task = rt.spawn('echo', { name: 'invoice-42', meta });
    expect(task.name).toBe('invoice-42');
    expect(task.meta).toBe(meta); // kept in JS: the very object, functions and BigInts included
    const snap = rt.task(task.id);
    expect(snap).toMatchObject({ id: task.id, status: 'waiting', name: 'invoice-42' });
    expect(snap.meta).toBe(meta);
    const listed = rt.tasks().find((t) => t.id === task.id);
    expect(listed.name).toBe('invoice-42');
    expect(listed.meta).toBe(meta);
    task.resume('done');
    await task.result;
    expect(rt.task(task.id)).toMatchObject({ status: 'done', name: 'invoice-42' });
  });

  test('a name alone or meta alone is shown alone', () => {
    const a = rt.spawn('forever', { name: 'only-name' });
    const b = rt.spawn('forever', { meta: 0 });
    expect(rt.task(a.id)).not.toHaveProperty('meta');
    expect(rt.task(b.id)).toEqual({ id: b.id, status: 'waiting', waiting: { instruction: 'INDEFINITELY' }, meta: 0 });
  });

  test('tasks started with rt.start or from Lua have no name or meta', () => {
    rt.spawn('forever', { name: 'labelled' });
    const plain = rt.start('forever');
    expect(plain.name).toBeUndefined();
    expect(plain.meta).toBeUndefined();
    const luaId = rt.load('return tasks.start(function() coroutine.yield("INDEFINITELY") end)')[0];
    for (const id of [plain.id, luaId]) {
      expect(rt.task(id)).not.toHaveProperty('name');
      expect(rt.task(id)).not.toHaveProperty('meta');
      expect(rt.tasks().find((t) => t.id === id)).not.toHaveProperty('name');
    }
  });

  test.each([
    ['options', 'an object', 5, /"options" argument must be an object/],
    ['options', 'not an array', [1], /"options" argument must be an object/],
    ['options.args', 'an array', { args: 'x' }, /"options\.args" argument must be an array\. Received the string "x"/],
    ['options.signal', 'an AbortSignal', { signal: {} }, /"options\.signal" argument must be an AbortSignal/],
    ['options.name', 'a string', { name: 7 }, /"options\.name" argument must be a string\. Received number 7/],
  ])('refuses a bad %s (%s) with ERR_INVALID_ARG_TYPE', (_, __, options, message) => {
    expect(() => rt.spawn('forever', options)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_TYPE', message: expect.stringMatching(message) }));
    expect(rt.tasks()).toEqual([]);
  });

  test('refuses an unknown option naming the nearest one', () => {
    expect(() => rt.spawn('forever', { sigal: AbortSignal.abort() })).toThrow(expect.objectContaining({
      code: 'ERR_INVALID_ARG_VALUE',
      message: expect.stringContaining('The option "sigal" is not a spawn option; did you mean "signal"? Options: args, signal, name, meta.'),
    }));
    expect(() => rt.spawn('forever', { zzzzzz: 1 })).toThrow(/The option "zzzzzz" is not a spawn option\. Options:/);
    expect(rt.tasks()).toEqual([]);
  });

  test('refuses a bad fn as rt.start does', () => {
    expect(() => rt.spawn(42)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_TYPE' }));
  });
});

describe('waiting.until', () => {
  test.each([
    ['FOR', 'coroutine.yield("FOR", 30)', 30000],
    ['FOR in milliseconds', 'coroutine.yield("FOR", 4000, "MILLISECONDS")', 4000],
    ['tasks.sleep', 'tasks.sleep(60)', 60000],
  ])('is the Date a %s wait ends', (_, wait, ms) => {
    rt.load(`function w() ${wait} end`);
    const before = Date.now();
    const task = rt.start('w');
    const after = Date.now();
    const { waiting } = task;
    expect(waiting.instruction).toBe('FOR');
    expect(waiting.until).toBeInstanceOf(Date);
    // Tolerances: the wall clock is read at the query, a few ms after the start.
    expect(waiting.until.getTime()).toBeGreaterThanOrEqual(before + ms - 5);
    expect(waiting.until.getTime()).toBeLessThanOrEqual(after + ms + 50);
    expect(rt.task(task.id).waiting.until.getTime()).toBe(waiting.until.getTime());
    // rt.tasks() builds its snapshots as rt.task(id) does; a FOR's end is read at each query.
    expect(Math.abs(rt.tasks()[0].waiting.until.getTime() - waiting.until.getTime())).toBeLessThanOrEqual(50);
  });

  test('waits with no end have none', () => {
    const task = rt.start('forever');
    expect(task.waiting).toEqual({ instruction: 'INDEFINITELY' });
  });
});

describe('aborting through a signal', () => {
  test('AbortError is exported and shaped as Node\'s', () => {
    const err = new AbortError('x', { cause: 'why' });
    expect(err).toBeInstanceOf(Error);
    expect(err.name).toBe('AbortError');
    expect(err.code).toBe('ABORT_ERR');
    expect(err.cause).toBe('why');
    expect(codes.ABORT_ERR).toBe('ABORT_ERR');
  });

  test('an already aborted signal: start and spawn throw an AbortError and start nothing', () => {
    rt.load('ran = false function t() ran = true coroutine.yield("INDEFINITELY") end');
    const reason = new Error('too late');
    const signal = AbortSignal.abort(reason);
    for (const go of [() => rt.start('t', signal), () => rt.spawn('t', { signal })]) {
      let err;
      try {
        go();
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(AbortError);
      expect(err).toMatchObject({ name: 'AbortError', code: 'ABORT_ERR' });
      expect(err.cause).toBe(reason);
    }
    expect(rt.get('ran')).toBe(false);
    expect(rt.tasks()).toEqual([]);
  });

  test('an already aborted signal: rt.call rejects with an AbortError', async () => {
    await expect(rt.call('forever', AbortSignal.abort('nope'))).rejects.toMatchObject({ name: 'AbortError', code: 'ABORT_ERR', cause: 'nope' });
  });

  test('aborted during the run: the result rejects with an AbortError and <close> variables run', async () => {
    const ac = new AbortController();
    const task = rt.start('guarded', 'g', ac.signal);
    setTimeout(() => ac.abort('stop now'), 5);
    const err = await task.result.catch((e) => e);
    expect(err).toBeInstanceOf(AbortError);
    expect(err).toMatchObject({ name: 'AbortError', code: 'ABORT_ERR', cause: 'stop now', message: expect.stringContaining('stop now') });
    expect(lines).toEqual(['closed g']);
    expect(task.status).toBe('cancelled');
  });

  test('the default reason (a DOMException) is the cause', async () => {
    const ac = new AbortController();
    const task = rt.start('forever', ac.signal);
    ac.abort();
    const err = await task.result.catch((e) => e);
    expect(err.code).toBe('ABORT_ERR');
    expect(err.cause).toBe(ac.signal.reason);
    expect(err.cause.name).toBe('AbortError');
  });

  test('aborted while its first part runs (by JS it called): an AbortError', async () => {
    const ac = new AbortController();
    rt.set('abort', () => ac.abort('mid'));
    rt.load('function h() abort() coroutine.yield("INDEFINITELY") end');
    const task = rt.start('h', ac.signal);
    await expect(task.result).rejects.toMatchObject({ code: 'ABORT_ERR', cause: 'mid' });
  });

  test('aborted while its COMMIT is being written: an AbortError saying whether the snapshot landed', async () => {
    let land;
    const store = { load: async () => null, save: () => new Promise((r) => { land = r; }) };
    const prt = await Runtime.open({ name: 'abort-commit', store });
    try {
      prt.load('function c() tasks.state.x = 1 coroutine.yield("COMMIT") coroutine.yield("INDEFINITELY") end');
      const ac = new AbortController();
      const task = prt.start('c', ac.signal);
      while (!land) await turn();
      ac.abort('mid-commit');
      land();
      const err = await task.result.catch((e) => e);
      expect(err).toMatchObject({ name: 'AbortError', code: 'ABORT_ERR', cause: 'mid-commit', committed: true });
      expect(err.message).toContain('Its COMMIT had been written');
    } finally {
      await prt.close();
    }
  });

  test('a plain cancel of a task with a signal is still ERR_TASK_CANCELLED', async () => {
    const ac = new AbortController();
    const task = rt.start('forever', ac.signal);
    task.cancel('by hand');
    await expect(task.result).rejects.toMatchObject({ code: 'ERR_TASK_CANCELLED', reason: 'by hand' });
    ac.abort('later'); // changes nothing
    await turn();
  });
});

describe("the 'taskcancel' event", () => {
  let seen;
  beforeEach(() => {
    seen = [];
    rt.on('taskcancel', (task, err) => seen.push([task, err]));
  });

  test('fires for rt.cancel and task.cancel, with the error the result rejects with', async () => {
    const a = rt.start('forever');
    const b = rt.spawn('forever', { name: 'b' });
    rt.cancel(a.id, 'one');
    b.cancel('two');
    expect(seen.map(([t, e]) => [t, e.code, e.reason])).toEqual([[a, 'ERR_TASK_CANCELLED', 'one'], [b, 'ERR_TASK_CANCELLED', 'two']]);
    expect(await a.result.catch((e) => e)).toBe(seen[0][1]);
    expect(seen[1][0].name).toBe('b');
  });

  test('fires for an abort, with the AbortError', async () => {
    const ac = new AbortController();
    const task = rt.start('forever', ac.signal);
    ac.abort('sig');
    expect(seen).toHaveLength(1);
    expect(seen[0][0]).toBe(task);
    expect(seen[0][1]).toMatchObject({ name: 'AbortError', code: 'ABORT_ERR', cause: 'sig' });
    expect(await task.result.catch((e) => e)).toBe(seen[0][1]);
  });

  test('fires for a cancel from Lua', async () => {
    const task = rt.start('forever');
    rt.set('victim', task.id);
    rt.load('tasks.cancel(victim)');
    await turn();
    expect(seen.map(([t, e]) => [t, e.code])).toEqual([[task, 'ERR_TASK_CANCELLED']]);
  });

  test('fires for the tasks close cancels', async () => {
    const a = rt.start('forever');
    const b = rt.spawn('guarded', { args: ['c'] });
    await rt.close();
    expect(seen.map(([t]) => t).sort((x, y) => (x.id < y.id ? -1 : 1))).toEqual([a, b]);
    expect(lines).toEqual(['closed c']);
  });

  test('does not fire for tasks that end otherwise, nor for tasks started from Lua', async () => {
    rt.load('function fail() error("x") end');
    await rt.call('count', 1);
    await rt.call('fail').catch(() => {});
    const id = rt.load('return tasks.start(function() coroutine.yield("INDEFINITELY") end)')[0];
    rt.cancel(id);
    await turn();
    expect(seen).toEqual([]);
  });
});
