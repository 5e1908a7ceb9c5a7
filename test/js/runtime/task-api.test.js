// SPDX-License-Identifier: MIT
// The JS Task object and its views: task.id, task.waiting, name and meta from rt.spawn's options, task.cancel/resume, rt.task/rt.tasks snapshots, the exported AbortError.
'use strict';
const { Task, AbortError } = require('../../..');
const { codes } = require('../../../lib/errors');

const { makeRuntime, makeRuntimeWithLines, TASK_FUNCTIONS } = require('../helpers');

let rt;
let lines;
beforeEach(() => {
  ({ rt, lines } = makeRuntimeWithLines());
  rt.load(TASK_FUNCTIONS);
});

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
    expect(() => rt.spawn('forever', options)).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_ARG_TYPE', message: expect.stringMatching(message) }),
    );
    expect(rt.tasks()).toEqual([]);
  });

  test('refuses an unknown option naming the nearest one', () => {
    expect(() => rt.spawn('forever', { sigal: AbortSignal.abort() })).toThrow(
      expect.objectContaining({
        code: 'ERR_INVALID_ARG_VALUE',
        message: expect.stringContaining(
          'The option "sigal" is not a spawn option; did you mean "signal"? Options: args, signal, name, meta, durable, key.',
        ),
      }),
    );
    expect(() => rt.spawn('forever', { zzzzzz: 1 })).toThrow(/The option "zzzzzz" is not a spawn option\. Options:/);
    expect(rt.tasks()).toEqual([]);
  });

  test('refuses a bad fn as rt.start does', () => {
    expect(() => rt.spawn(42)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_TYPE' }));
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
    // A timed wait also has until (the tests below check its value).
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

describe('task.id', () => {
  test('task ids are strings, unique within a runtime and across runtimes', () => {
    rt.load('function w() coroutine.yield("INDEFINITELY") end');
    const other = makeRuntime();
    other.load('function w() coroutine.yield("INDEFINITELY") end');
    const ids = [];
    for (let i = 0; i < 200; i++) {
      ids.push(rt.start('w').id, other.start('w').id);
    }
    for (const id of ids) expect(typeof id).toBe('string');
    expect(new Set(ids).size).toBe(ids.length);
    // An id of another runtime is unknown here.
    expect(rt.task(ids[1])).toBeUndefined();
    expect(rt.resume(ids[1])).toBe(false);
  });

  test("is the id Lua sees, 41 characters, and a runtime's ids sort in start order", () => {
    const seen = [];
    rt.set('peek', (id) => {
      seen.push(id);
    });
    rt.load('function t() peek(tasks.current_id()) coroutine.yield("INDEFINITELY") end');
    const tasks = [];
    for (let i = 0; i < 40; i++) tasks.push(rt.start('t'));
    expect(seen).toEqual(tasks.map((t) => t.id));
    for (const t of tasks) expect(t.id).toMatch(/^t[0-9a-z]{26}-[0-9a-z]{13}$/);
    expect([...seen].sort()).toEqual(seen);
    const [fromLua] = rt.load('return tasks.start(t)');
    expect(fromLua).toBe(seen[40]);
    expect(rt.resume(fromLua)).toBe(true);
    expect(rt.resume(`${fromLua.slice(0, 28)}${fromLua.slice(28).replace(/^0+/, '')}`)).toBe(false); // not the canonical form
    const other = makeRuntime();
    expect(other.start('tostring').id.slice(0, 28)).not.toBe(tasks[0].id.slice(0, 28));
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
    expect(rt.task(b.id)).toEqual({
      id: b.id,
      status: 'waiting',
      waiting: { instruction: 'FOR', until: expect.anything() },
    });
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

  test.each([
    ['an unknown id', 'no-such-task'],
    ['an empty id', ''],
  ])('rt.task answers undefined for %s', (_, id) => {
    expect(rt.task(id)).toBeUndefined();
  });

  test('an id with a character more, one less, or one changed names no task', () => {
    rt.load('function park() coroutine.yield("INDEFINITELY") end');
    const { id } = rt.start('park');
    const last = id[id.length - 1];
    for (const other of [
      `${id}0`,
      `${id}${id}`,
      id.slice(0, -1),
      id.slice(0, -1) + (last === '0' ? '1' : '0'),
      id.toUpperCase(),
      `${id.slice(0, -1)}é`,
      `${id}é`,
      `${id}😀`,
      `${id}\u0800`,
    ]) {
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

test("AbortError is exported and shaped as Node's", () => {
  const err = new AbortError('x', { cause: 'why' });
  expect(err).toBeInstanceOf(Error);
  expect(err.name).toBe('AbortError');
  expect(err.code).toBe('ABORT_ERR');
  expect(err.cause).toBe('why');
  expect(codes.ABORT_ERR).toBe('ABORT_ERR');
});
