'use strict';
// Lazy restore on PostgreSQL under faults (docs/durable.md#restore-at-open):
// closes, outages, restarts, takeovers, damage, kills and races while dormant
// tasks are read. Each test states the guarantee it checks.
const path = require('node:path');
const { spawn } = require('node:child_process');
const { Runtime, PostgresStore } = require('../../..');
const { describePg, createDatabase, query, privateCluster } = require('../pg-helpers');
const { sleep } = require('../helpers');
const { SOURCE, runs, written } = require('../fixtures/lazy-pg');

// The same names, `forever` changed: its replay meets another wait.
const CHANGED = SOURCE.replace(
  'function forever() ran("forever"); return coroutine.yield("INDEFINITELY") end',
  'function forever() ran("forever"); return coroutine.yield("FOR", 60, "SECONDS") end',
);

// until(pred), given up after `ms` (never left spinning): whether pred held.
async function within(pred, ms) {
  const end = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > end) return false;
    await new Promise((r) => setTimeout(r, 5));
  }
  return true;
}
// until(pred), bounded: throws after `ms` instead of spinning on.
async function until(pred, ms = 20000) {
  if (!(await within(pred, ms))) throw new Error(`timed out waiting for ${pred}`);
}
const settle = (p) =>
  p.then(
    (v) => ({ value: v }),
    (e) => ({ error: e.code || String(e) }),
  );

describePg('lazy restore on PostgreSQL under faults', () => {
  let db;
  let schema = 0;
  const stores = [];
  const store = () => {
    const s = new PostgresStore({ connectionString: db.url, schema: `audit_${schema}` });
    stores.push(s);
    return s;
  };
  const open = (s, extra = {}, source = SOURCE) =>
    Runtime.open({ name: 'game', store: s, ...extra, setup: (r) => r.load(source) });
  const kv = () => `"audit_${schema}".lua_tasks_kv`;
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
  const dropJournal = (id) => query(db.url, `DELETE FROM ${kv()} WHERE space = 2 AND key LIKE $1`, [`${id}/%`]);

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

  // Guarantee: `true` from sendDurable means the message waits in the inbox.
  test('sendDurable to a dormant task that cannot be restored (journal gone) does not resolve true', async () => {
    const [id] = await seed('inbox', 1);
    await dropJournal(id);
    const rt = await open(store());
    rt.on('taskerror', () => {});
    const out = await settle(rt.sendDurable(id, 'lost?'));
    const inboxRows = await query(db.url, `SELECT key FROM ${kv()} WHERE space = 3`);
    await rt.close();
    expect({ out, inboxRows: inboxRows.rows.length }).toEqual({ out: { value: false }, inboxRows: 0 });
  });

  // Guarantee: resumeDurable `true` means the wake is in the task's journal.
  test('resumeDurable to a dormant task whose replay meets changed code does not resolve true', async () => {
    const [id] = await seed('forever', 1);
    const rt = await open(store(), {}, CHANGED);
    const errors = [];
    rt.on('taskerror', (t, e) => errors.push([t.id, e.code]));
    const out = await settle(rt.resumeDurable(id, 'wake'));
    await until(() => errors.length > 0);
    await rt.close();
    expect(errors).toEqual([[id, 'ERR_NONDETERMINISM']]);
    expect(out).not.toEqual({ value: true });
  });

  // Guarantee: an acknowledged message is never lost; close() during a read.
  test('sendDurable to a dormant task, close() while its read is refused: not acknowledged, or kept', async () => {
    const [id] = await seed('inbox', 1);
    const rt = await open(store());
    await query(db.url, `REVOKE SELECT ON ${kv()} FROM lua_tasks`);
    let out;
    try {
      const p = settle(rt.sendDurable(id, 'during close'));
      await sleep(200);
      await rt.close();
      out = await Promise.race([p, sleep(3000).then(() => 'hang')]);
    } finally {
      await query(db.url, `GRANT SELECT ON ${kv()} TO lua_tasks`);
    }
    const rt2 = await open(store());
    const inboxRows = (await query(db.url, `SELECT key FROM ${kv()} WHERE space = 3`)).rows.length;
    await rt2.close();
    // Either refused (an error, or false) with nothing written, or true with the message kept.
    if (out && out.value === true) expect(inboxRows).toBe(1);
    else expect(out).toHaveProperty('error');
  });

  test('sendDurable to a dormant task, closeSync() while its read is refused: not acknowledged, or kept', async () => {
    const [id] = await seed('inbox', 1);
    const rt = await open(store());
    await query(db.url, `REVOKE SELECT ON ${kv()} FROM lua_tasks`);
    let out;
    try {
      const p = settle(rt.sendDurable(id, 'during closeSync'));
      await sleep(200);
      rt.closeSync();
      out = await Promise.race([p, sleep(3000).then(() => 'hang')]);
    } finally {
      await query(db.url, `GRANT SELECT ON ${kv()} TO lua_tasks`);
    }
    const inboxRows = (await query(db.url, `SELECT key FROM ${kv()} WHERE space = 3`)).rows.length;
    if (out && out.value === true) expect(inboxRows).toBe(1);
    else expect(out).toHaveProperty('error');
  });

  // Clear errors / no hang: a commit() asked while a read is refused, then close().
  test('rt.commit() while a dormant task is being read, then close(): settles', async () => {
    const [id] = await seed('inbox', 1);
    const rt = await open(store());
    await query(db.url, `REVOKE SELECT ON ${kv()} FROM lua_tasks`);
    let out;
    try {
      expect(rt.send(id, 'x')).toBe(true);
      const p = settle(rt.commit());
      await sleep(200);
      await rt.close();
      out = await Promise.race([p, sleep(3000).then(() => 'hang')]);
    } finally {
      await query(db.url, `GRANT SELECT ON ${kv()} TO lua_tasks`);
    }
    expect(out).not.toBe('hang');
  });

  // Guarantee: every dormant task due wakes once, none early, none twice.
  test('1000 dormant tasks due at once (a deadline ~6 s out): all wake, none early, none twice', async () => {
    const N = 1000;
    const s = store();
    let rt = await open(s);
    const deadline = Date.now() + 6000;
    const ids = [];
    for (let i = 0; i < N; i++) ids.push(rt.spawn('soon', { durable: true, args: [deadline - Date.now()] }).id);
    await until(() => ids.every((id) => written(rt, id)));
    const until0 = new Map(ids.map((id) => [id, rt.task(id).waiting.until.getTime()]));
    await rt.close();
    await s.close();
    rt = await open(store());
    const done = new Map();
    const early = [];
    const twice = [];
    rt.on('taskdone', (t, v) => {
      if (done.has(t.id)) twice.push(t.id);
      done.set(t.id, v);
      if (Date.now() < until0.get(t.id) - 2) early.push(t.id);
    });
    const dormantAtOpen = rt.stats().dormantTasks;
    await within(() => done.size === N, deadline + 20000 - Date.now());
    await sleep(300);
    const replays = runs(rt, 'soon');
    await rt.close();
    expect({ dormantAtOpen: dormantAtOpen > 0, done: done.size, early, twice, replays }).toEqual({
      dormantAtOpen: true,
      done: N,
      early: [],
      twice: [],
      replays: N,
    });
  }, 60000);

  // A damaged index entry (bytes changed by SQL): the task runs now from its journal.
  test('an index entry whose bytes were changed by SQL: the task runs from its journal, the others unharmed', async () => {
    const ids = await seed('inbox', 3);
    await query(
      db.url,
      `UPDATE ${kv()} SET value = set_byte(value, length(value) - 1, (get_byte(value, length(value) - 1) + 1) % 256) WHERE space = 4 AND key = $1`,
      [ids[1]],
    );
    const rt = await open(store());
    const errors = [];
    rt.on('taskerror', (t, e) => errors.push([t.id, e.code]));
    expect(rt.stats().dormantTasks).toBe(2);
    expect(rt.task(ids[1])).toMatchObject({ status: 'waiting', waiting: { instruction: 'RECEIVE' } });
    await expect(rt.sendDurable(ids[1], 'a')).resolves.toBe(true);
    await expect(rt.sendDurable(ids[0], 'b')).resolves.toBe(true);
    await until(() => rt.task(ids[0])?.status === 'done' && rt.task(ids[1])?.status === 'done');
    await rt.close();
    expect(errors).toEqual([]);
  });

  // A damaged mark row: not trusted, every journal read, no task lost.
  test('the index mark damaged by SQL: every journal is read, every task restored', async () => {
    const ids = await seed('forever', 3);
    await query(
      db.url,
      `UPDATE ${kv()} SET value = set_byte(value, length(value) - 1, (get_byte(value, length(value) - 1) + 1) % 256) WHERE space = 4 AND key NOT IN (${ids.map((_, i) => `$${i + 1}`).join(',')})`,
      ids,
    );
    let rt = await open(store());
    expect(rt.stats().restoreFailures).toBe(0);
    expect(rt.stats().tasks + rt.stats().dormantTasks).toBe(3);
    await rt.close();
    rt = await open(store());
    expect(rt.stats().dormantTasks).toBe(3); // the index kept again
    for (const id of ids) expect(rt.resume(id, 'ok')).toBe(true);
    await until(() => ids.every((id) => rt.task(id)?.status === 'done'));
    await rt.close();
  });

  // tasks.wait on a dormant child, from a durable parent, across restarts.
  test('an index whose COPY data is damaged or cut short in transit: open fails ERR_STORE_CORRUPT, the store unharmed', async () => {
    const damages = [
      (chunk) => Buffer.concat([chunk.subarray(0, 19), Buffer.from([0, 3])]), // a row of 3 columns
      (chunk) => chunk.subarray(0, chunk.length - 5), // the trailer and a row's end lost
    ];
    for (const damage of damages) {
      schema++; // a name of its own: a failed open leaves the index's mark naming its lease
      const ids = await seed('forever', 3);
      const s = store();
      const copy = s.copySpace.bind(s);
      s.copySpace = (name, space, onChunk) =>
        copy(name, space, (chunk) => onChunk(space === 4 ? damage(Buffer.from(chunk)) : chunk));
      await expect(open(s)).rejects.toMatchObject({
        code: 'ERR_STORE_CORRUPT',
        message: expect.stringContaining('PostgreSQL COPY data'),
      });
      await s.close();
      const rt = await open(store());
      expect(ids.map((id) => rt.task(id).status)).toEqual(['waiting', 'waiting', 'waiting']);
      await rt.close();
    }
  });

  test('a durable parent joins a dormant task across restarts: the join gets its result once', async () => {
    const [child] = await seed('inbox', 1);
    const s = store();
    let rt = await open(s);
    const parent = rt.spawn('joiner', { durable: true, key: 'parent', args: [child] });
    await until(() => rt.task(parent.id)?.waiting?.instruction === 'JOIN');
    await rt.close();
    await s.close();
    rt = await open(store());
    // The parent runs now (it joins), so the child is read too.
    await until(() => rt.task(parent.id)?.waiting?.instruction === 'JOIN');
    await expect(rt.sendDurable(child, 'the child ends')).resolves.toBe(true);
    await until(() => rt.task(parent.id)?.status === 'done');
    await rt.close();
    rt = await open(store());
    await expect(rt.spawn('joiner', { durable: true, key: 'parent' }).result).resolves.toBe('the child ends');
    expect(runs(rt, 'inbox')).toBe(0);
    await rt.close();
  });

  // No hang: a taskerror listener that throws while an activation batch is reported.
  test('a throwing taskerror listener during an activation does not strand the other tasks of its batch', async () => {
    const ids = await seed('inbox', 2);
    await dropJournal(ids[0]);
    const rt = await open(store());
    rt.on('taskerror', () => {
      throw new Error('listener bug');
    });
    // The listener's throw is rethrown on its own (an uncaught exception, as
    // an emitter's would be): caught here instead of thrown.
    const rethrown = [];
    const tick = process.nextTick;
    const spy = jest.spyOn(process, 'nextTick').mockImplementation((fn, ...args) => {
      if (fn.length === 0 && /throw e/.test(String(fn))) rethrown.push(fn);
      else tick(fn, ...args);
    });
    let out;
    try {
      rt.send(ids[0], 'x'); // both named in one loop turn: one read
      const p = settle(rt.sendDurable(ids[1], 'y'));
      out = await Promise.race([p, sleep(3000).then(() => 'hang')]);
    } finally {
      spy.mockRestore();
    }
    rt.closeSync();
    expect(out).toEqual({ value: true });
    expect(rethrown).toHaveLength(1);
    expect(() => rethrown[0]()).toThrow('listener bug');
  });

  // Guarantee: a message acknowledged by sendDurable (and a wake by resumeDurable) to a dormant task survives SIGKILL.
  for (const mode of ['send', 'resume']) {
    test(`SIGKILL right after ${mode}Durable resolved true to a dormant task: it is there after reopen`, async () => {
      const [id] = await seed(mode === 'send' ? 'inbox' : 'forever', 1);
      const script = path.join(__dirname, '..', 'fixtures', 'lazy-pg-ack-child.js');
      const child = spawn(process.execPath, [script, db.url, `audit_${schema}`, id, mode], {
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      const answer = await new Promise((resolve, reject) => {
        let out = '';
        child.stdout.on('data', (d) => {
          out += d;
          const line = out.split('\n').find((l) => l.startsWith('acked '));
          if (line) {
            child.kill('SIGKILL');
            resolve(line.slice(6));
          }
        });
        child.on('exit', (code) => reject(new Error(`the child exited (${code}) first`)));
      });
      await new Promise((r) => (child.exitCode !== null || child.signalCode !== null ? r() : child.once('exit', r)));
      expect(answer).toBe('true');
      const rt = await open(store());
      const t = rt.spawn(mode === 'send' ? 'inbox' : 'forever', { durable: true, key: 'k0' });
      const out = await Promise.race([t.result, sleep(3000).then(() => 'still waiting')]);
      await rt.close();
      expect(out).toBe(mode === 'send' ? 'acked message' : 'resumed');
    });
  }

  // Ordering: the same dormant task named by Lua (waits) and JS (answered at once).
  test('Lua tasks.resume then JS rt.resume on a task being read: exactly one is answered true, and it is the one that lands', async () => {
    const [id] = await seed('forever', 1);
    const rt = await open(store());
    const lua = rt.spawn('poke', { args: [id, 'from lua'] });
    expect(lua.waiting).toEqual({ instruction: 'RESTORE' });
    const js = rt.resume(id, 'from js');
    const luaAnswer = await lua.result;
    await until(() => rt.task(id)?.status === 'done');
    const result = await rt.spawn('forever', { durable: true, key: 'k0' }).result;
    await rt.close();
    const trues = [js === true, luaAnswer === true].filter(Boolean).length;
    expect(trues).toBe(1);
    expect(result).toBe(js === true ? 'from js' : 'from lua');
  });

  test('JS rt.cancel then Lua tasks.send on a task being read: the send is refused, the task cancelled', async () => {
    const [id] = await seed('inbox', 1);
    const rt = await open(store());
    expect(rt.cancel(id)).toBe(true);
    const lua = rt.spawn('mail', { args: [id, 'after cancel'] });
    const answer = await lua.result;
    await until(() => rt.task(id)?.status === 'cancelled');
    await rt.close();
    expect(answer).toBeFalsy(); // nil
  });

  // Transient faults while activations are in flight: nothing acknowledged lost, nothing twice, no hang.
  test('sessions terminated while 40 activations are in flight: every message lands once', async () => {
    const ids = await seed('inbox', 40);
    const rt = await open(store());
    const done = new Map();
    rt.on('taskdone', (t, v) => done.set(t.id, v));
    const acks = ids.slice(0, 20).map((id) => settle(rt.sendDurable(id, `js ${id}`)));
    const lua = ids.slice(20).map((id) => rt.spawn('mail', { args: [id, `lua ${id}`] }));
    for (const wait of process.env.AUDIT_WAITS ? JSON.parse(process.env.AUDIT_WAITS) : [0, 15, 40]) {
      await sleep(wait);
      await query(
        db.url,
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND usename = 'lua_tasks'`,
      );
    }
    const answers = await Promise.race([Promise.all(acks), sleep(15000).then(() => 'hang')]);
    const luaAnswers = await Promise.race([Promise.all(lua.map((t) => t.result)), sleep(2000).then(() => 'hang')]);
    await within(() => done.size === 40, 2000);
    const stuck = ids
      .filter((id) => !done.has(id))
      .map((id) => [id.slice(-4), rt.task(id)?.waiting?.instruction ?? rt.task(id)?.status]);
    const luaStuck = lua.filter((t) => t.status !== 'done').map((t) => t.waiting?.instruction);
    const stats = rt.stats();
    expect({ stuck, luaStuck, dormant: stats.dormantTasks, tasks: stats.tasks }).toEqual({
      stuck: [],
      luaStuck: [],
      dormant: 0,
      tasks: 0,
    });
    // A failed write rejects (ERR_COMMIT_FAILED: the sender tries again); never a hang, never false.
    expect(answers).not.toBe('hang');
    for (const a of answers) expect([true, 'ERR_COMMIT_FAILED']).toContain(a.value ?? a.error);
    expect(luaAnswers).toEqual(lua.map(() => true));
    for (const id of ids) expect(done.get(id)).toBe(`${ids.indexOf(id) < 20 ? 'js' : 'lua'} ${id}`);
    expect(runs(rt, 'inbox')).toBe(40);
    await rt.close();
  }, 40000);

  test('PostgreSQL restarted while activations are in flight: acknowledged messages kept, none twice', async () => {
    const cluster = await privateCluster();
    const ps = [];
    const mk = () => {
      const s = new PostgresStore({ connectionString: cluster.url, schema: 'restart' });
      ps.push(s);
      return s;
    };
    try {
      const s0 = mk();
      let rt = await open(s0);
      const ids = [];
      for (let i = 0; i < 30; i++) ids.push(rt.spawn('inbox', { durable: true, key: `k${i}` }).id);
      await until(() => ids.every((id) => written(rt, id)));
      await rt.close();
      rt = await open(mk());
      const done = new Map();
      rt.on('taskdone', (t, v) => done.set(t.id, v));
      const restarting = cluster.restart('immediate');
      await sleep(30);
      const acks = ids.map((id) => settle(rt.sendDurable(id, `m ${id}`)));
      await restarting;
      const answers = await Promise.race([Promise.all(acks), sleep(30000).then(() => 'hang')]);
      const trueIds = ids.filter((_, i) => answers !== 'hang' && answers[i].value === true);
      await until(() => trueIds.every((id) => done.has(id)));
      expect(runs(rt, 'inbox')).toBe(30);
      rt.closeSync(); // as a crash: what was acknowledged is in the store
      await sleep(200);
      rt = await open(mk());
      const again = new Map();
      rt.on('taskdone', (t, v) => again.set(t.id, v));
      await sleep(300);
      // Nothing acknowledged lost: each true was received; no task ran twice at the next open.
      expect(answers).not.toBe('hang');
      expect(trueIds.length).toBe(30);
      for (const id of trueIds) expect(done.get(id)).toBe(`m ${id}`);
      expect(again.size).toBe(0);
      await rt.close();
    } finally {
      await Promise.all(ps.map((s) => s.close().catch(() => {})));
      await cluster.stop();
    }
  }, 90000);

  // Fencing: the lease taken over (its token moved on) while a dormant task is read.
  test('lease taken over while a dormant task is read: sendDurable does not resolve true', async () => {
    const [id] = await seed('inbox', 1);
    const rt = await open(store());
    rt.on('taskerror', () => {});
    await query(db.url, `REVOKE SELECT ON ${kv()} FROM lua_tasks`);
    let out;
    try {
      const p = settle(rt.sendDurable(id, 'fenced'));
      await sleep(150);
      // Another holder takes the name (as after an expiry): the token moves on.
      await query(db.url, `UPDATE "audit_${schema}".lua_tasks_leases SET token = token + 1 WHERE name = 'game'`);
      await query(db.url, `GRANT SELECT ON ${kv()} TO lua_tasks`);
      out = await Promise.race([p, sleep(5000).then(() => 'hang')]);
    } finally {
      await query(db.url, `GRANT SELECT ON ${kv()} TO lua_tasks`);
    }
    rt.closeSync();
    const inboxRows = (await query(db.url, `SELECT key FROM ${kv()} WHERE space = 3`)).rows.length;
    expect(out).toHaveProperty('error'); // ERR_COMMIT_FAILED (the write fenced)
    expect(inboxRows).toBe(0);
  });

  // No call after a cancel: a Lua caller waiting for a read (RESTORE) that is
  // cancelled never makes its call, and the read still lands for the others.
  test('a task waiting for a read (RESTORE) and cancelled makes no call; the read lands', async () => {
    const [id] = await seed('inbox', 1);
    const rt = await open(store());
    await query(db.url, `REVOKE SELECT ON ${kv()} FROM lua_tasks`);
    let granted = false;
    try {
      const caller = rt.spawn('mail', { args: [id, 'from a cancelled caller'] });
      caller.result.catch(() => {});
      expect(caller.waiting).toEqual({ instruction: 'RESTORE' });
      expect(rt.cancel(caller.id)).toBe(true);
      await expect(caller.result).rejects.toMatchObject({ code: 'ERR_TASK_CANCELLED' });
      await query(db.url, `GRANT SELECT ON ${kv()} TO lua_tasks`);
      granted = true;
      await until(() => rt.stats().dormantTasks === 0); // read and restored
      expect(rt.task(id)).toMatchObject({ status: 'waiting', waiting: { instruction: 'RECEIVE' } });
      expect(await rt.sendDurable(id, 'the only message')).toBe(true);
      await expect(rt.spawn('inbox', { durable: true, key: 'k0' }).result).resolves.toBe('the only message');
    } finally {
      if (!granted) await query(db.url, `GRANT SELECT ON ${kv()} TO lua_tasks`);
    }
    await rt.close();
  });

  // Clear errors: a task that could not be restored, named again by its key.
  test('a key of a task that could not be restored, named again: one report, no second read', async () => {
    const [id] = await seed('forever', 1);
    await dropJournal(id);
    const rt = await open(store());
    const errors = [];
    rt.on('taskerror', (t) => errors.push(t.id));
    expect(rt.send(id, 'x')).toBe(true); // named: read, cannot be restored
    await until(() => errors.length === 1);
    for (let i = 0; i < 3; i++) {
      expect(() => rt.spawn('forever', { durable: true, key: 'k0' })).toThrow(
        expect.objectContaining({ code: 'ERR_STORE_CORRUPT' }),
      );
    }
    await sleep(300);
    const failures = rt.stats().restoreFailures;
    await rt.close();
    expect({ errors: errors.length, failures }).toEqual({ errors: 1, failures: 1 });
  });
});
