// SPDX-License-Identifier: MIT
// Lua calling JS functions many times in one entry: the calls share a handle scope, renewed as
// they go (js_ref.cpp, LuaHost::CallScope). Every value still crosses whole, whatever runs
// between the calls: finalizers, nested entries, a stopped collector, functions collected.
'use strict';
const { makeRuntime } = require('../helpers');

const LOOP = `local n = 0
  for i = 1, 300 do
    local k = i % 5
    if k == 0 then n = n + num(i, 1)
    elseif k == 1 then n = n + #str(i)
    elseif k == 2 then n = n + tbl(i).v
    elseif k == 3 then n = n + fun(i)()
    else n = n + (flag(i) and 1 or 0) end
  end
  return n`;

function setCalls(rt) {
  rt.set('num', (a, b) => a + b);
  rt.set('str', (i) => 'x'.repeat(i));
  rt.set('tbl', (i) => ({ v: i }));
  rt.set('fun', (i) => () => i);
  rt.set('flag', (i) => i % 2 === 0);
}

function expected() {
  let n = 0;
  for (let i = 1; i <= 300; i++) {
    const k = i % 5;
    if (k === 0) n += i + 1;
    else if (k === 1) n += i;
    else if (k === 2) n += i;
    else if (k === 3) n += i;
    else n += i % 2 === 0 ? 1 : 0;
  }
  return n;
}

test('a loop of calls moving numbers, strings, tables, functions and booleans returns every result', async () => {
  const rt = makeRuntime();
  setCalls(rt);
  rt.load(`function run() ${LOOP} end`);
  expect(rt.load(LOOP)).toEqual([expected()]); // outside any task
  expect(await rt.call('run')).toBe(expected()); // in a task: its calls run in its async context
});

test('calls from __gc finalizers, run by the loop and by host code converting a result, all cross', () => {
  const rt = makeRuntime({ libs: 'all' });
  let fromGc = 0;
  rt.set('add', (a, b) => a + b);
  rt.set('hit', () => ++fromGc);
  rt.set('text', (n) => 'y'.repeat(n)); // converting it allocates: the collector may step there
  const [n, calls] = rt.load(`local n, calls = 0, 0
    for i = 1, 2000 do
      setmetatable({}, {__gc = function() hit() calls = calls + add(1, 0) end})
      n = n + add(i, 1)
      if i % 100 == 0 then collectgarbage() end
      n = n + #text(i % 300)
    end
    collectgarbage()
    return n, calls`);
  let want = 0;
  for (let i = 1; i <= 2000; i++) want += i + 1 + (i % 300);
  expect(n).toBe(want);
  expect(calls).toBe(2000);
  expect(fromGc).toBe(2000);
});

test('calls with the collector stopped, and after it restarts', () => {
  const rt = makeRuntime({ libs: 'all' });
  rt.set('add', (a, b) => a + b);
  expect(
    rt.load(`local n = 0
      for i = 1, 500 do n = n + add(i, 1) end
      collectgarbage('stop')
      for i = 1, 500 do n = n + add(i, 1) end
      collectgarbage('restart')
      for i = 1, 500 do n = n + add(i, 1) end
      return n`),
  ).toEqual([(3 * (500 * 501)) / 2 + 1500]);
});

test('a JS function called from Lua that calls a Lua function calling JS in a loop: both loops see every result', () => {
  const rt = makeRuntime();
  rt.set('add', (a, b) => a + b);
  rt.load('function inner(k) local s = 0 for i = 1, 100 do s = s + add(i, k) end return s end');
  const inner = rt.get('inner');
  rt.set('outer', (k) => inner(k) + inner(k + 1));
  const [n] = rt.load('local n = 0 for k = 1, 100 do n = n + add(k, 0) + outer(k) end return n');
  let want = 0;
  for (let k = 1; k <= 100; k++) want += k + 5050 + 100 * k + 5050 + 100 * (k + 1);
  expect(n).toBe(want);
});

test('a function collected during a loop of calls is never called in place of a new one at its address', () => {
  // Each read of holder.f0 / holder.f1 makes a new Lua value for the function; the
  // collector frees the old ones, and a new one may take the address of a freed one.
  class Holder {
    constructor() {
      this.f0 = () => 1;
      this.f1 = () => 1000;
    }
  }
  const rt = makeRuntime({ libs: 'all' });
  rt.set('holder', new Holder());
  const [n] = rt.load(`local n = 0
    for i = 1, 600 do
      local f = holder['f' .. (i % 2)]
      n = n + f()
      f = nil
      if i % 3 == 0 then collectgarbage() end
    end
    return n`);
  expect(n).toBe(300 * 1 + 300 * 1000);
});

test('a JS function that throws now and then inside a loop: each error is its own, the other results whole', () => {
  const rt = makeRuntime();
  rt.set('maybe', (i) => {
    if (i % 7 === 0) throw new RangeError(`bad ${i}`);
    return i;
  });
  const [sum, errors, last] = rt.load(`local sum, errors, last = 0, 0, nil
    for i = 1, 700 do
      local ok, v = pcall(maybe, i)
      if ok then sum = sum + v else errors = errors + 1 last = v.message end
    end
    return sum, errors, last`);
  let want = 0;
  for (let i = 1; i <= 700; i++) if (i % 7 !== 0) want += i;
  expect(sum).toBe(want);
  expect(errors).toBe(100);
  expect(last).toBe('bad 700');
});

test('a task mixing promise-returning calls with plain ones gets every value', async () => {
  const rt = makeRuntime();
  rt.set('add', (a, b) => a + b);
  rt.set('later', (v) => Promise.resolve(v * 2));
  rt.load(`function run()
    local n = 0
    for i = 1, 200 do
      n = n + add(i, 1)
      if i % 10 == 0 then n = n + later(i) end
    end
    return n
  end`);
  let want = 0;
  for (let i = 1; i <= 200; i++) want += i + 1 + (i % 10 === 0 ? 2 * i : 0);
  expect(await rt.call('run')).toBe(want);
});
