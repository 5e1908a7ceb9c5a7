'use strict';
// Durable tasks (docs/durable.md): replay across close and reopen, the same
// ids, idempotency keys, journaled calls, steps, clocks and messages,
// divergence, and what is refused.
const { Runtime, DirectoryStore } = require('../../..');
const { sleep, until: loopUntil, tempDirs, delegatingStore } = require('../helpers');

const tmpdir = tempDirs('lua-tasks-durable-');

// Opens `dir` with `source` loaded and `calls` (a counter of the JS calls
// made, by argument) behind the global effect(x).
async function open(dir, source, calls = new Map(), extra = {}) {
  const rt = await Runtime.open({
    name: 'game',
    store: dir,
    ...extra,
    setup: (r) => {
      r.set('effect', (x) => {
        calls.set(x, (calls.get(x) || 0) + 1);
        return `did ${x}`;
      });
      r.load(source);
    },
  });
  return rt;
}

const QUEST = `
function quest(name, steps)
  local log = {}
  for i = 1, steps do
    log[#log + 1] = effect(name .. i)
    coroutine.yield("FOR", 30, "MILLISECONDS")
  end
  local got = coroutine.yield("INDEFINITELY")
  return table.concat(log, ",") .. "|" .. tostring(got)
end
function sleeper() return coroutine.yield("FOR", 1, "HOURS") end
`;

// The instruction a live task waits on, or undefined.
function waitingOn(rt, id) {
  const t = rt.task(id);
  return t && t.waiting ? t.waiting.instruction : undefined;
}

test('a durable task waits again after close and reopen, with its id, its deadline and its place', async () => {
  const dir = tmpdir();
  const calls = new Map();
  let rt = await open(dir, QUEST, calls);
  const task = rt.spawn('quest', { durable: true, args: ['a', 2] });
  const long = rt.spawn('sleeper', { durable: true });
  // A durable wait is reported once its record is written.
  expect(long.waiting).toEqual({ instruction: 'COMMIT' });
  // Both steps done, quest waits INDEFINITELY (turns, not a fixed sleep: a
  // sanitizer build under load is slower than any).
  await loopUntil(() => waitingOn(rt, task.id) === 'INDEFINITELY' && waitingOn(rt, long.id) === 'FOR');
  const until = long.waiting.until;
  expect(until).toBeInstanceOf(Date);
  expect(rt.task(task.id).waiting.instruction).toBe('INDEFINITELY');
  await rt.close();

  rt = await open(dir, QUEST, calls);
  expect(rt.task(task.id)).toMatchObject({ id: task.id, status: 'waiting', waiting: { instruction: 'INDEFINITELY' } });
  expect(rt.task(long.id).waiting).toEqual({ instruction: 'FOR', until });
  expect(rt.tasks().map((t) => t.id)).toEqual(expect.arrayContaining([task.id, long.id]));
  // Every JS call ran once: the replay handed their results back.
  expect([...calls]).toEqual([
    ['a1', 1],
    ['a2', 1],
  ]);
  const again = rt.spawn('quest', { durable: true, key: 'never-used', args: ['b', 0] });
  expect(again.id).not.toBe(task.id);
  expect(rt.resume(task.id, 'back')).toBe(true);
  expect(await rt.spawn('quest', { durable: true, key: 'x', args: ['c', 0] }).id).toBeTruthy();
  // The restored task's result, through the Task an idempotency key returns.
  expect(rt.cancel(long.id)).toBe(true);
  await rt.close();

  rt = await open(dir, QUEST, calls);
  // The quest ended and the sleeper was cancelled: neither runs again; both are retained as ended.
  expect(rt.tasks().map((t) => t.id)).toEqual(expect.not.arrayContaining([task.id, long.id]));
  expect(rt.tasks()).toHaveLength(2); // the two quests started after the restart, still waiting
  expect(rt.task(task.id)).toEqual({ id: task.id, status: 'done' });
  expect(rt.task(long.id)).toEqual({ id: long.id, status: 'cancelled' });
  await rt.close();
});

test('an idempotency key gives the live task, across a restart too', async () => {
  const dir = tmpdir();
  let rt = await open(dir, QUEST);
  const first = rt.spawn('quest', { durable: true, key: 'quest:1', args: ['k', 1] });
  expect(rt.spawn('quest', { durable: true, key: 'quest:1', args: ['other', 5] })).toBe(first);
  await rt.close();
  rt = await open(dir, QUEST);
  const ensured = rt.spawn('quest', { durable: true, key: 'quest:1', args: ['k', 1] });
  expect(ensured.id).toBe(first.id);
  await loopUntil(() => waitingOn(rt, first.id) === 'INDEFINITELY');
  expect(rt.resume(first.id, 'hi')).toBe(true);
  expect(await ensured.result).toBe('did k1|hi');
  // Ended: the key still gives it, done, while it is retained (durableRetention).
  expect(rt.spawn('quest', { durable: true, key: 'quest:1', args: ['k', 0] })).toBe(ensured);
  await rt.close();
  rt = await open(dir, QUEST);
  const retained = rt.spawn('quest', { durable: true, key: 'quest:1', args: ['k', 0] });
  expect(retained.id).toBe(first.id);
  expect(retained.status).toBe('done');
  expect(await retained.result).toBe('did k1|hi');
  expect(rt.task(first.id)).toEqual({ id: first.id, status: 'done' });
  expect(rt.tasks()).toEqual([]);
  await rt.close();
  // Past its retention it is forgotten: the key starts a new task.
  rt = await open(dir, QUEST, new Map(), { durableRetention: 0 });
  expect(rt.task(first.id)).toBeUndefined();
  const fresh = rt.spawn('quest', { durable: true, key: 'quest:1', args: ['k', 0] });
  expect(fresh.id).not.toBe(first.id);
  await rt.close();
});

test('a finished durable task past the native recent results answers its status by id, and a made-up id of the same shape none', async () => {
  // Retained by its key, not its id string (DurableKeys refs): rt.task(id)
  // must find it from the id all the same, here and after a restart.
  const dir = tmpdir();
  let rt = await open(dir, 'function f(x) return x end');
  const tasks = [];
  for (let i = 0; i < 1100; i++) tasks.push(rt.spawn('f', { durable: true, args: [i] }));
  await Promise.all(tasks.map((t) => t.result));
  const first = tasks[0].id;
  expect(rt.task(first)).toEqual({ id: first, status: 'done' });
  expect(tasks[0].status).toBe('done');
  const prefix = first.slice(0, -13); // ids end in their key's 13 base-36 digits
  expect(rt.task(`${prefix}0000000zzzzzz`)).toBeUndefined();
  expect(rt.task(`${prefix}zzzzzzzzzzzzz`)).toBeUndefined();
  expect(rt.task(`${first}x`)).toBeUndefined();
  await rt.close();
  rt = await open(dir, 'function f(x) return x end');
  expect(rt.task(first)).toEqual({ id: first, status: 'done' });
  await rt.close();
});

test('durableRetainedMax keeps the latest finished tasks: an older one is forgotten, in the store too, and its key starts anew', async () => {
  const dir = tmpdir();
  const SOURCE = 'function f(x) return x end';
  const ids = [];
  let rt = await open(dir, SOURCE, new Map(), { durableRetainedMax: 3 });
  for (let i = 1; i <= 5; i++) {
    const t = rt.spawn('f', { durable: true, key: `k${i}`, args: [i] });
    ids.push(t.id);
    expect(await t.result).toBe(i);
  }
  // k1 and k2 were forgotten when k4 and k5 ended; k3..k5 are kept.
  expect(await rt.spawn('f', { durable: true, key: 'k5', args: [0] }).result).toBe(5);
  const again = rt.spawn('f', { durable: true, key: 'k1', args: [10] });
  expect(again.id).not.toBe(ids[0]);
  expect(await again.result).toBe(10); // and k3 is forgotten now
  await rt.close();
  // The store kept what the runtime kept: k4, k5 and the new k1.
  rt = await open(dir, SOURCE, new Map(), { durableRetainedMax: 3 });
  const seen = [];
  for (const k of ['k4', 'k5', 'k1']) seen.push(await rt.spawn('f', { durable: true, key: k, args: [0] }).result);
  expect(seen).toEqual([4, 5, 10]);
  expect([ids[2], ids[3], ids[4]].map((id) => rt.task(id) && rt.task(id).status)).toEqual([undefined, 'done', 'done']);
  await rt.close();
  await expect(Runtime.open({ name: 'x', store: dir, durableRetainedMax: 0 })).rejects.toThrow(
    /"options.durableRetainedMax" option must be an integer number of tasks from 1 to 1000000000 \(past it the oldest finished ones are forgotten first\). Received number 0\./,
  );
});

test('tasks.step runs once: a replay hands back its results and leaves its changes alone', async () => {
  const dir = tmpdir();
  const source = `
    count = 0
    function stepper()
      local n, said = tasks.step(function() count = count + 1; return count, effect("s") end)
      local got = coroutine.yield("INDEFINITELY")
      return n .. " " .. said .. " " .. got .. " " .. count
    end`;
  const calls = new Map();
  let rt = await open(dir, source, calls);
  const task = rt.spawn('stepper', { durable: true, key: 's' });
  expect(rt.get('count')).toBe(1);
  await rt.close();
  rt = await open(dir, source, calls);
  expect(rt.get('count')).toBe(0); // the step did not run again: its effects were the first run's
  const t = rt.spawn('stepper', { durable: true, key: 's' });
  expect(t.id).toBe(task.id);
  rt.resume(t.id, 'go');
  expect(await t.result).toBe('1 did s go 0');
  expect(calls.get('s')).toBe(1);
  await rt.close();
});

test('clock and random reads replay as they were, and tasks.start is not started again', async () => {
  const dir = tmpdir();
  const source = `
    function idle() coroutine.yield("INDEFINITELY") end
    function reads()
      local child = tasks.start(idle)
      local seen = os.time() .. " " .. os.clock() .. " " .. os.date("!%H:%M:%S") .. " " .. math.random(1, 1000000000) .. " " .. child
      effect(seen)
      coroutine.yield("INDEFINITELY")
      return seen
    end`;
  const calls = new Map();
  let rt = await open(dir, source, calls);
  rt.spawn('reads', { durable: true, key: 'r' });
  expect(rt.tasks()).toHaveLength(2); // the task and its child
  await sleep(1100); // os.time and os.date would read another second now
  await rt.close();
  rt = await open(dir, source, calls);
  expect(rt.tasks()).toHaveLength(2); // the child is durable: restored, and not started again
  const t = rt.spawn('reads', { durable: true, key: 'r' });
  await loopUntil(() => waitingOn(rt, t.id) === 'INDEFINITELY');
  expect(rt.resume(t.id)).toBe(true);
  const replayed = await t.result;
  expect([...calls.keys()]).toEqual([replayed]); // what the first run saw, and effect() ran once
  await rt.close();
});

test('code that changed under a durable task fails it with ERR_NONDETERMINISM, naming it and the place', async () => {
  const dir = tmpdir();
  let rt = await open(dir, `function q() effect("x"); coroutine.yield("FOR", 1, "HOURS") end`);
  const task = rt.spawn('q', { durable: true });
  await rt.close();
  const errors = [];
  rt = await Runtime.open({
    name: 'game',
    store: dir,
    setup: (r) => {
      r.set('effect', () => 1);
      r.on('taskerror', (t, e) => errors.push([t.id, e]));
      r.load(`function q() coroutine.yield("FOR", 1, "HOURS") end`); // the call is gone
    },
  });
  // It stays in the store until needed (docs/durable.md#restore-at-open): a
  // resume reads its journal, and the replay fails.
  expect(errors).toHaveLength(0);
  expect(rt.task(task.id)).toMatchObject({ status: 'waiting', waiting: { instruction: 'FOR' } });
  expect(rt.resume(task.id)).toBe(false);
  expect(errors).toHaveLength(1);
  const [id, err] = errors[0];
  expect(id).toBe(task.id);
  expect(err.code).toBe('ERR_NONDETERMINISM');
  expect(err.message).toContain(task.id);
  expect(err.message).toContain('record 1');
  expect(err.message).toContain('a JS call');
  expect(err.message).toContain('a yield (FOR)');
  await rt.close();
  // Its journal stays for code that replays it: the old code finds the task again.
  rt = await open(dir, `function q() effect("x"); coroutine.yield("FOR", 1, "HOURS") end`);
  expect(rt.task(task.id)).toMatchObject({ status: 'waiting', waiting: { instruction: 'FOR' } });
  await rt.close();
});

test('a JS call that returns a promise is journaled with its outcome, rejections as their message', async () => {
  const dir = tmpdir();
  let n = 0;
  const source = `
    function fetcher()
      local v = fetch("a")
      local ok, err = pcall(fetch, "fail")
      coroutine.yield("INDEFINITELY")
      return v .. " " .. tostring(ok) .. " " .. tostring(err)
    end`;
  const setup = (r) => {
    r.set('fetch', async (x) => {
      n++;
      await sleep(5);
      if (x === 'fail') throw new Error('no such thing');
      return `got ${x}`;
    });
    r.load(source);
  };
  let rt = await Runtime.open({ name: 'game', store: dir, setup });
  const task = rt.spawn('fetcher', { durable: true, key: 'f' });
  await loopUntil(() => waitingOn(rt, task.id) === 'INDEFINITELY');
  await rt.close();
  rt = await Runtime.open({ name: 'game', store: dir, setup });
  const t = rt.spawn('fetcher', { durable: true, key: 'f' });
  rt.resume(t.id);
  expect(await t.result).toMatch(/^got a false .*no such thing/);
  expect(n).toBe(2); // each call once, in the first run
  await rt.close();
});

test('messages a durable task received replay; the mailbox of the new run waits for the live part', async () => {
  const dir = tmpdir();
  const source = `
    function inbox()
      local a = tasks.receive()
      effect(a)
      local b = tasks.receive()
      return a .. "+" .. b
    end`;
  const calls = new Map();
  let rt = await open(dir, source, calls);
  const task = rt.spawn('inbox', { durable: true, key: 'm' });
  expect(rt.send(task.id, 'one')).toBe(true);
  await loopUntil(() => calls.get('one') === 1); // taken; close() writes its journal
  await rt.close();
  rt = await open(dir, source, calls);
  const t = rt.spawn('inbox', { durable: true, key: 'm' });
  expect(t.waiting.instruction).toBe('RECEIVE');
  rt.send(t.id, 'two');
  expect(await t.result).toBe('one+two');
  expect(calls.get('one')).toBe(1); // replayed, not called again
  await rt.close();
});

test('a deadline that passed while the runtime was closed fires at open, once', async () => {
  const dir = tmpdir();
  const source = `function nap() local r, e = coroutine.yield("FOR", 50, "MILLISECONDS"); effect("woke"); return e end`;
  const calls = new Map();
  let rt = await open(dir, source, calls);
  const task = rt.spawn('nap', { durable: true, key: 'n' });
  await rt.close();
  await sleep(120);
  rt = await open(dir, source, calls);
  const t = rt.spawn('nap', { durable: true, key: 'n' });
  expect(t.id).toBe(task.id);
  const elapsed = await t.result;
  expect(elapsed).toBeGreaterThanOrEqual(0.1); // counted from the yield in the first run
  expect(calls.get('woke')).toBe(1);
  await rt.close();
  rt = await open(dir, source, calls);
  expect(rt.tasks()).toEqual([]);
  await rt.close();
});

test('tasks.start_durable starts a durable task from Lua; a replay does not start it again', async () => {
  const dir = tmpdir();
  const source = `
    function child(x) coroutine.yield("INDEFINITELY"); return x * 2 end
    function parent()
      local id = tasks.start_durable("child", 21)
      coroutine.yield("INDEFINITELY")
      return id
    end`;
  let rt = await open(dir, source);
  const parent = rt.spawn('parent', { durable: true, key: 'p' });
  const ids = rt.tasks().map((t) => t.id);
  expect(ids).toHaveLength(2);
  await rt.close();
  rt = await open(dir, source);
  expect(
    rt
      .tasks()
      .map((t) => t.id)
      .sort(),
  ).toEqual([...ids].sort());
  const p = rt.spawn('parent', { durable: true, key: 'p' });
  rt.resume(parent.id);
  const childId = await p.result;
  expect(ids).toContain(childId);
  expect(rt.resume(childId)).toBe(true);
  await rt.close();
});

test('bad input to a durable start is refused with what was wrong', async () => {
  const dir = tmpdir();
  const rt = await open(dir, QUEST);
  expect(() => rt.spawn(rt.get('quest'), { durable: true })).toThrow(
    expect.objectContaining({ code: 'ERR_INVALID_ARG_TYPE', message: expect.stringContaining('global name') }),
  );
  expect(() => rt.spawn('quest', { durable: true, args: [() => 1] })).toThrow(
    expect.objectContaining({ code: 'ERR_CONVERSION', message: expect.stringContaining('must persist') }),
  );
  expect(() => rt.spawn('quest', { key: 'k' })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_VALUE' }));
  expect(() => rt.spawn('quest', { durable: 'yes' })).toThrow(
    expect.objectContaining({ code: 'ERR_INVALID_ARG_TYPE' }),
  );
  expect(() => rt.spawn('nope', { durable: true })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_VALUE' }));
  expect(rt.tasks()).toEqual([]);
  await rt.close();
  const plain = new Runtime();
  expect(() => plain.spawn('print', { durable: true })).toThrow(
    expect.objectContaining({ code: 'ERR_INVALID_ARG_VALUE', message: expect.stringContaining('store') }),
  );
  expect(() => plain.load('tasks.start_durable("print")')).toThrow(/keeps no journals/);
  plain.close();
});

test('tasks.patched lets new code meet tasks that older code started', async () => {
  const dir = tmpdir();
  const v1 = `function q() coroutine.yield("INDEFINITELY"); return effect("old reward") end`;
  const v2 = `function q()
    local new = tasks.patched("double-reward")
    coroutine.yield("INDEFINITELY")
    if new then return effect("new reward") else return effect("old reward") end
  end`;
  let rt = await open(dir, v1);
  const old = rt.spawn('q', { durable: true, key: 'old' });
  await rt.close();
  rt = await open(dir, v2);
  const young = rt.spawn('q', { durable: true, key: 'young' });
  await sleep(20);
  const restored = rt.spawn('q', { durable: true, key: 'old' });
  expect(restored.id).toBe(old.id);
  expect(rt.resume(old.id)).toBe(true);
  expect(await restored.result).toBe('did old reward'); // started by v1: the old path, no divergence
  await rt.close();
  rt = await open(dir, v2);
  const again = rt.spawn('q', { durable: true, key: 'young' });
  expect(again.id).toBe(young.id);
  expect(rt.resume(young.id)).toBe(true);
  expect(await again.result).toBe('did new reward'); // started by v2: replayed on the new path
  await rt.close();
});

test('a message sent with sendDurable waits in the inbox across a restart until it is received', async () => {
  const dir = tmpdir();
  const source = `
    function inbox()
      coroutine.yield("INDEFINITELY")
      local a = tasks.receive()
      local b = tasks.receive()
      return a .. "+" .. b
    end`;
  let rt = await open(dir, source);
  const task = rt.spawn('inbox', { durable: true, key: 'i' });
  await sleep(20);
  expect(await rt.sendDurable(task.id, 'one')).toBe(true);
  expect(await rt.sendDurable(task.id, 'two')).toBe(true);
  expect(() => rt.send(task.id, () => 1)).toThrow(
    expect.objectContaining({ code: 'ERR_CONVERSION', message: expect.stringContaining('must persist') }),
  );
  rt.closeSync(); // as a crash would: only what was written counts
  rt = await open(dir, source);
  const t = rt.spawn('inbox', { durable: true, key: 'i' });
  expect(t.id).toBe(task.id);
  expect(rt.resume(t.id)).toBe(true);
  expect(await t.result).toBe('one+two');
  expect(await rt.sendDurable(t.id, 'late')).toBe(false);
  await rt.close();
});

test('continue_as_new runs the entry again under the same id with a journal that starts again', async () => {
  const dir = tmpdir();
  const source = `
    function hourly(round, total)
      total = total + tasks.step(function() return effect("round " .. round) and round end)
      if round < 5 then
        coroutine.yield("FOR", 5, "MILLISECONDS")
        tasks.continue_as_new(round + 1, total)
      end
      coroutine.yield("INDEFINITELY")
      return total
    end`;
  const calls = new Map();
  let rt = await open(dir, source, calls);
  const task = rt.spawn('hourly', { durable: true, key: 'h', args: [1, 0] });
  await loopUntil(() => waitingOn(rt, task.id) === 'INDEFINITELY');
  await rt.close();
  const { DirectoryStore } = require('../../..');
  const store = new DirectoryStore(dir);
  // One run's journal only: its start, its step, its wait.
  expect(store.reader('game').keys(task.id, '', -1, 2)).toHaveLength(3);
  rt = await open(dir, source, calls);
  const t = rt.spawn('hourly', { durable: true, key: 'h' });
  expect(t.id).toBe(task.id);
  rt.resume(t.id);
  expect(await t.result).toBe(15);
  expect([...calls.values()]).toEqual([1, 1, 1, 1, 1]);
  await rt.close();
  expect(() => new Runtime().load('tasks.continue_as_new()')).toThrow(/only a durable task/);
});

test('an UNTIL_NEXT instant missed while closed fires once at open, or is skipped with durableCatchUp: skip', async () => {
  const source = `function tick() local r = coroutine.yield("UNTIL_NEXT", "* * * * * *"); effect("tick"); coroutine.yield("INDEFINITELY") end`;
  for (const mode of ['once', 'skip']) {
    const dir = tmpdir();
    const calls = new Map();
    let rt = await open(dir, source, calls);
    const task = rt.spawn('tick', { durable: true, key: 't' });
    await loopUntil(() => waitingOn(rt, task.id) === 'UNTIL_NEXT');
    await rt.close();
    await sleep(1100); // the next second has passed
    const opened = Date.now();
    rt = await open(dir, source, calls, { durableCatchUp: mode });
    const t = rt.spawn('tick', { durable: true, key: 't' });
    if (mode === 'once') {
      await loopUntil(() => calls.get('tick') !== undefined);
      expect(calls.get('tick')).toBe(1); // fired at open
    } else {
      await loopUntil(() => waitingOn(rt, t.id) === 'UNTIL_NEXT'); // its replay done
      expect(calls.get('tick')).toBeUndefined(); // waits for the next second instead
      expect(t.waiting.instruction).toBe('UNTIL_NEXT');
      expect(t.waiting.until.getTime()).toBeGreaterThan(opened); // (by now it may be due: a second is short)
    }
    await rt.close();
  }
  await expect(Runtime.open({ name: 'x', store: tmpdir(), durableCatchUp: 'always' })).rejects.toThrow(
    /'once'.*'skip'/,
  );
});

test('a message already in the mailbox when a durable task receives replays as taken at once', async () => {
  const dir = tmpdir();
  const source = `function r()
    coroutine.yield("COMMIT")
    local a = tasks.receive()
    local b = tasks.receive()
    coroutine.yield("INDEFINITELY")
    return a .. b
  end`;
  let rt = await open(dir, source);
  const task = rt.spawn('r', { durable: true, key: 'r' });
  rt.send(task.id, 'x'); // while it commits: in its mailbox before it receives
  await sleep(30);
  rt.send(task.id, 'y'); // while it waits in receive
  await sleep(30);
  expect(rt.task(task.id).waiting.instruction).toBe('INDEFINITELY');
  await rt.close();
  const errors = [];
  rt = await Runtime.open({
    name: 'game',
    store: dir,
    setup: (r) => {
      r.on('taskerror', (t, e) => errors.push(e.message));
      r.load(source);
    },
  });
  const t = rt.spawn('r', { durable: true, key: 'r' });
  expect(errors).toEqual([]);
  expect(rt.resume(t.id)).toBe(true);
  expect(await t.result).toBe('xy');
  await rt.close();
});

test('a durable task refuses to detach a coroutine that waits under coroutine.resume; resume_inline waits in line', async () => {
  const dir = tmpdir();
  const rt = await open(
    dir,
    `function fan()
      local co = coroutine.create(function()
        local c <close> = setmetatable({}, { __close = function() closed = true end })
        coroutine.yield("FOR", 1, "MILLISECONDS") -- a plain yield: no wait
        tasks.sleep(0.001)
      end)
      coroutine.resume(co)
      local ok, err = pcall(coroutine.resume, co)
      return { ok, err, coroutine.status(co), closed }
    end
    function inline()
      local co = coroutine.create(function(x) tasks.sleep(0.001) return x * 2 end)
      return select(2, tasks.resume_inline(co, 21))
    end`,
  );
  const [ok, err, status, closed] = await rt.spawn('fan', { durable: true }).result;
  expect(ok).toBe(false);
  expect(err).toMatch(
    /coroutine\.resume: the coroutine waits \(FOR\) .* a durable task cannot replay: .*tasks\.resume_inline/,
  );
  expect([status, closed]).toEqual(['dead', true]);
  expect(await rt.spawn('inline', { durable: true }).result).toBe(42);
  await rt.close();
});

// A refusal is an answer about the task: given before the task's end is
// written, a crash would bring the task back at its wait, and the message
// refused meanwhile would be lost (the fleet chaos test found it).
test('a refusal is never answered from a write that failed: after a crash the task is there, and the retry lands', async () => {
  const dir = tmpdir();
  let failing = false;
  const storeOf = () => {
    const inner = new DirectoryStore(dir);
    return delegatingStore(inner, {
      async write(batch) {
        if (failing) throw Object.assign(new Error('the disk is gone'), { code: 'EIO' });
        return inner.write(batch);
      },
    });
  };
  const setup = (r) => r.load('function inbox() return tasks.receive() end');
  let rt = await Runtime.open({ name: 'game', store: storeOf(), setup });
  const task = rt.spawn('inbox', { durable: true });
  await loopUntil(() => rt.task(task.id).waiting?.instruction === 'RECEIVE'); // its wait is written
  failing = true;
  expect(rt.cancel(task.id)).toBe(true); // ended here; its end's write fails
  const answer = rt.sendDurable(task.id, 'lost?').then(
    (v) => ['resolved', v],
    (e) => ['rejected', e.code],
  );
  const early = await Promise.race([answer, sleep(300).then(() => null)]);
  // No false while the end is not written: the call waits for the write, or fails with it.
  expect(early).toEqual(['rejected', 'ERR_COMMIT_FAILED']);
  rt.closeSync(); // a crash while the store fails
  failing = false;
  rt = await Runtime.open({ name: 'game', store: storeOf(), setup });
  // Its end never landed: it is back at its wait, and the sender's retry reaches it.
  expect(rt.task(task.id)).toMatchObject({ status: 'waiting', waiting: { instruction: 'RECEIVE' } });
  const done = new Map();
  rt.on('taskdone', (t, v) => done.set(t.id, v));
  await expect(rt.sendDurable(task.id, 'delivered')).resolves.toBe(true);
  await loopUntil(() => done.has(task.id));
  expect(done.get(task.id)).toBe('delivered');
  await rt.close();
});

test('sendDurable and resumeDurable answer false only once the runtime has written what it knows of the task', async () => {
  const inner = new DirectoryStore(tmpdir());
  let gate = null;
  const store = delegatingStore(inner, {
    async write(batch) {
      if (gate) await gate.promise;
      return inner.write(batch);
    },
  });
  const rt = await Runtime.open({ name: 'game', store, setup: (r) => r.load('function quick() return 1 end') });
  let release;
  gate = { promise: new Promise((resolve) => (release = resolve)) };
  const task = rt.spawn('quick', { durable: true });
  expect(await task.result).toBe(1); // ended here; its end waits behind the gate
  const answers = [];
  const sent = rt.sendDurable(task.id, 'late').then((v) => answers.push(['send', v]));
  const resumed = rt.resumeDurable(task.id, 'late').then((v) => answers.push(['resume', v]));
  await sleep(50);
  const early = [...answers];
  release();
  expect(early).toEqual([]);
  await Promise.all([sent, resumed]);
  expect(answers).toEqual([
    ['send', false],
    ['resume', false],
  ]);
  await rt.close();
});
