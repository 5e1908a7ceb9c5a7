// SPDX-License-Identifier: MIT
// Functions across the boundary (docs/design.md#conversion): callable both ways, converted arguments, the same function back.
'use strict';
const { makeRuntime } = require('../helpers');
const { code } = require('./convert-helpers');

let rt;
beforeEach(() => {
  rt = makeRuntime();
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
