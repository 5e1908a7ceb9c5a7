// SPDX-License-Identifier: MIT
// Value conversion between JS and Lua, both ways (docs/design.md#conversion).
'use strict';
const { ConversionError } = require('../../..');
const { makeRuntime } = require('../helpers');

const code = (c) => expect.objectContaining({ code: c });

let rt;
beforeEach(() => {
  rt = makeRuntime();
});

// Sets `v` as a global and returns what Lua says about it.
const inLua = (v, expr) => {
  rt.set('v', v);
  return rt.load(`return ${expr}`);
};
// Round trip JS -> Lua -> JS.
const roundTrip = (v) => {
  rt.set('v', v);
  return rt.get('v');
};

describe('JS -> Lua, row by row', () => {
  test.each([
    ['undefined', undefined, 'nil', null],
    ['null', null, 'nil', null],
    ['true', true, 'boolean', true],
    ['false', false, 'boolean', false],
    ['an integral number', 42, 'number', 42],
    ['a fractional number', 1.5, 'number', 1.5],
    ['a BigInt', 7n, 'number', 7],
    ['a string', 'héllo 😀', 'string', 'héllo 😀'],
    ['an empty string', '', 'string', ''],
  ])('%s becomes a Lua %s', (_, value, type, back) => {
    expect(inLua(value, 'type(v), v')).toEqual([type, back]);
  });

  test.each([
    ['0', 0, 'integer'],
    ['-0 (keeps its sign)', -0, 'float'],
    ['1.0 (integral)', 1.0, 'integer'],
    ['0.5', 0.5, 'float'],
    ['2^53 - 1', 2 ** 53 - 1, 'integer'],
    ['-(2^53 - 1)', -(2 ** 53 - 1), 'integer'],
    ['2^53', 2 ** 53, 'integer'],
    ['-2^63 (smallest int64)', -(2 ** 63), 'integer'],
    ['2^63 (just past int64)', 2 ** 63, 'float'],
    ['1e300', 1e300, 'float'],
    ['Infinity', Infinity, 'float'],
    ['-Infinity', -Infinity, 'float'],
    ['NaN', NaN, 'float'],
    ['BigInt 0n', 0n, 'integer'],
    ['BigInt 2^62', 2n ** 62n, 'integer'],
  ])('the number %s becomes a Lua %s', (_, value, type) => {
    expect(inLua(value, 'math.type(v)')).toEqual([type]);
  });

  // Regression: Node-API copies whole characters only, and a string whose
  // UTF-8 stopped within a character of the 256-byte scratch buffer's end
  // was taken as complete: 'é'.repeat(200) crossed as 254 bytes.
  test.each([
    ['two-byte characters', 'é'.repeat(200)],
    ['four-byte characters after one ASCII byte', `a${'😀'.repeat(100)}`],
    ['three-byte characters after two ASCII bytes', `ab${'€'.repeat(100)}`],
    ['a lone surrogate at the edge', `${'x'.repeat(253)}\ud800yz`],
  ])('a string of %s near the scratch buffer size crosses whole', (_, s) => {
    expect(inLua(s, '#v')).toEqual([Buffer.byteLength(s)]);
    expect(roundTrip(s)).toBe(s.toWellFormed());
  });

  test('-0 stays negative zero in Lua', () => {
    expect(inLua(-0, '1 / v')).toEqual([-Infinity]);
  });

  test('NaN stays NaN and infinities stay infinite', () => {
    rt.set('nan', NaN);
    rt.set('inf', Infinity);
    expect(rt.load('return nan ~= nan, inf == math.huge, -inf == -math.huge')).toEqual([true, true, true]);
  });

  test.each([
    ['Buffer', Buffer.from([0, 1, 254, 255])],
    ['Uint8Array', new Uint8Array([0, 1, 254, 255])],
    ['ArrayBuffer', new Uint8Array([0, 1, 254, 255]).buffer],
    ['Uint8Array view into a larger buffer', new Uint8Array(new Uint8Array([9, 0, 1, 254, 255, 9]).buffer, 1, 4)],
  ])('a %s becomes a byte string', (_, value) => {
    expect(inLua(value, 'type(v), #v, v:byte(1, -1)')).toEqual(['string', 4, 0, 1, 254, 255]);
  });

  test('an Array becomes a sequence 1..n', () => {
    expect(inLua(['a', 'b', 'c'], '#v, v[1], v[2], v[3], v[0], v[4]')).toEqual([3, 'a', 'b', 'c', null, null]);
  });

  test('an empty Array becomes an empty table', () => {
    expect(inLua([], 'type(v), next(v)')).toEqual(['table', null]);
  });

  test('null and undefined in an Array become holes', () => {
    expect(inLua([1, null, 3, undefined, 5], 'v[1], v[2], v[3], v[4], v[5]')).toEqual([1, null, 3, null, 5]);
  });

  test('a plain object becomes a table with string keys', () => {
    expect(inLua({ a: 1, 2: 'two', 'with space': true }, 'v.a, v["2"], v[2], v["with space"]')).toEqual([
      1,
      'two',
      null,
      true,
    ]);
  });

  test('an object without a prototype is plain too', () => {
    const o = Object.assign(Object.create(null), { a: 1 });
    expect(inLua(o, 'type(v), v.a')).toEqual(['table', 1]);
  });

  test('symbol keys and non-enumerable properties are not copied', () => {
    const o = { a: 1, [Symbol('s')]: 2 };
    Object.defineProperty(o, 'hidden', { value: 3, enumerable: false });
    expect(
      inLua(o, 'v.a, v.hidden, (function() local n = 0 for _ in pairs(v) do n = n + 1 end return n end)()'),
    ).toEqual([1, null, 1]);
  });

  test('a Map becomes a table keyed by its converted keys', () => {
    const m = new Map([
      ['k', 'str'],
      [1, 'int'],
      [1.5, 'float'],
      [true, 'bool'],
    ]);
    expect(inLua(m, 'type(v), v.k, v[1], v[1.5], v[true]')).toEqual(['table', 'str', 'int', 'float', 'bool']);
  });

  test('a Map with an object key gives a table key', () => {
    const key = { id: 1 };
    expect(
      inLua(new Map([[key, 'v']]), '(function() for k, x in pairs(v) do return type(k), k.id, x end end)()'),
    ).toEqual(['table', 1, 'v']);
  });

  test.each([
    ['null', null],
    ['undefined', undefined],
    ['NaN', NaN],
  ])('a Map with a %s key gives ERR_CONVERSION and the runtime stays usable', (_, key) => {
    expect(() => rt.set('v', new Map([[key, 1]]))).toThrow(code('ERR_CONVERSION'));
    expect(rt.load('return 1')).toEqual([1]);
  });
});

describe('non-plain JS objects cross by reference', () => {
  class Point {
    constructor(x, y) {
      this.x = x;
      this.y = y;
    }
    get sum() {
      return this.x + this.y;
    }
  }

  test.each([
    ['a class instance', new Point(1, 2)],
    ['a Date', new Date(0)],
    ['a Promise', Promise.resolve(1)],
    ['an Error', new Error('e')],
    ['a Set', new Set([1])],
    ['a RegExp', /x/g],
    ['a WeakMap', new WeakMap()],
    ['an Int32Array', new Int32Array([1, 2])],
  ])('%s is a userdata in Lua and the same object back in JS', (_, obj) => {
    expect(inLua(obj, 'type(v)')).toEqual(['userdata']);
    expect(rt.get('v')).toBe(obj);
  });

  // Own data properties only (docs/security.md): the getter `sum` lives on the
  // prototype and is not run. (It was read through before issue 18.)
  test('Lua reads own fields and nested values of a referenced object, not its getters', () => {
    const p = new Point(3, 4);
    p.meta = { tag: 'pt' };
    expect(inLua(p, 'v.x, v.y, v.sum, v.meta.tag, v.missing')).toEqual([3, 4, null, 'pt', null]);
  });

  test('with trustedObjects, Lua reads getters and the prototype chain as JS does', () => {
    const trusted = makeRuntime({ trustedObjects: true });
    trusted.set('v', new Point(3, 4));
    expect(trusted.load('return v.sum, type(v.constructor), tostring(v)')).toEqual([7, 'function', '[object Object]']);
  });

  test('Lua calls a method-valued field as a function', () => {
    const o = new (class {
      constructor() {
        this.f = (a) => a * 2;
      }
    })();
    expect(inLua(o, 'v.f(21)')).toEqual([42]);
  });

  test('an Error keeps its message, name and extra fields readable', () => {
    const e = Object.assign(new RangeError('too big'), { code: 'E_BIG' });
    expect(inLua(e, 'v.message, v.name, v.code, tostring(v)')).toEqual([
      'too big',
      'RangeError',
      'E_BIG',
      'RangeError: too big',
    ]);
  });

  test('a referenced object passed back to a JS function is the same object', () => {
    const d = new Date(1);
    let seen;
    rt.set('take', (x) => {
      seen = x;
    });
    rt.set('d', d);
    rt.load('take(d)');
    expect(seen).toBe(d);
  });

  test('the same object inside a table comes back as the same object', () => {
    const d = new Date(2);
    rt.set('t', { d, list: [d] });
    const back = rt.get('t');
    expect(back.d).toBe(d);
    expect(back.list[0]).toBe(d);
  });
});

describe('Lua -> JS, row by row', () => {
  test.each([
    ['nil', 'nil', undefined],
    ['true', 'true', true],
    ['false', 'false', false],
    ['an integer', '42', 42],
    ['a negative integer', '-7', -7],
    ['a float', '2.5', 2.5],
    ['an integral float', '3.0', 3],
    ['negative zero', '-0.0', -0],
    ['an infinite float', '1/0', Infinity],
    ['NaN', '0/0', NaN],
    ['an ASCII string', '"abc"', 'abc'],
    ['a UTF-8 string', '"h\\u{E9} \\u{1F600}"', 'hé 😀'],
    ['an empty table', '{}', {}],
    ['a sequence', '{ 1, "two", true }', [1, 'two', true]],
    ['a record', '{ a = 1, b = { c = 2 } }', { a: 1, b: { c: 2 } }],
  ])('%s comes to JS as expected', (_, expr, expected) => {
    rt.load(`v = ${expr}`);
    const got = rt.get('v');
    expect(got).toEqual(expected); // Object.is on scalars: -0 and NaN are told apart
  });

  test('nil inside load results is null, and a nil global is undefined', () => {
    expect(rt.load('return nil')).toEqual([null]);
    expect(rt.get('absent')).toBeUndefined();
  });

  test('a table with keys exactly 1..n is an Array', () => {
    const [a] = rt.load('local t = {} for i = 1, 5 do t[i] = i * i end return t');
    expect(Array.isArray(a)).toBe(true);
    expect(a).toEqual([1, 4, 9, 16, 25]);
  });

  test.each([
    ['a hole', '{ 1, nil, 3 }', { 1: 1, 3: 3 }],
    ['a key 0', '{ [0] = "z", "a" }', { 0: 'z', 1: 'a' }],
    ['a key past n', '{ [1] = "a", [3] = "c" }', { 1: 'a', 3: 'c' }],
    ['a negative key', '{ [-1] = "m" }', { '-1': 'm' }],
    ['a float key', '{ [1.5] = "f" }', { 1.5: 'f' }],
    ['a boolean key', '{ [true] = "t" }', { true: 't' }],
    ['mixed keys', '{ "a", x = 1 }', { 1: 'a', x: 1 }],
  ])('a table with %s is an object with string keys', (_, expr, expected) => {
    const [o] = rt.load(`return ${expr}`);
    expect(Array.isArray(o)).toBe(false);
    expect(o).toEqual(expected);
  });

  test('a key named __proto__ is an own property, not the prototype', () => {
    const [o] = rt.load('return { __proto__ = { polluted = true } }');
    // The object is made in the addon's realm, so compare shapes, not identities.
    expect(Object.getPrototypeOf(Object.getPrototypeOf(o))).toBeNull();
    expect(Object.keys(o)).toEqual(['__proto__']);
    expect(Object.getOwnPropertyDescriptor(o, '__proto__').value).toEqual({ polluted: true });
    expect(o.polluted).toBeUndefined();
    expect({}.polluted).toBeUndefined();
  });

  test.each([
    ['a table', '{ [{}] = 1 }'],
    ['a function', '{ [print] = 1 }'],
    ['a coroutine', '{ [coroutine.create(print)] = 1 }'],
  ])('a table key that is %s gives ERR_CONVERSION and the runtime stays usable', (_, expr) => {
    let err;
    try {
      rt.load(`return ${expr}`);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConversionError);
    expect(err.code).toBe('ERR_CONVERSION');
    expect(rt.load('return 1')).toEqual([1]);
  });

  test('a coroutine comes to JS as an opaque handle that converts back', () => {
    const [co] = rt.load('co = coroutine.create(function() end) return co');
    expect(co).toEqual({ luaType: 'thread' });
    rt.set('back', co);
    expect(rt.load('return back == co, type(back)')).toEqual([true, 'thread']);
  });

  test('a userdata comes to JS as an opaque handle that converts back', () => {
    const all = makeRuntime({ libs: 'all' });
    const [ud] = all.load('return io.stdout');
    expect(ud).toEqual({ luaType: 'userdata' });
    all.set('back', ud);
    expect(all.load('return back == io.stdout')).toEqual([true]);
  });

  test('a handle of one runtime cannot enter another: ERR_CONVERSION', () => {
    const other = makeRuntime();
    const [co] = other.load('return coroutine.create(print)');
    expect(() => rt.set('x', co)).toThrow(code('ERR_CONVERSION'));
    expect(rt.load('return 1')).toEqual([1]);
  });
});

describe('integers are exact in int64', () => {
  test.each([
    ['2^53 - 1', '9007199254740991', 9007199254740991],
    ['-(2^53 - 1)', '-9007199254740991', -9007199254740991],
    ['2^53', '9007199254740992', 9007199254740992n],
    ['2^53 + 1', '9007199254740993', 9007199254740993n],
    ['-(2^53 + 1)', '-9007199254740993', -9007199254740993n],
    ['math.maxinteger', 'math.maxinteger', 9223372036854775807n],
    ['math.mininteger', 'math.mininteger', -9223372036854775808n],
  ])('the Lua integer %s comes to JS exactly', (_, expr, expected) => {
    expect(rt.load(`return ${expr}`)).toEqual([expected]);
  });

  test('a float beyond 2^53 stays a number', () => {
    expect(rt.load('return 2^53, math.maxinteger + 0.0')).toEqual([2 ** 53, 2 ** 63]);
  });

  test.each([
    ['2^53 + 1', 9007199254740993n, '9007199254740993'],
    ['math.maxinteger', 9223372036854775807n, '9223372036854775807'],
    ['math.mininteger', -9223372036854775808n, '-9223372036854775808'],
    ['a small BigInt', -5n, '-5'],
  ])('BigInt %s enters Lua as that exact integer', (_, big, text) => {
    expect(inLua(big, 'math.type(v), tostring(v)')).toEqual(['integer', text]);
  });

  test.each([
    ['2^63', 2n ** 63n],
    ['-2^63 - 1', -(2n ** 63n) - 1n],
    ['2^64', 2n ** 64n],
    ['10^30', 10n ** 30n],
  ])('BigInt %s outside int64 is a RangeError ERR_OUT_OF_RANGE', (_, big) => {
    let err;
    try {
      rt.set('v', big);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(RangeError);
    expect(err.code).toBe('ERR_OUT_OF_RANGE');
    expect(err.message).toContain(String(big));
    expect(rt.get('v')).toBeUndefined();
    expect(rt.load('return 1')).toEqual([1]);
  });

  test('a BigInt out of range deep inside a value is still a RangeError', () => {
    expect(() => rt.set('v', { a: [1, 2, 2n ** 70n] })).toThrow(RangeError);
    expect(rt.load('return 1')).toEqual([1]);
  });

  test.each([
    ['math.maxinteger', 9223372036854775807n],
    ['math.mininteger', -9223372036854775808n],
    ['9007199254740993', 9007199254740993n],
  ])('%s makes the round trip Lua -> JS -> Lua unchanged', (expr, big) => {
    const [v] = rt.load(`return ${expr}`);
    expect(v).toBe(big);
    rt.set('v', v);
    expect(rt.load(`return v == ${expr}, math.type(v)`)).toEqual([true, 'integer']);
  });
});

describe('integers and floats are kept apart', () => {
  test('a Lua float that is integral stays a float after a round trip through JS', () => {
    const [f] = rt.load('return 3.0');
    expect(f).toBe(3);
    // JS has one number type: 3 comes back as an integer. A non-integral float
    // keeps its type.
    const [g] = rt.load('return 2.5');
    rt.set('g', g);
    expect(rt.load('return math.type(g)')).toEqual(['float']);
  });

  test('integer arithmetic in Lua stays integer on values from JS', () => {
    rt.set('a', 7);
    rt.set('b', 2);
    expect(rt.load('return a // b, math.type(a // b), a / b, math.type(a / b)')).toEqual([3, 'integer', 3.5, 'float']);
  });

  test('integer overflow wraps in Lua as Lua defines it', () => {
    rt.set('m', 9223372036854775807n);
    expect(rt.load('return m + 1 == math.mininteger')).toEqual([true]);
  });
});

describe('bytes', () => {
  const all = Buffer.from(Array.from({ length: 256 }, (_, i) => i));

  test('all 256 byte values cross into Lua unchanged', () => {
    rt.set('b', all);
    expect(rt.load('local ok = #b == 256 for i = 1, 256 do ok = ok and b:byte(i) == i - 1 end return ok')).toEqual([
      true,
    ]);
  });

  test('all 256 byte values come back as a Buffer, byte for byte', () => {
    const [back] = rt.load('local t = {} for i = 0, 255 do t[#t + 1] = string.char(i) end return table.concat(t)');
    expect(Buffer.isBuffer(back)).toBe(true);
    expect(Buffer.compare(back, all)).toBe(0);
  });

  test('a Buffer round trip is lossless', () => {
    const back = roundTrip(all);
    expect(Buffer.compare(back, all)).toBe(0);
  });

  test.each([
    ['a lone 0xFF', '\\xFF', [0xff]],
    ['a truncated sequence', 'ok\\xC3', [0x6f, 0x6b, 0xc3]],
    ['an overlong encoding of NUL', '\\xC0\\x80', [0xc0, 0x80]],
    ['a UTF-16 surrogate encoded as UTF-8', '\\xED\\xA0\\x80', [0xed, 0xa0, 0x80]],
    ['a code point past U+10FFFF', '\\xF4\\x90\\x80\\x80', [0xf4, 0x90, 0x80, 0x80]],
    ['a stray continuation byte', 'a\\x80b', [0x61, 0x80, 0x62]],
  ])('invalid UTF-8 (%s) comes back as a Buffer, byte for byte', (_, lit, bytes) => {
    const [v] = rt.load(`return "${lit}"`);
    expect(Buffer.isBuffer(v)).toBe(true);
    expect([...v]).toEqual(bytes);
  });

  test.each([
    ['ASCII', 'plain text', 'plain text'],
    ['a NUL byte', 'a\\0b', 'a\u0000b'],
    ['two-byte UTF-8', '\\xC3\\xA9', 'é'],
    ['three-byte UTF-8', '\\xE2\\x82\\xAC', '€'],
    ['an emoji (four bytes)', '\\xF0\\x9F\\x98\\x80', '😀'],
    ['U+10FFFF', '\\u{10FFFF}', '\u{10FFFF}'],
  ])('valid UTF-8 (%s) comes back as a string', (_, lit, expected) => {
    expect(rt.load(`return "${lit}"`)).toEqual([expected]);
  });

  test('a JS string crosses as UTF-8 bytes', () => {
    expect(inLua('é😀', '#v, v:byte(1, -1)')).toEqual([6, 0xc3, 0xa9, 0xf0, 0x9f, 0x98, 0x80]);
  });

  test('a Buffer holding valid UTF-8 comes back as a string', () => {
    expect(roundTrip(Buffer.from('héllo'))).toBe('héllo');
  });

  test('invalid UTF-8 inside a table comes back as a Buffer value', () => {
    const [t] = rt.load('return { ok = "fine", bad = "\\xFF\\xFE", list = { "\\x80" } }');
    expect(t.ok).toBe('fine');
    expect([...t.bad]).toEqual([0xff, 0xfe]);
    expect([...t.list[0]]).toEqual([0x80]);
  });
});

describe('tables and objects', () => {
  test.each([
    [
      'nested arrays',
      [
        [1, 2],
        [3, [4, 5]],
      ],
    ],
    ['an object of arrays', { a: [1, 2], b: { c: ['x'] } }],
    ['strings and booleans', { s: 'x', t: true, f: false }],
    ['integers and floats', { i: 1, f: 1.5, n: -3 }],
  ])('%s make the round trip unchanged', (_, v) => {
    expect(roundTrip(v)).toEqual(v);
  });

  test('an empty object and an empty array both come back as {}', () => {
    expect(roundTrip({})).toEqual({});
    expect(roundTrip([])).toEqual({});
  });

  test('a Map comes back as a plain object', () => {
    expect(
      roundTrip(
        new Map([
          ['a', 1],
          ['b', [2]],
        ]),
      ),
    ).toEqual({ a: 1, b: [2] });
  });

  test('a sparse table comes back as an object with string keys', () => {
    const [o] = rt.load('local t = {} t[1] = "a" t[100] = "b" return t');
    expect(o).toEqual({ 1: 'a', 100: 'b' });
    expect(Object.keys(o).sort()).toEqual(['1', '100']);
  });
});

describe('cycles and shared references', () => {
  test('a JS cycle is a Lua cycle', () => {
    const o = { name: 'root' };
    o.self = o;
    o.list = [o];
    expect(inLua(o, 'v.self == v, v.list[1] == v, v.self.self.name')).toEqual([true, true, 'root']);
  });

  test('a JS object shared twice is one Lua table', () => {
    const shared = { k: 1 };
    const arr = [shared, shared];
    const m = new Map([['x', shared]]);
    expect(
      inLua({ a: shared, b: shared, arr, m }, 'v.a == v.b, v.arr[1] == v.a, v.arr[2] == v.a, v.m.x == v.a'),
    ).toEqual([true, true, true, true]);
  });

  test('a JS array shared twice and a Map cycle are preserved', () => {
    const list = [1];
    const m = new Map();
    m.set('me', m);
    expect(inLua({ l1: list, l2: list, m }, 'v.l1 == v.l2, v.m.me == v.m')).toEqual([true, true]);
  });

  test('a Lua cycle is a JS cycle', () => {
    const [o] = rt.load('local t = { name = "root" } t.self = t t.list = { t } return t');
    expect(o.self).toBe(o);
    expect(o.list[0]).toBe(o);
  });

  test('a Lua table shared twice is one JS object', () => {
    const [o] = rt.load('local s = { 1 } return { a = s, b = s, c = { s } }');
    expect(o.a).toBe(o.b);
    expect(o.c[0]).toBe(o.a);
  });

  test('a sequence that contains itself is a self-containing Array', () => {
    const [a] = rt.load('local t = {} t[1] = t return t');
    expect(Array.isArray(a)).toBe(true);
    expect(a[0]).toBe(a);
  });

  test('a cycle survives the round trip JS -> Lua -> JS', () => {
    const o = { v: 1 };
    o.self = o;
    const back = roundTrip(o);
    expect(back).not.toBe(o);
    expect(back.self).toBe(back);
    expect(back.v).toBe(1);
  });

  test('shared references in multiple load results are converted independently', () => {
    const [a, b] = rt.load('local s = {} return s, s');
    expect(a).toEqual({});
    expect(b).toEqual({});
  });
});

describe('functions', () => {
  test('a JS function is callable from Lua with converted arguments and result', () => {
    const calls = [];
    rt.set('f', (...args) => {
      calls.push(args);
      return { sum: args[0] + args[1] };
    });
    expect(rt.load('local r = f(2, 3, "x", nil, { 1 }) return type(f), r.sum')).toEqual(['function', 5]);
    expect(calls).toEqual([[2, 3, 'x', undefined, [1]]]);
  });

  test('a JS function receives integers beyond 2^53 as BigInt', () => {
    let got;
    rt.set('f', (x) => {
      got = x;
    });
    rt.load('f(math.maxinteger)');
    expect(got).toBe(9223372036854775807n);
  });

  test('a JS function returning undefined gives Lua one nil', () => {
    rt.set('f', () => undefined);
    expect(rt.load('return select("#", f()), f() == nil')).toEqual([1, true]);
  });

  test('a Lua function is callable from JS and returns its first result', () => {
    const [f] = rt.load('return function(a, b) return a + b, "second" end');
    expect(typeof f).toBe('function');
    expect(f(2, 3)).toBe(5);
  });

  test('a Lua function returning nothing returns undefined to JS', () => {
    const [f] = rt.load('return function() end');
    expect(f()).toBeUndefined();
  });

  test('a Lua function receives JS arguments converted, undefined as nil', () => {
    const [f] = rt.load(
      'return function(...) return { n = select("#", ...), t = { math.type((...)), type(select(2, ...)) } } end',
    );
    expect(f(1, undefined)).toEqual({ n: 2, t: ['integer', 'nil'] });
  });

  test('a Lua function that yields throws when called from JS and the runtime stays usable', () => {
    const [f] = rt.load('return function() coroutine.yield(1) end');
    expect(() => f()).toThrow(code('ERR_LUA_RUNTIME'));
    expect(rt.load('return 1')).toEqual([1]);
  });

  test('the same JS function comes back as itself', () => {
    const f = () => 1;
    rt.set('f', f);
    expect(rt.get('f')).toBe(f);
    rt.set('t', { f, list: [f] });
    const t = rt.get('t');
    expect(t.f).toBe(f);
    expect(t.list[0]).toBe(f);
  });

  test('a Lua function passed back into Lua is the same Lua function', () => {
    const [f] = rt.load('original = function() end return original');
    rt.set('again', f);
    expect(rt.load('return again == original, rawequal(again, original)')).toEqual([true, true]);
  });

  test('a Lua function handle is stable: getting it twice gives working handles', () => {
    rt.load('function twice(x) return 2 * x end');
    const a = rt.get('twice');
    const b = rt.get('twice');
    expect(a(2)).toBe(4);
    expect(b(3)).toBe(6);
  });

  test('a JS function is called with the Lua arguments when Lua passes a Lua function to it', () => {
    rt.set('apply', (fn, x) => fn(x) + 1);
    expect(rt.load('return apply(function(x) return x * 10 end, 4)')).toEqual([41]);
  });

  test('a Lua function of one runtime given to another is a plain JS function there', () => {
    const other = makeRuntime();
    const [inc] = other.load('return function(x) return x + 1 end');
    rt.set('inc', inc);
    expect(rt.load('return type(inc), inc(41)')).toEqual(['function', 42]);
  });

  test('a JS function given to two runtimes comes back as itself from each', () => {
    const other = makeRuntime();
    const f = (x) => x * 3;
    rt.set('f', f);
    other.set('f', f);
    expect(rt.get('f')).toBe(f);
    expect(other.get('f')).toBe(f);
    expect(other.load('return f(2)')).toEqual([6]);
  });
});

describe('values that cannot cross', () => {
  test.each([
    ['a Symbol', Symbol('s')],
    ['a Symbol in an array', [1, Symbol('s')]],
    ['a Symbol as an object value', { a: { b: Symbol.iterator } }],
    ['a Symbol as a Map value', new Map([['k', Symbol('s')]])],
  ])('%s gives ERR_CONVERSION and the runtime stays usable', (_, v) => {
    let err;
    try {
      rt.set('x', v);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConversionError);
    expect(err.code).toBe('ERR_CONVERSION');
    expect(err.message).toMatch(/Symbol/);
    expect(rt.get('x')).toBeUndefined();
    expect(rt.load('return 1 + 1')).toEqual([2]);
  });

  test('a Symbol returned by a JS function to Lua is a Lua error', () => {
    rt.set('f', () => Symbol('s'));
    expect(rt.load('local ok, e = pcall(f) return ok')).toEqual([false]);
    expect(rt.load('return 1')).toEqual([1]);
  });

  const deep = (n, wrap) => {
    let v = {};
    for (let i = 0; i < n; i++) v = wrap(v);
    return v;
  };

  test.each([
    ['object', (v) => ({ next: v })],
    ['array', (v) => [v]],
    ['Map', (v) => new Map([['next', v]])],
  ])('a 10,000-deep %s gives ERR_CONVERSION and the runtime stays usable', (_, wrap) => {
    let err;
    try {
      rt.set('x', deep(10000, wrap));
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConversionError);
    expect(err.code).toBe('ERR_CONVERSION');
    expect(err.message).toMatch(/deep/);
    expect(rt.get('x')).toBeUndefined();
    expect(rt.load('local t = {} return 1 + 1')).toEqual([2]);
  });

  test('a 10,000-deep object as a JS function argument to Lua gives ERR_CONVERSION', () => {
    const [f] = rt.load('return function(x) return 1 end');
    expect(() => f(deep(10000, (v) => ({ v })))).toThrow(code('ERR_CONVERSION'));
    expect(f(1)).toBe(1);
  });

  test('a 10,000-deep Lua table gives ERR_CONVERSION and the runtime stays usable', () => {
    expect(() => rt.load('local t = {} local c = t for i = 1, 10000 do c.n = {} c = c.n end return t')).toThrow(
      code('ERR_CONVERSION'),
    );
    rt.load('deep = {} local c = deep for i = 1, 10000 do c.n = {} c = c.n end');
    expect(() => rt.get('deep')).toThrow(code('ERR_CONVERSION'));
    expect(rt.load('return 1')).toEqual([1]);
  });

  test('a moderately nested value (50 levels) crosses both ways', () => {
    const v = deep(50, (x) => ({ x }));
    expect(roundTrip(v)).toEqual(v);
  });

  test('a getter that throws propagates its own error object and the runtime stays usable', () => {
    const boom = new Error('getter failed');
    const o = {
      ok: 1,
      get bad() {
        throw boom;
      },
    };
    let err;
    try {
      rt.set('x', o);
    } catch (e) {
      err = e;
    }
    expect(err).toBe(boom);
    expect(rt.get('x')).toBeUndefined();
    expect(rt.load('return 1')).toEqual([1]);
  });

  test('a getter that throws deep inside an array propagates its error', () => {
    const boom = new TypeError('nested getter');
    const v = [
      {
        a: [
          {
            get b() {
              throw boom;
            },
          },
        ],
      },
    ];
    expect(() => rt.set('x', v)).toThrow(boom);
    expect(rt.load('return 2')).toEqual([2]);
  });

  // Before issue 18 Lua ran the getter; now a field read runs no code of the object.
  test('a getter on a referenced object is not run: the field reads nil', () => {
    const boom = new Error('field getter');
    rt.set(
      'o',
      new (class {
        get bad() {
          throw boom;
        }
      })(),
    );
    expect(rt.load('local ok, v = pcall(function() return o.bad end) return ok, v')).toEqual([true, null]);
  });

  test('with trustedObjects, a getter that throws is a Lua error keeping the Error', () => {
    const trusted = makeRuntime({ trustedObjects: true });
    const boom = new Error('field getter');
    trusted.set(
      'o',
      new (class {
        get bad() {
          throw boom;
        }
      })(),
    );
    expect(trusted.load('local ok, e = pcall(function() return o.bad end) return ok, e.message')).toEqual([
      false,
      'field getter',
    ]);
    expect(() => trusted.load('return o.bad')).toThrow(boom);
  });
});
