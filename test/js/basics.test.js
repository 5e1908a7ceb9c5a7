// SPDX-License-Identifier: MIT
// Runtime basics: load, set/get, conversion both ways, errors, close, examples.
'use strict';
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { Runtime, LuaError } = require('../..');

let rt;
beforeEach(() => {
  rt = new Runtime();
});
afterEach(() => rt.closeSync());

describe('load', () => {
  test('returns every value of the chunk, nil as null', () => {
    expect(rt.load('return 1, 2.5, "x", nil, true')).toEqual([1, 2.5, 'x', null, true]);
  });
  test('refuses a non-string source with ERR_INVALID_ARG_TYPE', () => {
    expect(() => rt.load(42)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_TYPE' }));
    expect(rt.load('return 1')).toEqual([1]);
  });
  test('reports a syntax error with chunk name and line', () => {
    let err;
    try {
      rt.load('x = 1\ny = ', { name: 'conf.lua' });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(LuaError);
    expect(err.code).toBe('ERR_LUA_SYNTAX');
    expect(err.source).toBe('conf.lua');
    expect(err.line).toBe(2);
  });
  test('reports a runtime error with a traceback and the original value', () => {
    let err;
    try {
      rt.load('error({ code = 7 })');
    } catch (e) {
      err = e;
    }
    expect(err.code).toBe('ERR_LUA_RUNTIME');
    expect(err.value).toEqual({ code: 7 });
    expect(err.luaStack).toMatch(/stack traceback/);
  });
  test('refuses binary chunks', () => {
    expect(() => rt.load('\x1bLua')).toThrow(expect.objectContaining({ code: 'ERR_LUA_SYNTAX' }));
    expect(rt.load('return (load(string.dump(function() end)))')).toEqual([null]);
  });
});

describe('conversion', () => {
  test.each([
    ['integer', 42, 'integer'],
    ['float', 1.5, 'float'],
    ['negative zero stays a float', -0, 'float'],
    ['2^53 - 1', 2 ** 53 - 1, 'integer'],
    ['BigInt', 2n ** 62n, 'integer'],
  ])('%s keeps its Lua number type', (_, v, type) => {
    rt.set('v', v);
    expect(rt.load('return math.type(v)')).toEqual([type]);
  });
  test('int64 values beyond 2^53 come back as exact BigInts', () => {
    expect(rt.load('return math.maxinteger, math.mininteger, 9007199254740993')).toEqual([
      9223372036854775807n, -9223372036854775808n, 9007199254740993n,
    ]);
  });
  test('a BigInt outside int64 is a RangeError and the runtime stays usable', () => {
    expect(() => rt.set('x', 2n ** 63n)).toThrow(RangeError);
    expect(rt.load('return 1')).toEqual([1]);
  });
  test('bytes cross losslessly: invalid UTF-8 comes back as a Buffer', () => {
    const all = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    rt.set('b', all);
    const [back, len] = rt.load('return b, #b');
    expect(len).toBe(256);
    expect(Buffer.compare(back, all)).toBe(0);
    expect(rt.load('return "h\\xC3\\xA9 \\u{1F600}"')).toEqual(['hé 😀']);
  });
  test('arrays, objects, maps, cycles and shared references', () => {
    const shared = { k: 1 };
    const o = { list: [1, 2, 3], a: shared, b: shared, m: new Map([['x', 1]]) };
    o.self = o;
    rt.set('o', o);
    expect(rt.load('return #o.list, o.a == o.b, o.self == o, o.m.x')).toEqual([3, true, true, 1]);
    const back = rt.get('o');
    expect(back.self).toBe(back);
    expect(back.a).toBe(back.b);
    expect(rt.load('return {}')).toEqual([{}]);
    expect(rt.load('return {1, nil, 3}')[0]).toEqual({ 1: 1, 3: 3 });
  });
  test('functions cross both ways and keep their identity', () => {
    const f = (a, b) => a + b;
    rt.set('f', f);
    expect(rt.load('return f(2, 3)')).toEqual([5]);
    expect(rt.get('f')).toBe(f);
    const g = rt.load('return function(x) return x * 2 end')[0];
    expect(g(21)).toBe(42);
    rt.set('g', g);
    expect(rt.load('return g(4)')).toEqual([8]);
  });
  test('a Symbol and a 10,000-deep object give ERR_CONVERSION', () => {
    expect(() => rt.set('x', Symbol('s'))).toThrow(expect.objectContaining({ code: 'ERR_CONVERSION' }));
    let deep = {};
    const root = deep;
    for (let i = 0; i < 10000; i++) deep = deep.next = {};
    expect(() => rt.set('x', root)).toThrow(expect.objectContaining({ code: 'ERR_CONVERSION' }));
    expect(rt.load('return 1 + 1')).toEqual([2]);
  });
  test('a getter that throws propagates its own error', () => {
    const boom = new Error('getter');
    const o = {
      get bad() {
        throw boom;
      },
    };
    expect(() => rt.set('x', o)).toThrow(boom);
    expect(rt.load('return 1')).toEqual([1]);
  });
});

describe('errors through the boundary', () => {
  test('a JS exception is catchable by pcall and otherwise reaches JS as the same object', () => {
    const err = new Error('boom');
    rt.set('thrower', () => {
      throw err;
    });
    expect(rt.load('local ok, e = pcall(thrower) return ok, tostring(e), e.message')).toEqual([
      false, 'Error: boom', 'boom',
    ]);
    let caught;
    try {
      rt.load('thrower()');
    } catch (e) {
      caught = e;
    }
    expect(caught).toBe(err);
  });
  test('a memory limit fails the allocation and leaves the runtime usable', () => {
    const small = new Runtime({ memoryLimit: 1 << 20 });
    expect(() => small.load('local t = {} for i = 1, 1e7 do t[i] = i end')).toThrow(
      expect.objectContaining({ code: 'ERR_MEMORY_LIMIT' }),
    );
    expect(small.load('return 2')).toEqual([2]);
    small.closeSync();
  });
});

describe('libs and isolation', () => {
  test('the safe profile has only the allow list', () => {
    expect(rt.load('return io, debug, package, dofile, os.execute, type(os.time)')).toEqual([
      null, null, null, null, null, 'function',
    ]);
    const all = new Runtime({ libs: 'all' });
    expect(all.load('return type(io), type(debug)')).toEqual(['table', 'table']);
    all.closeSync();
  });
  test('an unknown library name is refused', () => {
    expect(() => new Runtime({ libs: ['net'] })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_VALUE' }));
  });
  test('runtimes share nothing', () => {
    const other = new Runtime();
    rt.load('shared = 1');
    expect(other.load('return shared')).toEqual([null]);
    other.closeSync();
  });
  test('print goes to the print option, tab-joined', () => {
    const lines = [];
    const p = new Runtime({ print: (l) => lines.push(l) });
    p.load('print("a", 1, nil, true)');
    expect(lines).toEqual(['a\t1\tnil\ttrue']);
    p.closeSync();
  });
});

describe('close', () => {
  test('is idempotent and every later call throws ERR_RUNTIME_CLOSED', () => {
    const f = rt.load('return function() return 1 end')[0];
    rt.closeSync();
    rt.closeSync();
    for (const call of [() => rt.load('return 1'), () => rt.get('x'), () => rt.set('x', 1), () => f(), () => rt.start('x')]) {
      expect(call).toThrow(expect.objectContaining({ code: 'ERR_RUNTIME_CLOSED' }));
    }
  });
});

test('examples/hello.js runs', () => {
  const out = execFileSync(process.execPath, [path.join(__dirname, '..', '..', 'examples', 'hello.js')], { encoding: 'utf8' });
  expect(out).toContain('hello, LUA!');
  expect(out).toContain('slow_sum(5) as a task: 15');
});
