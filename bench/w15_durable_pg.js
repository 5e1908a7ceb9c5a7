// SPDX-License-Identifier: MIT
// W15: durable steps on PostgreSQL: lua-tasks on its PostgresStore beside DBOS, same server.
//
// The same durable work, a step = one call of a tiny JS function `js(i)`
// returning i, summed, on the PostgreSQL of LUA_TASKS_PG_URL, in one run:
//
// - lua-tasks durable tasks on PostgresStore, each step
//   `tasks.step(function() return js(i) end)` (as W14): the step records go
//   with the task's next write, every batch of a loop turn in one
//   transaction; timed until every result is in and the journal is written
//   (an awaited rt.commit()).
// - The same with `coroutine.yield("COMMIT")` after each step: each step is
//   durable before the next starts, the guarantee DBOS gives per step (the
//   COMMITs of one loop turn, from every task, still share one transaction).
// - DBOS (@dbos-inc/dbos-sdk): a workflow per task, each step
//   `DBOS.runStep(() => js(i))`, on a system database of its own on the same
//   server; timed until every workflow's result is in.
//
// Two cases: 100 tasks (workflows) at once × STEPS steps, and one task ×
// SEQ_STEPS steps (sequential). Each rep runs in a child process of its own
// on a database made for it (dropped after), round-robin across the
// implementations, the first round a warm-up. Every rep checks each sum and
// the JS call count; lua-tasks's store, reopened, holds every task as done
// with no call made again; DBOS's system tables hold every workflow as
// SUCCESS and every step's output. The target: lua-tasks ≥ 10×
// DBOS's durable steps/s, stated on the lua-tasks rows of each case.
// Beside them, PostgreSQL's floors: for the many-task case, upserts of
// TASKS rows a statement (a loop turn's steps of every task go in one
// transaction), a rep before each round; one task's step + COMMIT against
// autocommit upserts of one row, and the WAL bytes of each
// (bench/step_floor.js).
//
// Without LUA_TASKS_PG_URL (a role that may CREATEDB: scripts/pg.sh start
// prints one) the rows say so and carry no figures. Sizes can be made
// smaller or larger (W15_TASKS, W15_STEPS, W15_SEQ_STEPS, W15_REPS).
'use strict';

const fs = require('fs');
const { fmt, nowMs, median, check, nodeChild, pgDatabase } = require('./harness');
const stepFloor = require('./step_floor');

const env = (name, def) => Number(process.env[name]) || def;
const TASKS = env('W15_TASKS', 100);
const STEPS = env('W15_STEPS', 50);
const SEQ_STEPS = env('W15_SEQ_STEPS', 300);
const REPS = env('W15_REPS', 3);
const CHILD_TIMEOUT_MS = 300000;
const TARGET_X = 10; // ≥ 10× DBOS's durable steps/s

const IMPL = {
  step: 'lua-tasks durable, tasks.step (PostgresStore)',
  commit: 'lua-tasks durable, tasks.step + COMMIT each (PostgresStore)',
  dbos: 'DBOS (@dbos-inc/dbos-sdk), DBOS.runStep',
};

const LUA = `
function work(n)
  local sum = 0
  for i = 1, n do sum = sum + tasks.step(function() return js(i) end) end
  return sum
end
function work_commit(n)
  local sum = 0
  for i = 1, n do
    sum = sum + tasks.step(function() return js(i) end)
    coroutine.yield("COMMIT")
  end
  return sum
end
`;

// ---------------------------------------------------------------- children

function printAndExit(obj) {
  fs.writeSync(1, `${JSON.stringify(obj)}\n`);
  process.exit(0);
}

// One rep of lua-tasks: `tasks` durable tasks × `steps` steps on a PostgresStore of `url`.
async function luaTasks(mode, tasks, steps, url) {
  const { Runtime, PostgresStore } = require('..');
  const counter = { calls: 0 };
  const setup = (rt) => {
    rt.set('js', (i) => {
      counter.calls++;
      return i;
    });
    rt.load(LUA);
  };
  const store = new PostgresStore({ connectionString: url });
  try {
    const rt = await Runtime.open({ name: 'w15', store, setup });
    const tx0 = store.stats().transactions;
    const entry = mode === 'commit' ? 'work_commit' : 'work';
    const t0 = nowMs();
    const ids = [];
    const all = [];
    for (let t = 0; t < tasks; t++) {
      const task = rt.spawn(entry, { durable: true, args: [steps] });
      ids.push(task.id);
      all.push(task.result);
    }
    const sums = await Promise.all(all);
    await rt.commit(); // the last records are written
    const ms = nowMs() - t0;
    const transactions = store.stats().transactions - tx0;
    const want = (steps * (steps + 1)) / 2;
    for (const s of sums) check(`${mode}: a task's sum`, s, want);
    check(`${mode}: JS calls`, counter.calls, tasks * steps);
    await rt.close();
    // Reopened: every task is done (retained), none runs again.
    const again = await Runtime.open({ name: 'w15', store, setup });
    check(`${mode}: tasks left after reopen`, again.tasks().length, 0);
    for (const id of ids) check(`${mode}: ${id} after reopen`, (again.task(id) || {}).status, 'done');
    check(`${mode}: JS calls after reopen`, counter.calls, tasks * steps);
    await again.close();
    return { steps: tasks * steps, ms, transactions };
  } finally {
    await store.close();
  }
}

// One rep of DBOS: `tasks` workflows at once × `steps` steps, its system database at `url`.
async function dbos(tasks, steps, url) {
  const { DBOS } = require('@dbos-inc/dbos-sdk');
  let calls = 0;
  const js = async (i) => {
    calls++;
    return i;
  };
  const work = DBOS.registerWorkflow(
    async (n) => {
      let sum = 0;
      for (let i = 1; i <= n; i++) sum += await DBOS.runStep(() => js(i), { name: 'js' });
      return sum;
    },
    { name: 'work' },
  );
  DBOS.setConfig({ name: 'w15', systemDatabaseUrl: url, logLevel: 'error' });
  await DBOS.launch();
  try {
    const t0 = nowMs();
    const sums = await Promise.all(Array.from({ length: tasks }, () => work(steps)));
    const ms = nowMs() - t0;
    const want = (steps * (steps + 1)) / 2;
    for (const s of sums) check("dbos: a workflow's sum", s, want);
    check('dbos: JS calls', calls, tasks * steps);
    // What DBOS made durable: every workflow done, every step's output kept.
    const done = await query(
      url,
      `SELECT (SELECT count(*) FROM dbos.workflow_status WHERE status = 'SUCCESS')::int AS workflows,
              (SELECT count(*) FROM dbos.operation_outputs)::int AS outputs`,
    );
    check('dbos: workflows SUCCESS', done.rows[0].workflows, tasks);
    check('dbos: step outputs kept', done.rows[0].outputs, tasks * steps);
    return { steps: tasks * steps, ms };
  } finally {
    await DBOS.shutdown();
  }
}

async function child(argv) {
  const [what, tasks, steps, url] = argv;
  if (what === 'dbos') return dbos(Number(tasks), Number(steps), url);
  if (what === 'step' || what === 'commit') return luaTasks(what, Number(tasks), Number(steps), url);
  throw new Error(`w15: unknown case ${what}`);
}

// --------------------------------------------------------------- PostgreSQL

async function query(url, text) {
  const { Client } = require('pg');
  const c = new Client({ connectionString: url });
  await c.connect();
  try {
    return await c.query(text);
  } finally {
    await c.end();
  }
}

// --------------------------------------------------------------- the parent

const CASES = [
  { key: 'many', tasks: TASKS, steps: STEPS, what: `${fmt(TASKS)} tasks at once × ${fmt(STEPS)} steps` },
  { key: 'one', tasks: 1, steps: SEQ_STEPS, what: `1 task × ${fmt(SEQ_STEPS)} steps (sequential)` },
];
const IMPLS = ['step', 'commit', 'dbos'];

function kaseName(c) {
  return `${c.what}, a JS call each, on PostgreSQL: durable steps/s`;
}

function notes(impl, c, r, times) {
  const tx = r.transactions
    ? `; ${fmt(r.transactions)} transactions a rep, ${fmt(r.steps / r.transactions, r.steps / r.transactions < 10 ? 1 : 0)} steps each`
    : '';
  switch (impl) {
    case 'step':
      return `${times}; durable at each wait and at the end: a step's record goes with the task's next write (here its end), a loop turn's batches in one transaction${tx}; a crash may run the steps after the last durable point again`;
    case 'commit':
      return `${times}; coroutine.yield("COMMIT") after each step: every step durable before the next, the guarantee DBOS gives per step${tx}${c.tasks > 1 ? " (every task's COMMIT of a loop turn in one)" : ": a WAL flush a step, as DBOS's, bounds both"}`;
    default:
      return `${c.tasks > 1 ? `${fmt(c.tasks)} workflows called at once` : '1 workflow'}, each step's output written before the next step; its system database on the same server, a pool of 10 connections (its default; PostgresStore's too)`;
  }
}

function notMeasured(why) {
  const rows = [];
  for (const c of CASES) {
    for (const impl of IMPLS) {
      rows.push({
        case: kaseName(c),
        impl: IMPL[impl],
        value: NaN,
        unit: 'steps/s',
        ...(impl === 'dbos' ? {} : { target: `≥ ${TARGET_X}× DBOS`, ok: false }),
        note: `NOT measured: ${why}`,
      });
    }
  }
  return rows;
}

async function run() {
  const url = process.env.LUA_TASKS_PG_URL || '';
  if (!url) {
    const why = 'needs LUA_TASKS_PG_URL (a PostgreSQL role with CREATEDB; scripts/pg.sh start prints one)';
    return [...notMeasured(why), ...stepFloor.pgNotMeasured(why)];
  }
  if (!/^postgres(ql)?:\/\/\S+$/.test(url)) {
    throw new Error(`LUA_TASKS_PG_URL is not one postgres:// URL: ${JSON.stringify(url)}`);
  }

  const got = new Map(); // `${case}/${impl}` → [{ steps, ms, transactions? }]
  const floor = []; // rows/s of upserts of TASKS rows each: the many-task case's floor, a rep each
  for (let rep = 0; rep < REPS + 1; rep++) {
    const rate = await stepFloor.pgBatchRate(url, STEPS, TASKS);
    if (rep > 0) floor.push(rate);
    for (const c of CASES) {
      for (const impl of IMPLS) {
        const db = await pgDatabase(url, 'w15');
        let r;
        try {
          r = nodeChild(__filename, [impl, c.tasks, c.steps, db.url], { timeoutMs: CHILD_TIMEOUT_MS });
        } finally {
          await db.drop();
        }
        if (rep === 0) continue; // the first round warms up
        const k = `${c.key}/${impl}`;
        if (!got.has(k)) got.set(k, []);
        got.get(k).push(r);
      }
    }
  }

  // The many-task case beside its floor, as a fraction.
  const ofFloor = (c, impl, v) =>
    c.tasks > 1 && impl !== 'dbos'
      ? `; ${fmt(v / median(floor), 2)} of the floor of ${fmt(TASKS)}-row transactions`
      : '';
  const rows = [];
  for (const c of CASES) {
    const kase = kaseName(c);
    const rate = (impl) => got.get(`${c.key}/${impl}`).map((r) => r.steps / (r.ms / 1000));
    const dbosRate = median(rate('dbos'));
    const base = median(rate('commit'));
    for (const impl of IMPLS) {
      const xs = rate(impl);
      const v = median(xs);
      const reps = got.get(`${c.key}/${impl}`);
      const last = reps[reps.length - 1];
      rows.push({
        case: kase,
        impl: IMPL[impl],
        value: v,
        min: Math.min(...xs),
        unit: 'steps/s',
        ratio: v / base, // steps/s: above 1 is faster than lua-tasks with a COMMIT each step
        ...(impl === 'dbos'
          ? {}
          : { target: `≥ ${TARGET_X}× DBOS (${fmt(TARGET_X * dbosRate)}/s)`, ok: v >= TARGET_X * dbosRate }),
        note: notes(impl, c, last, `${fmt(v / dbosRate, 1)}× DBOS${ofFloor(c, impl, v)}`),
      });
    }
    if (c.tasks > 1) {
      rows.push({
        case: kase,
        impl: `PostgreSQL autocommit upserts of ${fmt(TASKS)} rows each (node-pg): the floor`,
        value: median(floor),
        min: Math.min(...floor),
        unit: 'rows/s',
        ratio: median(floor) / base,
        note: `${fmt(STEPS)} statements of ${fmt(TASKS)} rows (unnest), a rep before each round: what a loop turn's steps of ${fmt(TASKS)} tasks cost PostgreSQL at least`,
      });
    }
  }
  return [...rows, ...(await stepFloor.pgRows(url))];
}

module.exports = {
  id: 'w15',
  title: 'W15: durable steps on PostgreSQL: lua-tasks (PostgresStore) beside DBOS on the same server',
  run,
};

if (require.main === module) {
  child(process.argv.slice(2)).then(printAndExit, (e) => {
    console.error(e && e.stack ? e.stack : e);
    process.exit(1);
  });
}
