// SPDX-License-Identifier: MIT
// W4: 10,000 sequential awaits of an already-resolved JS promise in one task, in ns per await.
//
// lua-tasks, two ways: a JS function set into Lua returning Promise.resolve(i)
// (the call suspends the task until the promise settles: transparent await),
// and tasks.await(ps[i]) on promises made beforehand and handed to Lua in a
// table. Each rep times rt.call('run', N) to its result and divides by N.
// Node: an async function doing `s += await Promise.resolve(i)`, for scale
// (the floor: one microtask turn per await). wasmoon: `f(i):await()` inside
// doString, its way to await a promise. Every implementation sums the awaited
// values and the sum is checked.
'use strict';

const { nowMs, sample, check } = require('./harness');

const N = 10000;
const SUM = (N * (N + 1)) / 2; // sum of i for i = 1..N
const TARGET_NS = 2000;

const LUA = `
function run_call(n)
  local s = 0
  for i = 1, n do s = s + resolved(i) end
  return s
end
function run_await(n)
  local s = 0
  for i = 1, n do s = s + tasks.await(ps[i]) end
  return s
end`;

const WASMOON = `
local s = 0
for i = 1, ${N} do s = s + resolved(i):await() end
return s`;

const nsPer = (ms) => (ms * 1e6) / N;

async function run() {
  const { Runtime } = require('..');
  const resolved = (x) => Promise.resolve(x);
  const impls = [];

  const rt = new Runtime();
  rt.set('resolved', resolved);
  rt.set(
    'ps',
    Array.from({ length: N }, (_, i) => Promise.resolve(i + 1)),
  );
  rt.load(LUA);
  impls.push({
    name: 'lua-tasks',
    warmup: 5,
    reps: 21,
    async once() {
      const t = nowMs();
      const s = await rt.call('run_call', N);
      const ns = nsPer(nowMs() - t);
      check('lua-tasks resolved(i)', s, SUM);
      return { ns };
    },
  });
  impls.push({
    name: 'lua-tasks tasks.await',
    warmup: 5,
    reps: 21,
    async once() {
      const t = nowMs();
      const s = await rt.call('run_await', N);
      const ns = nsPer(nowMs() - t);
      check('lua-tasks tasks.await', s, SUM);
      return { ns };
    },
  });

  async function nodeLoop(n) {
    let s = 0;
    for (let i = 1; i <= n; i++) s += await Promise.resolve(i);
    return s;
  }
  impls.push({
    name: 'node async/await',
    warmup: 5,
    reps: 21,
    async once() {
      const t = nowMs();
      const s = await nodeLoop(N);
      const ns = nsPer(nowMs() - t);
      check('node await', s, SUM);
      return { ns };
    },
  });

  const { LuaFactory } = require('wasmoon');
  const wasmoon = await new LuaFactory().createEngine();
  wasmoon.global.set('resolved', resolved);
  impls.push({
    name: 'wasmoon',
    warmup: 1,
    reps: 5,
    async once() {
      const t = nowMs();
      const s = await wasmoon.doString(WASMOON);
      const ns = nsPer(nowMs() - t);
      check('wasmoon :await()', s, SUM);
      return { ns };
    },
  });

  const stats = await sample(impls);
  rt.closeSync();
  wasmoon.global.close();

  const base = stats.get('lua-tasks').ns.median;
  const notes = {
    'lua-tasks': 'a JS function returning Promise.resolve(i), called from the task',
    'lua-tasks tasks.await': 'tasks.await(ps[i]) on resolved promises made beforehand',
    'node async/await': 'await Promise.resolve(i) in an async function, for scale',
    wasmoon: 'resolved(i):await() inside doString',
  };
  return impls.map((impl) => {
    const m = stats.get(impl.name).ns;
    const row = {
      case: `${N.toLocaleString('en')} awaits of a resolved promise`,
      impl: impl.name,
      value: m.median,
      min: m.min,
      unit: 'ns/await',
      ratio: m.median / base,
      note: notes[impl.name],
    };
    if (impl.name.startsWith('lua-tasks')) {
      row.target = `≤ ${TARGET_NS} ns/await`;
      row.ok = m.median <= TARGET_NS;
    }
    return row;
  });
}

module.exports = {
  id: 'w4',
  title: `W4: ${N.toLocaleString('en')} sequential awaits of a resolved JS promise in one task (sums checked)`,
  run,
};
