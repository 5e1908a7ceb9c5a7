// SPDX-License-Identifier: MIT
// Numbers and bytes cross exactly (docs/design.md#conversion): integers in int64, integers and floats apart, every byte.
'use strict';
const { makeRuntime } = require('../helpers');
const { conversionProbes } = require('./convert-helpers');

let rt;
beforeEach(() => {
  rt = makeRuntime();
});
const { inLua, roundTrip } = conversionProbes(() => rt);

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
