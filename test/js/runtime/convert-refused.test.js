// SPDX-License-Identifier: MIT
// Values that cannot cross (docs/design.md#conversion): each is refused with its error, and the runtime stays usable.
'use strict';
const { execFileSync } = require('node:child_process');
const path = require('node:path');
const { ConversionError } = require('../../..');
const { makeRuntime } = require('../helpers');
const { code, conversionProbes } = require('./convert-helpers');

let rt;
beforeEach(() => {
  rt = makeRuntime();
});
const { roundTrip } = conversionProbes(() => rt);

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

  // Its message calls String(symbol): one that threw left its exception
  // pending, which then came out instead of ERR_CONVERSION. In a fresh node:
  // the addon reads the String of Node's own realm, not of this test's.
  test('a Symbol gives ERR_CONVERSION even when globalThis.String throws or gives no string', () => {
    const out = execFileSync(
      process.execPath,
      [
        '-e',
        `const { Runtime } = require('.');
        const rt = new Runtime();
        const original = globalThis.String;
        const seen = [];
        for (const replacement of [() => { throw new Error('boom'); }, () => 42]) {
          globalThis.String = replacement;
          try {
            rt.set('x', Symbol('s'));
          } catch (e) {
            seen.push([e.code, e.message]);
          } finally {
            globalThis.String = original;
          }
        }
        seen.push(rt.load('return 1 + 1')[0]);
        console.log(JSON.stringify(seen));`,
      ],
      { cwd: path.join(__dirname, '..', '..', '..'), encoding: 'utf8', timeout: 20000 },
    );
    const refused = ['ERR_CONVERSION', 'Cannot convert a Symbol to Lua: symbols have no Lua equivalent.'];
    expect(JSON.parse(out)).toEqual([refused, refused, 2]);
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
