// SPDX-License-Identifier: MIT
// Tasks on Node's loop: yields, resume, cancel, nested coroutines, seeds' namazu API.
'use strict';
const { Runtime } = require('../..');

let rt;
let lines;
beforeEach(() => {
  lines = [];
  rt = new Runtime({ print: (l) => lines.push(l) });
});
afterEach(() => rt.closeSync());

test('FOR waits about the duration and returns SCHEDULER, elapsed, unit', async () => {
  rt.load(`function t() return coroutine.yield("FOR", 30, "milliseconds") end`);
  // Taken before start: the wait begins inside start(), and under a slow
  // build (ASan) the checks below can take longer than any slack.
  const t0 = performance.now();
  const task = rt.start('t');
  expect(task.status).toBe('waiting');
  expect(task.waiting).toEqual({ instruction: 'FOR', until: expect.anything() });
  const reason = await task.result;
  expect(reason).toBe('SCHEDULER');
  expect(performance.now() - t0).toBeGreaterThanOrEqual(29);
  rt.load(`function t2() local r, e, u = coroutine.yield("FOR", 20, "MILLISECONDS") return {r, e, u} end`);
  const [r, e, u] = await rt.call('t2');
  expect([r, u]).toEqual(['SCHEDULER', 'MILLISECONDS']);
  expect(e).toBeGreaterThanOrEqual(19);
  expect(e).toBeLessThan(1000);
});

test('a bare yield is IMMEDIATE and an AbortSignal cancels a task', async () => {
  rt.load(`function t() local r, e, u = coroutine.yield() return r .. " " .. u end
           function forever() coroutine.yield("INDEFINITELY") end`);
  expect(await rt.call('t')).toBe('SCHEDULER SECONDS');
  const ac = new AbortController();
  const task = rt.start('forever', ac.signal);
  ac.abort('stop');
  await expect(task.result).rejects.toMatchObject({ name: 'AbortError', code: 'ABORT_ERR', cause: 'stop' });
});

test('INDEFINITELY is resumed by id with exactly the resume values', async () => {
  rt.load(`function t() local a, b, c = coroutine.yield("INDEFINITELY") return {a, b, c} end`);
  const task = rt.start('t');
  expect(rt.resume('no-such-id')).toBe(false);
  expect(rt.resume(task.id, 1, 'two', true)).toBe(true);
  expect(await task.result).toEqual([1, 'two', true]);
  expect(rt.resume(task.id)).toBe(false);
});

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

describe('cancel runs the <close> variables of coroutines a task waits inside', () => {
  const CLOSER = 'local function closer(name) return setmetatable({}, { __close = function(_, e) print(name .. " closed " .. tostring(e)) end }) end';

  test('coroutine.wrap and coroutine.resume, nested two deep, innermost first', async () => {
    rt.load(`${CLOSER}
    function t()
      local outer <close> = closer("task")
      local gen = coroutine.wrap(function()
        local w <close> = closer("wrap")
        local co = coroutine.create(function()
          local c <close> = closer("inner")
          tasks.sleep(60)
        end)
        print("inner resumed", coroutine.resume(co))
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
      print(coroutine.resume(co))
      print(coroutine.status(co))
      coroutine.resume(co)
    end`);
    const task = rt.start('t');
    await new Promise((r) => setTimeout(r, 30));
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

test('a bad yield raises at the yield with the caller line, catchable by pcall', async () => {
  rt.load(`function t()
    local ok, err = pcall(coroutine.yield, "FOR", 5, "FORTNIGHTS")
    return tostring(err)
  end`, { name: 'bad.lua' });
  expect(await rt.call('t')).toMatch(/unknown time unit "FORTNIGHTS" for FOR \(expected NANOSECONDS.*DAYS\)/);
  rt.load('function u() coroutine.yield("SOON") end', { name: 'u.lua' });
  await expect(rt.call('u')).rejects.toMatchObject({ code: 'ERR_BAD_YIELD', message: expect.stringMatching(/^u\.lua:1: unknown yield instruction "SOON"/) });
});

test('tasks.sleep suspends the whole task from inside a coroutine.wrap iterator', async () => {
  rt.load(`function t()
    local gen = coroutine.wrap(function() for i = 1, 3 do tasks.sleep(0.005) coroutine.yield(i) end end)
    local out = {}
    for _ = 1, 3 do out[#out + 1] = gen() end
    return out
  end`);
  expect(await rt.call('t')).toEqual([1, 2, 3]);
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
  const turn = () => new Promise((r) => setImmediate(r));
  while (task.status === 'waiting') await turn();
  await turn();
  process.off('unhandledRejection', onUnhandled);
  expect(task.status).toBe('failed');
  expect(seen).toEqual([]);
  await expect(task.result).rejects.toMatchObject({ code: 'ERR_LUA_RUNTIME' });
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

test('close() with waiting tasks cancels them', async () => {
  rt.load('function w() coroutine.yield("FOR", 60) end');
  const tasks = [rt.start('w'), rt.start('w')];
  rt.closeSync();
  for (const t of tasks) await expect(t.result).rejects.toMatchObject({ code: 'ERR_TASK_CANCELLED' });
});

describe('many values onto a task\'s stack (a new thread has about 40 slots; Lua checks no room outside debug builds)', () => {
  const N = 5000;
  const sumTo = (n) => (n * (n + 1)) / 2;
  beforeEach(() => {
    rt.load(`
      function sum(...) local s = 0 for i = 1, select('#', ...) do s = s + select(i, ...) end return select('#', ...), s end
      function upto(n) local t = {} for i = 1, n do t[i] = i end return t end
      function sumresumed() return sum(coroutine.yield("INDEFINITELY")) end
      function many(n) coroutine.yield() return table.unpack(upto(n)) end`);
  });

  test('tasks.start and rt.start pass every argument', async () => {
    expect(rt.load(`local id = tasks.start(function(...) n, s = sum(...) end, table.unpack(upto(${N}))) return n, s`)).toEqual([N, sumTo(N)]);
    const args = Array.from({ length: N }, (_, i) => i + 1);
    rt.load('function both(...) return {sum(...)} end');
    expect(await rt.start('both', ...args).result).toEqual([N, sumTo(N)]);
  });

  test('tasks.resume, namazu.coroutine.resume and rt.resume pass every value', async () => {
    expect(rt.load(`local id = tasks.start(function() n, s = sumresumed() end)
      tasks.resume(id, table.unpack(upto(${N}))) return n, s`)).toEqual([N, sumTo(N)]);
    expect(rt.load(`local nc = require("namazu.coroutine")
      local id = nc.start(coroutine.create(function() n, s = sumresumed() end))
      nc.resume(id, table.unpack(upto(${N}))) return n, s`)).toEqual([N, sumTo(N)]);
    rt.load('function both() return {sumresumed()} end');
    const task = rt.start('both');
    expect(rt.resume(task.id, ...Array.from({ length: N }, (_, i) => i + 1))).toBe(true);
    expect(await task.result).toEqual([N, sumTo(N)]);
  });

  test('a task waiting on one that returns thousands of values gets them all', async () => {
    rt.load(`got = nil
      local id = tasks.start(many, ${N})
      tasks.start(function() got = {sum(tasks.wait(id))} end)
      tasks.start(function() got2 = select('#', tasks.wait(id)) end)`);
    await new Promise((r) => setTimeout(r, 30));
    expect(rt.get('got')).toEqual([N, sumTo(N)]);
    expect(rt.get('got2')).toBe(N);
  });

  test('a resume past the stack limit is an error and leaves the task waiting', async () => {
    // The task holds 999,000 values on its stack; Lua's limit is about a million.
    rt.load(`function deep() local t = upto(999000)
      local function hold(...) return coroutine.yield("INDEFINITELY") end
      return select('#', hold(table.unpack(t))) end`);
    const task = rt.start('deep');
    const more = Array.from({ length: 20000 }, () => 0);
    expect(() => rt.resume(task.id, ...more)).toThrow(expect.objectContaining({
      code: 'ERR_LUA_RUNTIME', message: expect.stringContaining('no room for 20000 more values'),
    }));
    expect(() => rt.load(`tasks.resume("${task.id}", table.unpack(upto(20000)))`)).toThrow(/tasks.resume: the task's stack has no room for 20000 more values/);
    expect(task.status).toBe('waiting');
    expect(rt.resume(task.id, 1, 2, 3)).toBe(true);
    expect(await task.result).toBe(3);
  });
});

describe('a task\'s coroutine runs only under the scheduler (coroutine.running() hands it out)', () => {
  test('coroutine.resume refuses it and coroutine.close raises, from anywhere; the task stays resumable by id', async () => {
    rt.load(`function w() leaked = coroutine.running() local v = coroutine.yield("INDEFINITELY") return v end`);
    const task = rt.start('w');
    expect(rt.load('return coroutine.resume(leaked)')).toEqual([false, "cannot resume a task's coroutine (resume the task: tasks.resume(id))"]);
    expect(() => rt.load('coroutine.close(leaked)', { name: 'closer' }))
      .toThrow(/closer"?\]?:1: cannot close a task's coroutine \(cancel the task: tasks.cancel\(id\)\)/);
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
    let id;
    rt.set('poke', () => rt.cancel(id));
    rt.load(`function w() leaked = coroutine.running() coroutine.yield("INDEFINITELY") poke() return "ran" end`);
    const task = rt.start('w');
    id = task.id;
    expect(rt.load('return coroutine.resume(leaked)')[0]).toBe(false);
    expect(rt.cancel(id)).toBe(true);
    await expect(task.result).rejects.toMatchObject({ code: 'ERR_TASK_CANCELLED' });
    expect(rt.load('return 1 + 1')).toEqual([2]);
  });

  test('a start deferred by a COMMIT cannot be closed or resumed before it runs', async () => {
    rt.closeSync();
    let release;
    const store = { load: async () => null, save: () => new Promise((r) => { release = r; }) };
    rt = await Runtime.open({ name: 'deferred', store });
    rt.load(`co = coroutine.create(function(...) return select('#', ...) end)
      big = {} for i = 1, 5000 do big[i] = i end`);
    const committed = rt.commit();
    await new Promise((r) => setImmediate(r)); // the COMMIT lock is held until save resolves
    const [id, status] = rt.load('local id = tasks.start(co, table.unpack(big)) return id, tasks.status(id)');
    expect(status).toBe('waiting');
    expect(() => rt.load('coroutine.close(co)')).toThrow(/cannot close a task's coroutine/);
    expect(rt.load('return coroutine.resume(co)')[0]).toBe(false);
    release();
    await committed;
    await new Promise((r) => setTimeout(r, 10));
    expect(rt.task(id)).toMatchObject({ status: 'done' });
    expect(rt.load(`return tasks.wait("${id}")`)).toEqual([5000]);
  });
});
