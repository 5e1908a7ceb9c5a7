// SPDX-License-Identifier: MIT
// W3: crossing cost: 1e5 JS->Lua calls and 1e5 Lua->JS calls of add(a, b), in ns per call.
//
// JS->Lua: the Lua function is fetched once (rt.get / wasmoon global.get /
// fengari registry ref) and called from a JS loop; the JS side sums results.
// Lua->JS: a JS function is set as a global and called from a Lua loop that
// sums the results. Each rep times the whole loop and divides by 1e5.
// fengari has no generic JS<->Lua conversion without fengari-interop (not a
// dependency), so its rows use its raw C-style API: the cheapest path it has.
// lua-tasks is warmed up longer than the peers: its JS loop only reaches
// steady state after V8 optimises it (about 1e6 calls). Each direction ends
// with its floor (bench/floor/floor.cpp, in the same run): lua_pcall of a Lua
// add from C, and a Lua loop calling a C add, with lua-tasks's multiple.
'use strict';

const { Runtime } = require('..');
const { nowMs, sample, check, withSpawner, floorImpl, floorRow } = require('./harness');

const N = 1e5;
const JS_TO_LUA_SUM = (N * (N - 1)) / 2 + N; // sum of add(i, 1) for i = 0..N-1
const LUA_TO_JS_SUM = 5000150000n; // sum of add(i, 1) for i = 1..N
const LUA_LOOP = `local add = jsadd local s = 0 for i = 1, ${N} do s = s + add(i, 1) end return s`;
const ADD_LUA = 'function add(a, b) return a + b end';
const TARGETS = { 'JS → Lua': 150, 'Lua → JS': 300 }; // ns/call
const PEER_RATIO = 20; // peers expected this many times slower

const nsPerCall = (ms) => (ms * 1e6) / N;

const run = () => withSpawner(measure);

async function measure(spawner) {
  const js = []; // JS -> Lua implementations
  const lj = []; // Lua -> JS implementations
  const jsadd = (a, b) => a + b;

  // ---- lua-tasks
  const rt = new Runtime();
  rt.load(ADD_LUA);
  rt.set('jsadd', jsadd);
  const ltAdd = rt.get('add');
  js.push({
    name: 'lua-tasks',
    warmup: 15,
    reps: 31,
    once() {
      const t = nowMs();
      let s = 0;
      for (let i = 0; i < N; i++) s += ltAdd(i, 1);
      const ns = nsPerCall(nowMs() - t);
      check('lua-tasks JS → Lua', s, JS_TO_LUA_SUM);
      return { ns };
    },
  });
  lj.push({
    name: 'lua-tasks',
    warmup: 5,
    reps: 31,
    once() {
      const t = nowMs();
      const [s] = rt.load(LUA_LOOP);
      const ns = nsPerCall(nowMs() - t);
      check('lua-tasks Lua → JS', s, LUA_TO_JS_SUM);
      return { ns };
    },
  });

  // ---- wasmoon
  const { LuaFactory } = require('wasmoon');
  const wasmoon = await new LuaFactory().createEngine();
  await wasmoon.doString(ADD_LUA);
  wasmoon.global.set('jsadd', jsadd);
  const wAdd = wasmoon.global.get('add');
  js.push({
    name: 'wasmoon',
    warmup: 2,
    reps: 5,
    once() {
      const t = nowMs();
      let s = 0;
      for (let i = 0; i < N; i++) s += wAdd(i, 1);
      const ns = nsPerCall(nowMs() - t);
      check('wasmoon JS → Lua', s, JS_TO_LUA_SUM);
      return { ns };
    },
  });
  lj.push({
    name: 'wasmoon',
    warmup: 2,
    reps: 5,
    async once() {
      const t = nowMs();
      const s = await wasmoon.doString(LUA_LOOP);
      const ns = nsPerCall(nowMs() - t);
      check('wasmoon Lua → JS', s, LUA_TO_JS_SUM);
      return { ns };
    },
  });

  // ---- fengari (raw API)
  const { lua, lauxlib, lualib, to_luastring } = require('fengari');
  const L = lauxlib.luaL_newstate();
  lualib.luaL_openlibs(L);
  if (lauxlib.luaL_dostring(L, to_luastring(ADD_LUA)) !== lua.LUA_OK) throw new Error('fengari: cannot load add');
  lua.lua_getglobal(L, to_luastring('add'));
  const fAdd = lauxlib.luaL_ref(L, lua.LUA_REGISTRYINDEX);
  lua.lua_pushcfunction(L, (S) => {
    lua.lua_pushinteger(S, jsadd(lua.lua_tointeger(S, 1), lua.lua_tointeger(S, 2)));
    return 1;
  });
  lua.lua_setglobal(L, to_luastring('jsadd'));
  const fLoop = to_luastring(LUA_LOOP);
  js.push({
    name: 'fengari',
    warmup: 3,
    reps: 7,
    once() {
      const t = nowMs();
      let s = 0;
      for (let i = 0; i < N; i++) {
        lua.lua_rawgeti(L, lua.LUA_REGISTRYINDEX, fAdd);
        lua.lua_pushinteger(L, i);
        lua.lua_pushinteger(L, 1);
        lua.lua_call(L, 2, 1);
        s += lua.lua_tointeger(L, -1);
        lua.lua_pop(L, 1);
      }
      const ns = nsPerCall(nowMs() - t);
      check('fengari JS → Lua', s, JS_TO_LUA_SUM);
      return { ns };
    },
  });
  lj.push({
    name: 'fengari',
    warmup: 3,
    reps: 7,
    once() {
      const t = nowMs();
      if (lauxlib.luaL_dostring(L, fLoop) !== lua.LUA_OK) throw new Error(`fengari: ${lua.lua_tojsstring(L, -1)}`);
      const ns = nsPerCall(nowMs() - t);
      const s = lua.lua_tointeger(L, -1);
      lua.lua_pop(L, 1);
      // fengari's integers are 32-bit (documented): the sum wraps around.
      check('fengari Lua → JS', s, BigInt.asIntN(32, LUA_TO_JS_SUM));
      return { ns };
    },
  });

  const floor = floorImpl(spawner, { warmup: 1, reps: 7 });
  const floors = {
    'JS → Lua': ['c_to_lua', 'C → Lua', 'lua_pcall of the Lua add from C'],
    'Lua → JS': ['lua_to_c', 'Lua → C', 'the same Lua loop calling a lua_CFunction add'],
  };
  const rows = [];
  for (const [kind, impls] of [
    ['JS → Lua', js],
    ['Lua → JS', lj],
  ]) {
    const stats = await sample(floor ? [...impls, floor] : impls);
    const base = stats.get('lua-tasks').ns.median;
    for (const impl of impls) {
      const m = stats.get(impl.name).ns;
      const row = {
        case: `${kind} add(a, b)`,
        impl: impl.name,
        value: m.median,
        min: m.min,
        unit: 'ns/call',
        ratio: m.median / base,
        note: impl.name === 'fengari' ? 'raw C-style API (no fengari-interop)' : '',
      };
      if (impl.name === 'lua-tasks') {
        row.target = `≤ ${TARGETS[kind]} ns/call`;
        row.ok = m.median <= TARGETS[kind];
      } else {
        row.target = `≥ ${PEER_RATIO}× lua-tasks`;
        row.ok = row.ratio >= PEER_RATIO;
      }
      rows.push(row);
    }
    const [measure, crossing, note] = floors[kind];
    rows.push(
      floorRow(floor && stats, measure, {
        kase: `${crossing} add(a, b)`,
        impl: 'C floor',
        unit: 'ns/call',
        value: base,
        note: `the Lua library alone: ${note}`,
      }),
    );
  }
  rt.close();
  wasmoon.global.close();
  return rows;
}

module.exports = {
  id: 'w3',
  title: 'W3: 1e5 calls of add(a, b) across the boundary, each way (sums checked)',
  run,
};
