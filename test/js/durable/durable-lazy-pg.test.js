'use strict';
// Lazy restore on PostgreSQL (docs/durable.md#restore-at-open): the index is
// read at open, a waiting task stays in the store, and naming it (or its
// deadline) starts an asynchronous read; what is answered meanwhile is done
// once it is restored, and a read the server refuses is tried again.
const path = require('node:path');
const { spawn } = require('node:child_process');
const { Runtime, PostgresStore } = require('../../..');
const { describePg, createDatabase, query } = require('../pg-helpers');
const { until, sleep } = require('../helpers');
const { SOURCE, runs, written } = require('../fixtures/lazy-pg');

describePg('lazy restore on PostgreSQL', () => {
  let db;
  let schema = 0;
  const stores = [];
  const store = () => {
    const s = new PostgresStore({ connectionString: db.url, schema: `lazy_${schema}` });
    stores.push(s);
    return s;
  };
  const open = (s, extra = {}) => Runtime.open({ name: 'game', store: s, ...extra, setup: (r) => r.load(SOURCE) });
  // A runtime of `n` tasks of `entry` (keys k0, k1, ...), closed: its ids.
  async function seed(entry, n, args = []) {
    const s = store();
    const rt = await open(s);
    const ids = [];
    for (let i = 0; i < n; i++) ids.push(rt.spawn(entry, { durable: true, key: `k${i}`, args }).id);
    await until(() => ids.every((id) => written(rt, id)));
    await rt.close();
    await s.close();
    return ids;
  }

  beforeAll(async () => {
    db = await createDatabase();
  });
  afterAll(async () => {
    if (db) await db.drop();
  });
  beforeEach(() => {
    schema++;
  });
  afterEach(async () => {
    await Promise.all(stores.splice(0).map((s) => s.close()));
  });

  test('a waiting task stays in the store at open: listed and counted, not replayed', async () => {
    const ids = await seed('forever', 3);
    const rt = await open(store());
    expect(rt.stats()).toMatchObject({ tasks: 0, dormantTasks: 3 });
    expect(runs(rt, 'forever')).toBe(0);
    expect(rt.tasks().map((t) => t.id)).toEqual([...ids].sort());
    expect(rt.task(ids[0])).toEqual({ id: ids[0], status: 'waiting', waiting: { instruction: 'INDEFINITELY' } });
    expect(rt.load(`return tasks.status("${ids[1]}")`)).toEqual(['waiting']);
    expect(rt.stats().dormantTasks).toBe(3); // looking reads nothing
    await rt.close();
  });

  test('naming a dormant task reads it: JS calls are answered at once and made once it is read', async () => {
    const ids = await seed('forever', 4);
    const inbox = (await seedMore('inbox'))[0];
    const rt = await open(store());
    const done = new Map();
    rt.on('taskdone', (t, v) => done.set(t.id, v));
    expect(rt.stats().dormantTasks).toBe(5);

    expect(rt.resume(ids[0], 'from js')).toBe(true);
    expect(rt.resume(ids[0], 'twice')).toBe(false); // the first resume goes first: this one found no wait
    // While it is read it answers from its index entry.
    expect(rt.task(ids[0])).toMatchObject({ status: 'waiting', waiting: { instruction: 'INDEFINITELY' } });
    expect(rt.send(inbox, 'hello')).toBe(true);
    expect(rt.cancel(ids[1])).toBe(true);
    expect(rt.resume(ids[1], 'late')).toBe(false); // cancelled first
    const keyed = rt.spawn('forever', { durable: true, key: 'k2' }); // its key: the same task, no second one
    expect(keyed.id).toBe(ids[2]);

    await until(() => done.has(ids[0]) && done.has(inbox));
    expect(done.get(ids[0])).toBe('from js');
    expect(done.get(inbox)).toBe('hello');
    await until(() => rt.task(ids[1])?.status === 'cancelled');
    expect(keyed.waiting).toEqual({ instruction: 'INDEFINITELY' });
    expect(rt.resume(ids[2], 'keyed')).toBe(true);
    await expect(keyed.result).resolves.toBe('keyed');
    expect(runs(rt, 'forever')).toBe(3); // each replayed once, when named
    expect(rt.stats().dormantTasks).toBe(1);
    await rt.close();

    async function seedMore(entry) {
      const s = store();
      const r = await open(s);
      const t = r.spawn(entry, { durable: true });
      await until(() => r.task(t.id).waiting?.instruction === 'RECEIVE');
      await r.close();
      await s.close();
      return [t.id];
    }
  });

  test('from Lua, resume, send, cancel and wait wait for the read, then find the task live', async () => {
    const ids = await seed('inbox', 4);
    const rt = await open(store());
    const joined = rt.spawn('joiner', { args: [ids[3]] });
    const mailed = rt.spawn('mail', { args: [ids[0], 'lua mail'] });
    expect(mailed.waiting).toEqual({ instruction: 'RESTORE' });
    await expect(mailed.result).resolves.toBe(true);
    await expect(rt.call('poke', ids[1], 'x')).resolves.toBe('task is not waiting on a yield instruction');
    await expect(rt.call('stop', ids[2])).resolves.toBe(true);
    await until(() => rt.task(ids[2])?.status === 'cancelled');
    expect(joined.waiting).toEqual({ instruction: 'JOIN' }); // read, and now joined
    expect(rt.send(ids[3], 'the end')).toBe(true);
    await expect(joined.result).resolves.toBe('the end');
    expect(runs(rt, 'inbox')).toBe(4);
    await rt.close();
  });

  test('a dormant task wakes by its deadline, never early', async () => {
    const s = store();
    let rt = await open(s);
    const t = rt.spawn('soon', { durable: true, args: [2500] });
    await until(() => rt.task(t.id).waiting?.instruction === 'FOR');
    const deadline = rt.task(t.id).waiting.until.getTime();
    await rt.close();
    await s.close();
    rt = await open(store());
    const done = new Map();
    rt.on('taskdone', (task, v) => done.set(task.id, [v, Date.now()]));
    if (Date.now() < deadline - 1100) expect(rt.stats().dormantTasks).toBe(1); // else it was due at open
    await until(() => done.has(t.id));
    expect(done.get(t.id)[0]).toBe('woke');
    expect(done.get(t.id)[1]).toBeGreaterThanOrEqual(deadline - 5);
    await rt.close();
  });

  test('the runtime clock set forward while dormant, then back while it is read: it wakes at its deadline on that clock', async () => {
    const s = store();
    let rt = await open(s);
    const t = rt.spawn('soon', { durable: true, args: [3600000] }); // an hour: dormant at open whatever the load
    await until(() => rt.task(t.id).waiting?.instruction === 'FOR');
    const deadline = rt.task(t.id).waiting.until.getTime();
    await rt.close();
    await s.close();
    rt = await open(store());
    expect(rt.stats().dormantTasks).toBe(1);
    let offset = deadline - Date.now() - 2500; // due 2.5 s from now on the runtime's clock: read within a second of it
    let endedAt;
    rt.on('taskdone', (task, v) => task.id === t.id && (endedAt = [v, Date.now() + offset]));
    rt.setClockOffset(offset);
    await until(() => rt.stats().dormantTasks === 0); // activated by its nearing deadline
    offset -= 1000; // back a second mid-wait: the deadline is a second further off on this clock
    rt.setClockOffset(offset);
    await until(() => endedAt !== undefined);
    expect(endedAt[0]).toBe('woke');
    expect(endedAt[1]).toBeGreaterThanOrEqual(deadline - 5);
    await rt.close();
  });

  test('rt.sendDurable to a dormant task resolves once the message is written: a crash after keeps it', async () => {
    const [id] = await seed('inbox', 1);
    const s = store();
    let rt = await open(s);
    await expect(rt.sendDurable(id, 'kept')).resolves.toBe(true);
    rt.closeSync(); // as a crash would
    await s.close();
    rt = await open(store());
    // A message waiting: it ran at open, and its key finds its result.
    await expect(rt.spawn('inbox', { durable: true, key: 'k0' }).result).resolves.toBe('kept');
    expect(rt.task(id)).toEqual({ id, status: 'done' });
    await rt.close();
  });

  test('a read the server refuses is tried again: what was answered meanwhile is done once it lands', async () => {
    const ids = await seed('inbox', 2);
    const rt = await open(store());
    const kv = `"lazy_${schema}".lua_tasks_kv`;
    const done = new Map();
    rt.on('taskdone', (t, v) => done.set(t.id, v));
    await query(db.url, `REVOKE SELECT ON ${kv} FROM lua_tasks`);
    let granted = false;
    try {
      expect(rt.send(ids[0], 'through')).toBe(true);
      const lua = rt.spawn('mail', { args: [ids[1], 'lua through'] });
      await sleep(300); // reads refused meanwhile, and tried again
      expect(lua.waiting).toEqual({ instruction: 'RESTORE' });
      expect(rt.stats().dormantTasks).toBe(2); // still being read
      await query(db.url, `GRANT SELECT ON ${kv} TO lua_tasks`);
      granted = true;
      await expect(lua.result).resolves.toBe(true);
      await until(() => done.has(ids[0]) && done.has(ids[1]));
      expect(done.get(ids[0])).toBe('through');
      expect(done.get(ids[1])).toBe('lua through');
    } finally {
      if (!granted) await query(db.url, `GRANT SELECT ON ${kv} TO lua_tasks`);
    }
    await rt.close();
  });

  test('messages sent while a task is read are bounded by mailboxLimit: the next send throws ERR_MAILBOX_FULL', async () => {
    const SOURCE_SUM =
      'function collect(n) local t = {} for i = 1, n do t[i] = tasks.receive() end return table.concat(t, ",") end';
    const s = store();
    let rt = await Runtime.open({ name: 'game', store: s, setup: (r) => r.load(SOURCE_SUM) });
    const { id } = rt.spawn('collect', { durable: true, key: 'c', args: [3] });
    await until(() => written(rt, id));
    await rt.close();
    rt = await Runtime.open({ name: 'game', store: store(), mailboxLimit: 3, setup: (r) => r.load(SOURCE_SUM) });
    const kv = `"lazy_${schema}".lua_tasks_kv`;
    await query(db.url, `REVOKE SELECT ON ${kv} FROM lua_tasks`);
    let granted = false;
    try {
      expect([rt.send(id, 'a'), rt.send(id, 'b'), rt.send(id, 'c')]).toEqual([true, true, true]);
      expect(() => rt.send(id, 'd')).toThrow(
        expect.objectContaining({
          code: 'ERR_MAILBOX_FULL',
          message: expect.stringContaining(
            'sent while it is read from the store (3 messages, the mailboxLimit option)',
          ),
        }),
      );
      await expect(rt.sendDurable(id, 'e')).rejects.toMatchObject({ code: 'ERR_MAILBOX_FULL' });
      expect(rt.stats().dormantTasks).toBe(1); // still being read
      await query(db.url, `GRANT SELECT ON ${kv} TO lua_tasks`);
      granted = true;
      const done = new Promise((resolve) => rt.on('taskdone', (t, v) => t.id === id && resolve(v)));
      await expect(done).resolves.toBe('a,b,c');
    } finally {
      if (!granted) await query(db.url, `GRANT SELECT ON ${kv} TO lua_tasks`);
    }
    await rt.close();
  });

  test('closed while its task is read: sendDurable rejects, and the message was not sent', async () => {
    const [id] = await seed('inbox', 1);
    const s = store();
    let rt = await open(s);
    const kv = `"lazy_${schema}".lua_tasks_kv`;
    await query(db.url, `REVOKE SELECT ON ${kv} FROM lua_tasks`);
    let answer;
    try {
      answer = rt.sendDurable(id, 'never sent').then(
        (v) => ['resolved', v],
        (e) => ['rejected', e.code, e.message],
      );
      await sleep(100); // its read refused meanwhile
      await rt.close();
    } finally {
      await query(db.url, `GRANT SELECT ON ${kv} TO lua_tasks`);
    }
    expect(await answer).toEqual(['rejected', 'ERR_RUNTIME_CLOSED', expect.stringContaining('the call was not made')]);
    await s.close();
    rt = await open(store());
    await expect(rt.call('mail', id, 'the one sent')).resolves.toBe(true);
    await expect(rt.spawn('inbox', { durable: true, key: 'k0' }).result).resolves.toBe('the one sent');
    await rt.close();
  });

  test('a key answered while its task is read, and that task cannot be restored: its result rejects, loudly', async () => {
    const [id] = await seed('forever', 1);
    await query(db.url, `DELETE FROM "lazy_${schema}".lua_tasks_kv WHERE space = 2 AND key LIKE $1`, [`${id}/%`]);
    const rt = await open(store());
    const errors = [];
    rt.on('taskerror', (t, e) => errors.push([t.id, e.code]));
    const task = rt.spawn('forever', { durable: true, key: 'k0' });
    expect(task.id).toBe(id);
    await expect(task.result).rejects.toMatchObject({
      code: 'ERR_STORE_CORRUPT',
      message: expect.stringContaining('names a journal the store does not hold'),
    });
    expect(errors).toEqual([[id, 'ERR_STORE_CORRUPT']]);
    expect(rt.stats().restoreFailures).toBe(1);
    await rt.close();
  });

  test('a message answered while its task is read and refused once it is: a process warning says so', async () => {
    const [id] = await seed('inbox', 1);
    const rt = await open(store());
    const warn = jest.spyOn(process, 'emitWarning').mockImplementation(() => {});
    try {
      expect(rt.send(id, { notPersistable: () => 1 })).toBe(true);
      await until(() => warn.mock.calls.length > 0);
      const [message, options] = warn.mock.calls[0];
      expect(options).toEqual({ code: 'LUA_TASKS_RESTORED_CALL' });
      expect(message).toContain(id);
      expect(message).toContain('cannot persist a function');
    } finally {
      warn.mockRestore();
    }
    expect(rt.task(id)).toMatchObject({ status: 'waiting', waiting: { instruction: 'RECEIVE' } });
    await rt.close();
  });

  test('an index the last holder did not keep is not trusted: every journal is read, and it is kept again', async () => {
    const ids = await seed('forever', 3);
    {
      // A finished task, retained: its end record lives in its index entry.
      const first = store();
      const r = await open(first);
      const done = r.spawn('forever', { durable: true, key: 'done' });
      await until(() => written(r, done.id));
      r.resume(done.id, 'kept result');
      await expect(done.result).resolves.toBe('kept result');
      await r.close();
      await first.close();
    }
    // A holder that keeps no index (an older lua-tasks) ends a task: its
    // journal goes, its entry stays. It took the lease, so the index's mark
    // no longer names the lease before the next one.
    const s = store();
    const lease = await s.acquire('game');
    await query(db.url, `DELETE FROM "lazy_${schema}".lua_tasks_kv WHERE space = 2 AND key LIKE $1`, [`${ids[2]}/%`]);
    await lease.release();
    let rt = await open(s);
    expect(rt.stats().dormantTasks).toBe(0);
    expect(runs(rt, 'forever')).toBe(2);
    expect(rt.stats().restoreFailures).toBe(0); // the ended task's entry is dropped, not reported
    // The retained end is read from the index too: its key answers its result, no second run.
    await expect(rt.spawn('forever', { durable: true, key: 'done' }).result).resolves.toBe('kept result');
    expect(runs(rt, 'forever')).toBe(2);
    await rt.close();
    rt = await open(s);
    expect(rt.stats().dormantTasks).toBe(2);
    expect(rt.stats().restoreFailures).toBe(0);
    expect(rt.task(ids[2])).toBeUndefined();
    rt.resume(ids[0], 'x');
    await rt.close();
  });

  test('killed (SIGKILL) with tasks waiting: the next open leaves them dormant; deadline, message and resume wake them', async () => {
    const script = path.join(__dirname, '..', 'fixtures', 'lazy-pg-child.js');
    const child = spawn(process.execPath, [script, db.url, `lazy_${schema}`], { stdio: ['ignore', 'pipe', 'inherit'] });
    const ids = await new Promise((resolve, reject) => {
      let out = '';
      child.stdout.on('data', (d) => {
        out += d;
        const line = out.split('\n').find((l) => l.startsWith('ready '));
        if (line) resolve(JSON.parse(line.slice(6)));
      });
      child.on('exit', (code) => reject(new Error(`the child exited (${code}) before it was ready`)));
    });
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    const rt = await open(store());
    const done = new Map();
    rt.on('taskdone', (t, v) => done.set(t.id, v));
    expect(rt.stats().dormantTasks).toBe(3);
    expect(rt.send(ids.inbox, 'after the kill')).toBe(true);
    expect(rt.resume(ids.forever, 'resumed')).toBe(true);
    await until(() => done.size === 3);
    expect(done.get(ids.inbox)).toBe('after the kill');
    expect(done.get(ids.forever)).toBe('resumed');
    expect(done.get(ids.soon)).toBe('woke');
    await rt.close();
  });
});
