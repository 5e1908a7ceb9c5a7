// SPDX-License-Identifier: MIT
// Value conversion row by row, both ways, as docs/design.md#conversion's table lists it; non-plain JS objects by reference.
'use strict';
const { ConversionError } = require('../../..');
const { makeRuntime } = require('../helpers');
const { code, conversionProbes } = require('./convert-helpers');

let rt;
beforeEach(() => {
  rt = makeRuntime();
});
const { inLua, roundTrip } = conversionProbes(() => rt);

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
