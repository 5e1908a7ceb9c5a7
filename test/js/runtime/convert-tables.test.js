// SPDX-License-Identifier: MIT
// Tables and objects across the boundary (docs/design.md#conversion): their shapes, cycles and shared references.
'use strict';
const { makeRuntime } = require('../helpers');
const { conversionProbes } = require('./convert-helpers');

let rt;
beforeEach(() => {
  rt = makeRuntime();
});
const { inLua, roundTrip } = conversionProbes(() => rt);

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
