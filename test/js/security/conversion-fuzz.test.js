// SPDX-License-Identifier: MIT
// Conversion fuzzer: random values cross JS <-> Lua; each comes back as docs/design.md#conversion says, or fails cleanly.
//
// Two generators, each a fixed number of iterations from a seeded PRNG:
//  - JS values (nested Arrays with holes, sparse Arrays, plain objects,
//    Maps, shared references, cycles, -0, NaN, BigInts, lone surrogates,
//    Buffers of invalid UTF-8, functions, objects kept by reference, huge
//    strings, nesting around the depth limit) go to Lua and back by one of
//    four routes (rt.set/rt.get, an argument and result of a Lua function,
//    a task's argument and result, an argument of a JS function Lua calls);
//  - Lua values (tables with every key type, shared tables and long
//    strings, cycles, invalid UTF-8, integers past 2^53, -0.0, NaN, Lua
//    functions and coroutines) are built by generated Lua code and returned.
// A small model of §5 predicts each outcome: the value (with its sharing:
// an object shared in the input is one object in the output, and distinct
// ones stay distinct), or the error (ERR_CONVERSION, or ERR_OUT_OF_RANGE for
// a BigInt outside int64). Runtimes with a small memoryLimit or
// conversionLimit may also refuse with ERR_MEMORY_LIMIT / ERR_CONVERSION,
// never more than that: after every iteration the runtime must still run
// code and hold no more than its limit.
//
// LUA_TASKS_FUZZ_SEED=<n> picks the seed (default fixed, so CI is
// repeatable), LUA_TASKS_FUZZ_ITERATIONS=<n> the count per generator, and
// LUA_TASKS_FUZZ_ONLY=<i> reruns one iteration. A failure names all three.
// The model is conversion-fuzz-model.js, the generators conversion-fuzz-generators.js.
'use strict';
const { Runtime } = require('../../..');
const { MAX_DEPTH, Refused, toLua, toJs, compare, show } = require('./conversion-fuzz-model');
const { MiB, rng, genValue, deepChain, LuaBuilder } = require('./conversion-fuzz-generators');

const SEED = Number(process.env.LUA_TASKS_FUZZ_SEED || 0x5eed);
const ITERATIONS = Number(process.env.LUA_TASKS_FUZZ_ITERATIONS || 250);
const ONLY = process.env.LUA_TASKS_FUZZ_ONLY === undefined ? -1 : Number(process.env.LUA_TASKS_FUZZ_ONLY);

// ---- The runs.

// Runtimes reused across iterations: none of the limits, small memoryLimit,
// small conversionLimit.
function runtimes() {
  return [
    { name: 'no limits', rt: new Runtime(), limited: false },
    { name: 'memoryLimit 6 MiB', rt: new Runtime({ memoryLimit: 6 * MiB, taskTimeout: 5000 }), limited: true },
    { name: 'conversionLimit 2 MiB', rt: new Runtime({ conversionLimit: 2 * MiB }), limited: true },
  ];
}

function prepare(env) {
  const { rt } = env;
  rt.load('function id(...) return ... end');
  env.id = rt.get('id');
  env.luaFn = rt.load('return function() return 7 end')[0];
}

function closeAll(envs) {
  for (const e of envs) e.rt.closeSync();
}

function allowed(err, env, expectedErr) {
  if (!err || typeof err.code !== 'string') return false;
  if (expectedErr && err.code === expectedErr.code) return true;
  // A limited runtime may refuse anything for its size.
  if (
    env.limited &&
    (err.code === 'ERR_MEMORY_LIMIT' || (err.code === 'ERR_CONVERSION' && /conversionLimit/.test(err.message)))
  ) {
    return true;
  }
  return false;
}

function stillUsable(env) {
  const { rt } = env;
  rt.load('v = nil collectgarbage()');
  const [a, b] = rt.load('local t = {} for i = 1, 10 do t[i] = i end return #t, 1 + 1');
  if (a !== 10 || b !== 2) throw new Error('the runtime no longer runs code');
  const { memoryUsed, memoryLimit } = rt.stats();
  if (memoryLimit && memoryUsed > memoryLimit) {
    throw new Error(`the state holds ${memoryUsed} bytes past memoryLimit ${memoryLimit}`);
  }
}

function label(kind, i) {
  return `${kind} iteration ${i} (reproduce: LUA_TASKS_FUZZ_SEED=${SEED} LUA_TASKS_FUZZ_ONLY=${i} npx jest ${__filename.replace(/^.*\/test\//, 'test/')})`;
}

// Judges one iteration against the model: `err` must be an error `allowed`
// for `expectedErr` (or the runtime's limits), a value that crossed must
// equal `expected`, and the runtime must still be usable. Throws naming
// `where`; returns the outcome ('crossed' or the error code).
function judge(where, env, { expected, expectedErr, actual, err }) {
  if (err) {
    if (!allowed(err, env, expectedErr)) {
      throw new Error(
        `${where}\n  failed with ${err.code} ${err.message}\n  expected ${expectedErr ? expectedErr.message : show(expected)}`,
      );
    }
  } else if (expectedErr) {
    throw new Error(`${where}\n  crossed (${show(actual)}) but ${expectedErr.message} was expected`);
  } else {
    try {
      compare(expected, actual);
    } catch (e) {
      throw new Error(`${where}\n  ${e.message}`, { cause: e });
    }
  }
  stillUsable(env);
  return err ? err.code : 'crossed';
}

async function oneJs(i, envs, foreignFn) {
  const r = rng(SEED * 1000003 + i);
  const env = r.pick(envs);
  const ctx = { pool: [], jsFn: () => 1, luaFn: env.luaFn, foreignFn, budget: 1500 }; // values at most
  const value = r.chance(0.06) ? deepChain(r, MAX_DEPTH - 3 + r.int(6)) : genValue(r, ctx, 0, []);
  const model = { memo: new Map(), luaFns: new Map([[env.luaFn, { t: 'luafn' }]]) };
  let expected;
  let expectedErr = null;
  try {
    const lua = toLua(value, model);
    expected = toJs(lua, { out: new Map() });
  } catch (e) {
    if (!(e instanceof Refused)) throw e;
    expectedErr = e;
  }
  const route = r.int(4);
  let actual;
  let err = null;
  try {
    if (route === 0) {
      env.rt.set('v', value);
      actual = env.rt.get('v');
    } else if (route === 1) {
      actual = env.id(value);
    } else if (route === 2) {
      actual = await env.rt.call('id', value);
    } else {
      env.rt.set('v', value);
      let got;
      env.rt.set('sink', (x) => {
        got = x;
      });
      env.rt.load('sink(v)');
      actual = got;
    }
  } catch (e) {
    err = e;
  }
  return judge(`${label('JS value', i)}, ${env.name}, route ${route}: ${show(value)}`, env, {
    expected,
    expectedErr,
    actual,
    err,
  });
}

async function oneLua(i, envs) {
  const r = rng(SEED * 7919 + i + 0x10000);
  const env = r.pick(envs);
  const b = new LuaBuilder(r);
  let root;
  if (r.chance(0.08)) {
    root = b.deep(MAX_DEPTH - 3 + r.int(6));
  } else {
    root = b.table();
    b.fill(root, 0);
  }
  let expected;
  let expectedErr = null;
  try {
    expected = toJs(root, { out: new Map() });
  } catch (e) {
    if (!(e instanceof Refused)) throw e;
    expectedErr = e;
  }
  const code = b.code(root);
  const route = r.int(3);
  let actual;
  let err = null;
  try {
    if (route === 0) {
      [actual] = env.rt.load(code);
    } else if (route === 1) {
      env.rt.set('make', env.rt.load(`return function() ${code} end`)[0]);
      actual = await env.rt.call('make');
    } else {
      let got;
      env.rt.set('sink', (x) => {
        got = x;
      });
      env.rt.load(`sink((function() ${code} end)())`);
      actual = got;
    }
  } catch (e) {
    err = e;
  }
  // (Building the value may pass memoryLimit in Lua itself: a LuaError.)
  return judge(
    `${label('Lua value', i)}, ${env.name}, route ${route}:\n${code.length > 2000 ? `${code.slice(0, 2000)}...` : code}`,
    env,
    {
      expected,
      expectedErr,
      actual,
      err,
    },
  );
}

function iterations() {
  if (ONLY >= 0) return [ONLY];
  return Array.from({ length: ITERATIONS }, (_, i) => i);
}

test(`JS values cross to Lua and back as docs/design.md#conversion says, or fail cleanly (seed ${SEED})`, async () => {
  const envs = runtimes();
  const other = new Runtime();
  try {
    envs.forEach(prepare);
    const foreignFn = other.load('return function() end')[0];
    const outcomes = {};
    for (const i of iterations()) {
      const o = await oneJs(i, envs, foreignFn);
      outcomes[o] = (outcomes[o] || 0) + 1;
    }
    if (process.env.LUA_TASKS_FUZZ_VERBOSE) console.log(outcomes);
    // Not vacuous: most values cross.
    if (ONLY < 0) expect(outcomes.crossed).toBeGreaterThan(ITERATIONS / 2);
  } finally {
    other.closeSync();
    closeAll(envs);
  }
}, 60000);

test(`Lua values cross to JS as docs/design.md#conversion says, or fail cleanly (seed ${SEED})`, async () => {
  const envs = runtimes();
  try {
    envs.forEach(prepare);
    const outcomes = {};
    for (const i of iterations()) {
      const o = await oneLua(i, envs);
      outcomes[o] = (outcomes[o] || 0) + 1;
    }
    if (process.env.LUA_TASKS_FUZZ_VERBOSE) console.log(outcomes);
    if (ONLY < 0) expect(outcomes.crossed).toBeGreaterThan(ITERATIONS / 2);
  } finally {
    closeAll(envs);
  }
}, 60000);

// The model itself, on values whose outcome is known: a broken model would
// let the fuzzer pass anything.
test("the fuzzer's model predicts known conversions", () => {
  const ctx = () => ({ memo: new Map(), luaFns: new Map() });
  const rt = (v) => toJs(toLua(v, ctx()), { out: new Map() });
  expect(rt([1, 2, 3])).toEqual([1, 2, 3]);
  expect(rt([1, null, 3])).toEqual({ 1: 1, 3: 3 });
  expect(rt([])).toEqual({});
  expect(
    rt(
      new Map([
        [1, 'a'],
        [2, 'b'],
      ]),
    ),
  ).toEqual(['a', 'b']);
  expect(rt(2 ** 53)).toBe(2n ** 53n);
  expect(Object.is(rt(-0), -0)).toBe(true);
  expect(rt('\ud800')).toBe('\ufffd');
  expect(Buffer.isBuffer(rt(Buffer.from([0xff])))).toBe(true);
  expect(() => rt(2n ** 64n)).toThrow(Refused);
  const shared = { a: 1 };
  const out = rt([shared, shared]);
  expect(out[0]).toBe(out[1]);
  expect(() => compare({ a: 1 }, { a: 2 })).toThrow(/differs/);
  expect(() =>
    compare(
      [{}, {}],
      (() => {
        const o = {};
        return [o, o];
      })(),
    ),
  ).toThrow(/sharing/);
});
