// SPDX-License-Identifier: MIT
// W13: keyed state: COMMITs per second and loop time per COMMIT, time to a first task, group commit.
//
// Three row groups, each case in a child process of its own (a filled store
// of a million records, and the loop measures, stay out of the bench's
// process and out of each other's):
//
// 1. 100,000 player records of ~150 B, 100 concurrent tasks, each COMMIT
//    changing one record (its score grows by one, so every write changes
//    the value: SQLite skips unchanged rows). COMMITs/s, and the loop's busy
//    time per COMMIT (performance.eventLoopUtilization: the time the loop
//    was not waiting for I/O, over the run, divided by the COMMITs) with the
//    worst stall (monitorEventLoopDelay's longest delay, less its 1 ms
//    resolution). For `tasks.store` on the directory store (the records are
//    keys), today's whole-snapshot `tasks.state` doing the same (the records
//    in one table; a few COMMITs, each rewrites the whole state), and
//    better-sqlite3 doing the same upserts from JS (WAL, synchronous=FULL,
//    one transaction per upsert: what a user would pick instead), and
//    `tasks.store` on the PostgresStore (a database of its own on the server
//    of LUA_TASKS_PG_URL, made and dropped by the run; without that variable
//    its rows say how to get it).
//    Each run checks its work: the store reopened, the scores of the
//    records it touched grew by exactly the number of COMMITs it counted.
// 2. Time from Runtime.open to a first task's result (it reads one record),
//    with 10,000 and with 1,000,000 records, filled once, untimed.
// 3. 1,000 tasks each setting a record and COMMITting at once: transactions
//    the store issued (its stats(), or the saves of a store without one),
//    wall time, p99 COMMIT latency.
//
// Row 1 alone, for a profiler (perf, node --cpu-prof): fill a directory once
// with `node bench/w13_store.js fill keyed DIR 100000`, then run
// `node bench/w13_store.js commits keyed DIR 100` (it prints the rep's JSON).
//
// The rows whose implementation is missing here (`tasks.store` before the
// store v2 lands, better-sqlite3 when `npm ci` did not install it) say so
// and keep their targets: a target not measured is a target not met.
'use strict';

const fs = require('fs');
const os = require('os');
const path = require('path');
const { performance, monitorEventLoopDelay } = require('perf_hooks');
const { fmt, nowMs, median, percentile, check, nodeChild, pgDatabase } = require('./harness');

const PLAYERS = 100000;
const TASKS = 100;
const PER_TASK = { keyed: 100, state: 1, sqlite: 10, pg: 100 }; // COMMITs per task and rep: 10,000, 100, 1,000, 10,000
// Reps of each implementation, round-robin. One of tasks.state: its 100
// COMMITs are 100 whole-state writes of ~200 ms each (a COMMIT holds the
// runtime while its snapshot is taken, so the tasks behind it cannot join it).
const REPS = { keyed: 3, state: 1, sqlite: 3, pg: 3 };
const OPEN_COUNTS = [10000, 1000000];
const OPEN_REPS = 5;
const GROUP_TASKS = 1000;
const ELD_RESOLUTION_MS = 1;
const CHILD_TIMEOUT_MS = 600000; // a fill of a million records on a loaded machine

const IMPL_NAME = {
  keyed: 'lua-tasks tasks.store',
  state: 'lua-tasks tasks.state (whole snapshot)',
  sqlite: 'better-sqlite3 from JS',
  pg: 'lua-tasks tasks.store on PostgresStore',
};

// Implementations of tasks.store: the directory store's and the PostgreSQL store's.
const isKeyed = (impl) => impl === 'keyed' || impl === 'pg';

// ---------------------------------------------------------------- the records

// One player record, ~150 B encoded; the same fields in Lua and in JS.
const LUA_RECORDS = `
  N = ...
  function key(i) return string.format("player:%07d", i) end
  function player(i)
    return { id = i, name = string.format("player%07d", i), score = i, level = i % 60 + 1, hp = 100,
             gold = i * 3, x = i * 0.5, y = i * -0.25, guild = "guild-" .. i % 97, tags = { "knight", "red" } }
  end
  -- Which record the j-th COMMIT of task t changes: spread over all of them.
  function pick(t, j) return (t * 7919 + j * 104729) % N + 1 end
  -- Sum over the distinct records that tasks 1..ntasks x 1..n touch of (score - id).
  function grown(ntasks, n, read)
    local seen, sum = {}, 0
    for t = 1, ntasks do
      for j = 1, n do
        local i = pick(t, j)
        if not seen[i] then
          seen[i] = true
          sum = sum + (read(i).score - i)
        end
      end
    end
    return sum
  end
`;

const jsKey = (i) => `player:${String(i).padStart(7, '0')}`;
const jsPlayer = (i) => ({
  id: i,
  name: `player${String(i).padStart(7, '0')}`,
  score: i,
  level: (i % 60) + 1,
  hp: 100,
  gold: i * 3,
  x: i * 0.5,
  y: i * -0.25,
  guild: `guild-${i % 97}`,
  tags: ['knight', 'red'],
});
const jsPick = (n, t, j) => ((t * 7919 + j * 104729) % n) + 1;

// ------------------------------------------------------------- availability

function luaTasks() {
  return require('..');
}

// Why `tasks.store` cannot run here, or null when it can.
function keyedMissing() {
  const { Runtime, DirectoryStore } = luaTasks();
  if (typeof DirectoryStore.prototype.write !== 'function' || typeof DirectoryStore.prototype.reader !== 'function') {
    return 'not measured: this build has no tasks.store (DirectoryStore has no write/reader)';
  }
  const rt = new Runtime();
  try {
    if (!['table', 'userdata'].includes(rt.load('return type(tasks.store)')[0])) {
      return 'not measured: this build has no tasks.store';
    }
  } finally {
    rt.closeSync();
  }
  return null;
}

function sqliteModule() {
  try {
    return require('better-sqlite3');
  } catch (e) {
    if (e && e.code === 'MODULE_NOT_FOUND') return null;
    throw e;
  }
}

// A store that counts the calls that reach it (saves of the v1 interface,
// writes of v2) and forwards everything else, showing the same interface.
function counted(inner) {
  const calls = { save: 0, write: 0 };
  const store = {
    acquire: (n) => inner.acquire(n),
    load: (n) => inner.load(n),
    save: (...a) => {
      calls.save++;
      return inner.save(...a);
    },
  };
  if (typeof inner.write === 'function') {
    store.write = (b) => {
      calls.write++;
      return inner.write(b);
    };
  }
  if (typeof inner.reader === 'function') store.reader = (n) => inner.reader(n);
  if (typeof inner.locate === 'function') store.locate = (n) => inner.locate(n);
  return { store, calls };
}

// The store's own count of transactions (the directory store v2's stats()), or undefined.
function transactions(store) {
  if (typeof store.stats !== 'function') return undefined;
  const s = store.stats();
  return s && typeof s.transactions === 'number' ? s.transactions : undefined;
}

// ------------------------------------------------------------ loop measures

/** Runs fn; returns { result, wallMs, loopMs (loop busy time), worstMs (longest stall) }. */
async function measured(fn) {
  const eld = monitorEventLoopDelay({ resolution: ELD_RESOLUTION_MS });
  eld.enable();
  const elu0 = performance.eventLoopUtilization();
  const t0 = nowMs();
  const result = await fn();
  const wallMs = nowMs() - t0;
  const elu = performance.eventLoopUtilization(elu0);
  eld.disable();
  const worstMs = Math.max(0, eld.max / 1e6 - ELD_RESOLUTION_MS);
  return { result, wallMs, loopMs: elu.active, worstMs };
}

// ---------------------------------------------------------- child: the cases

// `dir`: the directory of the store, or for 'pg' the database's URL.
async function openRuntime(impl, dir, count) {
  const { Runtime, DirectoryStore, PostgresStore } = luaTasks();
  const inner = impl === 'pg' ? new PostgresStore({ connectionString: dir }) : new DirectoryStore(dir);
  const { store, calls } = counted(inner);
  const rt = await Runtime.open({ name: 'players', store });
  rt.load(LUA_RECORDS, { name: 'records' });
  rt.load(`N = ${count}`);
  rt.load(
    isKeyed(impl)
      ? 'function read(i) return tasks.store.get(key(i)) end function write(i, p) tasks.store.set(key(i), p) end'
      : 'function read(i) return tasks.state.players[i] end function write(i, p) tasks.state.players[i] = p end',
  );
  return { rt, inner, calls };
}

async function fill(impl, dir, count) {
  if (impl !== 'pg') fs.mkdirSync(dir, { recursive: true });
  const t0 = nowMs();
  if (impl === 'sqlite') {
    const db = openSqlite(dir);
    const put = db.prepare('INSERT INTO players (key, value) VALUES (?, ?)');
    db.transaction(() => {
      for (let i = 1; i <= count; i++) put.run(jsKey(i), JSON.stringify(jsPlayer(i)));
    })();
    const bytes = db.prepare('SELECT avg(length(value)) AS b FROM players').get().b;
    db.close();
    return { ms: nowMs() - t0, recordBytes: bytes };
  }
  const { rt, inner } = await openRuntime(impl, dir, count);
  let recordBytes;
  if (isKeyed(impl)) {
    // 10,000 records a COMMIT: the dirty map stays small.
    rt.load(`function fill(n)
      for i = 1, n do
        tasks.store.set(key(i), player(i))
        if i % 10000 == 0 then coroutine.yield("COMMIT") end
      end
      coroutine.yield("COMMIT")
      return n
    end`);
    check('filled', await rt.call('fill', count), count);
    const got = inner.reader('players').get(jsKey(1));
    recordBytes = got ? got.length : undefined;
  } else {
    rt.load('local p = {} for i = 1, N do p[i] = player(i) end tasks.state.players = p');
    await rt.commit();
    const snap = await inner.load('players');
    recordBytes = snap ? snap.length / count : undefined;
  }
  await rt.close();
  return { ms: nowMs() - t0, recordBytes };
}

function openSqlite(dir) {
  const Database = sqliteModule();
  const db = new Database(path.join(dir, 'players.sqlite'));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.exec('CREATE TABLE IF NOT EXISTS players (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID');
  return db;
}

// What a rep of COMMITs measured: loop and wall time, latency percentiles, writes and transactions.
function measures(m, lats, writes, tx, tx0) {
  return {
    wallMs: m.wallMs,
    loopMs: m.loopMs,
    worstMs: m.worstMs,
    p50: percentile(lats, 50),
    p99: percentile(lats, 99),
    writes,
    transactions: tx === undefined ? undefined : tx - tx0,
  };
}

// One rep of row group 1: TASKS tasks x perTask COMMITs, each changing one record.
async function commits(impl, dir, perTask) {
  const total = TASKS * perTask;
  if (impl === 'sqlite') return sqliteCommits(dir, perTask);
  const { inner, calls, ...opened } = await openRuntime(impl, dir, PLAYERS);
  let { rt } = opened;
  const lats = [];
  rt.set('stamp', nowMs);
  rt.set('took', (t0) => {
    lats.push(nowMs() - t0);
  });
  rt.load(`function work(t, n)
    for j = 1, n do
      local i = pick(t, j)
      local p = read(i)
      p.score = p.score + 1
      write(i, p)
      local t0 = stamp()
      coroutine.yield("COMMIT")
      took(t0)
    end
    return n
  end`);
  const before = rt.load(`return grown(${TASKS}, ${perTask}, read)`)[0];
  const tx0 = transactions(inner);
  const writes0 = calls.write + calls.save;
  const m = await measured(() => {
    const all = [];
    for (let t = 1; t <= TASKS; t++) all.push(rt.start('work', t, perTask).result);
    return Promise.all(all);
  });
  const tx = transactions(inner);
  const writes = calls.write + calls.save - writes0;
  await rt.close();
  if (impl === 'pg') await inner.close();
  // The store reopened: every COMMIT counted is there, once.
  ({ rt } = await openRuntime(impl, dir, PLAYERS));
  const after = rt.load(`return grown(${TASKS}, ${perTask}, read)`)[0];
  await rt.close();
  check(`${impl}: scores grown after reopen`, after - before, total);
  check(`${impl}: COMMITs timed`, lats.length, total);
  return { commits: total, ...measures(m, lats, writes, tx, tx0) };
}

// What grown() computes in Lua, over the SQLite table.
function sqliteGrown(db, perTask) {
  const get = db.prepare('SELECT value FROM players WHERE key = ?');
  const seen = new Set();
  let sum = 0;
  for (let t = 1; t <= TASKS; t++) {
    for (let j = 1; j <= perTask; j++) {
      const i = jsPick(PLAYERS, t, j);
      if (!seen.has(i)) {
        seen.add(i);
        sum += JSON.parse(get.get(jsKey(i)).value).score - i;
      }
    }
  }
  return sum;
}

async function sqliteCommits(dir, perTask) {
  const db = openSqlite(dir);
  const get = db.prepare('SELECT value FROM players WHERE key = ?');
  const put = db.prepare(
    'INSERT INTO players (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value',
  );
  // One transaction per change: read, change, upsert, COMMIT (fsync).
  const change = db.transaction((k) => {
    const p = JSON.parse(get.get(k).value);
    p.score += 1;
    put.run(k, JSON.stringify(p));
  });
  const before = sqliteGrown(db, perTask);
  const lats = [];
  const task = async (t) => {
    for (let j = 1; j <= perTask; j++) {
      await new Promise(setImmediate); // the tasks take turns, as concurrent requests would
      const t0 = nowMs();
      change(jsKey(jsPick(PLAYERS, t, j)));
      lats.push(nowMs() - t0);
    }
  };
  const m = await measured(() => {
    const all = [];
    for (let t = 1; t <= TASKS; t++) all.push(task(t));
    return Promise.all(all);
  });
  db.close();
  const again = openSqlite(dir);
  const after = sqliteGrown(again, perTask);
  again.close();
  check('sqlite: scores grown after reopen', after - before, TASKS * perTask);
  return {
    commits: TASKS * perTask,
    wallMs: m.wallMs,
    loopMs: m.loopMs,
    worstMs: m.worstMs,
    p50: percentile(lats, 50),
    p99: percentile(lats, 99),
    writes: TASKS * perTask,
    transactions: TASKS * perTask,
  };
}

// Row group 2: Runtime.open to a first task's result, the record counts round-robin.
async function openTimes(impl, dirs) {
  const { Runtime } = luaTasks();
  const read = impl === 'keyed' ? 'tasks.store.get(k)' : 'tasks.state.players[i]';
  const once = async (dir, count) => {
    const i = 1 + Math.floor(Math.random() * count);
    const t0 = nowMs();
    const rt = await Runtime.open({ name: 'players', store: dir });
    rt.load(`function first(i, k) return ${read}.name end`);
    const name = await rt.call('first', i, jsKey(i));
    const ms = nowMs() - t0;
    await rt.close();
    check('first task read', name, jsPlayer(i).name);
    return ms;
  };
  const samples = dirs.map(() => []);
  for (let r = 0; r < OPEN_REPS + 1; r++) {
    for (let d = 0; d < dirs.length; d++) {
      const ms = await once(dirs[d], OPEN_COUNTS[d]);
      if (r > 0) samples[d].push(ms); // the first round warms up
    }
  }
  return { ms: samples.map(median), min: samples.map((s) => Math.min(...s)) };
}

// Row group 3: GROUP_TASKS tasks each set a record and COMMIT, all at once.
async function group(impl, dir) {
  const { Runtime, DirectoryStore } = luaTasks();
  fs.mkdirSync(dir, { recursive: true });
  const inner = new DirectoryStore(dir);
  const { store, calls } = counted(inner);
  const rt = await Runtime.open({ name: 'group', store });
  const lats = [];
  rt.set('stamp', nowMs);
  rt.set('took', (t0) => {
    lats.push(nowMs() - t0);
  });
  rt.load(
    impl === 'keyed'
      ? 'function write(t, v) tasks.store.set(string.format("g:%05d", t), v) end'
      : 'tasks.state.g = {} function write(t, v) tasks.state.g[t] = v end',
  );
  if (impl === 'state') await rt.commit(); // the table exists durably: the COMMITs below change it
  rt.load(`function one(t)
    write(t, { t = t, at = stamp() })
    local t0 = stamp()
    coroutine.yield("COMMIT")
    took(t0)
    return t
  end`);
  const tx0 = transactions(inner);
  const writes0 = calls.write + calls.save;
  const m = await measured(() => {
    const all = [];
    for (let t = 1; t <= GROUP_TASKS; t++) all.push(rt.start('one', t).result);
    return Promise.all(all);
  });
  const tx = transactions(inner);
  const writes = calls.write + calls.save - writes0;
  await rt.close();
  check(`${impl}: group COMMITs timed`, lats.length, GROUP_TASKS);
  return measures(m, lats, writes, tx, tx0);
}

async function child(argv) {
  const [what, impl, ...rest] = argv;
  if (isKeyed(impl)) {
    const why = keyedMissing();
    if (why) return { missing: why };
  }
  if (impl === 'pg' && !rest[0]) {
    return { missing: 'not measured: LUA_TASKS_PG_URL is not set (export LUA_TASKS_PG_URL=$(scripts/pg.sh start))' };
  }
  if (impl === 'sqlite' && !sqliteModule()) {
    return { missing: 'not measured: better-sqlite3 is not installed (a devDependency: npm ci installs it)' };
  }
  switch (what) {
    case 'fill':
      return fill(impl, rest[0], Number(rest[1]));
    case 'commits':
      return commits(impl, rest[0], Number(rest[1]));
    case 'open':
      return openTimes(impl, rest);
    case 'group':
      return group(impl, rest[0]);
    default:
      throw new Error(`w13: unknown case ${what}`);
  }
}

// ------------------------------------------------------------- the parent

const runChild = (...args) => nodeChild(__filename, args, { timeoutMs: CHILD_TIMEOUT_MS });

// Milliseconds with the digits that matter, as index.js prints its columns.
const msText = (v) => fmt(v, v >= 100 ? 0 : v >= 10 ? 1 : 2);

function missingRows(cases, impl, note) {
  return cases.map(([c, unit, target]) => ({
    case: c,
    impl,
    value: NaN,
    unit,
    note,
    ...(target ? { target, ok: false } : {}),
  }));
}

// A database of the run's own on the server of LUA_TASKS_PG_URL, or null without that variable.
function runDatabase() {
  const url = process.env.LUA_TASKS_PG_URL;
  return url ? pgDatabase(url, 'w13') : null;
}

async function throughputRows(root) {
  const impls = ['keyed', 'state', 'sqlite', 'pg'];
  const rows = [];
  const missing = new Map();
  const fills = new Map();
  const db = await runDatabase();
  try {
    return await throughputOn(root, impls, rows, missing, fills, db);
  } finally {
    if (db) await db.drop();
  }
}

async function throughputOn(root, impls, rows, missing, fills, db) {
  // Where each implementation keeps its records ('' for pg: not measured).
  const where = (impl) => (impl === 'pg' ? (db ? db.url : '') : path.join(root, `tp-${impl}`));
  for (const impl of impls) {
    const r = runChild('fill', impl, where(impl), PLAYERS);
    if (r.missing) missing.set(impl, r.missing);
    else fills.set(impl, r);
  }
  const reps = new Map(impls.map((i) => [i, []]));
  for (let rep = 0; rep < Math.max(...Object.values(REPS)); rep++) {
    for (const impl of impls) {
      if (!missing.has(impl) && rep < REPS[impl]) {
        reps.get(impl).push(runChild('commits', impl, where(impl), PER_TASK[impl]));
      }
    }
  }
  const tpCase = `${fmt(PLAYERS)} records, 1 changed per COMMIT, ${TASKS} concurrent tasks: COMMITs/s`;
  const loopCase = `${fmt(PLAYERS)} records, 1 changed per COMMIT: loop time per COMMIT`;
  const stallCase = `${fmt(PLAYERS)} records, 1 changed per COMMIT: worst loop stall`;
  let keyedLoop;
  for (const impl of impls) {
    const name = IMPL_NAME[impl];
    const keyed = impl === 'keyed';
    if (missing.has(impl)) {
      rows.push(
        ...missingRows(
          [
            [tpCase, 'COMMITs/s', keyed && '≥ 20,000/s'],
            [loopCase, 'ms', keyed && '≤ 1 ms'],
            [stallCase, 'ms', keyed && '≤ 10 ms'],
          ],
          name,
          missing.get(impl),
        ),
      );
      continue;
    }
    const rs = reps.get(impl);
    const rate = rs.map((r) => r.commits / (r.wallMs / 1000));
    const loop = rs.map((r) => r.loopMs / r.commits);
    const worst = rs.map((r) => r.worstMs);
    const f = fills.get(impl);
    const mid = rs[rs.length >> 1];
    const rateV = median(rate);
    const loopV = median(loop);
    if (keyed) keyedLoop = loopV;
    const size = f.recordBytes ? `~${fmt(f.recordBytes)} B a record` : '';
    const how = {
      keyed: `${mid.commits} COMMITs a rep; ${mid.transactions === undefined ? `${mid.writes} store writes` : `${mid.transactions} transactions`}`,
      pg: `${mid.commits} COMMITs a rep; ${mid.transactions} transactions (synchronous_commit on, PostgreSQL 15 on this machine, loopback)`,
      state: `${mid.commits} COMMITs a rep; ${mid.writes} whole-state writes`,
      sqlite: `${mid.commits} upserts a rep, each its own transaction; WAL, synchronous=FULL`,
    }[impl];
    rows.push({
      case: tpCase,
      impl: name,
      value: rateV,
      min: Math.min(...rate),
      unit: 'COMMITs/s',
      ...(keyed ? { target: '≥ 20,000/s', ok: rateV >= 20000 } : {}),
      note: `${how}; p50 ${msText(mid.p50)} ms, p99 ${msText(mid.p99)} ms a COMMIT${size ? `; ${size}` : ''}`,
    });
    rows.push({
      case: loopCase,
      impl: name,
      value: loopV,
      min: Math.min(...loop),
      unit: 'ms',
      ...(keyed ? { target: '≤ 1 ms', ok: loopV <= 1 } : {}),
      note: 'event-loop busy time (eventLoopUtilization) over the run ÷ COMMITs',
    });
    rows.push({
      case: stallCase,
      impl: name,
      value: median(worst),
      min: Math.min(...worst),
      unit: 'ms',
      ...(keyed ? { target: '≤ 10 ms', ok: median(worst) <= 10 } : {}),
      note: `longest monitorEventLoopDelay delay less its ${ELD_RESOLUTION_MS} ms resolution`,
    });
  }
  if (keyedLoop !== undefined) {
    for (const r of rows) if (r.case === loopCase && Number.isFinite(r.value)) r.ratio = r.value / keyedLoop;
  }
  return rows;
}

async function openRows(root) {
  const rows = [];
  for (const impl of ['keyed', 'state']) {
    const dirs = OPEN_COUNTS.map((n) => path.join(root, `open-${impl}-${n}`));
    let missing = null;
    const fillMs = [];
    for (let d = 0; d < dirs.length && !missing; d++) {
      const r = runChild('fill', impl, dirs[d], OPEN_COUNTS[d]);
      if (r.missing) missing = r.missing;
      else fillMs.push(r.ms);
    }
    const cases = OPEN_COUNTS.map((n) => `Runtime.open to a first task's result, ${fmt(n)} records`);
    if (missing) {
      rows.push(
        ...missingRows(
          cases.map((c, d) => [c, 'ms', impl === 'keyed' && d > 0 && '≤ 2× the 10,000-record time']),
          IMPL_NAME[impl],
          missing,
        ),
      );
      continue;
    }
    const r = runChild('open', impl, ...dirs);
    OPEN_COUNTS.forEach((n, d) => {
      const target =
        impl === 'keyed' && d > 0 ? { target: '≤ 2× the 10,000-record time', ok: r.ms[d] <= 2 * r.ms[0] } : {};
      rows.push({
        case: cases[d],
        impl: IMPL_NAME[impl],
        value: r.ms[d],
        min: r.min[d],
        unit: 'ms',
        ...target,
        note: `the task reads one record; filled once in ${fmt(fillMs[d] / 1000, 1)} s, untimed`,
      });
    });
    // the state rows compared with the keyed ones of the same count
  }
  for (const r of rows) {
    const k = rows.find((x) => x.case === r.case && x.impl === IMPL_NAME.keyed);
    if (k && Number.isFinite(k.value) && Number.isFinite(r.value)) r.ratio = r.value / k.value;
  }
  return rows;
}

async function groupRows(root) {
  const rows = [];
  const cases = [
    [`${fmt(GROUP_TASKS)} tasks COMMITting at once: transactions issued`, 'count'],
    [`${fmt(GROUP_TASKS)} tasks COMMITting at once: wall time`, 'ms'],
    [`${fmt(GROUP_TASKS)} tasks COMMITting at once: p99 COMMIT latency`, 'ms'],
  ];
  for (const impl of ['keyed', 'state']) {
    const r = runChild('group', impl, path.join(root, `group-${impl}`));
    if (r.missing) {
      rows.push(...missingRows(cases, IMPL_NAME[impl], r.missing));
      continue;
    }
    const tx = r.transactions === undefined ? r.writes : r.transactions;
    const txNote =
      r.transactions === undefined
        ? `the store has no stats(): ${r.writes} saves (each a temp file, its fsync, a rename and the directory's fsync)`
        : `the store's stats().transactions (one fsync each); ${r.writes} batches handed to it`;
    rows.push({ case: cases[0][0], impl: IMPL_NAME[impl], value: tx, unit: 'count', note: txNote });
    rows.push({
      case: cases[1][0],
      impl: IMPL_NAME[impl],
      value: r.wallMs,
      unit: 'ms',
      note: `loop busy ${fmt(r.loopMs)} ms, worst stall ${msText(r.worstMs)} ms`,
    });
    rows.push({ case: cases[2][0], impl: IMPL_NAME[impl], value: r.p99, unit: 'ms', note: `p50 ${msText(r.p50)} ms` });
  }
  for (const r of rows) {
    const k = rows.find((x) => x.case === r.case && x.impl === IMPL_NAME.keyed);
    if (r.unit === 'ms' && k && Number.isFinite(k.value) && Number.isFinite(r.value)) r.ratio = r.value / k.value;
  }
  return rows;
}

async function run() {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'lua-tasks-w13-'));
  try {
    return [...(await throughputRows(root)), ...(await openRows(root)), ...(await groupRows(root))];
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
}

module.exports = {
  id: 'w13',
  title: 'W13: keyed state (tasks.store): COMMITs/s and loop time, time to a first task, group commit',
  run,
};

if (require.main === module) {
  child(process.argv.slice(2)).then(
    (r) => {
      console.log(JSON.stringify(r));
      process.exit(0);
    },
    (e) => {
      console.error(e && e.stack ? e.stack : e);
      process.exit(1);
    },
  );
}
