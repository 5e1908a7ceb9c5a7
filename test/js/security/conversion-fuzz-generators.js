// SPDX-License-Identifier: MIT
// The conversion fuzzer's random values from a seed: JS values, and Lua values with the Lua code that builds them.
'use strict';
const {
  MEMO_STRING,
  MEMO_BUFFER,
  INT64_MIN,
  INT64_MAX,
  luaInt,
  luaFloat,
  luaStr,
  LuaTable,
  canon,
  keyString,
} = require('./conversion-fuzz-model');

const MiB = 1 << 20;

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

module.exports = { MiB, rng, genValue, deepChain, LuaBuilder };
