// SPDX-License-Identifier: MIT
// W8: spawn: start and finish a trivial task, in ns per task, from Lua and from JS.
//
// From Lua: `for i = 1, N do tasks.start(f) end` in one rt.load, f counting
// its runs in an upvalue. From JS: rt.start('f') N times in a loop, nothing
// awaited. Each task runs to its end inside start. Beside them, for scale:
// coroutine.create + resume of the same f in the lua5.4 CLI (os.clock inside
// Lua) and a trivial async function call in Node. Counts are checked, and no
// task may be left behind (rt.stats().tasks). One more row starts a coroutine
// object (the seed's namazu.coroutine.start(co)) with 100,000 other tasks
// waiting in the same runtime: what a start costs with many tasks alive,
// beside the same start in a runtime with none waiting. The floor
// (bench/floor/floor.cpp, in the same run): lua_newthread + lua_resume of f
// to its end, driven from C on the same Lua library.
'use strict';

const { Runtime } = require('..');
const { nowMs, sample, check, haveLuaCli, withSpawner, runLuaCliIn, floorImpl, floorRow } = require('./harness');

const N = 1e5;
const TARGET_NS = 1000;
const LUA_F = 'count = 0 function f() count = count + 1 end';
const FROM_LUA = `local c = 0 local function f() c = c + 1 end for i = 1, ${N} do tasks.start(f) end return c`;
const WAITING = 1e5;
const BUSY_RATIO = 1.3; // a start beside WAITING tasks at most this many times one beside none
const FROM_CO = `local nc = require("namazu.coroutine")
local c = 0 local function f() c = c + 1 end
for i = 1, ${N} do nc.start(coroutine.create(f)) end return c`;
const CLI = `local c = 0 local function f() c = c + 1 end
local t0 = os.clock()
for i = 1, ${N} do coroutine.resume(coroutine.create(f)) end
local t1 = os.clock()
print(string.format("%d %.9f", c, t1 - t0))`;

const nsPerTask = (ms) => (ms * 1e6) / N;

const run = () => withSpawner(measure);

async function measure(spawner) {
  const rt = new Runtime();
  rt.load(LUA_F);
  const impls = [];
  impls.push({
    name: 'lua',
    warmup: 3,
    reps: 15,
    once() {
      const t = nowMs();
      rt.load('collectgarbage()'); // each run starts clean, as the lua5.4 CLI's fresh process does
      const [c] = rt.load(FROM_LUA);
      const ms = nowMs() - t;
      check('tasks.start runs', c, N);
      check('tasks left (Lua)', rt.stats().tasks, 0);
      return { ns: nsPerTask(ms) };
    },
  });
  impls.push({
    name: 'js',
    warmup: 3,
    reps: 15,
    once() {
      rt.set('count', 0);
      rt.load('collectgarbage()'); // each run starts clean, as the lua5.4 CLI's fresh process does
      const t = nowMs();
      for (let i = 0; i < N; i++) rt.start('f');
      const ms = nowMs() - t;
      check('rt.start runs', rt.get('count'), N);
      check('tasks left (JS)', rt.stats().tasks, 0);
      return { ns: nsPerTask(ms) };
    },
  });
  const busy = new Runtime();
  busy.load(`local function park() coroutine.yield("INDEFINITELY") end for i = 1, ${WAITING} do tasks.start(park) end`);
  impls.push({
    name: 'co',
    warmup: 1,
    reps: 7,
    once() {
      const t = nowMs();
      const [c] = busy.load(FROM_CO);
      const ms = nowMs() - t;
      check('namazu.coroutine.start runs', c, N);
      check('tasks left (busy)', busy.stats().tasks, WAITING);
      return { ns: nsPerTask(ms) };
    },
  });
  const alone = new Runtime();
  impls.push({
    name: 'coAlone',
    warmup: 1,
    reps: 7,
    once() {
      const t = nowMs();
      const [c] = alone.load(FROM_CO);
      const ms = nowMs() - t;
      check('namazu.coroutine.start runs (alone)', c, N);
      check('tasks left (alone)', alone.stats().tasks, 0);
      return { ns: nsPerTask(ms) };
    },
  });
  const floor = floorImpl(spawner, { warmup: 1, reps: 7 });
  if (floor) impls.push(floor);
  const haveCli = haveLuaCli();
  if (haveCli) {
    impls.push({
      name: 'lua5.4',
      warmup: 1,
      reps: 7,
      async once() {
        const r = await runLuaCliIn(spawner, CLI);
        check('lua5.4 runs', Number(r.count), N);
        return { ns: nsPerTask(r.ms) };
      },
    });
  }
  impls.push({
    name: 'node',
    warmup: 3,
    reps: 15,
    async once() {
      let c = 0;
      const f = async () => {
        c++;
      };
      const t = nowMs();
      for (let i = 0; i < N; i++) f();
      const ms = nowMs() - t;
      check('node runs', c, N);
      return { ns: nsPerTask(ms) };
    },
  });
  const stats = await sample(impls);
  rt.closeSync();
  busy.closeSync();
  alone.closeSync();

  const rows = [];
  const base = stats.get('lua').ns.median;
  const row = (name, kase, label, note) => {
    const m = stats.get(name).ns;
    return { case: kase, impl: label, value: m.median, min: m.min, unit: 'ns/task', ratio: m.median / base, note };
  };
  const fromLua = row('lua', 'start + finish, from Lua', 'lua-tasks', 'for i = 1, N do tasks.start(f) end');
  fromLua.target = `≤ ${TARGET_NS} ns/task`;
  fromLua.ok = fromLua.value <= TARGET_NS;
  rows.push(fromLua);
  const fromJs = row('js', 'start + finish, from JS', 'lua-tasks', "rt.start('f') in a JS loop, nothing awaited");
  fromJs.target = `≤ ${TARGET_NS} ns/task`;
  fromJs.ok = fromJs.value <= TARGET_NS;
  rows.push(fromJs);
  const coAlone = row(
    'coAlone',
    'start + finish, from Lua',
    'lua-tasks, a coroutine',
    'namazu.coroutine.start(coroutine.create(f)), no other task',
  );
  rows.push(coAlone);
  const busyRow = row(
    'co',
    'start + finish, from Lua',
    'lua-tasks, a coroutine, 100,000 tasks waiting',
    `namazu.coroutine.start(coroutine.create(f)) beside ${WAITING.toLocaleString('en')} tasks waiting INDEFINITELY`,
  );
  const busyTimes = busyRow.value / coAlone.value;
  busyRow.note += `; ${busyTimes.toFixed(2)}× the same with none waiting`;
  busyRow.target = `≤ ${BUSY_RATIO}× with none waiting`;
  busyRow.ok = busyTimes <= BUSY_RATIO;
  rows.push(busyRow);
  rows.push(
    floorRow(floor && stats, 'spawn', {
      kase: 'start + finish, from Lua',
      impl: 'C floor',
      unit: 'ns/task',
      value: base,
      note: 'the Lua library alone: lua_newthread + lua_resume of f to its end, from C',
    }),
  );
  if (haveCli) {
    rows.push(
      row(
        'lua5.4',
        'start + finish, from Lua',
        'lua5.4 CLI',
        'coroutine.resume(coroutine.create(f)), for scale; os.clock',
      ),
    );
  }
  rows.push(row('node', 'start + finish, from JS', 'node', 'a trivial async function call, for scale'));
  return rows;
}

module.exports = {
  id: 'w8',
  title: `W8: spawn: start and finish a trivial task, ${N.toLocaleString('en')} times (counts checked)`,
  run,
};
