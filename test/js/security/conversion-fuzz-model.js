// SPDX-License-Identifier: MIT
// The conversion fuzzer's model of docs/design.md#conversion: what a value becomes on the other side, and a comparison that checks sharing too.
'use strict';
const util = require('node:util');

const MAX_DEPTH = 200; // kMaxConvertDepth
const MEMO_STRING = 256; // kMemoStringBytes: Lua strings this long convert once
const MEMO_BUFFER = 1024; // JS Buffers this large convert once
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

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

module.exports = {
  MAX_DEPTH,
  MEMO_STRING,
  MEMO_BUFFER,
  INT64_MIN,
  INT64_MAX,
  Refused,
  luaInt,
  luaFloat,
  luaStr,
  LuaTable,
  canon,
  toLua,
  toJs,
  keyString,
  compare,
  show,
};
