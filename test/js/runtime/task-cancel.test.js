// SPDX-License-Identifier: MIT
// Cancelling a task: rt.cancel, tasks.cancel, an AbortSignal and close(); its <close> variables run, its result rejects, 'taskcancel' fires.
'use strict';
const { Runtime, AbortError } = require('../../..');
const { makeRuntimeWithLines, sleep, turn, TASK_FUNCTIONS } = require('../helpers');

let rt;
let lines;
beforeEach(() => ({ rt, lines } = makeRuntimeWithLines()));

test('cancel runs <close> variables and rejects with ERR_TASK_CANCELLED', async () => {
  rt.load(`function t()
    local g <close> = setmetatable({}, { __close = function() print("closed") end })
    coroutine.yield("FOR", 60)
  end`);
  const task = rt.start('t');
  expect(rt.cancel(task.id, 'no longer needed')).toBe(true);
  await expect(task.result).rejects.toMatchObject({ code: 'ERR_TASK_CANCELLED', reason: 'no longer needed' });
  expect(lines).toEqual(['closed']);
  expect(task.status).toBe('cancelled');
  expect(rt.stats().tasks).toBe(0);
});

test('a result taken after the cancel rejects with the reason, the same error each time', async () => {
  rt.load('function t() coroutine.yield("INDEFINITELY") end');
  const task = rt.start('t');
  expect(rt.cancel(task.id, 'later')).toBe(true);
  await turn();
  const err = await task.result.catch((e) => e);
  expect(err).toBeInstanceOf(Error);
  expect(err).toMatchObject({
    code: 'ERR_TASK_CANCELLED',
    reason: 'later',
    message: `Task ${task.id} was cancelled: later`,
  });
  expect(await task.result.catch((e) => e)).toBe(err);
});

describe('cancel runs the <close> variables of coroutines a task waits inside', () => {
  const CLOSER =
    'local function closer(name) return setmetatable({}, { __close = function(_, e) print(name .. " closed " .. tostring(e)) end }) end';

  test('coroutine.wrap and tasks.resume_inline, nested two deep, innermost first', async () => {
    rt.load(`${CLOSER}
    function t()
      local outer <close> = closer("task")
      local gen = coroutine.wrap(function()
        local w <close> = closer("wrap")
        local co = coroutine.create(function()
          local c <close> = closer("inner")
          tasks.sleep(60)
        end)
        print("inner resumed", tasks.resume_inline(co))
      end)
      gen()
    end`);
    const task = rt.start('t');
    expect(task.status).toBe('waiting');
    expect(rt.cancel(task.id)).toBe(true);
    await expect(task.result).rejects.toMatchObject({ code: 'ERR_TASK_CANCELLED' });
    expect(lines).toEqual(['inner closed nil', 'wrap closed nil', 'task closed nil']);
  });

  test('a nested coroutine resumed normally is left alone, and one that waits again is guarded again', async () => {
    rt.load(`${CLOSER}
    function t()
      local co = coroutine.create(function()
        local c <close> = closer("inner")
        tasks.sleep(0.001)
        coroutine.yield("first")
        tasks.sleep(60)
      end)
      print(tasks.resume_inline(co))
      print(coroutine.status(co))
      tasks.resume_inline(co)
    end`);
    const task = rt.start('t');
    await sleep(30);
    expect(lines).toEqual(['true\tfirst', 'suspended']);
    expect(task.status).toBe('waiting');
    rt.cancel(task.id);
    await expect(task.result).rejects.toMatchObject({ code: 'ERR_TASK_CANCELLED' });
    expect(lines).toEqual(['true\tfirst', 'suspended', 'inner closed nil']);
  });

  test('an error in a nested <close> handler does not stop the cancel', async () => {
    rt.load(`${CLOSER}
    function t()
      local outer <close> = closer("task")
      coroutine.wrap(function()
        local bad <close> = setmetatable({}, { __close = function() error("boom") end })
        tasks.sleep(60)
      end)()
    end`);
    const task = rt.start('t');
    rt.cancel(task.id);
    await expect(task.result).rejects.toMatchObject({ code: 'ERR_TASK_CANCELLED' });
    expect(lines).toEqual(['task closed nil']);
    expect(rt.stats().tasks).toBe(0);
  });
});

test('close() with waiting tasks cancels them', async () => {
  rt.load('function w() coroutine.yield("FOR", 60) end');
  const tasks = [rt.start('w'), rt.start('w')];
  rt.closeSync();
  for (const t of tasks) await expect(t.result).rejects.toMatchObject({ code: 'ERR_TASK_CANCELLED' });
});

describe('cancel during every kind of wait', () => {
  const waits = [
    ['IMMEDIATE', 'coroutine.yield()'],
    ['FOR', 'coroutine.yield("FOR", 60)'],
    ['tasks.sleep', 'tasks.sleep(60)'],
    ['UNTIL_TIME', 'coroutine.yield("UNTIL_TIME", os.time() + 60)'],
    ['INDEFINITELY', 'coroutine.yield("INDEFINITELY")'],
    ['tasks.wait on another task', 'tasks.wait(tasks.start(function() coroutine.yield("INDEFINITELY") end))'],
    ['a sleep inside coroutine.wrap', 'coroutine.wrap(function() tasks.sleep(60) end)()'],
    ['a JS promise', 'never()'],
  ];
  test.each(waits)(
    'cancel during %s runs <close> variables and rejects with ERR_TASK_CANCELLED and the reason',
    async (kind, wait) => {
      rt.set('never', () => new Promise(() => {}));
      rt.load(`function t()
      local outer <close> = setmetatable({}, { __close = function() print("closed outer") end })
      do
        local inner <close> = setmetatable({}, { __close = function() print("closed inner") end })
        ${wait}
      end
      print("not reached")
    end`);
      const task = rt.start('t');
      expect(task.status).toBe('waiting');
      expect(rt.cancel(task.id, `stop ${kind}`)).toBe(true);
      expect(lines).toEqual(['closed inner', 'closed outer']);
      expect(task.status).toBe('cancelled');
      const err = await task.result.catch((e) => e);
      expect(err).toMatchObject({ code: 'ERR_TASK_CANCELLED', reason: `stop ${kind}` });
      expect(err.message).toContain(task.id);
      expect(err.message).toContain(`stop ${kind}`);
      expect(rt.cancel(task.id)).toBe(false);
      await sleep(5);
      expect(lines).toEqual(['closed inner', 'closed outer']);
    },
  );

  test('cancel without a reason says so and carries no reason', async () => {
    rt.load('function t() coroutine.yield("INDEFINITELY") end');
    const task = rt.start('t');
    rt.cancel(task.id);
    const err = await task.result.catch((e) => e);
    expect(err.code).toBe('ERR_TASK_CANCELLED');
    expect(err.message).toBe(`Task ${task.id} was cancelled.`);
    expect(err.reason).toBeUndefined();
  });

  test.each([
    ['an unknown id', 'nope'],
    ['an empty id', ''],
  ])('cancel answers false for %s', (_, id) => {
    expect(rt.cancel(id, 'why')).toBe(false);
  });

  test('a task cancelled while it runs ends at its next yield, its <close> variables run', async () => {
    rt.set('cancelMe', (id) => rt.cancel(id, 'self'));
    rt.load(`function t()
      local c <close> = setmetatable({}, { __close = function() print("closed") end })
      local ok = cancelMe(tasks.current_id())
      print("still running " .. tostring(ok))
      coroutine.yield("FOR", 60)
      print("not reached")
    end`);
    const task = rt.start('t');
    await expect(task.result).rejects.toMatchObject({ code: 'ERR_TASK_CANCELLED', reason: 'self' });
    expect(lines).toEqual(['still running true', 'closed']);
  });
});

describe('tasks.cancel', () => {
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

describe('AbortSignal', () => {
  beforeEach(() => rt.load(TASK_FUNCTIONS));

  // Regression: start() used to Object.assign a name onto an error whose name
  // is a prototype getter, and threw a TypeError instead.
  test('an already aborted signal throws an AbortError and starts nothing', () => {
    rt.load('ran = false function t() ran = true coroutine.yield("INDEFINITELY") end');
    const ac = new AbortController();
    ac.abort('too late');
    expect(() => rt.start('t', ac.signal)).toThrow(
      expect.objectContaining({ name: 'AbortError', code: 'ABORT_ERR', cause: 'too late' }),
    );
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
    await expect(task.result).rejects.toMatchObject({
      name: 'AbortError',
      code: 'ABORT_ERR',
      cause: 'stop now',
      message: expect.stringContaining('stop now'),
    });
    expect(lines).toEqual(['closed xy']);
    expect(task.status).toBe('cancelled');
  });

  test('AbortSignal.timeout cancels a call that waits too long', async () => {
    rt.load('function t() coroutine.yield("INDEFINITELY") end');
    const t0 = Date.now();
    await expect(rt.call('t', AbortSignal.timeout(20))).rejects.toMatchObject({
      code: 'ABORT_ERR',
      cause: expect.objectContaining({ name: 'TimeoutError' }),
    });
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
    await expect(rt.call('forever', AbortSignal.abort('nope'))).rejects.toMatchObject({
      name: 'AbortError',
      code: 'ABORT_ERR',
      cause: 'nope',
    });
  });

  test('aborted during the run: the result rejects with an AbortError and <close> variables run', async () => {
    const ac = new AbortController();
    const task = rt.start('guarded', 'g', ac.signal);
    setTimeout(() => ac.abort('stop now'), 5);
    const err = await task.result.catch((e) => e);
    expect(err).toBeInstanceOf(AbortError);
    expect(err).toMatchObject({
      name: 'AbortError',
      code: 'ABORT_ERR',
      cause: 'stop now',
      message: expect.stringContaining('stop now'),
    });
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
    const store = {
      load: async () => null,
      save: () =>
        new Promise((r) => {
          land = r;
        }),
    };
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
    rt.load(TASK_FUNCTIONS);
    seen = [];
    rt.on('taskcancel', (task, err) => seen.push([task, err]));
  });

  test('fires for rt.cancel and task.cancel, with the error the result rejects with', async () => {
    const a = rt.start('forever');
    const b = rt.spawn('forever', { name: 'b' });
    rt.cancel(a.id, 'one');
    b.cancel('two');
    expect(seen.map(([t, e]) => [t, e.code, e.reason])).toEqual([
      [a, 'ERR_TASK_CANCELLED', 'one'],
      [b, 'ERR_TASK_CANCELLED', 'two'],
    ]);
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
