// SPDX-License-Identifier: MIT
// W14: durable tasks: durable steps per second, 100,000 durable sleeps, recovery at Runtime.open.
//
// Three row groups, each run in child processes of their own (a store
// directory each, made and removed here), side by side in one run:
//
// 1. Step throughput: 100 tasks x 1,000 steps, each step a JS function
//    called from the task's Lua code, on the directory store: durable steps
//    a second, from the first spawn until every result is in and the last
//    journal records are written (an awaited rt.commit()). Two spellings:
//    the JS call made directly (journaled as a JS call) and wrapped in
//    `tasks.step(function() return js(i) end)`; beside them the same tasks
//    ephemeral (no store, no journal). Every rep checks each task's sum and
//    the JS call count, and the store, reopened, holds every task as done.
//    DBOS runs beside lua-tasks in W15, both on PostgreSQL.
// 2. Sleeps: 100,000 durable tasks each `FOR` a random 0-5 s (the same
//    seeded durations as W7), spawned from JS in chunks of 1,000 with a loop
//    turn between: start time (the spawns, and until every wait is written),
//    memory (rt.stats().memoryUsed and RSS, after every wait is written, ÷
//    tasks) and wake lateness (the yield's elapsed − requested) p99; beside
//    them the same tasks ephemeral.
//    Wakes (issue 34's row): 100,000 durable tasks all started and written
//    (rt.commit()) before the first is due, then all due within one second
//    (each FOR the time to a due instant W14_WAKE_LEAD_MS after the first
//    spawn plus a seeded random 0-1 s): wake lateness p50/p99, and the
//    loop's busy time (eventLoopUtilization) and the loop thread's CPU
//    (/proc/self/task) over the wake second, from just before the first is
//    due until every task has ended and its records are written, ÷ wakes.
//    A collection runs before that second: the sleepers stand for tasks
//    started long ago. The same tasks ephemeral beside them.
// 3. Recovery: 100,000 durable tasks waiting INDEFINITELY after 8 steps
//    each (10 journal records a task, counted in the store), and one task
//    waiting after a loop of 100,000 steps (a 100,002-record journal): time from Runtime.open until it
//    returns, lazily (each task stays dormant in the store, known by its
//    index entry) and with durableRestore: 'all' (every unfinished task has
//    replayed its journal and stands at its wait before open resolves),
//    checked by the count of tasks waiting and a task's place; and the RSS
//    each task adds.
// 4. One task's step + COMMIT after step + COMMIT beside SQLite's one-row
//    floor (bench/step_floor.js).
//
// Sizes can be made smaller for a quick look (W14_STEP_TASKS, W14_STEPS,
// W14_SLEEPERS, W14_RECOVER_TASKS, W14_LONG_STEPS); the results files come
// only from the full sizes.
'use strict';

const fs = require('fs');
const os = require('os');
const path = require('path');
const { fmt, nowMs, median, check, nodeChild, warmMemory } = require('./harness');
const stepFloor = require('./step_floor');

const env = (name, def) => Number(process.env[name]) || def;
const STEP_TASKS = env('W14_STEP_TASKS', 100);
const STEPS = env('W14_STEPS', 1000);
const STEP_REPS = 3;
const SLEEPERS = env('W14_SLEEPERS', 100000);
const MAX_MS = 5000;
const WAKE_SPREAD_MS = 1000;
const WAKE_LEAD_MS = env('W14_WAKE_LEAD_MS', 10000); // room for 100,000 durable spawns and their writes
const SEED = 0x2545f491;
const CHUNK = 1000;
const RECOVER_TASKS = env('W14_RECOVER_TASKS', 100000);
const RECOVER_STEPS = 8; // + its start record and its wait's: 10 records a task
const LONG_STEPS = env('W14_LONG_STEPS', 100000); // one record a step: a 100,002-record journal
const OPEN_REPS = 3;
const CHILD_TIMEOUT_MS = 600000;

const TARGETS = { stepsPerS: 100000, recoverMs: 300, wakeP99Ms: 50, wakeLoopUs: 5 };

const IMPL = {
  js: 'lua-tasks durable, JS call',
  step: 'lua-tasks durable, tasks.step',
  ephemeral: 'lua-tasks ephemeral',
};

const LUA = `
function work(n)
  local sum = 0
  for i = 1, n do sum = sum + js(i) end
  return sum
end
function work_step(n)
  local sum = 0
  for i = 1, n do sum = sum + tasks.step(function() return js(i) end) end
  return sum
end
late, woke = {}, 0
function sleeper(i, r)
  local why, el = coroutine.yield("FOR", r)
  if why == "SCHEDULER" then late[#late + 1] = (el - r) * 1e3 else late[#late + 1] = 1e9 end
  woke = woke + 1
end
function summary()
  table.sort(late)
  local n = #late
  local function at(p) return late[math.max(1, math.ceil(p * n))] end
  return { p50 = at(0.5), p99 = at(0.99), max = late[n], min = late[1], n = n }
end
function parked(n)
  local sum = 0
  for i = 1, n do sum = sum + tasks.step(function() return js(i) end) end
  local got = coroutine.yield("INDEFINITELY")
  return sum + (got or 0)
end
`;

// ---------------------------------------------------------------- children

function luaTasks() {
  return require('..');
}

// The runtime a child works with: on the directory store `dir`, or without a store.
async function openRt(dir, counter, durableRestore = 'lazy') {
  const { Runtime } = luaTasks();
  const setup = (rt) => {
    rt.set('js', (i) => {
      counter.calls++;
      return i;
    });
    rt.load(LUA);
  };
  if (!dir) {
    const rt = new Runtime();
    setup(rt);
    return rt;
  }
  return Runtime.open({ name: 'w14', store: dir, setup, durableRestore });
}

function printAndExit(obj) {
  fs.writeSync(1, `${JSON.stringify(obj)}\n`);
  process.exit(0);
}

// Row group 1: one rep. impl: js | step | ephemeral.
async function steps(impl, dir) {
  const counter = { calls: 0 };
  const durable = impl !== 'ephemeral';
  const rt = await openRt(durable ? dir : null, counter);
  const entry = impl === 'step' ? 'work_step' : 'work';
  const t0 = nowMs();
  const all = [];
  const ids = [];
  for (let t = 0; t < STEP_TASKS; t++) {
    const task = rt.spawn(entry, durable ? { durable: true, args: [STEPS] } : { args: [STEPS] });
    ids.push(task.id);
    all.push(task.result);
  }
  const sums = await Promise.all(all);
  if (durable) await rt.commit(); // the last records are written
  const ms = nowMs() - t0;
  const want = (STEPS * (STEPS + 1)) / 2;
  for (const s of sums) check(`${impl}: a task's sum`, s, want);
  check(`${impl}: JS calls`, counter.calls, STEP_TASKS * STEPS);
  await rt.close();
  if (durable) {
    // Reopened: every task is done (retained), none runs again.
    const again = await openRt(dir, counter);
    check(`${impl}: tasks left after reopen`, again.tasks().length, 0);
    for (const id of ids) check(`${impl}: ${id} after reopen`, (again.task(id) || {}).status, 'done');
    check(`${impl}: JS calls after reopen`, counter.calls, STEP_TASKS * STEPS);
    await again.close();
  }
  return { steps: STEP_TASKS * STEPS, ms };
}

function xorshiftDurations(n, max = MAX_MS) {
  const out = new Uint16Array(n);
  let x = SEED;
  for (let i = 0; i < n; i++) {
    x = (x ^ (x << 13)) >>> 0;
    x = (x ^ (x >>> 17)) >>> 0;
    x = (x ^ (x << 5)) >>> 0;
    out[i] = x % (max + 1);
  }
  return out;
}

function rssNow() {
  global.gc();
  return process.memoryUsage().rss;
}

async function waitFor(cond, limitMs, what) {
  const until = nowMs() + limitMs;
  while (!cond()) {
    if (nowMs() > until) throw new Error(`${what}: not done in time`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

// Row group 2. impl: durable | ephemeral.
async function sleeps(impl, dir) {
  const durable = impl === 'durable';
  const counter = { calls: 0 };
  const rt = await openRt(durable ? dir : null, counter);
  const ms = xorshiftDurations(SLEEPERS);
  const mem0 = rt.stats().memoryUsed;
  const rss0 = rssNow();
  const t0 = nowMs();
  for (let i = 0; i < SLEEPERS; i++) {
    const args = [i + 1, ms[i] / 1e3];
    rt.spawn('sleeper', durable ? { durable: true, args } : { args });
    if ((i + 1) % CHUNK === 0) await new Promise(setImmediate);
  }
  const spawnMs = nowMs() - t0;
  if (durable) await rt.commit(); // every wait written
  const startMs = nowMs() - t0;
  const memoryUsed = rt.stats().memoryUsed - mem0;
  const rss = process.memoryUsage().rss - rss0;
  await waitFor(() => rt.get('woke') === SLEEPERS, MAX_MS + 60000, `${impl}: wakes`);
  const s = rt.load('return summary()')[0];
  check(`${impl}: tasks left`, rt.stats().tasks, 0);
  await rt.close();
  return { spawnMs, startMs, memPerTask: memoryUsed / SLEEPERS, rssPerTask: rss / SLEEPERS, ...s };
}

// CPU seconds of the loop thread (its tid is the pid) and of all others, from /proc.
function threadCpu() {
  let loop = 0;
  let others = 0;
  for (const t of fs.readdirSync('/proc/self/task')) {
    let s;
    try {
      s = fs.readFileSync(`/proc/self/task/${t}/stat`, 'utf8');
    } catch {
      continue; // the thread ended
    }
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(f[11]) + Number(f[12]); // utime + stime
    if (Number(t) === process.pid) loop += ticks;
    else others += ticks;
  }
  return { loop: loop / 100, others: others / 100 }; // USER_HZ is 100 on Linux
}

// Row group 2, wakes. impl: durable | ephemeral.
async function wakes(impl, dir) {
  const { performance } = require('perf_hooks');
  const durable = impl === 'durable';
  const counter = { calls: 0 };
  const rt = await openRt(durable ? dir : null, counter);
  const spread = xorshiftDurations(SLEEPERS, WAKE_SPREAD_MS);
  const t0 = nowMs();
  const due0 = t0 + WAKE_LEAD_MS;
  for (let i = 0; i < SLEEPERS; i++) {
    const args = [i + 1, (due0 + spread[i] - nowMs()) / 1e3];
    rt.spawn('sleeper', durable ? { durable: true, args } : { args });
    if ((i + 1) % CHUNK === 0) await new Promise(setImmediate);
  }
  if (durable) await rt.commit(); // every wait written
  const startMs = nowMs() - t0;
  if (nowMs() > due0 - 200) {
    throw new Error(`${impl}: the start took ${fmt(startMs)} ms, past the first due time; raise W14_WAKE_LEAD_MS`);
  }
  global.gc();
  await new Promise((r) => setTimeout(r, due0 - 20 - nowMs()));
  const elu0 = performance.eventLoopUtilization();
  const cpu0 = threadCpu();
  const w0 = nowMs();
  await waitFor(() => rt.get('woke') === SLEEPERS, WAKE_SPREAD_MS + 60000, `${impl}: wakes`);
  if (durable) await rt.commit(); // every end written
  const wallMs = nowMs() - w0;
  const elu = performance.eventLoopUtilization(elu0);
  const cpu = threadCpu();
  const s = rt.load('return summary()')[0];
  check(`${impl}: tasks left`, rt.stats().tasks, 0);
  await rt.close();
  const us = (v) => (v * 1e6) / SLEEPERS;
  return {
    startMs,
    wallMs,
    loopUs: (elu.active * 1e3) / SLEEPERS,
    loopCpuUs: us(cpu.loop - cpu0.loop),
    otherCpuUs: us(cpu.others - cpu0.others),
    ...s,
  };
}

// Row group 3: fills `dir` with `tasks` durable tasks parked after `n` steps each; counts their records.
async function recoverFill(dir, tasks, n) {
  const counter = { calls: 0 };
  const t0 = nowMs();
  const rt = await openRt(dir, counter);
  const ids = [];
  for (let t = 0; t < tasks; t++) {
    ids.push(rt.spawn('parked', { durable: true, args: [n] }).id);
    if ((t + 1) % CHUNK === 0) await new Promise(setImmediate);
  }
  await rt.commit();
  await waitFor(
    () => rt.task(ids[ids.length - 1]).waiting.instruction === 'INDEFINITELY',
    120000,
    'fill: the last task parked',
  );
  check('fill: tasks parked', rt.tasks().length, tasks);
  check('fill: JS calls', counter.calls, tasks * n);
  await rt.close();
  const { DirectoryStore } = luaTasks();
  const store = new DirectoryStore(dir);
  const reader = store.reader('w14');
  let records = 0;
  for (let after = ''; ;) {
    const keys = reader.keys('', after, 10000, 2);
    if (!keys || keys.length === 0) break;
    records += keys.length;
    after = keys[keys.length - 1];
  }
  if (typeof store.close === 'function') await store.close();
  return { ms: nowMs() - t0, records, ids: [ids[0], ids[ids.length - 1]] };
}

// Row group 3: Runtime.open of a filled store, OPEN_REPS times: lazily
// (the tasks stay dormant in the store: docs/durable.md#restore-at-open) or
// replaying every one ('all'). RSS: the process's growth over the first
// open, ÷ tasks.
async function recoverOpen(dir, tasks, n, id, restore) {
  const counter = { calls: 0 };
  const times = [];
  let rss = 0;
  for (let r = 0; r < OPEN_REPS; r++) {
    global.gc();
    const before = process.memoryUsage().rss;
    const t0 = nowMs();
    const rt = await openRt(dir, counter, restore);
    times.push(nowMs() - t0);
    if (r === 0) rss = (process.memoryUsage().rss - before) / tasks;
    check('open: tasks restored', rt.tasks().length, tasks);
    const t = rt.task(id);
    check('open: a restored task waits', t && t.waiting && t.waiting.instruction, 'INDEFINITELY');
    check('open: JS calls made by a replay', counter.calls, 0);
    const { tasks: live, dormantTasks } = rt.stats();
    check('open: every task replayed or dormant', live + dormantTasks, tasks);
    check(`open: tasks replayed (${restore})`, live, restore === 'all' ? tasks : 0);
    await rt.close();
  }
  return { ms: median(times), min: Math.min(...times), times, steps: n, rss };
}

async function child(argv) {
  const [what, impl, dir, ...rest] = argv;
  switch (what) {
    case 'steps':
      return steps(impl, dir);
    case 'sleeps':
      return sleeps(impl, dir);
    case 'wakes':
      return wakes(impl, dir);
    case 'fill':
      return recoverFill(dir, Number(rest[0]), Number(rest[1]));
    case 'open':
      return recoverOpen(dir, Number(rest[0]), Number(rest[1]), rest[2], rest[3]);
    default:
      throw new Error(`w14: unknown case ${what}`);
  }
}

// --------------------------------------------------------------- the parent

const runChild = (...args) => nodeChild(__filename, args, { nodeArgs: ['--expose-gc'], timeoutMs: CHILD_TIMEOUT_MS });

const msText = (v) => fmt(v, v >= 100 ? 0 : v >= 10 ? 1 : 2);

async function stepRows(root) {
  const impls = ['js', 'step', 'ephemeral'];
  const reps = new Map(impls.map((i) => [i, []]));
  const floor = []; // rows/s of SQLite transactions of STEP_TASKS rows: the floor, a rep before each round
  let n = 0;
  for (let rep = 0; rep < STEP_REPS + 1; rep++) {
    const rate = stepFloor.sqliteBatchRate(root, STEPS, STEP_TASKS);
    if (rep > 0) floor.push(rate);
    for (const impl of impls) {
      const r = runChild('steps', impl, path.join(root, `steps-${n++}`));
      if (rep > 0) reps.get(impl).push(r.steps / (r.ms / 1000)); // the first round warms up
    }
  }
  const kase = `${fmt(STEP_TASKS)} tasks × ${fmt(STEPS)} steps (a JS call each): steps/s`;
  const base = median(reps.get('js'));
  const rows = impls.map((impl) => {
    const v = median(reps.get(impl));
    const durable = impl !== 'ephemeral';
    return {
      case: kase,
      impl: IMPL[impl],
      value: v,
      min: Math.min(...reps.get(impl)),
      unit: 'steps/s',
      ratio: v / base, // steps/s: above 1 is faster than the durable JS call
      ...(durable ? { target: `≥ ${fmt(TARGETS.stepsPerS)}/s`, ok: v >= TARGETS.stepsPerS } : {}),
      note: durable
        ? `${fmt(v / median(floor), 2)} of the floor of ${fmt(STEP_TASKS)}-row transactions; directory store; spawn to every result in and the last records written (rt.commit()); what dominates: docs/performance.md#durable-tasks`
        : 'no store, no journal',
    };
  });
  rows.push({
    case: kase,
    impl: `SQLite transactions of ${fmt(STEP_TASKS)} upserted rows (better-sqlite3, WAL, synchronous=FULL): the floor`,
    value: median(floor),
    min: Math.min(...floor),
    unit: 'rows/s',
    ratio: median(floor) / base,
    note: `${fmt(STEPS)} transactions, a rep before each round: what a loop turn's steps of ${fmt(STEP_TASKS)} tasks cost SQLite at least`,
  });
  return rows;
}

async function sleepRows(root) {
  const rows = [];
  const kase = `${fmt(SLEEPERS)} tasks, FOR a random 0–5 s`;
  const got = {};
  for (const impl of ['durable', 'ephemeral']) {
    warmMemory(2);
    got[impl] = runChild('sleeps', impl, path.join(root, `sleeps-${impl}`));
    const r = got[impl];
    if (r.n !== SLEEPERS) throw new Error(`${impl}: ${r.n} of ${SLEEPERS} sleepers woke`);
    if (r.max >= 1e9) throw new Error(`${impl}: a sleep did not answer "SCHEDULER"`);
  }
  const d = got.durable;
  const e = got.ephemeral;
  const name = { durable: 'lua-tasks durable', ephemeral: 'lua-tasks ephemeral' };
  const chunked = `spawned from JS in chunks of ${fmt(CHUNK)}, a loop turn between`;
  rows.push(
    {
      case: `${kase}: start all`,
      impl: name.durable,
      value: d.startMs,
      unit: 'ms',
      note: `${chunked}; the spawns ${msText(d.spawnMs)} ms, then until every wait was written (rt.commit())`,
    },
    {
      case: `${kase}: start all`,
      impl: name.ephemeral,
      value: e.startMs,
      unit: 'ms',
      ratio: e.startMs / d.startMs,
      note: chunked,
    },
    {
      case: `${kase}: Lua memory`,
      impl: name.durable,
      value: d.memPerTask / 1e3,
      unit: 'KB/task',
      note: 'rt.stats().memoryUsed after the start − before, ÷ tasks',
    },
    {
      case: `${kase}: Lua memory`,
      impl: name.ephemeral,
      value: e.memPerTask / 1e3,
      unit: 'KB/task',
      ratio: e.memPerTask / d.memPerTask,
    },
    {
      case: `${kase}: RSS`,
      impl: name.durable,
      value: d.rssPerTask / 1e3,
      unit: 'KB/task',
      note: 'process RSS after the start − before, ÷ tasks',
    },
    {
      case: `${kase}: RSS`,
      impl: name.ephemeral,
      value: e.rssPerTask / 1e3,
      unit: 'KB/task',
      ratio: e.rssPerTask / d.rssPerTask,
    },
    {
      case: `${kase}: wake lateness p99`,
      impl: name.durable,
      value: d.p99,
      unit: 'ms',
      note: `elapsed − requested as the yield returns it; p50 ${msText(d.p50)} ms, max ${msText(d.max)} ms`,
    },
    {
      case: `${kase}: wake lateness p99`,
      impl: name.ephemeral,
      value: e.p99,
      unit: 'ms',
      ratio: e.p99 / d.p99,
      note: `p50 ${msText(e.p50)} ms, max ${msText(e.max)} ms`,
    },
  );
  const wk = {};
  for (const impl of ['durable', 'ephemeral']) {
    warmMemory(2);
    wk[impl] = runChild('wakes', impl, path.join(root, `wakes-${impl}`));
    const r = wk[impl];
    if (r.n !== SLEEPERS) throw new Error(`${impl}: ${r.n} of ${SLEEPERS} sleepers woke`);
    if (r.max >= 1e9) throw new Error(`${impl}: a sleep did not answer "SCHEDULER"`);
  }
  const wkase = `${fmt(SLEEPERS)} tasks started, then all due within 1 s`;
  const loopNote = (r) =>
    `the loop's busy time over the wake second ÷ wakes; the loop thread's CPU ${msText(r.loopCpuUs)} µs, other threads' ${msText(r.otherCpuUs)} µs a wake; ${fmt(r.wallMs)} ms from the first due until all ended and were written`;
  for (const impl of ['durable', 'ephemeral']) {
    const r = wk[impl];
    const durable = impl === 'durable';
    rows.push(
      {
        case: `${wkase}: wake lateness p99`,
        impl: name[impl],
        value: r.p99,
        unit: 'ms',
        ...(durable
          ? { target: `≤ ${TARGETS.wakeP99Ms} ms`, ok: r.p99 <= TARGETS.wakeP99Ms }
          : { ratio: r.p99 / wk.durable.p99 }),
        note: `p50 ${msText(r.p50)} ms, max ${msText(r.max)} ms; started in ${fmt(r.startMs)} ms, before the first was due`,
      },
      {
        case: `${wkase}: loop time a wake`,
        impl: name[impl],
        value: r.loopUs,
        unit: 'µs',
        ...(durable
          ? { target: `≤ ${TARGETS.wakeLoopUs} µs`, ok: r.loopUs <= TARGETS.wakeLoopUs }
          : { ratio: r.loopUs / wk.durable.loopUs }),
        note: loopNote(r),
      },
    );
  }
  return rows;
}

// The recovery cases, smallest first: a case is run only if the one before
// it, scaled linearly, would finish within PROBE_LIMIT_MS (three opens of
// 100,000 tasks that take minutes each would hold the run for an hour);
// one not run keeps its row, with what stood in its way.
const PROBE_LIMIT_MS = 60000;

async function recoverRows(root) {
  const rows = [];
  const many = [...new Set([Math.min(10000, RECOVER_TASKS), RECOVER_TASKS])];
  const cases = [
    ...many.map((t) => [t, RECOVER_STEPS, `${fmt(t)} tasks waiting, ${RECOVER_STEPS + 2} journal records each`]),
    [1, LONG_STEPS, `1 task waiting after ${fmt(LONG_STEPS)} steps`],
  ];
  let last = null; // { tasks, ms } of the many-task case before
  for (const [tasks, n, what] of cases) {
    const kase = `Recovery, ${what}: Runtime.open to all restored`;
    const target = tasks === RECOVER_TASKS && tasks > 1 ? { target: `≤ ${fmt(TARGETS.recoverMs)} ms` } : {};
    const guess = last && tasks > 1 ? (last.ms * tasks) / last.tasks : 0;
    if (guess > PROBE_LIMIT_MS) {
      rows.push({
        case: kase,
        impl: 'lua-tasks durable',
        value: NaN,
        unit: 'ms',
        ...target,
        ...(target.target ? { ok: false } : {}),
        note: `not run: ${fmt(last.tasks)} tasks took ${fmt(last.ms)} ms, so this would take ≥ ${fmt(guess / 1000)} s an open (more: it grows faster than the task count); see docs/performance.md#durable-tasks`,
      });
      continue;
    }
    const dir = path.join(root, `recover-${tasks}`);
    const f = runChild('fill', 'durable', dir, tasks, n);
    for (const restore of ['lazy', 'all']) {
      if (restore === 'all' && guess * 10 > PROBE_LIMIT_MS) continue; // replaying all costs ~10x
      const r = runChild('open', 'durable', dir, tasks, n, f.ids[1], restore);
      if (tasks > 1 && restore === 'lazy') last = { tasks, ms: r.ms };
      const lazy = restore === 'lazy';
      rows.push({
        case: kase,
        impl: lazy ? 'lua-tasks durable' : "lua-tasks durable, durableRestore: 'all'",
        value: r.ms,
        min: r.min,
        unit: 'ms',
        ...(lazy ? target : {}),
        ...(lazy && target.target ? { ok: r.ms <= TARGETS.recoverMs } : {}),
        note: `${fmt(f.records)} journal records (${fmt(f.records / tasks, 1)} a task), ${lazy ? 'every task dormant' : `${fmt(f.records / (r.ms / 1000))} replayed/s`}; RSS ${fmt(r.rss)} B a task; filled once in ${fmt(f.ms / 1000, 1)} s, untimed`,
      });
    }
    fs.rmSync(dir, { recursive: true, force: true });
  }
  return rows;
}

async function run() {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'lua-tasks-w14-'));
  try {
    return [
      ...(await stepRows(root)),
      ...(await stepFloor.dirRows()),
      ...(await sleepRows(root)),
      ...(await recoverRows(root)),
    ];
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
}

module.exports = {
  id: 'w14',
  title:
    'W14: durable tasks: steps/s (beside ephemeral; DBOS in W15), 100,000 durable sleeps, recovery at Runtime.open',
  run,
};

if (require.main === module) {
  child(process.argv.slice(2)).then(printAndExit, (e) => {
    console.error(e && e.stack ? e.stack : e);
    process.exit(1);
  });
}
