// SPDX-License-Identifier: MIT
// W7: 1,000,000 concurrent tasks each sleeping a random 0-5 s: time to start
// them all, resident memory per task, wake lateness; beside Node's
// timers/promises setTimeout doing the same. Heavy: one run, no repetitions.
//
// Each implementation runs in its own child process (node --expose-gc), so
// the RSS delta is its own and nothing else's. Durations are whole ms in
// 0..5000 from the same seeded 32-bit xorshift in both, so both sleep the
// same set. Starting is done in chunks of 1,000 with a loop turn between
// (lua-tasks: a starter task yields IMMEDIATE; Node: await setImmediate):
// started in one synchronous go, every timer due during the start would be
// late by the rest of it. "Start all" is the wall time of the whole chunked
// start; "memory" is the RSS after it minus the RSS before (lateness slots
// preallocated), ÷ tasks. Lateness is elapsed − requested, the elapsed being
// what the yield returns (lua-tasks) or performance.now() around the await
// (Node, whose timers start at the loop's cached time and may fire early).
//
// Each task records its lateness and ends; the child then exits. The last
// row measures close() with thousands of waiting tasks.
//
// Right before each child, a throwaway process touches 2 GiB (warmMemory):
// on the bench VM, memory freed a few seconds earlier has been handed back to
// the host, and faulting 1.2 GB of it in anew made the start 2.0-3.7 s
// instead of 1.4-1.5 s, depending on what ran before.
'use strict';

const { nowMs, nodeChild, warmMemory, check } = require('./harness');

const TASKS = Number(process.env.W7_TASKS) || 1e6;
const MAX_MS = 5000;
const SEED = 0x2545f491;
const CHUNK = 1000;
const TARGETS = { startMs: 2000, kbPerTask: 1.5, p99Ms: 5 };

const LUA = `
function sleeper(i, r)
  local why, el = coroutine.yield("FOR", r)
  if why == "SCHEDULER" then late[i] = (el - r) * 1e3 else late[i] = 1e9 end
  woke = woke + 1
end
function starter(n, chunk, seed, maxms)
  local x = seed
  for i = 1, n do
    x = x ~ ((x << 13) & 0xffffffff)
    x = x ~ (x >> 17)
    x = x ~ ((x << 5) & 0xffffffff)
    tasks.start(sleeper, i, (x % (maxms + 1)) / 1e3)
    if i % chunk == 0 then coroutine.yield() end
  end
  return n
end
function prepare(n)
  late, woke = {}, 0
  for i = 1, n do late[i] = 0 end
end
function summary(n)
  table.sort(late)
  local function at(p) return late[math.max(1, math.ceil(p * n))] end
  return { p50 = at(0.5), p99 = at(0.99), max = late[n], min = late[1] }
end`;

function xorshiftDurations(n) {
  const out = new Uint16Array(n);
  let x = SEED;
  for (let i = 0; i < n; i++) {
    x = (x ^ (x << 13)) >>> 0;
    x = (x ^ (x >>> 17)) >>> 0;
    x = (x ^ (x << 5)) >>> 0;
    out[i] = x % (MAX_MS + 1);
  }
  return out;
}

function rssNow() {
  global.gc();
  return process.memoryUsage().rss;
}

async function waitFor(cond, limitMs) {
  const until = nowMs() + limitMs;
  while (!cond()) {
    if (nowMs() > until) throw new Error('not every task woke in time');
    await new Promise((r) => setTimeout(r, 50));
  }
}

function printAndExit(obj) {
  require('fs').writeSync(1, `${JSON.stringify(obj)}\n`);
  process.exit(0);
}

async function luaTasksChild(n) {
  const { Runtime } = require('..');
  const rt = new Runtime();
  rt.load(LUA);
  rt.load(`prepare(${n})`);
  const rss0 = rssNow();
  const t0 = nowMs();
  await rt.call('starter', n, CHUNK, SEED, MAX_MS);
  const startMs = nowMs() - t0;
  const rss1 = process.memoryUsage().rss;
  await waitFor(() => rt.get('woke') === n, MAX_MS + 30000);
  const s = rt.load(`return summary(${n})`)[0];
  const woke = rt.get('woke');
  check('lua-tasks tasks left', rt.stats().tasks, 0);
  rt.close();
  printAndExit({ startMs, bytesPerTask: (rss1 - rss0) / n, woke, ...s });
}

async function nodeTimersChild(n) {
  const { setTimeout: sleep } = require('timers/promises');
  const ms = xorshiftDurations(n);
  const late = new Float64Array(n);
  let woke = 0;
  const sleeper = async (i, d) => {
    const t = performance.now();
    await sleep(d);
    late[i] = performance.now() - t - d;
    woke++;
  };
  const rss0 = rssNow();
  const t0 = nowMs();
  for (let i = 0; i < n; i++) {
    sleeper(i, ms[i]);
    if ((i + 1) % CHUNK === 0) await new Promise(setImmediate);
  }
  const startMs = nowMs() - t0;
  const rss1 = process.memoryUsage().rss;
  await waitFor(() => woke === n, MAX_MS + 30000);
  late.sort();
  const at = (p) => late[Math.max(0, Math.ceil(p * n) - 1)];
  printAndExit({
    startMs,
    bytesPerTask: (rss1 - rss0) / n,
    woke,
    p50: at(0.5),
    p99: at(0.99),
    max: late[n - 1],
    min: late[0],
  });
}

/** close() with n tasks waiting INDEFINITELY, in ms. */
function closeMs(n) {
  const { Runtime } = require('..');
  const rt = new Runtime();
  rt.load(`function park() coroutine.yield("INDEFINITELY") end for i = 1, ${n} do tasks.start(park) end`);
  const t = nowMs();
  rt.closeSync();
  return nowMs() - t;
}

async function run() {
  const rows = [];
  const kase = `${TASKS.toLocaleString('en')} tasks, sleep 0–5 s`;
  const opts = { nodeArgs: ['--expose-gc'], timeoutMs: 120000 };
  warmMemory(2);
  const lt = nodeChild(__filename, ['lua-tasks', TASKS], opts);
  warmMemory(2);
  const nd = nodeChild(__filename, ['node', TASKS], opts);
  if (lt.woke !== TASKS) throw new Error(`lua-tasks: ${lt.woke} of ${TASKS} tasks woke`);
  if (lt.max >= 1e9) throw new Error('lua-tasks: a sleep did not answer "SCHEDULER"');
  if (lt.min < -0.001) throw new Error(`lua-tasks: a task woke ${(-lt.min).toFixed(3)} ms early`);
  if (nd.woke !== TASKS) throw new Error(`node: ${nd.woke} of ${TASKS} sleeps woke`);
  const chunked = `in chunks of ${CHUNK}, a loop turn between`;
  rows.push({
    case: `${kase}: start all`,
    impl: 'lua-tasks',
    value: lt.startMs,
    unit: 'ms',
    ratio: 1,
    target: `≤ ${TARGETS.startMs} ms`,
    ok: lt.startMs <= TARGETS.startMs,
    note: `tasks.start from a Lua task, ${chunked}`,
  });
  rows.push({
    case: `${kase}: start all`,
    impl: 'node timers/promises',
    value: nd.startMs,
    unit: 'ms',
    ratio: nd.startMs / lt.startMs,
    note: `async fn awaiting setTimeout(ms), ${chunked}`,
  });
  const ltKb = lt.bytesPerTask / 1e3;
  const ndKb = nd.bytesPerTask / 1e3;
  rows.push({
    case: `${kase}: memory`,
    impl: 'lua-tasks',
    value: ltKb,
    unit: 'KB/task',
    ratio: 1,
    target: `≤ ${TARGETS.kbPerTask} KB/task`,
    ok: ltKb <= TARGETS.kbPerTask,
    note: 'RSS after the start − before, ÷ tasks',
  });
  rows.push({
    case: `${kase}: memory`,
    impl: 'node timers/promises',
    value: ndKb,
    unit: 'KB/task',
    ratio: ndKb / ltKb,
    note: 'RSS after the start − before, ÷ sleeps',
  });
  rows.push({
    case: `${kase}: lateness p50`,
    impl: 'lua-tasks',
    value: lt.p50,
    unit: 'ms',
    note: `elapsed returned by the yield − requested; min ${lt.min.toFixed(3)}`,
  });
  rows.push({
    case: `${kase}: lateness p50`,
    impl: 'node timers/promises',
    value: nd.p50,
    unit: 'ms',
    note: `performance.now() around the await; min ${nd.min.toFixed(3)}`,
  });
  rows.push({
    case: `${kase}: lateness p99`,
    impl: 'lua-tasks',
    value: lt.p99,
    unit: 'ms',
    ratio: 1,
    target: `≤ ${TARGETS.p99Ms} ms`,
    ok: lt.p99 <= TARGETS.p99Ms,
    note: `max ${lt.max.toFixed(1)} ms`,
  });
  rows.push({
    case: `${kase}: lateness p99`,
    impl: 'node timers/promises',
    value: nd.p99,
    unit: 'ms',
    ratio: nd.p99 / lt.p99,
    note: `max ${nd.max.toFixed(1)} ms`,
  });
  const small = closeMs(5000);
  const big = closeMs(20000);
  rows.push({
    case: 'close() with 20,000 waiting tasks',
    impl: 'lua-tasks',
    value: big,
    unit: 'ms',
    note: `5,000 tasks: ${small.toFixed(0)} ms (×${(big / small).toFixed(1)} for ×4 tasks)`,
  });
  return rows;
}

module.exports = {
  id: 'w7',
  title: `W7: ${TASKS.toLocaleString('en')} tasks each sleeping a random 0–5 s (every wake checked)`,
  run,
};

if (require.main === module) {
  const [mode, n] = process.argv.slice(2);
  const child = mode === 'lua-tasks' ? luaTasksChild : mode === 'node' ? nodeTimersChild : null;
  if (child) {
    child(Number(n)).catch((err) => {
      console.error(err);
      process.exit(1);
    });
  }
}
