// SPDX-License-Identifier: MIT
// Resuming a waiting task: rt.resume, tasks.resume and namazu.coroutine.resume, the values they hand over, and the timers they cancel.
'use strict';
const { makeRuntime, sleep, turn } = require('../helpers');

let rt;
beforeEach(() => (rt = makeRuntime()));

describe('INDEFINITELY and rt.resume', () => {
  test.each([[[]], [[1]], [[1, 'two', true]], [[{ a: 1 }, [1, 2]]], [[1.5, -3, 'x'.repeat(100)]]])(
    'resume with %j makes the yield return exactly those values',
    async (values) => {
      rt.load(
        'function t() local v = table.pack(coroutine.yield("INDEFINITELY")) return { n = v.n, v = { table.unpack(v, 1, v.n) } } end',
      );
      const task = rt.start('t');
      expect(rt.resume(task.id, ...values)).toBe(true);
      const out = await task.result;
      expect(out.n).toBe(values.length);
      expect(values.length === 0 ? [] : out.v).toEqual(values);
    },
  );

  test('resume passes nil in the middle of the values through', async () => {
    rt.load(
      'function t() local a, b, c = coroutine.yield("INDEFINITELY") return select("#", coroutine.yield("INDEFINITELY")) .. tostring(a) .. tostring(b) .. tostring(c) end',
    );
    const task = rt.start('t');
    rt.resume(task.id, 1, undefined, 3);
    rt.resume(task.id, null, null);
    expect(await task.result).toBe('21nil3');
  });

  test('resume runs the task up to its next wait before returning', () => {
    rt.load(
      'log = "" function t() coroutine.yield("INDEFINITELY") log = log .. "a" coroutine.yield("INDEFINITELY") log = log .. "b" end',
    );
    const task = rt.start('t');
    expect(rt.resume(task.id)).toBe(true);
    expect(rt.get('log')).toBe('a');
    expect(task.status).toBe('waiting');
    expect(rt.resume(task.id)).toBe(true);
    expect(rt.get('log')).toBe('ab');
    expect(task.status).toBe('done');
  });

  test.each([
    ['an unknown id', () => 'no-such-task'],
    ['an id of the right shape that was never issued', (t) => t.id.replace(/[0-9a-z]+$/, 'zzzzzz')],
    ['a finished task', (t) => t.id],
  ])('resume answers false for %s', async (_, idOf) => {
    rt.load('function t() coroutine.yield("INDEFINITELY") end');
    const task = rt.start('t');
    rt.resume(task.id);
    await task.result;
    expect(rt.resume(idOf(task), 'x')).toBe(false);
  });

  test('resume answers false for the task that is running', async () => {
    const answers = [];
    rt.set('tryResume', (id) => {
      answers.push(rt.resume(id, 'x'));
    });
    rt.load('function t() tryResume(tasks.current_id()) coroutine.yield() return "ok" end');
    expect(await rt.call('t')).toBe('ok');
    expect(answers).toEqual([false]);
  });

  test('resume answers false for a cancelled task', async () => {
    rt.load('function t() coroutine.yield("INDEFINITELY") end');
    const task = rt.start('t');
    rt.cancel(task.id);
    await expect(task.result).rejects.toMatchObject({ code: 'ERR_TASK_CANCELLED' });
    expect(rt.resume(task.id)).toBe(false);
  });
});

describe('resume of a task waiting on a timer', () => {
  // The task counts its wake-ups; after the manual resume it waits
  // INDEFINITELY, so a stale timer that still fired would show up as a
  // second wake-up.
  test.each([
    ['FOR 30 MILLISECONDS', '"FOR", 30, "MILLISECONDS"'],
    ['tasks.sleep', null],
    ['UNTIL_TIME 30 ms ahead', '"UNTIL_TIME", at, "MILLISECONDS"'],
    ['IMMEDIATE', '"IMMEDIATE"'],
    ['UNTIL_TIME in the past', '"UNTIL_TIME", 0'],
  ])('resuming a task waiting on %s cancels its wake-up', async (_, args) => {
    const wait = args === null ? 'tasks.sleep(0.03)' : `coroutine.yield(${args})`;
    rt.load(`wakes = 0 function t(at)
      local got = { ${wait} }
      wakes = wakes + 1
      coroutine.yield("INDEFINITELY")
      wakes = wakes + 1
      return got
    end`);
    const task = rt.start('t', Date.now() + 30);
    expect(rt.resume(task.id, 'manual', 2)).toBe(true);
    expect(rt.get('wakes')).toBe(1);
    await sleep(80);
    await turn();
    expect(rt.get('wakes')).toBe(1);
    expect(task.waiting).toEqual({ instruction: 'INDEFINITELY' });
    rt.resume(task.id);
    expect(await task.result).toEqual(['manual', 2]);
    expect(rt.get('wakes')).toBe(2);
  });

  test('a FOR after a resumed FOR runs its full duration (the old timer does not cut it short)', async () => {
    rt.load(`function t()
      local first = coroutine.yield("FOR", 20, "MILLISECONDS")
      local r, e = coroutine.yield("FOR", 100, "MILLISECONDS")
      return { first, r, e }
    end`);
    const task = rt.start('t');
    const t0 = Date.now(); // before the second FOR begins
    rt.resume(task.id, 'early');
    const [first, r, e] = await task.result;
    expect(first).toBe('early');
    expect(r).toBe('SCHEDULER');
    expect(e).toBeGreaterThanOrEqual(99);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(99);
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

describe('namazu.coroutine.resume', () => {
  test.each([
    ['an unknown id', '"t-unknown"'],
    ['a number', '7'],
    ['a finished task', 'tasks.start(function() end)'],
  ])('resume of %s returns nil and never throws', (_, arg) => {
    expect(rt.load(`return require("namazu.coroutine").resume(${arg})`)).toEqual([
      null,
      'no such task (unknown or finished)',
    ]);
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
