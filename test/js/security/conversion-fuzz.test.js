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
'use strict';
const util = require('node:util');
const { Runtime } = require('../../..');

const SEED = Number(process.env.LUA_TASKS_FUZZ_SEED || 0x5eed);
const ITERATIONS = Number(process.env.LUA_TASKS_FUZZ_ITERATIONS || 250);
const ONLY = process.env.LUA_TASKS_FUZZ_ONLY === undefined ? -1 : Number(process.env.LUA_TASKS_FUZZ_ONLY);
const MAX_DEPTH = 200; // kMaxConvertDepth
const MEMO_STRING = 256; // kMemoStringBytes: Lua strings this long convert once
const MEMO_BUFFER = 1024; // JS Buffers this large convert once
const MiB = 1 << 20;
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

// ---- PRNG: a 32-bit xorshift, seeded through a mixing step per iteration.

function mix(x) {
  x = Math.imul(x ^ (x >>> 16), 0x45d9f3b);
  x = Math.imul(x ^ (x >>> 16), 0x45d9f3b);
  return (x ^ (x >>> 16)) >>> 0;
}

function rng(seed) {
  let s = mix(seed) || 1;
  const next = () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s / 4294967296;
  };
  const r = {
    float: next,
    int: (n) => Math.floor(next() * n), // 0..n-1
    chance: (p) => next() < p,
    pick: (list) => list[Math.floor(next() * list.length)],
  };
  return r;
}

// ---- The model of docs/design.md#conversion.

class Refused extends Error {
  constructor(code, why) {
    super(`${code}: ${why}`);
    this.code = code;
  }
}

const NIL = { t: 'nil' };
const luaInt = (v) => ({ t: 'int', v: BigInt(v) });
const luaFloat = (v) => ({ t: 'float', v });
const luaStr = (b) => ({ t: 'str', b }); // one Lua string object

class LuaTable {
  constructor() {
    this.t = 'table';
    this.keys = new Map(); // canonical key -> [key model, value model]
  }
  set(k, v) {
    if (v === NIL) this.keys.delete(canon(k));
    else this.keys.set(canon(k), [k, v]);
  }
}

let tableIds = 0;
const tableId = new WeakMap();
function canon(k) {
  switch (k.t) {
    case 'int':
      return `i${k.v}`;
    case 'float':
      return Number.isInteger(k.v) ? `i${BigInt(k.v)}` : `f${k.v}`; // Lua normalizes 2.0 to 2
    case 'bool':
      return `b${k.v}`;
    case 'str':
      return `s${k.b.toString('hex')}`;
    default:
      if (!tableId.has(k)) tableId.set(k, ++tableIds);
      return `o${tableId.get(k)}`;
  }
}

function isPlain(v) {
  const p = Object.getPrototypeOf(v);
  return p === null || Object.getPrototypeOf(p) === null;
}

// JS -> Lua, in the converter's order. `ctx.memo` maps JS objects (and
// Buffers of MEMO_BUFFER bytes or more) to their Lua model.
function toLua(v, ctx, depth = 0) {
  switch (typeof v) {
    case 'undefined':
      return NIL;
    case 'boolean':
      return { t: 'bool', v };
    case 'number':
      if (Number.isInteger(v) && v >= -(2 ** 63) && v < 2 ** 63 && !Object.is(v, -0)) return luaInt(v);
      return luaFloat(v);
    case 'bigint':
      if (v < INT64_MIN || v > INT64_MAX) throw new Refused('ERR_OUT_OF_RANGE', 'BigInt outside int64');
      return luaInt(v);
    case 'string':
      return luaStr(Buffer.from(v, 'utf8')); // lone surrogates become U+FFFD
    case 'symbol':
      throw new Refused('ERR_CONVERSION', 'symbol');
    case 'function':
      // A Lua function of this runtime crosses as itself; one of another
      // runtime as a JS function that calls there (and comes back as itself).
      if (ctx.luaFns.has(v)) return ctx.luaFns.get(v);
      return { t: 'ref', v };
    default:
      break;
  }
  if (v === null) return NIL;
  if (v instanceof Uint8Array || v instanceof ArrayBuffer) {
    const bytes = Buffer.from(v instanceof ArrayBuffer ? new Uint8Array(v) : v);
    if (bytes.length < MEMO_BUFFER) return luaStr(bytes);
    if (!ctx.memo.has(v)) ctx.memo.set(v, luaStr(bytes));
    return ctx.memo.get(v);
  }
  if (ArrayBuffer.isView(v)) return { t: 'ref', v };
  const isArray = Array.isArray(v);
  const isMap = !isArray && !isPlain(v) && v instanceof Map;
  if (!isArray && !isPlain(v) && !isMap) return { t: 'ref', v };
  if (ctx.memo.has(v)) return ctx.memo.get(v);
  if (depth + 1 > MAX_DEPTH) throw new Refused('ERR_CONVERSION', 'too deep');
  const t = new LuaTable();
  ctx.memo.set(v, t);
  if (isArray) {
    // Own index keys, ascending (a sparse Array's length says nothing).
    for (const key of Object.keys(v)) {
      const i = Number(key);
      if (!(String(i) === key && Number.isInteger(i) && i < v.length)) continue;
      const e = v[i];
      if (e === undefined || e === null) continue;
      t.set(luaInt(i + 1), toLua(e, ctx, depth + 1));
    }
  } else if (isMap) {
    for (const [k, e] of v) {
      const lk = toLua(k, ctx, depth + 1);
      if (lk === NIL || (lk.t === 'float' && Number.isNaN(lk.v))) throw new Refused('ERR_CONVERSION', 'nil or NaN key');
      t.set(lk.t === 'float' && Number.isInteger(lk.v) ? luaInt(lk.v) : lk, toLua(e, ctx, depth + 1));
    }
  } else {
    for (const k of Object.keys(v)) t.set(luaStr(Buffer.from(k, 'utf8')), toLua(v[k], ctx, depth + 1));
  }
  return t;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });
function validUtf8(b) {
  try {
    utf8.decode(b);
    return true;
  } catch {
    return false;
  }
}

// A marker the comparison matches by type only: a Lua function or coroutine
// crosses as a fresh handle.
const LUA_FUNCTION = { handle: 'function' };
const LUA_HANDLE = { handle: 'object' };

// Lua -> JS: the value JS should see. Tables and long strings map to one JS
// value each (ctx.out).
function toJs(m, ctx, depth = 0) {
  switch (m.t) {
    case 'nil':
      return undefined;
    case 'bool':
      return m.v;
    case 'int':
      return m.v >= -(2n ** 53n - 1n) && m.v <= 2n ** 53n - 1n ? Number(m.v) : m.v;
    case 'float':
      return m.v;
    case 'str': {
      if (m.b.length >= MEMO_STRING && ctx.out.has(m)) return ctx.out.get(m);
      const v = validUtf8(m.b) ? m.b.toString('utf8') : Buffer.from(m.b);
      if (m.b.length >= MEMO_STRING) ctx.out.set(m, v);
      return v;
    }
    case 'ref':
      return m.v;
    case 'luafn':
      return LUA_FUNCTION;
    case 'co':
      return LUA_HANDLE;
    default:
      break;
  }
  if (ctx.out.has(m)) return ctx.out.get(m);
  if (depth + 1 > MAX_DEPTH) throw new Refused('ERR_CONVERSION', 'too deep');
  const entries = [...m.keys.values()];
  const n = entries.length;
  const array = n > 0 && entries.every(([k]) => k.t === 'int' && k.v >= 1n && k.v <= BigInt(n));
  if (array) {
    const out = new Array(n);
    ctx.out.set(m, out);
    for (const [k, e] of entries) out[Number(k.v) - 1] = toJs(e, ctx, depth + 1);
    return out;
  }
  const out = {};
  ctx.out.set(m, out);
  for (const [k, e] of entries) {
    Object.defineProperty(out, keyString(k), {
      value: toJs(e, ctx, depth + 1),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return out;
}

function keyString(k) {
  switch (k.t) {
    case 'str':
      return k.b.toString('utf8');
    case 'int':
      return String(k.v);
    case 'float':
      return String(k.v);
    case 'bool':
      return String(k.v);
    default:
      throw new Refused('ERR_CONVERSION', `a ${k.t} key`);
  }
}

// Compares what JS got with the model: the same values, and the same
// sharing (a bijection between expected and actual objects). Throws a
// message naming the path.
function compare(expected, actual, path = 'v', seen = { e2a: new Map(), a2e: new Map() }) {
  const fail = (why) => {
    throw new Error(`${path}: ${why}; expected ${show(expected)}, got ${show(actual)}`);
  };
  if (expected === LUA_FUNCTION) {
    if (typeof actual !== 'function') fail('not a function');
    return;
  }
  if (expected === LUA_HANDLE) {
    if (typeof actual !== 'object' || actual === null) fail('not a handle');
    return;
  }
  if (typeof expected !== 'object' || expected === null || typeof expected === 'function') {
    if (!Object.is(expected, actual)) fail('differs');
    return;
  }
  if (Buffer.isBuffer(expected)) {
    if (!Buffer.isBuffer(actual) || !expected.equals(actual)) fail('bytes differ');
    // A long string is one JS Buffer wherever it is (one way: two equal
    // strings may be distinct Lua objects or one).
    if (seen.e2a.has(expected) && seen.e2a.get(expected) !== actual) fail('a shared long string came out twice');
    seen.e2a.set(expected, actual);
    return;
  }
  if (!Array.isArray(expected) && !isPlain(expected)) {
    if (expected !== actual) fail('not the same object');
    return;
  }
  if (seen.e2a.has(expected) || seen.a2e.has(actual)) {
    if (seen.e2a.get(expected) !== actual || seen.a2e.get(actual) !== expected) fail('sharing differs');
    return;
  }
  seen.e2a.set(expected, actual);
  if (typeof actual === 'object' && actual !== null) seen.a2e.set(actual, expected);
  if (Array.isArray(expected) !== Array.isArray(actual) || typeof actual !== 'object' || actual === null) {
    fail(Array.isArray(expected) ? 'not an Array' : 'not an object');
  }
  const ek = Object.keys(expected).sort();
  const ak = Object.keys(actual).sort();
  if (ek.join('\0') !== ak.join('\0')) fail(`keys differ: ${show(ek)} vs ${show(ak)}`);
  if (Array.isArray(expected) && expected.length !== actual.length) fail('length differs');
  for (const k of ek) compare(expected[k], actual[k], `${path}[${JSON.stringify(k)}]`, seen);
}

function show(v) {
  return util.inspect(v, { depth: 2, maxArrayLength: 5, maxStringLength: 40, breakLength: Infinity });
}

// ---- JS value generator.

const WORDS = [
  '',
  'a',
  'key',
  'é',
  '€',
  '😀',
  'naïve',
  '日本語',
  '__proto__',
  'constructor',
  '0',
  '1',
  '2',
  '-1',
  '1.5',
  'true',
  'length',
];

function genScalar(r, ctx) {
  switch (r.int(24)) {
    case 0:
      return undefined;
    case 1:
      return null;
    case 2:
      return r.chance(0.5);
    case 3:
      return r.int(2000) - 1000;
    case 4:
      return r.pick([2 ** 53 - 1, -(2 ** 53 - 1), 2 ** 53, 2 ** 60, -(2 ** 63), 2 ** 63, 2 ** 64, 1e300, 5e-324]);
    case 5:
      return r.pick([-0, NaN, Infinity, -Infinity, 0.1, -2.5]);
    case 6:
      return (r.float() - 0.5) * 10 ** r.int(30);
    case 7:
      return r.pick([0n, 7n, -7n, 2n ** 53n, INT64_MAX, INT64_MIN, r.chance(0.1) ? 2n ** 63n : 1n]);
    case 8:
    case 9:
      return r.pick(WORDS);
    case 10:
      return genString(r, r.int(40));
    case 11:
      return genString(r, MEMO_STRING + r.int(2000));
    case 12:
      return r.chance(0.2) ? `${'x'.repeat(r.int(300))}\ud800${'y'.repeat(r.int(3))}` : `lone \udc00 surrogate`;
    case 13:
      return genBytes(r, r.int(64));
    case 14:
      return genBytes(r, MEMO_BUFFER + r.int(4000));
    case 15:
      return new Uint8Array(genBytes(r, r.int(32))).buffer;
    case 16:
      return r.chance(0.05) ? Symbol('s') : 1;
    case 17:
      return ctx.jsFn;
    case 18:
      return r.pick([new Date(0), new Float64Array([1.5, -0]), new Set([1]), new (class Point {})(), new Error('e')]);
    case 19:
      return r.chance(0.5) ? ctx.luaFn : r.chance(0.1) ? ctx.foreignFn : ctx.luaFn;
    case 20:
      return r.chance(0.03) ? 'h'.repeat((1 + r.int(4)) * MiB) : 'short';
    case 21:
      return r.chance(0.03) ? Buffer.alloc((1 + r.int(4)) * MiB, 0xff) : Buffer.from('ok');
    default:
      return r.int(100);
  }
}

function genString(r, n) {
  const parts = ['a', 'b', 'Z', ' ', '\n', '"', '\\', '\0', 'é', '€', '😀', '日'];
  let s = '';
  while (s.length < n) s += r.pick(parts);
  return s;
}

function genBytes(r, n) {
  const b = Buffer.alloc(n);
  const valid = r.chance(0.5);
  for (let i = 0; i < n; i++) b[i] = valid ? 0x20 + r.int(0x5f) : r.int(256);
  return b;
}

function genValue(r, ctx, depth, ancestors) {
  if (--ctx.budget <= 0 || depth > 4 || r.chance(0.35)) return genScalar(r, ctx);
  if (ctx.pool.length && r.chance(0.12)) return r.pick(ctx.pool); // shared reference
  if (ancestors.length && r.chance(0.04)) return r.pick(ancestors); // cycle
  const size = r.chance(0.1) ? r.int(200) : r.int(6);
  let v;
  switch (r.int(6)) {
    case 0:
    case 1: {
      v = [];
      for (let i = 0; i < size; i++) v.push(genValue(r, ctx, depth + 1, [...ancestors, v]));
      if (r.chance(0.2)) v.length += r.int(100); // trailing holes
      if (r.chance(0.1)) v[v.length + r.int(1000)] = genScalar(r, ctx); // a gap
      if (r.chance(0.05)) v[r.chance(0.5) ? 1e8 : 2 ** 32 - 2] = 'far'; // sparse
      if (r.chance(0.1)) delete v[r.int(v.length + 1)];
      if (r.chance(0.1)) v.named = 1; // not an element
      break;
    }
    case 2:
    case 3: {
      v = r.chance(0.1) ? Object.create(null) : {};
      for (let i = 0; i < size; i++) {
        const k = r.chance(0.5) ? r.pick(WORDS) : genString(r, 1 + r.int(8));
        Object.defineProperty(v, k, {
          value: genValue(r, ctx, depth + 1, [...ancestors, v]),
          enumerable: true,
          writable: true,
          configurable: true,
        });
      }
      if (r.chance(0.1)) v[Symbol('skipped')] = 1;
      break;
    }
    case 4: {
      // Keys of one family, so no two stringify alike in JS.
      v = new Map();
      const family = r.int(5);
      for (let i = 0; i < size; i++) {
        let k;
        if (family === 0) k = `k${i}`;
        else if (family === 1) {
          k = i + 1;
        } // 1..n: back as an Array
        else if (family === 2) k = i + 0.5;
        else if (family === 3) k = r.chance(0.5) ? BigInt(i) * 2n ** 40n : i === 0;
        else k = r.chance(0.9) ? [i] : NaN; // a table key: cannot come back to JS
        v.set(k, genValue(r, ctx, depth + 1, [...ancestors, v]));
      }
      break;
    }
    default:
      return genScalar(r, ctx);
  }
  ctx.pool.push(v);
  return v;
}

// A chain of containers `n` deep with a value at the bottom.
function deepChain(r, n) {
  let v = r.int(10);
  for (let i = 0; i < n; i++) v = r.chance(0.5) ? [v] : { d: v };
  return v;
}

// ---- Lua value generator: a model, and Lua code that builds it.

// A Lua string literal for any bytes (three-digit decimal escapes).
function luaString(b) {
  let s = '"';
  for (const c of b) {
    s += c >= 0x20 && c < 0x7f && c !== 0x22 && c !== 0x5c ? String.fromCharCode(c) : `\\${String(c).padStart(3, '0')}`;
  }
  return `${s}"`;
}

function luaNumber(m) {
  if (m.t === 'int') {
    if (m.v === INT64_MIN) return 'math.mininteger';
    return `(${m.v})`;
  }
  const v = m.v;
  if (Number.isNaN(v)) return '(0/0)';
  if (v === Infinity) return 'math.huge';
  if (v === -Infinity) return '(-math.huge)';
  if (Object.is(v, -0)) return '(-0.0)';
  const s = String(v);
  return /[.e]/.test(s) ? `(${s})` : `(${s}.0)`;
}

class LuaBuilder {
  constructor(r) {
    this.r = r;
    this.lines = ['local T, S = {}, {}'];
    this.tables = []; // models, index + 1 is T's key
    this.strings = []; // long shared strings
  }
  table() {
    const t = new LuaTable();
    this.tables.push(t);
    this.lines.push(`T[${this.tables.length}] = {}`);
    t.ref = `T[${this.tables.length}]`;
    return t;
  }
  scalar() {
    const r = this.r;
    switch (r.int(12)) {
      case 0:
        return this.bool();
      case 1: {
        const m = luaInt(
          r.pick([0n, 1n, -1n, 2n ** 53n - 1n, 2n ** 53n, -(2n ** 53n), INT64_MAX, INT64_MIN, BigInt(r.int(1e6))]),
        );
        return [m, luaNumber(m)];
      }
      case 2: {
        const m = luaFloat(r.pick([-0, NaN, Infinity, -Infinity, 0.5, 1e300, 2 ** 53, 3, -1e-300]));
        return [m, luaNumber(m)];
      }
      case 3:
      case 4: {
        const b = genBytes(r, r.int(50));
        return [luaStr(b), luaString(b)];
      }
      case 5: {
        const b = Buffer.from(genString(r, r.int(30)), 'utf8');
        return [luaStr(b), luaString(b)];
      }
      case 6:
        return this.longString();
      case 7:
        return [{ t: 'luafn' }, 'function() return 1 end'];
      case 8:
        return [{ t: 'co' }, 'coroutine.create(print)'];
      case 9:
        if (this.strings.length) {
          const i = r.int(this.strings.length);
          return [this.strings[i], `S[${i + 1}]`];
        }
        return this.longString();
      default: {
        const m = luaInt(r.int(1000));
        return [m, luaNumber(m)];
      }
    }
  }
  bool() {
    const v = this.r.chance(0.5);
    return [{ t: 'bool', v }, String(v)];
  }
  // A long string kept in S, so references share it.
  longString() {
    const r = this.r;
    const n = r.chance(0.03) ? (1 + r.int(4)) * MiB : MEMO_STRING + r.int(3000);
    const bytes = r.pick([Buffer.from('ab'), Buffer.from([0xff]), Buffer.from('é'), Buffer.from('€x')]);
    const reps = Math.ceil(n / bytes.length);
    const m = luaStr(Buffer.concat(new Array(reps).fill(bytes)));
    this.strings.push(m);
    this.lines.push(`S[${this.strings.length}] = string.rep(${luaString(bytes)}, ${reps})`);
    return [m, `S[${this.strings.length}]`];
  }
  key(t) {
    const r = this.r;
    for (;;) {
      let k;
      let code;
      switch (r.int(7)) {
        case 0:
        case 1: {
          const b = Buffer.from(r.chance(0.5) ? r.pick(WORDS) : genString(r, 1 + r.int(6)), 'utf8');
          k = luaStr(b);
          code = luaString(b);
          break;
        }
        case 2: {
          const b = genBytes(r, 1 + r.int(6));
          k = luaStr(b);
          code = luaString(b);
          break;
        }
        case 3:
          k = luaInt(r.chance(0.7) ? r.int(10) + 1 : r.pick([INT64_MAX, -5n, 0n, 2n ** 53n]));
          code = luaNumber(k);
          break;
        case 4:
          k = luaFloat(r.pick([0.5, -2.25, 1e100, Infinity, -Infinity]));
          code = luaNumber(k);
          break;
        case 5:
          [k, code] = this.bool();
          break;
        default:
          if (this.tables.length && r.chance(0.1)) {
            k = r.pick(this.tables);
            code = k.ref;
            break;
          }
          k = luaInt(t.keys.size + 1);
          code = luaNumber(k);
          break;
      }
      // No two keys of one table may stringify alike in JS (which one wins would be lua_next's order).
      const js = k.t === 'table' ? canon(k) : keyString(k);
      if (!t.jsKeys) t.jsKeys = new Set();
      if (t.jsKeys.has(js) && !t.keys.has(canon(k))) continue;
      t.jsKeys.add(js);
      return [k, code];
    }
  }
  fill(t, depth) {
    const r = this.r;
    const n = r.chance(0.1) ? r.int(100) : r.int(6);
    const sequence = r.chance(0.4);
    for (let i = 0; i < n; i++) {
      const [k, kc] = sequence ? [luaInt(i + 1), String(i + 1)] : this.key(t);
      if (sequence) (t.jsKeys || (t.jsKeys = new Set())).add(String(i + 1));
      let v;
      let vc;
      if (depth < 4 && r.chance(0.3)) {
        if (this.tables.length && r.chance(0.25)) {
          v = r.pick(this.tables); // shared, or a cycle
        } else {
          v = this.table();
          this.fill(v, depth + 1);
        }
        vc = v.ref;
      } else {
        [v, vc] = this.scalar();
      }
      t.set(k, v);
      this.lines.push(`${t.ref}[${kc}] = ${vc}`);
    }
    if (r.chance(0.05) && this.strings.length) {
      // Many references to one long string.
      const i = r.int(this.strings.length);
      const base = t.keys.size;
      const count = 100 + r.int(2000);
      const seq = [...t.keys.values()].every(([k]) => k.t === 'int');
      if (seq) {
        for (let j = 1; j <= count; j++) t.set(luaInt(base + j), this.strings[i]);
        this.lines.push(`for j = 1, ${count} do ${t.ref}[${base} + j] = S[${i + 1}] end`);
      }
    }
  }
  deep(n) {
    const root = this.table();
    this.lines.push(`do local t = ${root.ref} for i = 1, ${n} do t.d = {} t = t.d end t.d = 1 end`);
    let t = root;
    for (let i = 0; i < n; i++) {
      const c = new LuaTable();
      t.set(luaStr(Buffer.from('d')), c);
      t = c;
    }
    t.set(luaStr(Buffer.from('d')), luaInt(1));
    return root;
  }
  code(root) {
    return `${this.lines.join('\n')}\nreturn ${root.ref}`;
  }
}

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
