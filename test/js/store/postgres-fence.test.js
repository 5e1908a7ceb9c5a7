// SPDX-License-Identifier: MIT
// PostgresStore's fence: no batch of an old token commits after a token change, with no lease row locked.
'use strict';
const { Client } = require('pg');
const { PostgresStore } = require('../../..');
const { WakeIndex } = require('../../../lib/fleet/wake_index');
const { table, statements } = require('../../../lib/store/postgres/schema');
const { describePg, createDatabase, query } = require('../pg-helpers');
const { sleep } = require('../helpers');

// The tables of `schema`, quoted, as the store names them.
const tables = (schema) => ({
  meta: table(schema, 'meta'),
  snapshots: table(schema, 'snapshots'),
  kv: table(schema, 'kv'),
  leases: table(schema, 'leases'),
});

// The parameters of a batch statement writing one tasks.store value.
function batchParams(name, token, key, value) {
  const v = Buffer.from(value);
  return [name, token, 1, null, [1], [key], v, [1], [v.length], [], []];
}

describePg('PostgresStore fence', () => {
  let db;
  let schemas = 0;
  let schema;
  const open = [];
  const make = (o = {}) => {
    const s = new PostgresStore({ connectionString: db.url, schema, leaseMs: 60000, ...o });
    open.push(s);
    return s;
  };
  const client = async () => {
    const c = new Client({ connectionString: db.url });
    await c.connect();
    open.push({ close: () => c.end() });
    return c;
  };
  // Resolves once a session of this database waits for an advisory lock (a
  // fence), or rejects once `settled()` says what should wait has finished.
  const waitsForFence = async (settled) => {
    for (;;) {
      const { rows } = await query(
        db.url,
        `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
         AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
      );
      if (rows[0].n > 0) return;
      if (settled()) throw new Error('it finished without waiting for the fence');
      await sleep(5);
    }
  };
  // A promise and whether it has settled.
  const watch = (p) => {
    const w = { settled: false, p };
    p.then(
      () => (w.settled = true),
      () => (w.settled = true),
    );
    return w;
  };
  const expire = (name) =>
    query(db.url, `UPDATE ${tables(schema).leases} SET expires_at = now() - interval '1 second' WHERE name = $1`, [
      name,
    ]);

  beforeAll(async () => {
    db = await createDatabase();
  });
  afterAll(async () => {
    if (db) await db.drop();
  });
  beforeEach(() => {
    schema = `fence_${++schemas}`;
  });
  afterEach(async () => {
    for (const s of open.splice(0).reverse()) await s.close().catch(() => {});
  });

  test('a batch that passed its token check commits before a takeover changes the token, never after', async () => {
    const a = make();
    const lease = await a.acquire('n');
    const held = await client();
    // The batch's transaction, held open right after its statement passed the fence.
    await held.query('BEGIN');
    const { rows } = await held.query({
      ...statements(schema, tables(schema)).fenced,
      values: batchParams('n', lease.token, 'race', 'old owner'),
    });
    expect(rows[0].fenced).toBe(1);
    await expire('n'); // a's lease lapsed (it was paused, say)
    const b = make();
    const take = watch(b.acquire('n'));
    await waitsForFence(() => take.settled);
    expect(take.settled).toBe(false); // the token change waits for the batch
    await held.query('COMMIT');
    const fresh = await take.p;
    expect(fresh.token).toBe(lease.token + 1);
    // The batch landed before the new token existed: the new owner read it.
    expect(String(b.reader('n').get('race'))).toBe('old owner');
    await expect(
      a.write({ name: 'n', token: lease.token, seq: 2, writes: [{ key: 'race', value: Buffer.from('late') }] }),
    ).rejects.toMatchObject({ code: 'ERR_STORE_LOCKED' });
  });

  test('a batch that starts while a token change is not yet committed waits for it, then is refused', async () => {
    const a = make();
    const lease = await a.acquire('m');
    const taker = await client();
    // A takeover between its token change and its commit.
    await taker.query('BEGIN');
    await taker.query(`UPDATE ${tables(schema).leases} SET token = token + 1 WHERE name = 'm'`);
    const write = watch(
      a.write({ name: 'm', token: lease.token, seq: 1, writes: [{ key: 'k', value: Buffer.from('stale') }] }),
    );
    await waitsForFence(() => write.settled);
    await taker.query('COMMIT');
    // It read the lease after the change committed, not as its statement began.
    await expect(write.p).rejects.toMatchObject({ code: 'ERR_STORE_LOCKED' });
    const { rows } = await query(db.url, `SELECT count(*)::int AS n FROM ${tables(schema).kv}`);
    expect(rows[0].n).toBe(0);
  });

  test("the wake index's changes pass the same fence", async () => {
    const a = make();
    const lease = await a.acquire('w');
    const pool = new (require('pg').Pool)({ connectionString: db.url });
    open.push({ close: () => pool.end() });
    const wake = new WakeIndex(schema);
    await wake.create(pool);
    expect(await wake.active(pool, 'w', lease.token)).toBe(true);
    const taker = await client();
    await taker.query('BEGIN');
    await taker.query(`UPDATE ${tables(schema).leases} SET token = token + 1 WHERE name = 'w'`);
    const change = watch(wake.hibernate(pool, 'w', lease.token, null));
    await waitsForFence(() => change.settled);
    await taker.query('COMMIT');
    expect(await change.p).toBe(false);
    expect(await wake.get(pool, 'w')).toEqual({ wakeAt: -Infinity, active: true });
  });

  test('a batch locks and writes no lease row', async () => {
    const a = make();
    const lease = await a.acquire('x');
    const row = () => query(db.url, `SELECT xmin::text, xmax::text FROM ${tables(schema).leases} WHERE name = 'x'`);
    const before = (await row()).rows[0];
    const held = await client();
    await held.query('BEGIN');
    await held.query({ ...statements(schema, tables(schema)).fenced, values: batchParams('x', lease.token, 'k', 'v') });
    // The row as it was: no new version, no locker recorded in it.
    expect((await row()).rows[0]).toEqual(before);
    expect(before.xmax).toBe('0');
    await held.query('COMMIT');
  });

  test('a loop turn of more batches than a transaction carries (500: each holds a fence lock until COMMIT) goes in two', async () => {
    const a = make();
    await a.ready();
    const before = a.stats();
    await Promise.all(
      Array.from({ length: 501 }, (_, i) => a.write({ name: `many${i}`, state: Buffer.from(String(i)), writes: [] })),
    );
    expect(a.stats()).toEqual({ transactions: before.transactions + 2, batches: before.batches + 501 });
  });

  test('a takeover that meets a fence held by a stalled transaction is refused while it stalls (lock_timeout)', async () => {
    const a = make();
    const lease = await a.acquire('s');
    const held = await client();
    await held.query('BEGIN');
    await held.query({ ...statements(schema, tables(schema)).fenced, values: batchParams('s', lease.token, 'k', 'v') });
    await expire('s');
    // leaseMs 1000: lock_timeout 250 ms.
    const err = await make({ leaseMs: 1000 })
      .acquire('s')
      .catch((e) => e);
    const { rows } = await held.query('SELECT 1 AS still');
    expect(rows).toEqual([{ still: 1 }]); // the transaction is still open
    expect(err).toMatchObject({ code: 'ERR_STORE_LOCKED' });
    await held.query('ROLLBACK');
  });

  test('a format-1 schema is upgraded at open; a format-1 take (no fence lock of its own) still waits for a batch past the fence', async () => {
    const t = tables(schema);
    // The schema as format 1 made it.
    await query(db.url, `CREATE SCHEMA "${schema}"`);
    await query(db.url, `CREATE TABLE ${t.meta} (key text PRIMARY KEY, value text NOT NULL)`);
    await query(
      db.url,
      `CREATE TABLE ${t.snapshots} (name text COLLATE "C" PRIMARY KEY, seq double precision, bytes bytea NOT NULL)`,
    );
    await query(
      db.url,
      `CREATE TABLE ${t.kv} (name text COLLATE "C", space integer, key text COLLATE "C", value bytea NOT NULL, PRIMARY KEY (name, space, key))`,
    );
    await query(
      db.url,
      `CREATE TABLE ${t.leases} (name text COLLATE "C" PRIMARY KEY, token bigint NOT NULL, holder jsonb,
        locked boolean NOT NULL DEFAULT false, expires_at timestamptz NOT NULL)`,
    );
    await query(db.url, `INSERT INTO ${t.meta} VALUES ('format_version', '1')`);
    const a = make();
    const lease = await a.acquire('u');
    expect((await query(db.url, `SELECT value FROM ${t.meta}`)).rows).toEqual([{ value: '2' }]);
    const held = await client();
    await held.query('BEGIN');
    await held.query({ ...statements(schema, t).fenced, values: batchParams('u', lease.token, 'k', 'new member') });
    // An old member still running takes the name over as format 1 did.
    const oldTake = watch(
      query(
        db.url,
        `INSERT INTO ${t.leases} AS l (name, token, holder, locked, expires_at) VALUES ('u', 1, '{"old":true}', false, now())
         ON CONFLICT (name) DO UPDATE SET token = l.token + 1, holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at`,
      ),
    );
    await waitsForFence(() => oldTake.settled);
    await held.query('COMMIT');
    await oldTake.p;
    const { rows } = await query(db.url, `SELECT token FROM ${t.leases} WHERE name = 'u'`);
    expect(Number(rows[0].token)).toBe(lease.token + 1);
    await expect(
      a.write({ name: 'u', token: lease.token, seq: 2, writes: [{ key: 'k', value: Buffer.from('late') }] }),
    ).rejects.toMatchObject({ code: 'ERR_STORE_LOCKED' });
  });
});
