// SPDX-License-Identifier: MIT
// A durable step + COMMIT, one after another, beside the same store's one-row floor; WAL bytes a step.
//
// Rows of W14 (the directory store: dirRows) and W15 (PostgreSQL: pgRows).
//
// What a sequential durable step costs against what the store underneath
// can do at best, measured side by side in one run:
//
// - One durable task doing STEPS times `tasks.step(function() return js(i)
//   end)` then `coroutine.yield("COMMIT")`: every step durable before the
//   next. Timed from its resume (it first waits INDEFINITELY, so its start
//   is written before the clock starts) until its last COMMIT returned.
// - The floor of each store, in a child of its own the same way: the
//   directory store's SQLite doing one-row transactions (better-sqlite3,
//   journal_mode=WAL, synchronous=FULL, as the store opens its database, on
//   the same file system), and PostgreSQL doing autocommit upserts of one
//   row (node-pg, synchronous_commit on, a table shaped like the store's
//   keyed rows), each row a new key as a journal record is.
// - On PostgreSQL, the WAL written a step: pg_current_wal_lsn() before and
//   after, divided by the steps; beside it the same for the raw upsert.
//   The server is shared, so WAL of other sessions adds to both; the rows
//   give the median and the least of the reps.
//
// Each rep a child process (a directory or database of its own, made and
// removed here), round-robin across the implementations, the first round
// a warm-up. Sizes: FLOOR_STEPS, FLOOR_PG_STEPS, FLOOR_REPS.
'use strict';

const fs = require('fs');
const os = require('os');
const path = require('path');
const { fmt, nowMs, median, check, nodeChild, pgDatabase } = require('./harness');

const env = (name, def) => Number(process.env[name]) || def;
const STEPS = env('FLOOR_STEPS', 2000);
const PG_STEPS = env('FLOOR_PG_STEPS', 1000);
const REPS = env('FLOOR_REPS', 3);
const CHILD_TIMEOUT_MS = 300000;
const TARGET_FLOOR = 0.8; // of the store's one-row floor
const TARGET_WAL_X = 2; // WAL bytes a step ≤ 2× the raw upsert's
const VALUE = Buffer.alloc(24, 7); // about a step record's size

const LUA = `
function seq_commit(n)
  coroutine.yield("INDEFINITELY")
  local sum = 0
  for i = 1, n do
    sum = sum + tasks.step(function() return js(i) end)
    coroutine.yield("COMMIT")
  end
  finished()
  coroutine.yield("INDEFINITELY")
  return sum
end
`;

// ---------------------------------------------------------------- children

function printAndExit(obj) {
  fs.writeSync(1, `${JSON.stringify(obj)}\n`);
  process.exit(0);
}

async function query(url, text, params) {
  const { Client } = require('pg');
  const c = new Client({ connectionString: url });
  await c.connect();
  try {
    return await c.query(text, params);
  } finally {
    await c.end();
  }
}

const walLsn = async (url) => (await query(url, 'SELECT pg_current_wal_lsn()::text AS l')).rows[0].l;

// WAL bytes from LSN `a` to `b` ("16/B2D4E5F8" each).
function walBytes(a, b) {
  const n = (l) => {
    const [hi, lo] = l.split('/');
    return BigInt(`0x${hi}`) * 2n ** 32n + BigInt(`0x${lo}`);
  };
  return Number(n(b) - n(a));
}

async function waitFor(cond, what) {
  const until = nowMs() + 60000;
  while (!cond()) {
    if (nowMs() > until) throw new Error(`${what}: not done in time`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

// One durable task, `steps` steps each followed by a COMMIT; store: a directory or a PostgreSQL URL.
async function luaTasks(kind, where, steps) {
  const { Runtime, PostgresStore } = require('..');
  let calls = 0;
  let done = null;
  const finished = new Promise((resolve) => {
    done = resolve;
  });
  const setup = (rt) => {
    rt.set('js', (i) => {
      calls++;
      return i;
    });
    rt.set('finished', () => done(nowMs()));
    rt.load(LUA);
  };
  const store = kind === 'pg' ? new PostgresStore({ connectionString: where }) : where;
  try {
    const rt = await Runtime.open({ name: 'floor', store, setup });
    const task = rt.spawn('seq_commit', { durable: true, args: [steps] });
    const parked = () => (task.waiting || {}).instruction === 'INDEFINITELY';
    await waitFor(parked, 'the task parked before its steps');
    const lsn0 = kind === 'pg' ? await walLsn(where) : null;
    const t0 = nowMs();
    rt.resume(task.id);
    const t1 = await finished;
    await waitFor(parked, 'the task parked after its steps');
    const lsn1 = kind === 'pg' ? await walLsn(where) : null;
    rt.resume(task.id);
    check(`${kind}: the sum`, await task.result, (steps * (steps + 1)) / 2);
    check(`${kind}: JS calls`, calls, steps);
    await rt.close();
    return { steps, ms: t1 - t0, wal: lsn0 === null ? undefined : walBytes(lsn0, lsn1) };
  } finally {
    if (kind === 'pg') await store.close();
  }
}

// SQLite's floor: `n` transactions of `rows` upserted rows (one by
// default), as the directory store opens its database.
function sqliteFloor(dir, n, rows = 1) {
  const Database = require('better-sqlite3');
  fs.mkdirSync(dir, { recursive: true });
  const db = new Database(path.join(dir, 'floor.sqlite'));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.exec(`CREATE TABLE kv(name TEXT NOT NULL, space INTEGER NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL,
    PRIMARY KEY (name, space, key)) WITHOUT ROWID`);
  const put = db.prepare(
    `INSERT INTO kv(name, space, key, value) VALUES('floor', 2, ?, ?)
     ON CONFLICT(name, space, key) DO UPDATE SET value = excluded.value`,
  );
  const many = db.transaction((i) => {
    for (let r = 0; r < rows; r++) put.run(`${r}/${String(i).padStart(10, '0')}`, VALUE);
  });
  const t0 = nowMs();
  for (let i = 1; i <= n; i++) {
    if (rows === 1) put.run(`0/${String(i).padStart(10, '0')}`, VALUE);
    else many(i);
  }
  const ms = nowMs() - t0;
  check('sqlite: rows', db.prepare('SELECT count(*) AS c FROM kv').get().c, n * rows);
  db.close();
  return { steps: n * rows, ms };
}

// PostgreSQL's floor: `n` autocommit upserts of `rows` rows each (one by
// default; more as one statement, the rows as arrays: a loop turn's steps of
// many tasks are one transaction), in a table shaped like the store's keyed rows.
async function pgFloor(url, n, rows = 1) {
  const { Client } = require('pg');
  const c = new Client({ connectionString: url });
  await c.connect();
  try {
    await c.query(`CREATE TABLE kv(name text COLLATE "C", space integer, key text COLLATE "C", value bytea NOT NULL,
      PRIMARY KEY (name, space, key))`);
    await c.query('SET synchronous_commit = on');
    const conflict = 'ON CONFLICT (name, space, key) DO UPDATE SET value = EXCLUDED.value';
    const put =
      rows === 1
        ? { name: 'floor_put', text: `INSERT INTO kv(name, space, key, value) VALUES('floor', 2, $1, $2) ${conflict}` }
        : {
            name: 'floor_put_many',
            text: `INSERT INTO kv(name, space, key, value)
              SELECT 'floor', 2, k, v FROM unnest($1::text[], $2::bytea[]) AS u(k, v) ${conflict}`,
          };
    const keys = (i) => Array.from({ length: rows }, (_, r) => `${r}/${String(i).padStart(10, '0')}`);
    const values = rows === 1 ? VALUE : Array.from({ length: rows }, () => VALUE);
    const lsn0 = await walLsn(url);
    const t0 = nowMs();
    for (let i = 1; i <= n; i++) await c.query({ ...put, values: [rows === 1 ? keys(i)[0] : keys(i), values] });
    const ms = nowMs() - t0;
    const lsn1 = await walLsn(url);
    check('pg: rows', (await c.query('SELECT count(*)::int AS c FROM kv')).rows[0].c, n * rows);
    return { steps: n * rows, ms, wal: walBytes(lsn0, lsn1) };
  } finally {
    await c.end();
  }
}

async function child(argv) {
  const [what, where, n, rows] = argv;
  switch (what) {
    case 'dir':
    case 'pg':
      return luaTasks(what, where, Number(n));
    case 'sqlite':
      return sqliteFloor(where, Number(n), Number(rows || 1));
    case 'upsert':
      return pgFloor(where, Number(n));
    case 'upserts':
      return pgFloor(where, Number(n), Number(rows));
    default:
      throw new Error(`step_floor: unknown case ${what}`);
  }
}

// --------------------------------------------------------------- the parent

const IMPL = {
  dir: 'lua-tasks durable, tasks.step + COMMIT (directory store)',
  sqlite: 'SQLite one-row transaction (better-sqlite3, WAL, synchronous=FULL)',
  pg: 'lua-tasks durable, tasks.step + COMMIT (PostgresStore)',
  upsert: 'PostgreSQL autocommit upsert of one row (node-pg)',
};

// One rep of `impl` in a child: a directory under `root`, or a database of its own.
async function rep(impl, root, url, n) {
  if (impl === 'dir' || impl === 'sqlite') {
    const dir = fs.mkdtempSync(path.join(root, `${impl}-`));
    try {
      return nodeChild(__filename, [impl, dir, n], { timeoutMs: CHILD_TIMEOUT_MS });
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }
  const db = await pgDatabase(url, 'floor');
  try {
    return nodeChild(__filename, [impl, db.url, n], { timeoutMs: CHILD_TIMEOUT_MS });
  } finally {
    await db.drop();
  }
}

// Runs `impls` REPS + 1 times round-robin (the first round warms up): each one's reps.
async function reps(impls, url) {
  const got = new Map(impls.map((i) => [i, []]));
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'lua-tasks-step-floor-'));
  try {
    for (let r = 0; r < REPS + 1; r++) {
      for (const impl of impls) {
        const n = impl === 'pg' || impl === 'upsert' ? PG_STEPS : STEPS;
        const out = await rep(impl, root, url, n);
        if (r > 0) got.get(impl).push(out);
      }
    }
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
  return got;
}

// Our rate beside the floor's, rep by rep.
function pair(got, ours, floor, kase) {
  const rate = (impl) => got.get(impl).map((o) => o.steps / (o.ms / 1000));
  const v = median(rate(ours));
  const f = median(rate(floor));
  const ratios = rate(ours).map((x, i) => x / rate(floor)[i]);
  return [
    {
      case: kase,
      impl: IMPL[ours],
      value: v,
      min: Math.min(...rate(ours)),
      unit: 'steps/s',
      target: `≥ ${TARGET_FLOOR} of the floor`,
      ok: v / f >= TARGET_FLOOR,
      note: `${fmt(v / f, 2)} of the floor (rep by rep: ${ratios.map((x) => fmt(x, 2)).join(', ')})`,
    },
    {
      case: kase,
      impl: IMPL[floor],
      value: f,
      min: Math.min(...rate(floor)),
      unit: 'rows/s',
      ratio: f / v,
      note: 'the floor: one row, one durable transaction each',
    },
  ];
}

/** W14's rows: the directory store beside SQLite's floor. */
async function dirRows() {
  const got = await reps(['dir', 'sqlite'], '');
  return pair(got, 'dir', 'sqlite', `1 task × ${fmt(STEPS)} steps, each made durable before the next: directory store`);
}

const pgCase = () => `1 task × ${fmt(PG_STEPS)} steps, each made durable before the next: PostgreSQL`;
const walCase = 'WAL bytes a durable step on PostgreSQL (pg_current_wal_lsn() before and after ÷ steps)';

/** W15's rows: PostgresStore beside PostgreSQL's floor, and the WAL a step; `url` a role that may CREATEDB. */
async function pgRows(url) {
  const got = await reps(['pg', 'upsert'], url);
  const rows = pair(got, 'pg', 'upsert', pgCase());
  const wal = (impl) => got.get(impl).map((o) => o.wal / o.steps);
  const w = median(wal('pg'));
  const u = median(wal('upsert'));
  rows.push(
    {
      case: walCase,
      impl: IMPL.pg,
      value: w,
      min: Math.min(...wal('pg')),
      unit: 'bytes',
      target: `≤ ${TARGET_WAL_X}× the upsert's`,
      ok: w <= TARGET_WAL_X * u,
      note: `${fmt(w / u, 2)}× the upsert's; the server is shared: other sessions' WAL adds to both (min: the least of ${REPS} reps)`,
    },
    {
      case: walCase,
      impl: IMPL.upsert,
      value: u,
      min: Math.min(...wal('upsert')),
      unit: 'bytes',
      ratio: u / w,
      note: 'a new key a row, as a journal record is',
    },
  );
  return rows;
}

/** W15's rows without a server: each says why. */
function pgNotMeasured(why) {
  return [
    [pgCase(), 'pg', 'steps/s'],
    [pgCase(), 'upsert', 'rows/s'],
    [walCase, 'pg', 'bytes'],
    [walCase, 'upsert', 'bytes'],
  ].map(([kase, impl, unit]) => ({ case: kase, impl: IMPL[impl], value: NaN, unit, note: `NOT measured: ${why}` }));
}

/**
 * One rep of PostgreSQL's many-rows floor in a child on a database of its
 * own: `transactions` upserts of `rows` rows each.
 * @returns {Promise<number>} rows/s
 */
async function pgBatchRate(url, transactions, rows) {
  const db = await pgDatabase(url, 'floor');
  try {
    const o = nodeChild(__filename, ['upserts', db.url, transactions, rows], { timeoutMs: CHILD_TIMEOUT_MS });
    return o.steps / (o.ms / 1000);
  } finally {
    await db.drop();
  }
}

/**
 * One rep of SQLite's many-rows floor in a child, in a directory of its own
 * under `root`: `transactions` transactions of `rows` rows each.
 * @returns {number} rows/s
 */
function sqliteBatchRate(root, transactions, rows) {
  const dir = fs.mkdtempSync(path.join(root, 'sqlite-many-'));
  try {
    const o = nodeChild(__filename, ['sqlite', dir, transactions, rows], { timeoutMs: CHILD_TIMEOUT_MS });
    return o.steps / (o.ms / 1000);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

module.exports = { dirRows, pgRows, pgNotMeasured, pgBatchRate, sqliteBatchRate };

if (require.main === module) {
  child(process.argv.slice(2)).then(printAndExit, (e) => {
    console.error(e && e.stack ? e.stack : e);
    process.exit(1);
  });
}
