// SPDX-License-Identifier: MIT
// W2: 10,000 tasks × 100 IMMEDIATE yields: lua-tasks against a pure-Lua
// round-robin scheduler in the lua5.4 CLI and Node's own async functions.
//
// lua-tasks: one task starts the 10,000 workers (tasks.start) and joins them
// (tasks.wait); each worker does 100 bare coroutine.yield() and counts the
// ones that returned "SCHEDULER". Timed on the wall clock from rt.call to its
// result, so starting, finishing and joining the 10,000 tasks is included.
// lua5.4: the same workers under a minimal round-robin scheduler (plain
// coroutines, resumed in turn until all are dead) timed by os.clock() inside
// Lua (CPU time; process start-up left out). Node: 10,000 concurrent async
// functions, each doing `await new Promise(setImmediate)` 100 times.
// Every implementation's count of yields is checked. A second lua-tasks row
// stops the clock when the first worker gets past its 100th yield (a JS
// stamp() called from Lua): the workers run in lockstep, so that is rounds
// 1-99 alone, and its note gives what the last round (every task's last
// yield, end and join) took. Two rows give the floor (bench/floor/floor.cpp,
// in the same run): a lua_resume / coroutine.yield round trip driven from C,
// of one coroutine and of 10,000 in turn (W2's shape, creation and end
// included), with lua-tasks's multiple of each.
'use strict';

const { Runtime } = require('..');
const { nowMs, sample, check, haveLuaCli, withSpawner, runLuaCliIn, floorImpl, floorRow } = require('./harness');

const TASKS = 10000;
const YIELDS = 100;
const TOTAL = TASKS * YIELDS;
const TARGET_NS = 250; // ns per yield
const NODE_RATIO = 5; // Node's await setImmediate at least this many times slower
const FLOOR_RATIO = 1.5; // lua-tasks at most this many times the C round trip

const WORKER = `
local function worker(n)
  local c = 0
  for i = 1, n do
    if coroutine.yield() == "SCHEDULER" then c = c + 1 end
  end
  LAST_YIELD
  return c
end`;

const LUA_TASKS = `${WORKER.replace('LAST_YIELD', 'if first == 0 then first = stamp() end')}
function run(ntasks, n)
  local ids = {}
  for i = 1, ntasks do ids[i] = tasks.start(worker, n) end
  local c = 0
  for i = 1, ntasks do c = c + tasks.wait(ids[i]) end
  return c
end`;

// The minimal round-robin scheduler: resume every live coroutine in turn,
// passing "SCHEDULER" as a lua-tasks yield would, until all are dead.
const LUA_CLI = `${WORKER.replace('LAST_YIELD', '')}
local N, n = ${TASKS}, ${YIELDS}
local t0 = os.clock()
local ready, count = {}, 0
for i = 1, N do ready[i] = coroutine.create(worker) end
local arg = n
while #ready > 0 do
  local nxt = {}
  for i = 1, #ready do
    local co = ready[i]
    local ok, v = coroutine.resume(co, arg)
    if not ok then error(v) end
    if coroutine.status(co) == "dead" then count = count + v else nxt[#nxt + 1] = co end
  end
  ready, arg = nxt, "SCHEDULER"
end
local t1 = os.clock()
print(string.format("%d %.9f", count, t1 - t0))`;

async function nodeWorker(n) {
  let c = 0;
  for (let i = 0; i < n; i++) {
    await new Promise(setImmediate);
    c++;
  }
  return c;
}

const nsPerYield = (ms) => (ms * 1e6) / TOTAL;

const run = () => withSpawner(measure);

async function measure(spawner) {
  const impls = [];
  // The same run with the safety limits on.
  const LIMITS = [
    ['lua-tasks', {}],
    ['lua-tasks timeSlice', { timeSlice: 5 }],
    ['lua-tasks all limits', { timeSlice: 5, taskTimeout: 60000, memoryLimit: 1 << 30 }],
  ];
  const runtimes = [];
  for (const [name, options] of LIMITS) {
    const rt = new Runtime(options);
    runtimes.push(rt);
    rt.set('stamp', nowMs);
    rt.load(LUA_TASKS);
    impls.push({
      name,
      warmup: 1,
      reps: 5,
      async once() {
        rt.set('first', 0);
        // The lua5.4 CLI starts each run in a fresh process: start each run
        // here without the last one's 10,000 dead threads still to collect.
        rt.load('collectgarbage()');
        const t = nowMs();
        const c = await rt.call('run', TASKS, YIELDS);
        const ms = nowMs() - t;
        check(`${name} yields`, c, TOTAL);
        check(`${name} tasks left`, rt.stats().tasks, 0);
        const firstEnd = rt.get('first') - t;
        // The workers run in lockstep: the first one past its 100th yield opens
        // the last round, in which all 10,000 take their last yield and end.
        return { ns: nsPerYield(ms), roundsNs: (firstEnd * 1e6) / (TOTAL - TASKS), lastRoundMs: ms - firstEnd };
      },
    });
  }

  const haveCli = haveLuaCli();
  if (haveCli) {
    impls.push({
      name: 'lua5.4',
      warmup: 1,
      reps: 5,
      async once() {
        const r = await runLuaCliIn(spawner, LUA_CLI);
        check('lua5.4 yields', Number(r.count), TOTAL);
        return { ns: nsPerYield(r.ms) };
      },
    });
  }

  const floor = floorImpl(spawner, { warmup: 1, reps: 5 });
  if (floor) impls.push(floor);

  impls.push({
    name: 'node',
    warmup: 1,
    reps: 5,
    async once() {
      const t = nowMs();
      const counts = await Promise.all(Array.from({ length: TASKS }, () => nodeWorker(YIELDS)));
      const ms = nowMs() - t;
      check(
        'node yields',
        counts.reduce((a, b) => a + b, 0),
        TOTAL,
      );
      return { ns: nsPerYield(ms) };
    },
  });

  const stats = await sample(impls);
  for (const rt of runtimes) rt.closeSync();

  const base = stats.get('lua-tasks').ns.median;
  const row = (name, label, note) => {
    const m = stats.get(name).ns;
    return {
      case: `${TASKS} × ${YIELDS} yields`,
      impl: label,
      value: m.median,
      min: m.min,
      unit: 'ns/yield',
      ratio: m.median / base,
      note,
    };
  };
  const rows = [];
  const lt = row('lua-tasks', 'lua-tasks', 'wall, rt.call to result: start + 100 yields + end + join of each task');
  lt.target = `≤ ${TARGET_NS} ns/yield`;
  lt.ok = lt.value <= TARGET_NS;
  rows.push(lt);
  if (haveCli) {
    const r = row(
      'lua5.4',
      'lua5.4 CLI, round-robin',
      'pure-Lua scheduler, plain coroutines; os.clock (CPU) inside Lua',
    );
    r.target = 'lua-tasks at least as fast (× ≥ 1)';
    r.ok = r.ratio >= 1;
    rows.push(r);
  } else {
    rows.push({
      case: `${TASKS} × ${YIELDS} yields`,
      impl: 'lua5.4 CLI, round-robin',
      value: NaN,
      unit: 'ns/yield',
      target: 'lua5.4 CLI not found: not checked',
      ok: false,
    });
  }
  const ly = stats.get('lua-tasks').roundsNs;
  const lr = stats.get('lua-tasks').lastRoundMs;
  rows.push({
    case: `${TASKS} × ${YIELDS - 1} yields`,
    impl: 'lua-tasks, rounds 1–99 only',
    value: ly.median,
    min: ly.min,
    unit: 'ns/yield',
    ratio: ly.median / base,
    note: `start to the first task's end; the last round (10,000 last yields, ends, joins) took ${lr.median.toFixed(0)} ms (min ${lr.min.toFixed(0)})`,
  });
  rows.push(
    row(
      'lua-tasks timeSlice',
      'lua-tasks, timeSlice: 5',
      'the CPU budget hook on: a clock read per 1,000 instructions',
    ),
  );
  rows.push(
    row('lua-tasks all limits', 'lua-tasks, every limit', 'timeSlice: 5, taskTimeout: 60000, memoryLimit: 1 GiB'),
  );
  const kase = `${TASKS} × ${YIELDS} yields`;
  const floorNote = 'the Lua library alone: lua_resume from C';
  rows.push(
    floorRow(floor && stats, 'yield', {
      kase: 'resume + yield',
      impl: 'C floor, one coroutine',
      unit: 'ns/yield',
      value: base,
      note: `${floorNote}, one coroutine yielding in a loop`,
      maxRatio: FLOOR_RATIO,
    }),
    floorRow(floor && stats, 'yield10k', {
      kase,
      impl: 'C floor, 10,000 in turn',
      unit: 'ns/yield',
      value: base,
      note: `${floorNote}, W2's worker on 10,000 coroutines resumed in turn with "SCHEDULER", made and ended inside the time`,
    }),
  );
  const nd = row('node', 'node async/await', 'await new Promise(setImmediate) in 10,000 concurrent async functions');
  if (floor) nd.note += `; ${(nd.value / stats.get('floor').yield.median).toFixed(1)}× the C floor`;
  nd.target = `≥ ${NODE_RATIO}× lua-tasks`;
  nd.ok = nd.ratio >= NODE_RATIO;
  rows.push(nd);
  return rows;
}

module.exports = {
  id: 'w2',
  title: `W2: ${TASKS.toLocaleString('en')} tasks × ${YIELDS} IMMEDIATE yields (yield counts checked)`,
  run,
};
