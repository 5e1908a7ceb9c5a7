// SPDX-License-Identifier: MIT
// PostgresStore under the faults production brings: ended sessions, a server restart, writes outside its limits.
'use strict';
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { Runtime, PostgresStore, DirectoryStore } = require('../../..');
const { describePg, createDatabase, query, writeHold, privateCluster } = require('../pg-helpers');
const { sleep } = require('../helpers');

const CHILD = path.join(__dirname, '..', 'fixtures', 'pg-faults-child.js');
const LEASE_MS = 2000;

// Runs the child, gated (fixtures/pg-faults-child.js): `during(lines,
// exited, go)` injects faults once it is ready and says "go" (its tasks start)
// when the faults are set to meet their writes; then the child is told "end"
// (its tasks ended, it closes). Resolves with its exit code and its output
// lines.
async function runChild(spec, during) {
  const p = spawn(process.execPath, [CHILD, JSON.stringify({ ...spec, gated: true })], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const lines = [];
  let stderr = '';
  let buffered = '';
  let readyResolve;
  const ready = new Promise((resolve) => {
    readyResolve = resolve;
  });
  p.stdin.on('error', () => {}); // a child that died first: its exit says so
  p.stderr.on('data', (d) => {
    stderr += d;
  });
  p.stdout.on('data', (d) => {
    buffered += d;
    const parts = buffered.split('\n');
    buffered = parts.pop();
    for (const line of parts) {
      lines.push(line);
      if (line === 'ready') readyResolve();
    }
  });
  const exited = new Promise((resolve) => p.once('exit', (code, signal) => resolve({ code, signal })));
  let exit = null;
  exited.then((e) => {
    exit = e;
    readyResolve();
  });
  await ready;
  let went = false;
  const go = () => {
    if (!went) p.stdin.write('go\n');
    went = true;
  };
  if (exit === null) {
    try {
      await during(lines, () => exit !== null, go);
    } catch (e) {
      // The child is ended, not left to keep Jest from exiting; what it said,
      // and what PostgreSQL's sessions of it were doing, are the reason's context.
      const { rows } = await query(
        spec.url,
        `SELECT pid, state, wait_event_type, wait_event, left(query, 60) AS q FROM pg_stat_activity
         WHERE application_name = 'lua_tasks_fault'`,
      ).catch(() => ({ rows: [] }));
      e.message += `\nthe child's sessions: ${JSON.stringify(rows)}`;
      p.kill('SIGKILL');
      await exited;
      e.message += `\nthe child's output:\n${lines.filter((l) => !l.startsWith('effect')).join('\n')}\n${stderr}`;
      throw e;
    }
  }
  go();
  p.stdin.end('end\n');
  // A child that never ends is killed (its signal fails the test), never left running.
  const killer = setTimeout(() => p.kill('SIGKILL'), 90000);
  const { code, signal } = await exited;
  clearTimeout(killer);
  return { code, signal, lines, stderr };
}

// Every task of a child's run ended (done or failed): it writes no more until it closes.
const settled = (lines) => lines.includes('settled');

// What the child's output says, checked: every task done once with its id,
// every step's effect exactly once, every step's key in PostgreSQL.
function expectAllOnce(run, tasks, steps) {
  const { lines } = run;
  const context = `exit ${run.code} ${run.signal || ''}\n${run.stderr}\n${lines.filter((l) => !l.startsWith('effect')).join('\n')}`;
  // A crash (an unheard 'error'), a failed task or a failed close says what it was.
  expect(lines.filter((l) => l.startsWith('failed') || l.startsWith('error'))).toEqual([]);
  if (run.code !== 0) throw new Error(`the child exited ${run.code} ${run.signal || ''}: ${context}`);
  const done = lines.filter((l) => l.startsWith('done')).sort();
  expect(done).toEqual(Array.from({ length: tasks }, (_, i) => `done t${i + 1} t${i + 1}`).sort());
  const effects = new Map();
  for (const l of lines.filter((x) => x.startsWith('effect'))) effects.set(l, (effects.get(l) || 0) + 1);
  expect(effects.size).toBe(tasks * steps);
  expect([...effects.values()].filter((n) => n !== 1)).toEqual([]);
  expect(lines).toContain(`stored ${tasks * steps}`);
  expect(lines[lines.length - 1]).toBe('end');
}

describePg('PostgresStore faults', () => {
  let db;
  beforeAll(async () => {
    db = await createDatabase();
  });
  afterAll(async () => {
    if (db) await db.drop();
  });

  test('sessions ended mid-COMMIT (pg_terminate_backend): no crash; every durable task finishes, each step once', async () => {
    let terminated = 0;
    let midCommit = 0; // sessions ended while their write waited
    const run = await runChild(
      { url: db.url, schema: 'terminate', tasks: 4, steps: 40, leaseMs: LEASE_MS },
      async (lines, exited, go) => {
        // Mid-COMMIT for certain: the tasks' writes wait on a lock a
        // session of the test's holds on the kv table (from before the
        // first, in the first round); the store's sessions are ended while
        // one waits, then the lock goes. Up to three rounds, while the
        // tasks have writes to make.
        for (let round = 0; round < 3 && !exited() && !settled(lines); round++) {
          const hold = await writeHold(db.url, '"terminate".lua_tasks_kv', { app: 'lua_tasks_fault' });
          try {
            await hold.lock();
            go();
            if (!(await hold.writeWaits(() => exited() || settled(lines)))) break;
            const { rows } = await query(
              db.url,
              `SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
               WHERE datname = current_database() AND application_name = 'lua_tasks_fault' AND wait_event_type = 'Lock'`,
            );
            midCommit += rows[0].n;
          } finally {
            await hold.release();
          }
        }
        // Then every session of the store, wherever it is, again and again
        // (the child holds its name, so its lock session is there to end,
        // until it is told to end).
        for (let round = 0; !exited() && (round < 10 || (terminated === 0 && round < 500)); round++) {
          await sleep(20 + ((round * 37) % 50));
          const { rows } = await query(
            db.url,
            `SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
             WHERE datname = current_database() AND application_name = 'lua_tasks_fault'`,
          );
          terminated += rows[0].n;
        }
      },
    );
    expectAllOnce(run, 4, 40);
    expect(midCommit).toBeGreaterThan(0);
    expect(terminated).toBeGreaterThan(0);
  }, 120000);

  test('a server restart (pg_ctl restart -m fast) during durable COMMITs: the process lives, every durable task completes exactly once', async () => {
    const cluster = await privateCluster();
    try {
      const run = await runChild(
        { url: cluster.url, schema: 'restart', tasks: 4, steps: 40, leaseMs: LEASE_MS },
        async (lines, exited, go) => {
          // Each restart while a write waits on the test's lock (from before
          // the first, the first time): a write is in flight for certain.
          for (let round = 0; round < 2 && !exited() && !settled(lines); round++) {
            const hold = await writeHold(cluster.url, '"restart".lua_tasks_kv', { app: 'lua_tasks_fault' });
            try {
              await hold.lock();
              go();
              if (await hold.writeWaits(() => exited() || settled(lines))) await cluster.restart('fast');
            } finally {
              await hold.release();
            }
          }
        },
      );
      expectAllOnce(run, 4, 40);
      // The outage was told, and its end.
      const health = run.lines.filter((l) => l.startsWith('health'));
      expect(health[0]).toBe('health false');
      expect(health[health.length - 1]).toBe('health true');
    } finally {
      await cluster.stop();
    }
  }, 180000);

  test('an acquire that meets a lease row locked by a stalled transaction is refused while it stalls (lock_timeout)', async () => {
    // leaseMs 1000: lock_timeout 250 ms on lease statements.
    const store = new PostgresStore({ connectionString: db.url, schema: 'stall', leaseMs: 1000 });
    const { Client } = require('pg');
    const stalled = new Client({ connectionString: db.url });
    try {
      await (await store.acquire('n')).release(); // the row exists, free
      await stalled.connect();
      // A holder paused inside its write transaction holds its lease row so.
      await stalled.query('BEGIN');
      await stalled.query(`SELECT 1 FROM "stall".lua_tasks_leases WHERE name = 'n' FOR UPDATE`);
      let released = false;
      const timer = setTimeout(() => {
        released = true;
        stalled.query('ROLLBACK').catch(() => {});
      }, 15000);
      const err = await store.acquire('n').catch((e) => e);
      clearTimeout(timer);
      // Refused while the row is still locked, not once it is let go.
      expect(released).toBe(false);
      expect(err).toMatchObject({ code: 'ERR_STORE_LOCKED' });
    } finally {
      await stalled.end().catch(() => {});
      await store.close();
    }
  }, 30000);

  test("a holder paused inside a write transaction (SIGSTOP) holds another store's acquire only until idle_in_transaction_session_timeout", async () => {
    // leaseMs 1000: the child's transactions end 1 s after they go idle.
    // steps: more than it can finish while the test looks for a write to
    // stop (a step writes one record now, and 500 were done in seconds); the
    // test kills it at the end. givenPool: every write of the child is a
    // transaction, so the first one the test's lock holds up is inside one
    // (on its own pool a batch alone is autocommit, and whether a write
    // carries several batches is up to timing).
    const spec = { url: db.url, schema: 'paused', tasks: 2, steps: 50000, leaseMs: 1000, runtimes: 2, givenPool: true };
    const p = spawn(process.execPath, [CHILD, JSON.stringify(spec)], { stdio: ['ignore', 'pipe', 'pipe'] });
    const exited = new Promise((resolve) => p.once('exit', resolve));
    let text = '';
    p.stdout.on('data', (d) => {
      text += d;
    });
    const { Client } = require('pg');
    const admin = new Client({ connectionString: db.url });
    const store = new PostgresStore({ connectionString: db.url, schema: 'paused', leaseMs: 1000 });
    let stopped = false;
    let resume = null;
    try {
      while (!text.includes('ready\n')) await sleep(10);
      await admin.connect();
      // Until one of the child's writes waits, on our lock, inside a
      // transaction of several batches (BEGIN ... COMMIT): stop the child
      // there, then let the write go on: its transaction sits idle, holding
      // the lease rows it locked.
      for (let round = 0; round < 50 && !stopped; round++) {
        await admin.query('BEGIN');
        await admin.query('LOCK TABLE "paused".lua_tasks_kv IN SHARE ROW EXCLUSIVE MODE');
        for (const end = Date.now() + 2000; Date.now() < end;) {
          // A fresh look each time: pg_stat_activity is kept for a transaction otherwise.
          await admin.query('SELECT pg_stat_clear_snapshot()');
          const { rows } = await admin.query(
            `SELECT count(*)::int AS n, bool_or(xact_start < query_start) AS inside FROM pg_stat_activity
             WHERE datname = current_database() AND application_name = 'lua_tasks_fault' AND wait_event_type = 'Lock'`,
          );
          if (rows[0].n > 0) {
            if (rows[0].inside) {
              p.kill('SIGSTOP');
              stopped = true;
            }
            break;
          }
          await sleep(2);
        }
        await admin.query('COMMIT');
      }
      expect(stopped).toBe(true);
      // Its process stays stopped for 15 s at most: another store's acquire
      // of its name must not wait for it.
      resume = setTimeout(() => {
        stopped = false;
        p.kill('SIGCONT');
      }, 15000);
      // Both names: the one whose lease row the idle transaction locked is
      // among them (the other's batch had not run).
      const leases = [];
      for (const name of ['faults', 'faults2']) {
        let lease = null;
        while (!lease && stopped) {
          lease = await store.acquire(name).catch((e) => {
            if (e.code !== 'ERR_STORE_LOCKED') throw e;
            return null;
          });
          if (!lease) await sleep(100);
        }
        leases.push(lease);
      }
      expect({ acquired: leases.every(Boolean), whileStopped: stopped }).toEqual({
        acquired: true,
        whileStopped: true,
      });
      for (const l of leases) await l.release();
    } finally {
      clearTimeout(resume);
      p.kill('SIGCONT');
      p.kill('SIGKILL');
      await exited;
      await admin.end().catch(() => {});
      await store.close();
    }
  }, 60000);

  // The client library's side of a lost answer, made on purpose: once the
  // first fenced statement is sent, its connection stops reading. On the
  // store's own pool a batch alone is autocommit: PostgreSQL answers, then
  // waits for the client while the client waits for it. On a pool given,
  // every write is a transaction, which PostgreSQL ends once it sits idle
  // past idle_in_transaction_session_timeout (1 s here): the session is gone.
  test.each([
    ['its own pool', 'it waits for the client', 'was waiting for this client'],
    ['a pool given', 'PostgreSQL ends it', 'is gone|was waiting for this client'],
  ])(
    'a write whose answer the client never reads (%s: %s) is dropped and fails transiently, not waited on forever; the next write lands',
    async (which, _how, said) => {
      const { Pool, Client } = require('pg');
      const query = Client.prototype.query;
      let stalled = null;
      Client.prototype.query = function stallFirstFenced(config, ...rest) {
        const result = query.call(this, config, ...rest);
        if (stalled === null && /lua_tasks_fence\(/.test((config && config.text) || '')) {
          stalled = this.processID;
          this.connection.stream.pause();
        }
        return result;
      };
      const pool = which === 'a pool given' ? new Pool({ connectionString: db.url }) : null;
      const where = pool ? { pool } : { connectionString: db.url };
      const store = new PostgresStore({ ...where, schema: pool ? 'unread_given' : 'unread_own', leaseMs: 2000 });
      try {
        const lease = await store.acquire('n');
        const batch = (v) => ({
          name: 'n',
          token: lease.token,
          state: null,
          writes: [{ space: 1, key: 'k', value: Buffer.from(v) }],
        });
        const err = await store.write(batch('first')).then(
          () => null,
          (e) => e,
        );
        expect(stalled).not.toBeNull();
        expect(err).toMatchObject({ transient: true });
        expect(err.message).toMatch(new RegExp(`stopped answering: its session \\(pid ${stalled}\\) (${said})`));
        await store.write(batch('second'));
        expect(store.reader('n').get('k').toString()).toBe('second');
        await lease.release();
      } finally {
        Client.prototype.query = query;
        await store.close();
        if (pool) await pool.end();
      }
    },
    30000,
  );

  test("a write that waits for a lock through several of the watchdog's probes is left to wait, and lands", async () => {
    const store = new PostgresStore({ connectionString: db.url, schema: 'slow_lock', leaseMs: 2000 });
    try {
      const lease = await store.acquire('n');
      await store.write({ name: 'n', token: lease.token, state: null, writes: [] }); // the tables exist
      const hold = await writeHold(db.url, '"slow_lock".lua_tasks_kv');
      let settled = null;
      let writing = null;
      try {
        await hold.lock();
        writing = store.write({
          name: 'n',
          token: lease.token,
          state: null,
          writes: [{ space: 1, key: 'k', value: Buffer.from('v') }],
        });
        writing.then(
          () => (settled = 'written'),
          (e) => (settled = e),
        );
        expect(await hold.writeWaits()).toBe(true);
        await sleep(3500); // a probe a second (leaseMs / 2): three looks at a session waiting for a lock
        expect(settled).toBe(null);
      } finally {
        await hold.release();
      }
      await writing;
      expect(settled).toBe('written');
      expect(store.reader('n').get('k').toString()).toBe('v');
      await lease.release();
    } finally {
      await store.close();
    }
  }, 30000);

  describe('limits', () => {
    let store;
    let n = 0;
    beforeEach(() => {
      store = new PostgresStore({ connectionString: db.url, schema: `limits_${++n}`, leaseMs: LEASE_MS });
    });
    afterEach(async () => {
      await store.close();
    });

    test('stores declare what one write may carry', () => {
      expect(store.limits).toEqual({
        maxKeyBytes: 2048,
        maxValueBytes: 64 * 1024 * 1024,
        maxBatchBytes: 512 * 1024 * 1024,
        keyForbidsNul: true,
      });
      expect(Object.isFrozen(store.limits)).toBe(true);
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lua-tasks-limits-'));
      try {
        expect(new DirectoryStore(dir).limits).toMatchObject({
          keyForbidsNul: false,
          maxValueBytes: 256 * 1024 * 1024,
        });
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });

    // `bad` makes its offending write in the same loop turn as `good`
    // commits: the write is refused at the Lua call (the runtime enforces the
    // store's limits), good's batch lands, and bad's later COMMITs land with
    // its other writes. (The store's own refusal of a batch is the test
    // after these: what gets past the runtime's check.)
    const cases = [
      {
        label: 'a key with a NUL character',
        lua: 'tasks.store.set("a\\0b", 1)',
        message: /key "a\\0b" holds a NUL byte/,
      },
      {
        label: 'a value over maxValueBytes (65 MiB)',
        lua: 'tasks.store.set("big", string.rep("x", 65 * 1024 * 1024))',
        message: /store\["big"\]: encodes to more than 67108864 bytes: the maxValueBytes limit is 64 MiB/,
      },
    ];
    for (const c of cases) {
      test(`${c.label} is refused at the Lua call with ERR_STORE_LIMIT; another name's batch of the same turn lands; later COMMITs work`, async () => {
        const bad = await Runtime.open({ name: 'bad', store });
        const good = await Runtime.open({ name: 'good', store });
        try {
          bad.load(`function offend() tasks.store.set("fine", 1); ${c.lua}; coroutine.yield("COMMIT") end
            function later(i) tasks.store.set("later", i); coroutine.yield("COMMIT"); return i end`);
          good.load('function put(i) tasks.store.set("g", i); coroutine.yield("COMMIT"); return i end');
          const before = store.stats().transactions;
          const offended = bad.spawn('offend').result.catch((e) => e);
          const put = good.spawn('put', { args: [7] }).result;
          await expect(put).resolves.toBe(7);
          const err = await offended;
          expect(err).toMatchObject({ code: 'ERR_STORE_LIMIT' });
          expect(err.message).toMatch(c.message);
          expect(store.stats().transactions - before).toBe(1);
          // The refused write is dropped; the others of that COMMIT (and
          // every later COMMIT) land.
          for (let i = 1; i <= 3; i++) await expect(bad.spawn('later', { args: [i] }).result).resolves.toBe(i);
          await bad.commit();
          expect(bad.load('return tasks.store.get("fine"), tasks.store.get("later")')).toEqual([1, 3]);
        } finally {
          await bad.close();
          await good.close();
        }
        const reader = new PostgresStore({ connectionString: db.url, schema: `limits_${n}`, leaseMs: LEASE_MS });
        try {
          const lease = await reader.acquire('bad');
          expect(reader.reader('bad').keys('').sort()).toEqual(['fine', 'later']);
          await lease.release();
        } finally {
          await reader.close();
        }
      }, 60000);
    }

    test('a batch written straight to the store outside its limits is refused before any transaction', async () => {
      await store.ready();
      const before = store.stats().transactions;
      const tooBig = Buffer.alloc(64 * 1024 * 1024 + 1);
      const refused = store.write({ name: 'direct', writes: [{ key: 'k', value: tooBig }] }).catch((e) => e);
      const fine = store.write({ name: 'other', writes: [{ key: 'k', value: Buffer.from('v') }] });
      const err = await refused;
      expect(err).toMatchObject({ code: 'ERR_STORE_LIMIT', permanent: true });
      expect(err.refused).toEqual([
        { space: 1, key: 'k', bytes: tooBig.length, limit: 64 * 1024 * 1024, what: 'value-size' },
      ]);
      await fine;
      expect(store.stats().transactions - before).toBe(1);
    });
  });
});
