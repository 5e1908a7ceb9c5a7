// SPDX-License-Identifier: MIT
// A durable task's name (rt.spawn's label) kept across restarts, and listTasks: a name's durable tasks read from the store.
'use strict';

const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { Runtime, DirectoryStore, PostgresStore, listTasks } = require('../../..');
const { closeAfterTest, tempDirs } = require('../helpers');
const { describePg, createDatabase } = require('../pg-helpers');

const LUA = `
function waiter(tag) local v = coroutine.yield("INDEFINITELY") return tag .. ":" .. tostring(v) end
function sleeper() coroutine.yield("FOR", 1, "HOURS") end
function quick(x) return x end
function again(n)
  if n < 2 then coroutine.yield("FOR", 1, "MILLISECONDS") tasks.continue_as_new(n + 1) end
  coroutine.yield("INDEFINITELY")
end
`;

const tmpdir = tempDirs('lua-tasks-labels-');

async function open(store, options = {}) {
  return closeAfterTest(
    await Runtime.open({
      name: 'game',
      store,
      durableRetention: 60000,
      ...options,
      setup: (r) => r.load(LUA, { name: 'labels.lua' }),
    }),
  );
}

describe("a durable task's name is kept across restarts", () => {
  test('rt.task, rt.tasks, the Task and rt.inspect show it after a restart that replays it', async () => {
    const dir = tmpdir();
    let rt = await open(dir);
    const task = rt.spawn('waiter', { durable: true, name: 'quest of player 7', args: ['q'] });
    const plain = rt.spawn('waiter', { durable: true, args: ['p'] }); // no name: none after, either
    await rt.close();
    rt = await open(dir, { durableRestore: 'all' });
    expect(rt.task(task.id)).toMatchObject({ status: 'waiting', name: 'quest of player 7' });
    expect(rt.tasks().find((t) => t.id === task.id).name).toBe('quest of player 7');
    expect(rt.task(plain.id).name).toBeUndefined();
    expect(await rt.inspect(task.id)).toMatchObject({ name: 'quest of player 7', entry: 'waiter', args: ['"q"'] });
    rt.resume(task.id, 'go');
    // Finished and retained: its end record keeps the name too.
    await rt.close();
    rt = await open(dir);
    expect(rt.task(task.id)).toEqual({ id: task.id, status: 'done', name: 'quest of player 7' });
    expect(await rt.inspect(task.id)).toMatchObject({ status: 'done', name: 'quest of player 7' });
    const store = new DirectoryStore(dir);
    const { tasks } = await listTasks(store, { name: 'game', status: 'done' });
    expect(tasks).toEqual([expect.objectContaining({ id: task.id, name: 'quest of player 7' })]);
  });

  test('a dormant task shows it through rt.inspect and listTasks, and once activated', async () => {
    const dir = tmpdir();
    let rt = await open(dir);
    const task = rt.spawn('waiter', { durable: true, name: 'dormant one', args: ['d'] });
    await rt.close();
    rt = await open(dir); // lazy: it stays in the store
    expect(await rt.inspect(task.id)).toMatchObject({ name: 'dormant one', entry: 'waiter' });
    const store = new DirectoryStore(dir);
    expect((await listTasks(store, { name: 'game' })).tasks).toEqual([
      expect.objectContaining({ id: task.id, name: 'dormant one', status: 'waiting', entry: 'waiter' }),
    ]);
    rt.resume(task.id, 'now'); // activates it, replays, resumes
    expect(rt.task(task.id)).toMatchObject({ status: 'done', name: 'dormant one' });
  });

  test('continue_as_new keeps it', async () => {
    const dir = tmpdir();
    let rt = await open(dir);
    const task = rt.spawn('again', { durable: true, name: 'looping', args: [0] });
    while ((await rt.inspect(task.id, { history: true })).history[0]?.args[0] !== '2') {
      await new Promise((r) => setTimeout(r, 5));
    }
    await rt.close();
    rt = await open(dir, { durableRestore: 'all' });
    expect(rt.task(task.id)).toMatchObject({ name: 'looping', status: 'waiting' });
  });

  test('and across a SIGKILL', async () => {
    const dir = tmpdir();
    const child = `
      const { Runtime } = require(${JSON.stringify(path.join(__dirname, '..', '..', '..'))});
      (async () => {
        const rt = await Runtime.open({ name: 'game', store: ${JSON.stringify(dir)},
          setup: (r) => r.load(${JSON.stringify(LUA)}) });
        const t = rt.spawn('waiter', { durable: true, name: 'survivor', args: ['k'] });
        await rt.commit();
        process.stdout.write(t.id);
        process.kill(process.pid, 'SIGKILL');
      })();`;
    const r = spawnSync(process.execPath, ['-e', child], { encoding: 'utf8' });
    expect(r.signal).toBe('SIGKILL');
    const id = r.stdout;
    const rt = await open(dir, { durableRestore: 'all' });
    expect(rt.task(id)).toMatchObject({ status: 'waiting', name: 'survivor' });
  });

  test('a durable name past 255 bytes is refused: the store keeps it whole or not at all', async () => {
    const rt = await open(tmpdir());
    expect(() => rt.spawn('waiter', { durable: true, name: 'é'.repeat(128) })).toThrow(
      expect.objectContaining({ code: 'ERR_OUT_OF_RANGE', message: expect.stringContaining('256 bytes') }),
    );
    expect(rt.spawn('waiter', { name: 'é'.repeat(128) }).name).toHaveLength(128); // a task that is not durable: no limit
  });
});

// The listing's checks, on a store of either kind.
async function listingChecks(store, rt) {
  const a = rt.spawn('waiter', { durable: true, name: 'ann', args: ['a'] });
  const b = rt.spawn('sleeper', { durable: true, name: 'bo', key: 'k-bo' });
  const c = rt.spawn('quick', { durable: true, name: 'ann', args: [1] });
  await c.result;
  await rt.commit();
  const all = await listTasks(store, { name: 'game' });
  expect(all.next).toBeNull();
  const byId = Object.fromEntries(all.tasks.map((t) => [t.id, t]));
  expect(Object.keys(byId).sort()).toEqual([a.id, b.id, c.id].sort());
  expect(byId[a.id]).toMatchObject({ status: 'waiting', waiting: { instruction: 'INDEFINITELY' }, entry: 'waiter' });
  expect(byId[b.id]).toMatchObject({ status: 'waiting', key: 'k-bo', name: 'bo', waiting: { instruction: 'FOR' } });
  expect(byId[b.id].waiting.until.getTime()).toBeGreaterThan(Date.now()); // a Date (of the addon's realm)
  expect(byId[c.id]).toMatchObject({ status: 'done', name: 'ann' });
  expect(byId[c.id].ended.getTime()).toBeLessThanOrEqual(Date.now());
  const ids = (page) => page.tasks.map((t) => t.id).sort();
  expect(ids(await listTasks(store, { name: 'game', label: 'ann' }))).toEqual([a.id, c.id].sort());
  expect(ids(await listTasks(store, { name: 'game', status: 'waiting', label: 'ann' }))).toEqual([a.id]);
  expect(ids(await listTasks(store, { name: 'game', entry: 'sleeper' }))).toEqual([b.id]);
  expect(ids(await listTasks(store, { name: 'game', status: 'failed' }))).toEqual([]);
  // A page at a time, in id order.
  const seen = [];
  for (let after = ''; after !== null;) {
    const page = await listTasks(store, { name: 'game', after, limit: 1 });
    expect(page.tasks.length).toBeLessThanOrEqual(1);
    seen.push(...page.tasks.map((t) => t.id));
    after = page.next;
  }
  expect(seen).toEqual([a.id, b.id, c.id].sort());
  expect((await listTasks(store, { name: 'nobody' })).tasks).toEqual([]);
}

describe('listTasks', () => {
  test("a directory store's durable tasks, from its index, filtered and paged", async () => {
    const dir = tmpdir();
    const rt = await open(dir);
    const store = new DirectoryStore(dir);
    await listingChecks(store, rt);
  });

  test.each([
    [undefined, 'ERR_INVALID_ARG_TYPE'],
    [{}, 'ERR_INVALID_ARG_VALUE'],
    [{ name: 'game', status: 'asleep' }, 'ERR_INVALID_ARG_VALUE'],
    [{ name: 'game', lable: 'x' }, 'ERR_INVALID_ARG_VALUE'],
    [{ name: 'game', limit: 0 }, 'ERR_OUT_OF_RANGE'],
    [{ name: 'game', limit: 1001 }, 'ERR_OUT_OF_RANGE'],
    [{ name: 'game', entry: 5 }, 'ERR_INVALID_ARG_TYPE'],
    [{ name: 'game', after: null }, 'ERR_INVALID_ARG_TYPE'],
  ])('listTasks(store, %j) is refused with %s', async (options, code) => {
    const store = new DirectoryStore(tmpdir());
    await expect(listTasks(store, options)).rejects.toMatchObject({ code });
  });

  test('a store without scan() is refused', async () => {
    await expect(listTasks({ load() {}, save() {} }, { name: 'game' })).rejects.toMatchObject({
      code: 'ERR_INVALID_ARG_TYPE',
    });
  });
});

describePg('listTasks on PostgreSQL (a fleet shares its database)', () => {
  let db;
  beforeAll(async () => {
    db = await createDatabase();
  });
  afterAll(async () => {
    if (db) await db.drop();
  });

  test("a name's durable tasks from its journals, read by another store object, filtered and paged", async () => {
    const writer = new PostgresStore({ connectionString: db.url });
    const reader = new PostgresStore({ connectionString: db.url });
    try {
      const rt = await open(writer);
      await listingChecks(reader, rt);
      await rt.close();
      // And a name's labels across its restart on PostgreSQL.
      const again = await open(writer, { durableRestore: 'all' });
      expect(again.tasks().filter((t) => t.name === 'ann')).toHaveLength(1);
      await again.close();
    } finally {
      await writer.close();
      await reader.close();
    }
  });
});
