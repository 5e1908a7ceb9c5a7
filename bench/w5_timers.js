// SPDX-License-Identifier: MIT
// W5: 10,000 concurrent tasks × 10 waits of 1 ms: lua-tasks, wasmoon, Node.
//
// lua-tasks: one task starts the 10,000 workers and joins them; each worker
// does coroutine.yield("FOR", 1, "MILLISECONDS") ten times and checks every
// answer ("SCHEDULER", elapsed ≥ 1, "MILLISECONDS"). Wall time from rt.call
// to its result; the ideal is 10 ms. A second row stops at the first worker's
// end (a JS stamp() called from Lua) to show what ending the tasks costs.
// wasmoon: the same workers as concurrent doString calls, each awaiting a JS
// promise of setTimeout(1) ten times (its way to wait; counted, not timed:
// Node's setTimeout may fire up to a ms early by performance.now, as its
// start is the loop's cached time); it is known to fail
// at about 50 concurrent awaiting coroutines, so it runs in a child process
// (a crash or hang there cannot take the bench down) with 50 and with 10,000,
// and the row says what it did. Node: 10,000 async functions awaiting
// timers/promises setTimeout(1) ten times, for scale.
'use strict';

const { nowMs, sample, check, nodeChild } = require('./harness');

const TASKS = 10000;
const WAITS = 10;
const TARGET_MS = 60;

const LUA_TASKS = `
local function worker(n)
  local ok = 0
  for i = 1, n do
    local why, el, unit = coroutine.yield("FOR", 1, "MILLISECONDS")
    if why == "SCHEDULER" and unit == "MILLISECONDS" and el >= 1 then ok = ok + 1 end
  end
  if first == 0 then first = stamp() end
  return ok
end
function run(ntasks, n)
  local ids = {}
  for i = 1, ntasks do ids[i] = tasks.start(worker, n) end
  local ok = 0
  for i = 1, ntasks do ok = ok + tasks.wait(ids[i]) end
  return ok
end`;

const WASMOON_WORKER = `
function worker(n)
  local ok = 0
  for i = 1, n do
    sleep(1):await()
    ok = ok + 1
  end
  return ok
end`;

/** In the child: runs `tasks` concurrent wasmoon workers, prints { ok, ms } or { error }. */
async function wasmoonChild(tasks) {
  const { LuaFactory } = require('wasmoon');
  const lua = await new LuaFactory().createEngine();
  lua.global.set('sleep', (ms) => new Promise((resolve) => setTimeout(resolve, ms)));
  await lua.doString(WASMOON_WORKER);
  const out = {};
  const t = nowMs();
  try {
    const counts = await Promise.all(Array.from({ length: tasks }, () => lua.doString(`return worker(${WAITS})`)));
    out.ms = nowMs() - t;
    out.ok = counts.reduce((a, b) => a + b, 0);
  } catch (err) {
    out.ms = nowMs() - t;
    out.error = String(err && err.message ? err.message : err)
      .split('\n')[0]
      .slice(0, 200);
  }
  process.stdout.write(`${JSON.stringify(out)}\n`);
  process.exit(0);
}

async function nodeWorker(n) {
  const { setTimeout: sleep } = require('timers/promises');
  let ok = 0;
  for (let i = 0; i < n; i++) {
    const t = nowMs();
    await sleep(1);
    if (nowMs() - t >= 0.999) ok++; // libuv's ms clock: about 1 ms, not always ≥ 1
  }
  return ok;
}

async function run() {
  const { Runtime } = require('..');
  const impls = [];
  const rt = new Runtime();
  rt.set('stamp', nowMs);
  rt.load(LUA_TASKS);
  impls.push({
    name: 'lua-tasks',
    warmup: 2,
    reps: 9,
    async once() {
      rt.set('first', 0);
      rt.load('collectgarbage()'); // each run starts clean, as the lua5.4 CLI's fresh process does
      const t = nowMs();
      const ok = await rt.call('run', TASKS, WAITS);
      const ms = nowMs() - t;
      check('lua-tasks correct waits', ok, TASKS * WAITS);
      check('lua-tasks tasks left', rt.stats().tasks, 0);
      return { ms, firstEndMs: rt.get('first') - t };
    },
  });
  impls.push({
    name: 'node',
    warmup: 2,
    reps: 9,
    async once() {
      const t = nowMs();
      const counts = await Promise.all(Array.from({ length: TASKS }, () => nodeWorker(WAITS)));
      const ms = nowMs() - t;
      check(
        'node correct waits',
        counts.reduce((a, b) => a + b, 0),
        TASKS * WAITS,
      );
      return { ms };
    },
  });
  const stats = await sample(impls);
  rt.closeSync();

  const base = stats.get('lua-tasks').ms.median;
  const kase = `${TASKS} tasks × ${WAITS} × 1 ms`;
  const rows = [];
  const lt = stats.get('lua-tasks').ms;
  rows.push({
    case: kase,
    impl: 'lua-tasks',
    value: lt.median,
    min: lt.min,
    unit: 'ms',
    ratio: 1,
    target: `≤ ${TARGET_MS} ms`,
    ok: lt.median <= TARGET_MS,
    note: "wall, rt.call to result; every yield's answer checked; ideal 10 ms",
  });
  const fe = stats.get('lua-tasks').firstEndMs;
  rows.push({
    case: kase,
    impl: 'lua-tasks, to the first end',
    value: fe.median,
    min: fe.min,
    unit: 'ms',
    ratio: fe.median / base,
    note: 'wall, rt.call to the first worker returning (all its waits done): the ending of 10,000 tasks left out',
  });

  for (const n of [50, TASKS]) {
    let r;
    try {
      r = nodeChild(__filename, ['wasmoon', n], { timeoutMs: 20000 });
    } catch (err) {
      r = {
        error: /ETIMEDOUT/.test(err.message)
          ? 'no answer in 20 s (hung; killed)'
          : err.message.split('\n')[0].slice(0, 200),
      };
    }
    const row = { case: `${n} tasks × ${WAITS} × 1 ms`, impl: 'wasmoon', unit: 'ms' };
    if (r.error) {
      Object.assign(row, {
        value: NaN,
        note: r.ms === undefined ? `failed: ${r.error}` : `failed after ${r.ms.toFixed(0)} ms: ${r.error}`,
      });
    } else if (r.ok !== n * WAITS) {
      Object.assign(row, { value: r.ms, note: `wrong result: ${r.ok} of ${n * WAITS} waits correct` });
    } else {
      Object.assign(row, { value: r.ms, note: 'one run in a child process: concurrent doString, sleep(1):await()' });
    }
    if (n === TASKS && !Number.isNaN(row.value)) row.ratio = row.value / base;
    rows.push(row);
  }

  const nd = stats.get('node').ms;
  rows.push({
    case: kase,
    impl: 'node async/await',
    value: nd.median,
    min: nd.min,
    unit: 'ms',
    ratio: nd.median / base,
    note: 'await timers/promises setTimeout(1), for scale',
  });
  return rows;
}

module.exports = {
  id: 'w5',
  title: `W5: ${TASKS.toLocaleString('en')} concurrent tasks × ${WAITS} FOR 1 MILLISECONDS (every wait checked)`,
  run,
};

if (require.main === module && process.argv[2] === 'wasmoon') {
  wasmoonChild(Number(process.argv[3])).catch((err) => {
    process.stdout.write(
      `${JSON.stringify({ error: String(err && err.message ? err.message : err).split('\n')[0] })}\n`,
    );
    process.exit(0);
  });
}
