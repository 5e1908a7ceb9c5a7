// SPDX-License-Identifier: MIT
// Drivers shaped like W2, W3, W5 and W8 for instruction counts: one case, a warm-up and N runs.
//
// Wall-clock times on a shared machine move by tens of percent; instruction
// counts do not. Run a case twice under callgrind, with N runs and with
// none, and divide the difference by N times the case's operations:
//
//   valgrind --tool=callgrind node --single-threaded bench/callgrind.js w2 1
//   valgrind --tool=callgrind node --single-threaded bench/callgrind.js w2 0
//
// Operations a run: w2 1,000,000 IMMEDIATE yields (10,000 tasks x 100);
// w5 100,000 timed wakes (10,000 tasks x 10 x FOR 1 ms); w3lj and w3jl
// 100,000 Lua -> JS and JS -> Lua calls; w8lua, w8js, w8co and w8alone
// 100,000 starts (from Lua, from JS, a coroutine beside 100,000 waiting
// tasks, the same with none). GC, if set, is Lua run once before (a
// collector setting to try). Under valgrind Lua runs about 50 times slower,
// so the interrupt watch's count hook comes on by wall-clock time: counts
// inside Lua itself move by a percent or two between runs of one build.
'use strict';
const [kase, repsArg] = process.argv.slice(2);
const REPS = Number(repsArg);
const { Runtime } = require(process.env.LUA_TASKS_ROOT || '..');
const N = 1e5;
const W2 = `local function worker(n) local c = 0 for i = 1, n do if coroutine.yield() == "SCHEDULER" then c = c + 1 end end return c end
function run(ntasks, n) local ids = {} for i = 1, ntasks do ids[i] = tasks.start(worker, n) end
local c = 0 for i = 1, ntasks do c = c + tasks.wait(ids[i]) end return c end`;
const W5 = `local function worker(n) local ok = 0 for i = 1, n do
local why, el, unit = coroutine.yield("FOR", 1, "MILLISECONDS")
if why == "SCHEDULER" and unit == "MILLISECONDS" and el >= 1 then ok = ok + 1 end end return ok end
function run(ntasks, n) local ids = {} for i = 1, ntasks do ids[i] = tasks.start(worker, n) end
local ok = 0 for i = 1, ntasks do ok = ok + tasks.wait(ids[i]) end return ok end`;
const check = (what, got, want) => {
  if (got !== want) throw new Error(`${what}: ${got} != ${want}`);
};
async function main() {
  const rt = new Runtime();
  let once;
  if (kase === 'w2' || kase === 'w5') {
    rt.load(kase === 'w2' ? W2 : W5);
    const [tasks, n] = kase === 'w2' ? [10000, 100] : [10000, 10];
    once = async () => {
      rt.load('collectgarbage()');
      check(kase, await rt.call('run', tasks, n), tasks * n);
    };
  } else if (kase === 'w3lj') {
    rt.set('jsadd', (a, b) => a + b);
    once = () => {
      const [s] = rt.load(`local add = jsadd local s = 0 for i = 1, ${N} do s = s + add(i, 1) end return s`);
      check(kase, Number(s), 5000150000);
    };
  } else if (kase === 'w3jl') {
    rt.load('function add(a, b) return a + b end');
    const add = rt.get('add');
    once = () => {
      let s = 0;
      for (let i = 0; i < N; i++) s += add(i, 1);
      check(kase, s, (N * (N - 1)) / 2 + N);
    };
  } else if (kase === 'w8lua') {
    once = () => {
      rt.load('collectgarbage()');
      const [c] = rt.load(
        `local c = 0 local function f() c = c + 1 end for i = 1, ${N} do tasks.start(f) end return c`,
      );
      check(kase, c, N);
    };
  } else if (kase === 'w8js') {
    rt.load('count = 0 function f() count = count + 1 end');
    once = () => {
      rt.set('count', 0);
      rt.load('collectgarbage()');
      for (let i = 0; i < N; i++) rt.start('f');
      check(kase, rt.get('count'), N);
    };
  } else if (kase === 'w8co' || kase === 'w8alone') {
    if (kase === 'w8co') {
      rt.load(`local function park() coroutine.yield("INDEFINITELY") end for i = 1, 100000 do tasks.start(park) end`);
    }
    const FROM_CO = `local nc = require("namazu.coroutine") local c = 0 local function f() c = c + 1 end
for i = 1, ${N} do nc.start(coroutine.create(f)) end return c`;
    once = () => {
      const [c] = rt.load(FROM_CO);
      check(kase, c, N);
    };
  } else {
    throw new Error(`unknown case ${kase}`);
  }
  if (process.env.GC) rt.load(process.env.GC);
  await once(); // warm-up, in both counts
  for (let r = 0; r < REPS; r++) await once();
  rt.closeSync();
}
main().catch((e) => {
  console.error(e);
  process.exit(1);
});
