'use strict';
// rt.inspect / task.inspect (docs/api.md#inspecting-a-task): entry, arguments
// summarised, where a waiting task is in its Lua code, a durable task's
// history read from the store; nothing kept or computed until asked.
const { Runtime } = require('../../..');
const { makeRuntime, closeAfterTest, until, tempDirs } = require('../helpers');
const { summarize } = require('../../../lib/runtime/inspect');

const tmpdir = tempDirs('lua-tasks-inspect-');

const CODE = `
function stuck(player, n)
  local x = n * 2
  coroutine.yield("INDEFINITELY")
  return x
end
function quick() return 1 end
`;

test('a waiting task tells its entry, its arguments summarised, and where it waits in its Lua code', async () => {
  const rt = makeRuntime();
  rt.load(CODE, { name: 'game.lua' });
  const task = rt.spawn('stuck', { args: ['ann', 21], name: 'quest', meta: { zone: 3 } });
  const info = await rt.inspect(task.id, { where: true });
  expect(info).toMatchObject({
    id: task.id,
    status: 'waiting',
    waiting: { instruction: 'INDEFINITELY' },
    name: 'quest',
    meta: { zone: 3 },
    entry: 'stuck',
    durable: false,
    args: ['"ann"', '21'],
  });
  expect(info.where).toMatchObject({ source: 'game.lua', line: 4 });
  expect(info.where.traceback).toContain('game.lua:4: in function');
  expect(await task.inspect()).not.toHaveProperty('where'); // only when asked
  // The task did not move: it resumes from where it was.
  expect(rt.resume(task.id, 'go')).toBe(true);
  expect(await task.result).toBe(42);
});

test('a task started with a Lua function names where that function is defined; an unknown id is undefined', async () => {
  const rt = makeRuntime();
  const [fn] = rt.load('return function() coroutine.yield("INDEFINITELY") end', { name: 'inline.lua' });
  const task = rt.spawn(fn);
  const info = await rt.inspect(task.id);
  expect(info.entry).toBe('function inline.lua:1');
  expect(info.args).toEqual([]);
  expect(await rt.inspect('t-not-a-task')).toBeUndefined();
});

test('an ended task answers as rt.task does: its entry and arguments are let go with it', async () => {
  const rt = makeRuntime();
  rt.load(CODE);
  const task = rt.spawn('quick', { args: [{ big: 'x'.repeat(1000) }] });
  expect(task.status).toBe('done');
  const info = await rt.inspect(task.id, { where: true, history: true });
  expect(info).toEqual({ id: task.id, status: 'done', durable: false });
  expect(info).not.toHaveProperty('where');
});

test('arguments are summarised and capped, never dumped: long strings, big arrays and objects, many arguments', async () => {
  const rt = makeRuntime();
  rt.load(CODE);
  const big = Array.from({ length: 100000 }, (_, i) => i);
  const wide = Object.fromEntries(Array.from({ length: 5000 }, (_, i) => [`k${i}`, i]));
  const args = ['y'.repeat(10000), big, wide, ...Array.from({ length: 200 }, () => 'z'.repeat(100))];
  const task = rt.spawn('stuck', { args: [1, 2] });
  const info = await rt.inspect(task.id);
  expect(info.args).toEqual(['1', '2']);
  const { summarizeArgs } = require('../../../lib/runtime/inspect');
  const s = summarizeArgs(args);
  expect(s[0]).toBe(`${JSON.stringify(`${'y'.repeat(120)}...`)} (10000 characters)`);
  expect(s[1]).toBe('[0, 1, 2, ...] (100000 items)');
  expect(s[2]).toBe('{k0: 0, k1: 1, k2: 2, ...} (5000 keys)');
  expect(s.join('').length).toBeLessThan(2000);
  expect(s[s.length - 1]).toMatch(/^\.\.\. \(\d+ more\)$/);
  // A getter and a Proxy are not run.
  let ran = 0;
  const trap = new Proxy({}, { ownKeys: () => (ran++, []) });
  const getter = {
    get x() {
      ran++;
      return 1;
    },
  };
  expect([summarize(trap), summarize(getter)]).toEqual(['Proxy', '{x: [getter]}']);
  // Builtins by their internal slots: an own getter or Symbol.toStringTag on them does not run.
  const tagged = Object.defineProperty(Buffer.alloc(3), Symbol.toStringTag, {
    get() {
      ran++;
      return 'x';
    },
  });
  expect([tagged, new Map([[1, 2]]), new Date(0)].map((v) => summarize(v))).toEqual([
    'TypedArray(3 bytes)',
    'Map(1)',
    'Date(1970-01-01T00:00:00.000Z)',
  ]);
  expect(ran).toBe(0);
});

test('bad options are refused naming the nearest; a closed runtime rejects', async () => {
  const rt = makeRuntime();
  rt.load(CODE);
  const task = rt.spawn('stuck', { args: [1, 1] });
  await expect(rt.inspect(task.id, { histroy: true })).rejects.toMatchObject({
    code: 'ERR_INVALID_ARG_VALUE',
    message: expect.stringContaining('did you mean "history"'),
  });
  await expect(rt.inspect(task.id, { where: 1 })).rejects.toMatchObject({ code: 'ERR_INVALID_ARG_TYPE' });
  await expect(rt.inspect(5)).rejects.toMatchObject({ code: 'ERR_INVALID_ARG_TYPE' });
  rt.closeSync();
  await expect(rt.inspect(task.id)).rejects.toMatchObject({ code: 'ERR_RUNTIME_CLOSED' });
});

const DURABLE = `
function quest(player, gold)
  local t = os.time()
  local got = tasks.step("grant", function() return grant(player, gold) end)
  local ok = notify(player)
  coroutine.yield("FOR", 1, "HOURS")
  return got
end
`;

async function openDurable(dir, name = 'game') {
  return closeAfterTest(
    await Runtime.open({
      name,
      store: dir,
      setup: (r) => {
        r.set('grant', (p, g) => `${p}+${g}`);
        r.set('notify', () => true);
        r.load(DURABLE, { name: 'quest.lua' });
      },
    }),
  );
}

test("a durable task's history is its journal decoded: start, reads, step, call, wait with its deadline", async () => {
  const dir = tmpdir();
  const rt = await openDurable(dir);
  const task = rt.spawn('quest', { durable: true, key: 'q-ann', args: ['ann', 5] });
  await rt.commit(); // its records are written
  const before = Date.now();
  const info = await rt.inspect(task.id, { history: true, where: true });
  expect(info).toMatchObject({
    status: 'waiting',
    durable: true,
    entry: 'quest',
    key: 'q-ann',
    args: ['"ann"', '5'],
    where: { source: 'quest.lua', line: 6 },
  });
  const kinds = info.history.map((r) => r.kind);
  expect(kinds).toEqual(['start', 'value', 'step', 'call', 'yield']);
  const [start, clock, step, call, wait] = info.history;
  expect(start).toMatchObject({ seq: 0, entry: 'quest', key: 'q-ann', args: ['"ann"', '5'] });
  expect(clock).toMatchObject({ seq: 1, what: 'a clock or random read or a tasks call' });
  expect(step).toMatchObject({ seq: 2, name: 'grant', what: 'tasks.step "grant"', values: ['"ann+5"'] });
  expect(call).toMatchObject({ seq: 3, name: 'notify', what: 'a JS call to notify', values: ['true', 'true'] });
  expect(wait).toMatchObject({ seq: 4, instruction: 'FOR' });
  expect(wait.deadline.getTime() - wait.start.getTime()).toBe(3600 * 1000);
  expect(wait.start.getTime()).toBeLessThanOrEqual(before);
  // The same after a restart: the restored task, its history from the store.
  await rt.close();
  const again = await openDurable(dir);
  const restored = await again.inspect(task.id, { history: true });
  expect(restored).toMatchObject({ status: 'waiting', durable: true, entry: 'quest', key: 'q-ann' });
  expect(restored.history.map((r) => r.kind)).toEqual(kinds);
});

test('a damaged record shows as damaged in a history; the others still read', async () => {
  const dir = tmpdir();
  const rt = await openDurable(dir);
  const task = rt.spawn('quest', { durable: true, args: ['bo', 1] });
  await rt.commit();
  const { DirectoryStore } = require('../../..');
  const store = new DirectoryStore(dir);
  const page = await store.scan('game', 2, `${task.id}/`, 10);
  const { openDecoder } = require('../../../lib/runtime/inspect');
  const decoder = openDecoder();
  try {
    const values = page.values.map((v, i) => (i === 2 ? Buffer.from(v).fill(1, 1, 3) : v));
    const history = decoder.describe(page.keys, values);
    expect(history.map((r) => r.kind)).toEqual(['start', 'value', 'damaged', 'call', 'yield']);
    expect(history[2].error).toContain('checksum');
  } finally {
    decoder.close();
    await store.close();
  }
});

test('a running task inspected from the JS it calls: its own traceback, read on its own thread', async () => {
  const rt = makeRuntime();
  const holder = {};
  let seen;
  rt.set('peek', () => {
    seen = rt.inspect(holder.id, { where: true });
  });
  rt.load('function peeker() coroutine.yield("IMMEDIATE") peek() coroutine.yield("INDEFINITELY") end', {
    name: 'peek.lua',
  });
  const task = rt.spawn('peeker');
  holder.id = task.id;
  await until(() => seen !== undefined);
  const info = await seen;
  expect(info).toMatchObject({ status: 'running', entry: 'peeker', where: { source: 'peek.lua', line: 1 } });
  expect(info.where.traceback.split('\n').slice(0, 2)).toEqual(['stack traceback:', "\t[C]: in function 'peek'"]);
  expect(task.status).toBe('waiting');
});
