// SPDX-License-Identifier: MIT
// PostgresStore's own guarantees beyond the conformance suite: options, leases and fencing, group commit, readers.
'use strict';
const path = require('node:path');
const { spawn } = require('node:child_process');
const { Runtime, PostgresStore } = require('../../..');
const { describePg, createDatabase, query } = require('../pg-helpers');
const { sleep } = require('../helpers');

describe('PostgresStore options', () => {
  test('bad options are refused naming the option', () => {
    expect(() => new PostgresStore()).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_TYPE' }));
    expect(() => new PostgresStore({})).toThrow(/exactly one of "options.connectionString" and "options.pool"/);
    expect(() => new PostgresStore({ connectionString: 'postgres://x/y', pool: { connect() {} } })).toThrow(
      /Received both/,
    );
    expect(() => new PostgresStore({ connectionString: 5 })).toThrow(
      expect.objectContaining({
        code: 'ERR_INVALID_ARG_TYPE',
        message: expect.stringContaining('options.connectionString'),
      }),
    );
    expect(() => new PostgresStore({ pool: {} })).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_ARG_TYPE', message: expect.stringContaining('options.pool') }),
    );
    expect(() => new PostgresStore({ connectionString: 'postgres://x/y', leaseMs: '5' })).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_ARG_TYPE', message: expect.stringContaining('options.leaseMs') }),
    );
    expect(() => new PostgresStore({ connectionString: 'postgres://x/y', leaseMs: 5 })).toThrow(
      expect.objectContaining({ code: 'ERR_OUT_OF_RANGE', message: expect.stringContaining('options.leaseMs') }),
    );
    expect(() => new PostgresStore({ connectionString: 'postgres://x/y', schema: 'Drop Table' })).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_ARG_VALUE', message: expect.stringContaining('options.schema') }),
    );
  });

  test('a server that does not answer: the error says what was tried, never the password', async () => {
    const store = new PostgresStore({ connectionString: 'postgres://someone:s3cret@127.0.0.1:1/nowhere' });
    const err = await store.acquire('x').then(
      () => null,
      (e) => e,
    );
    await store.close();
    expect(err).toMatchObject({ code: 'ECONNREFUSED' });
    expect(err.message).toContain('host 127.0.0.1, port 1, database "nowhere", user "someone"');
    expect(err.message).not.toContain('s3cret');
  });
});

describePg('PostgresStore on PostgreSQL', () => {
  let db;
  let schemas = 0;
  const stores = [];
  // A store on a schema of its own (or the one given), closed after the test.
  const make = (opts = {}) => {
    const store = new PostgresStore({ connectionString: db.url, schema: `own_${schemas}`, ...opts });
    stores.push(store);
    return store;
  };
  const leases = (schema) => `"${schema}".lua_tasks_leases`;

  beforeAll(async () => {
    db = await createDatabase();
  });
  afterAll(async () => {
    if (db) await db.drop();
  });
  beforeEach(() => {
    schemas++;
  });
  afterEach(async () => {
    await Promise.all(stores.splice(0).map((s) => s.close()));
  });

  test('durable tasks keep their journals and inboxes in PostgreSQL: a reopened runtime replays them', async () => {
    const calls = [];
    const setup = (r) => {
      r.set('effect', (x) => {
        calls.push(x);
        return x;
      });
      r.load(`function q(n)
        local v = tasks.step(function() return effect(n) end)
        local m = tasks.receive()
        return v .. m
      end`);
    };
    let store = make();
    let rt = await Runtime.open({ name: 'durable', store, setup });
    const task = rt.spawn('q', { durable: true, key: 'k', args: ['a'] });
    expect(await rt.sendDurable(task.id, '!')).toBe(true);
    rt.closeSync(); // as a crash would
    await store.close();
    store = make();
    rt = await Runtime.open({ name: 'durable', store, setup });
    const again = rt.spawn('q', { durable: true, key: 'k' });
    expect(again.id).toBe(task.id);
    expect(await again.result).toBe('a!');
    expect(calls).toEqual(['a']); // the step ran once
    await rt.close();
  });

  test('a second owner is refused with ERR_STORE_LOCKED naming the holder and when its lease expires', async () => {
    const a = make();
    const b = make();
    const lease = await a.acquire('n');
    const err = await b.acquire('n').then(
      () => null,
      (e) => e,
    );
    expect(err).toMatchObject({ code: 'ERR_STORE_LOCKED', holder: { pid: process.pid } });
    expect(err.expiresAt).toBeInstanceOf(Date);
    expect(err.message).toMatch(/"n" is already open in this process/);
    expect(err.message).toContain(err.expiresAt.toISOString());
    await lease.release();
    const again = await b.acquire('n');
    expect(again.token).toBe(lease.token + 1); // the token grows across owners
    await again.release();
  });

  test('fencing: a stale token is refused and applies nothing; the other batches of its transaction land', async () => {
    const schema = `own_${schemas}`;
    const a = make({ leaseMs: 60000 }); // no renewal during the test: a does not learn it lost the lease
    const b = make();
    const stale = await a.acquire('f');
    const other = await a.acquire('g');
    await a.write({ name: 'f', token: stale.token, seq: 1, state: Buffer.from('a1'), writes: [] });
    // a's lease runs out (a paused past it, say), and b takes the name over.
    await query(db.url, `UPDATE ${leases(schema)} SET expires_at = now() - interval '1 second' WHERE name = 'f'`);
    const fresh = await b.acquire('f');
    expect(fresh.token).toBe(stale.token + 1);
    await b.write({ name: 'f', token: fresh.token, seq: 1, state: Buffer.from('b1'), writes: [] });
    const before = a.stats();
    // Both of a's batches go in one transaction: the stale one is refused whole.
    const [refused, landed] = await Promise.allSettled([
      a.write({
        name: 'f',
        token: stale.token,
        seq: 2,
        state: Buffer.from('a2'),
        writes: [{ space: 1, key: 'k', value: Buffer.from('a') }],
      }),
      a.write({ name: 'g', token: other.token, seq: 1, state: Buffer.from('g1'), writes: [] }),
    ]);
    expect(refused).toMatchObject({ status: 'rejected', reason: { code: 'ERR_STORE_LOCKED' } });
    expect(refused.reason.message).toMatch(/another owner of "f" than token/);
    expect(landed.status).toBe('fulfilled');
    expect(a.stats()).toEqual({ transactions: before.transactions + 1, batches: before.batches + 1 });
    expect(String(await b.load('f'))).toBe('b1');
    expect(b.reader('f').get('k')).toBeNull();
    expect((await query(db.url, `SELECT count(*)::int AS n FROM "${schema}".lua_tasks_kv`)).rows[0].n).toBe(0);
    expect(String(await a.load('g'))).toBe('g1');
  });

  test('a released lease refuses later batches before they reach PostgreSQL; writes in flight land first', async () => {
    const a = make();
    const lease = await a.acquire('r');
    const pending = a.write({ name: 'r', token: lease.token, seq: 1, state: Buffer.from('one'), writes: [] });
    const released = lease.release();
    await expect(pending).resolves.toBeUndefined();
    await released;
    await expect(
      a.write({ name: 'r', token: lease.token, seq: 2, state: Buffer.from('two'), writes: [] }),
    ).rejects.toMatchObject({ code: 'ERR_STORE_LOCKED', message: expect.stringContaining('released') });
    expect(String(await a.load('r'))).toBe('one');
  });

  test('lease expiry: a holder that stops renewing (SIGSTOP) is taken over after leaseMs with token + 1, and fenced', async () => {
    const schema = `own_${schemas}`;
    // Long enough that a holder starved by a loaded machine still renews before the first look.
    const leaseMs = 1500;
    const child = await startHolder({ url: db.url, schema, leaseMs }, 'held');
    try {
      const { rows } = await query(db.url, `SELECT token FROM ${leases(schema)} WHERE name = 'held'`);
      const token = Number(rows[0].token);
      const b = make({ leaseMs });
      await expect(b.acquire('held')).rejects.toMatchObject({ code: 'ERR_STORE_LOCKED', holder: { pid: child.pid } });
      child.kill('SIGSTOP'); // alive, its session open, but no longer renewing
      const stoppedAt = Date.now();
      let lease;
      while (!lease) {
        lease = await b.acquire('held').catch((e) => {
          if (e.code !== 'ERR_STORE_LOCKED') throw e;
          return sleep(50).then(() => undefined);
        });
        if (Date.now() - stoppedAt > 20 * leaseMs) throw new Error('the lease was never taken over');
      }
      expect(lease.token).toBe(token + 1);
      // The stopped holder's session still holds its lock: it was the expiry.
      const locked = await query(db.url, `SELECT locked FROM ${leases(schema)} WHERE name = 'held'`);
      expect(locked.rows[0].locked).toBe(false);
      // Its token no longer writes.
      const old = make({ schema, leaseMs });
      await expect(
        old.write({ name: 'held', token, seq: 1, state: Buffer.from('late'), writes: [] }),
      ).rejects.toMatchObject({ code: 'ERR_STORE_LOCKED' });
      await lease.release();
    } finally {
      child.kill('SIGKILL');
      await new Promise((resolve) => child.once('exit', resolve));
    }
  });

  test('group commit: batches handed over in one loop turn go in one transaction', async () => {
    const a = make();
    const held = [];
    for (let i = 0; i < 20; i++) held.push(await a.acquire(`g${i}`));
    const before = a.stats();
    await Promise.all(
      held.map((l, i) =>
        a.write({
          name: `g${i}`,
          token: l.token,
          seq: 1,
          state: Buffer.from(`s${i}`),
          writes: [{ space: 1, key: 'k', value: Buffer.from(`v${i}`) }],
        }),
      ),
    );
    expect(a.stats()).toEqual({ transactions: before.transactions + 1, batches: before.batches + 20 });
    expect(String(a.reader('g7').get('k'))).toBe('v7');
  });

  test('batches of one name handed over before the last settled apply in order; after a failure the later ones are refused', async () => {
    const schema = `own_${schemas}`;
    const a = make();
    const lease = await a.acquire('p');
    const w = (seq, key) =>
      a.write({
        name: 'p',
        token: lease.token,
        seq,
        state: Buffer.from(`s${seq}`),
        writes: [{ space: 1, key, value: Buffer.from(`v${seq}`) }],
      });
    // Pipelined: 2 is handed over while 1 is in flight.
    const one = w(1, 'x');
    await sleep(0);
    const two = w(2, 'x');
    await Promise.all([one, two]);
    expect(String(await a.load('p'))).toBe('s2');
    expect(String(a.reader('p').get('x'))).toBe('v2');
    // A batch that fails (a trigger refuses the key "bad"): the one taken
    // after it, handed over before its failure was heard, is refused too.
    await query(
      db.url,
      `CREATE FUNCTION "${schema}".no_bad() RETURNS trigger LANGUAGE plpgsql AS
         $$ BEGIN IF NEW.key = 'bad' THEN RAISE EXCEPTION 'no bad keys'; END IF; RETURN NEW; END $$;
       CREATE TRIGGER no_bad BEFORE INSERT OR UPDATE ON "${schema}".lua_tasks_kv
         FOR EACH ROW EXECUTE FUNCTION "${schema}".no_bad()`,
    );
    const q = await a.acquire('q');
    const three = w(3, 'bad');
    const four = w(4, 'x'); // same loop turn: same transaction, after 3
    // Another name's batch in that transaction lands (3 is rolled back alone).
    const other = a.write({ name: 'q', token: q.token, seq: 1, state: Buffer.from('q1'), writes: [] });
    await sleep(0);
    const five = w(5, 'x'); // while 3's transaction is in flight
    const outcomes = await Promise.allSettled([three, four, five]);
    await expect(other).resolves.toBeUndefined();
    expect(String(await a.load('q'))).toBe('q1');
    expect(outcomes[0]).toMatchObject({ status: 'rejected', reason: { message: 'no bad keys' } });
    expect(outcomes[1]).toMatchObject({ status: 'rejected' });
    expect(outcomes[1].reason.message).toMatch(/an earlier batch of "p" failed \(no bad keys\)/);
    expect(outcomes[2]).toMatchObject({ status: 'rejected' });
    expect(outcomes[2].reason.message).toMatch(/an earlier batch of "p" failed/);
    expect(String(await a.load('p'))).toBe('s2');
    // Handed over after the failure was heard: it lands.
    await w(6, 'x');
    expect(String(await a.load('p'))).toBe('s6');
    expect(String(a.reader('p').get('x'))).toBe('v6');
  });

  test("readers: tasks.store's keys in bytewise (UTF-8) order with prefix, after and limit; journals by scan", async () => {
    const a = make();
    const lease = await a.acquire('k');
    const keys = ['b/2', 'a', 'b/1', 'b/10', '\u{10000}', '\uFFFD', 'é', 'b'];
    await a.write({
      name: 'k',
      token: lease.token,
      seq: 1,
      writes: [
        ...keys.map((key) => ({ space: 1, key, value: Buffer.from(key) })),
        { space: 2, key: 'task/001', value: Buffer.from('journal') },
      ],
    });
    const r = a.reader('k');
    const sorted = [...keys].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y)));
    expect(r.keys('', '', -1)).toEqual(sorted);
    expect(r.keys('b/', '', 100)).toEqual(['b/1', 'b/10', 'b/2']);
    expect(r.keys('b/', 'b/1', 100)).toEqual(['b/10', 'b/2']);
    expect(r.keys('b/', '', 2)).toEqual(['b/1', 'b/10']);
    expect(r.keys('', 'é', 100)).toEqual(['\uFFFD', '\u{10000}']);
    expect(String(r.get('é'))).toBe('é');
    expect(r.get('nope')).toBeNull();
    // Journals stay in PostgreSQL: scan() reads them, the reader refuses.
    expect((await a.scan('k', 2, '', 10)).values.map(String)).toEqual(['journal']);
    expect(() => r.get('task/001', 2)).toThrow(/journals and inboxes are read with scan/);
    expect(r.get('task/001')).toBeNull();
    await a.write({ name: 'k', token: lease.token, seq: 2, writes: [{ space: 1, key: 'b/1', value: null }] });
    expect(r.keys('b/', '', 100)).toEqual(['b/10', 'b/2']);
    // A new owner reads them back from PostgreSQL, in the same order.
    await lease.release();
    const b = make();
    await b.acquire('k');
    expect(b.reader('k').keys('', '', -1)).toEqual(sorted.filter((k) => k !== 'b/1'));
    expect(() => make().reader('k').get('a')).toThrow(expect.objectContaining({ code: 'ERR_INVALID_STATE' }));
  });

  test('copySpace streams a space as binary COPY rows, the same as scan(); a throw of its callback ends it alone', async () => {
    const a = make();
    const lease = await a.acquire('k');
    const writes = [];
    for (let i = 0; i < 3000; i++) {
      writes.push({
        space: 4,
        key: `t${String(i).padStart(5, '0')}`,
        value: Buffer.from(`entry ${i}`.repeat(1 + (i % 7))),
      });
    }
    writes.push({ space: 3, key: 'other space', value: Buffer.from('x') });
    await a.write({ name: 'k', token: lease.token, seq: 1, writes });
    const chunks = [];
    await a.copySpace('k', 4, (chunk) => chunks.push(Buffer.from(chunk)));
    // PostgreSQL's binary COPY: signature, flags, extension, then rows of
    // (field count, then each field's length and bytes), then -1.
    const data = Buffer.concat(chunks);
    expect(data.subarray(0, 11)).toEqual(Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1'));
    const rows = { keys: [], values: [] };
    let at = 19 + data.readUInt32BE(15);
    for (; data.readInt16BE(at) === 2;) {
      const k = data.readUInt32BE(at + 2);
      rows.keys.push(data.toString('utf8', at + 6, at + 6 + k));
      const v = data.readUInt32BE(at + 6 + k);
      rows.values.push(data.subarray(at + 10 + k, at + 10 + k + v));
      at += 10 + k + v;
    }
    expect(data.readInt16BE(at)).toBe(-1);
    expect(at + 2).toBe(data.length);
    expect(rows).toEqual(await a.scan('k', 4, '', -1));
    expect(rows.keys.length).toBe(3000);
    expect(chunks.length).toBeGreaterThan(1); // streamed, not one value

    const stop = new Error('enough');
    await expect(
      a.copySpace('k', 4, () => {
        throw stop;
      }),
    ).rejects.toBe(stop);
    expect((await a.scan('k', 3, '', 10)).keys).toEqual(['other space']); // the store goes on
    await expect(a.copySpace('k', 9, () => {})).rejects.toMatchObject({ code: 'ERR_INVALID_ARG_VALUE' });
    await expect(a.copySpace('bad name!', 4, () => {})).rejects.toMatchObject({ code: 'ERR_INVALID_ARG_VALUE' });
    await expect(a.copySpace('k', 4)).rejects.toMatchObject({ code: 'ERR_INVALID_ARG_TYPE' });
  });

  test('copySpace whose connection is terminated mid-stream rejects, never resolves with part of the rows', async () => {
    const a = make();
    const lease = await a.acquire('k');
    const big = Buffer.alloc(1000, 7);
    for (let b = 0; b < 20; b++) {
      const writes = Array.from({ length: 1000 }, (_, i) => ({ space: 4, key: `t${b}-${i}`, value: big }));
      await a.write({ name: 'k', token: lease.token, seq: b + 1, writes });
    }
    // Connected beforehand, so the kill leaves as soon as the first chunk is in.
    const { Client } = require('pg');
    const admin = new Client({ connectionString: db.url });
    await admin.connect();
    let chunks = 0;
    let killing = null;
    const copied = a.copySpace('k', 4, () => {
      chunks++;
      if (killing) return;
      killing = admin.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'COPY (SELECT key%' AND pid <> pg_backend_pid()`,
      );
      const until = Date.now() + 50; // the rest of the 20 MB waits in the server meanwhile
      while (Date.now() < until);
    });
    const outcome = await Promise.race([
      copied.then(
        () => 'resolved',
        (e) => e.message,
      ),
      sleep(15000).then(() => 'hung'),
    ]);
    await killing;
    await admin.end();
    expect(outcome).toMatch(/terminat/i);
    expect(chunks).toBeGreaterThan(0);
    expect((await a.scan('k', 4, '', 1)).keys).toEqual(['t0-0']); // the store goes on
  });

  test('a schema of a newer format version is refused naming both versions, and left as it was', async () => {
    const schema = `own_${schemas}`;
    const first = make();
    await (await first.acquire('v')).release();
    await query(db.url, `UPDATE "${schema}".lua_tasks_meta SET value = '7' WHERE key = 'format_version'`);
    const err = await make()
      .acquire('v')
      .then(
        () => null,
        (e) => e,
      );
    expect(err).toMatchObject({ code: 'ERR_STORE_CORRUPT' });
    expect(err.message).toMatch(/format version 7, written by a newer lua-tasks; this one reads format version 2/);
    const { rows } = await query(db.url, `SELECT value FROM "${schema}".lua_tasks_meta`);
    expect(rows).toEqual([{ value: '7' }]);
  });

  test('close() waits for the transaction in flight; later calls fail with ERR_INVALID_STATE', async () => {
    const a = new PostgresStore({ connectionString: db.url, schema: `own_${schemas}` });
    const lease = await a.acquire('c');
    const written = a.write({ name: 'c', token: lease.token, seq: 1, state: Buffer.from('c1'), writes: [] });
    await a.close();
    await expect(written).resolves.toBeUndefined();
    await expect(a.close()).resolves.toBeUndefined();
    await expect(a.load('c')).rejects.toMatchObject({ code: 'ERR_INVALID_STATE' });
    await expect(a.acquire('c')).rejects.toMatchObject({ code: 'ERR_INVALID_STATE' });
    // Its lease lapsed with its session: the name is free at once.
    const b = make();
    expect(String(await b.load('c'))).toBe('c1');
    await (await b.acquire('c')).release();
  });

  test("a process whose only handles are the store's idle connections goes on past await store.close()", () => {
    const { execFileSync } = require('node:child_process');
    const code = `const { PostgresStore } = require(${JSON.stringify(path.join(__dirname, '..', '..', '..'))});
      (async () => {
        for (let i = 0; i < 2; i++) {
          const store = new PostgresStore({ connectionString: ${JSON.stringify(db.url)}, schema: 'own_${schemas}' });
          await (await store.acquire('idle')).release();
          await store.close();
          console.log('closed ' + i);
        }
      })();`;
    expect(execFileSync(process.execPath, ['-e', code], { encoding: 'utf8', timeout: 20000 })).toBe(
      'closed 0\nclosed 1\n',
    );
  });

  test('a runtime end to end: tasks.state and tasks.store COMMITs come back in a new store object', async () => {
    const a = make();
    const rt = await Runtime.open({ name: 'game', store: a });
    rt.load(`function play(n)
      for i = 1, n do
        tasks.state.turns = (tasks.state.turns or 0) + 1
        tasks.store.set(string.format("player/%03d", i), { name = "p" .. i, score = i * 1.5 })
        coroutine.yield("COMMIT")
      end
      tasks.store.delete("player/002")
      coroutine.yield("COMMIT")
      return tasks.state.turns
    end`);
    expect(await rt.call('play', 5)).toBe(5);
    await rt.close();
    const again = await Runtime.open({ name: 'game', store: make() });
    expect(
      again.load(`local p = tasks.store.get("player/004")
        return tasks.state.turns, p.name, p.score, #tasks.store.keys("player/"), tasks.store.get("player/002")`),
    ).toEqual([5, 'p4', 6, 4, null]);
    await again.close();
  });
});

// A child process holding `name` on a PostgresStore of `spec`, once it says so.
function startHolder(spec, name) {
  const p = spawn(
    process.execPath,
    [
      path.join(__dirname, '..', 'fixtures', 'store-child.js'),
      'hold',
      name,
      path.join(__dirname, '..', 'fixtures', 'pg-store-spec.js'),
      JSON.stringify(spec),
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let err = '';
  p.stderr.on('data', (d) => {
    err += d;
  });
  return new Promise((resolve, reject) => {
    p.stdout.once('data', () => resolve(p));
    p.once('exit', (code) => reject(new Error(`holder exited (${code}) before it was ready: ${err}`)));
  });
}

describe('PostgresStore connections', () => {
  // Found by the fleet chaos test: members died as PostgreSQL restarted.
  test("old bug: a connection ended in the same read that completed it fails the store's call, and the process lives", async () => {
    const { execFile } = require('node:child_process');
    const child = path.join(__dirname, '..', 'fixtures', 'pg-fatal-after-ready.js');
    const { code, lines } = await new Promise((resolve) => {
      execFile(process.execPath, [child], { timeout: 20000 }, (err, stdout) =>
        resolve({ code: err ? err.code : 0, lines: stdout.split('\n').filter(Boolean) }),
      );
    });
    expect(code).toBe(0);
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/^settled (?!ok)/);
    expect(lines[1]).toBe('end');
  });
});
