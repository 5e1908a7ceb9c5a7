// SPDX-License-Identifier: MIT
// W1: a tight Lua loop (sum of 1..1e7): lua-tasks against the lua5.4 CLI, wasmoon and fengari.
//
// The fair figure is the loop alone, timed the same way in every engine:
// os.clock() read inside Lua just before and after the loop. That leaves out
// process start-up (lua5.4) and compile/call overhead (everyone), which are
// reported beside it for information. os.clock() is CPU time in C Lua
// (lua5.4, lua-tasks) and wasmoon, and wall time (process.uptime) in fengari.
// The target is judged on the ratio of the medians; the ratio of the minima
// is printed beside it, since on a noisy VM (single reps here swing between
// 45 and 85 ms) the fastest rep is the closest to the engine's own speed.
'use strict';

const { Runtime } = require('..');
const { nowMs, sample, check, haveLuaCli, runLuaCli } = require('./harness');

const N = 1e7;
const SUM = 50000005000000n; // N * (N + 1) / 2
const LOOP = `local t0 = os.clock() local s = 0 for i = 1, ${N} do s = s + i end local t1 = os.clock()`;
const TARGET = 1.05; // lua-tasks loop time / lua5.4 loop time

async function run() {
  const impls = [];
  const rows = [];

  const rt = new Runtime();
  impls.push({
    name: 'lua-tasks',
    warmup: 2,
    reps: 41,
    once() {
      const t = nowMs();
      const [s, dt] = rt.load(`${LOOP} return s, t1 - t0`);
      const wallMs = nowMs() - t;
      check('lua-tasks', s, SUM);
      return { loopMs: dt * 1e3, wallMs };
    },
  });

  const haveCli = haveLuaCli();
  if (haveCli) {
    impls.push({
      name: 'lua5.4',
      warmup: 2,
      reps: 41,
      once() {
        const r = runLuaCli(`${LOOP} print(string.format('%d %.9f', s, t1 - t0))`);
        check('lua5.4', BigInt(r.count), SUM);
        return { loopMs: r.ms, wallMs: r.wallMs };
      },
    });
  }

  const { LuaFactory } = require('wasmoon');
  const wasmoon = await new LuaFactory().createEngine();
  impls.push({
    name: 'wasmoon',
    warmup: 2,
    reps: 9,
    async once() {
      const t = nowMs();
      // doString hands back the first return value only: pack both.
      const [s, dt] = await wasmoon.doString(`${LOOP} return { s, t1 - t0 }`);
      const wallMs = nowMs() - t;
      check('wasmoon', s, SUM);
      return { loopMs: dt * 1e3, wallMs };
    },
  });

  const { lua, lauxlib, lualib, to_luastring } = require('fengari');
  const L = lauxlib.luaL_newstate();
  lualib.luaL_openlibs(L);
  const fengariChunk = to_luastring(`${LOOP} return s, t1 - t0`);
  impls.push({
    name: 'fengari',
    warmup: 1,
    reps: 5,
    once() {
      const t = nowMs();
      if (lauxlib.luaL_dostring(L, fengariChunk) !== lua.LUA_OK) {
        throw new Error(`fengari: ${lua.lua_tojsstring(L, -1)}`);
      }
      const wallMs = nowMs() - t;
      const s = lua.lua_tointeger(L, -2);
      const dt = lua.lua_tonumber(L, -1);
      lua.lua_pop(L, 2);
      // fengari's integers are 32-bit (documented): the sum wraps around.
      check('fengari', s, BigInt.asIntN(32, SUM));
      return { loopMs: dt * 1e3, wallMs };
    },
  });

  impls.push({
    name: 'node',
    warmup: 2,
    reps: 9,
    once() {
      const t = nowMs();
      let s = 0;
      for (let i = 1; i <= N; i++) s += i;
      const wallMs = nowMs() - t;
      check('node', s, Number(SUM));
      return { wallMs };
    },
  });

  const stats = await sample(impls);
  rt.close();
  wasmoon.global.close();

  const base = stats.get('lua-tasks').loopMs.median;
  const loopRow = (impl, label, note) => {
    const m = stats.get(impl).loopMs;
    return {
      case: 'loop, os.clock in Lua',
      impl: label,
      value: m.median,
      min: m.min,
      unit: 'ms',
      ratio: m.median / base,
      note,
    };
  };
  const lt = loopRow('lua-tasks', 'lua-tasks', '');
  rows.push(lt);
  if (haveCli) {
    const cliRow = loopRow('lua5.4', 'lua5.4 CLI', '');
    const r = lt.value / cliRow.value;
    lt.target = `${r.toFixed(3)}× lua5.4 (minima: ${(lt.min / cliRow.min).toFixed(3)}×; target ≤ ${TARGET}×)`;
    lt.ok = r <= TARGET;
    rows.push(cliRow);
  } else {
    lt.target = `lua5.4 CLI not found: target ≤ ${TARGET}× not checked`;
    lt.ok = false;
  }
  rows.push(loopRow('wasmoon', 'wasmoon', ''));
  rows.push(loopRow('fengari', 'fengari', 'os.clock is wall time; 32-bit integers: the sum wraps'));

  const wallRow = (impl, label, note) => {
    const m = stats.get(impl).wallMs;
    return { case: 'whole call, wall clock', impl: label, value: m.median, min: m.min, unit: 'ms', note };
  };
  rows.push(wallRow('lua-tasks', 'lua-tasks', 'rt.load(): compile + run + return'));
  if (haveCli) rows.push(wallRow('lua5.4', 'lua5.4 CLI', 'spawn to exit, process start-up included'));
  rows.push(wallRow('wasmoon', 'wasmoon', 'await doString()'));
  rows.push(wallRow('fengari', 'fengari', 'luaL_dostring()'));
  rows.push(wallRow('node', 'node (JS)', 'the same loop in JavaScript, for scale'));
  return rows;
}

module.exports = {
  id: 'w1',
  title: `W1: local s=0 for i=1,1e7 do s=s+i end (sum checked)`,
  run,
};
