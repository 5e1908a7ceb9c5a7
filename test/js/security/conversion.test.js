// SPDX-License-Identifier: MIT
// Conversion limits: every conversion between JS and Lua is bounded (issue 18, docs/security.md).
//
// Each test is one attempt to make a conversion exhaust memory, hang or crash
// the process; it asserts the safe outcome (the value crosses correctly, or a
// clean ERR_CONVERSION / ERR_MEMORY_LIMIT) and that the runtime stays usable.
'use strict';
const { Runtime } = require('../../..');
const { makeRuntime, thrownBy } = require('../helpers');

const MiB = 1 << 20;
// Every limit set, as an embedder running untrusted scripts would.
const LIMITS = { memoryLimit: 64 * MiB, taskTimeout: 1000, timeSlice: 10 };
const code = (c) => expect.objectContaining({ code: c });

// A runtime for this test (closed when it ends), by default with every limit set.
const runtime = (options = LIMITS) => makeRuntime(options);

// The runtime still loads and runs code, and holds no more than its limit.
function usable(rt) {
  expect(rt.load('local t = {} for i = 1, 100 do t[i] = i end return #t, 1 + 1')).toEqual([100, 2]);
  const { memoryUsed, memoryLimit } = rt.stats();
  if (memoryLimit) expect(memoryUsed).toBeLessThanOrEqual(memoryLimit);
}

// A Lua function `shared()` returning a table with `n` references to one string of `mb` MiB.
const SHARED = (mb, n) => `function shared()
  local s = string.rep("x", ${mb} * 1024 * 1024)
  local t = {}
  for i = 1, ${n} do t[i] = s end
  return t
end`;

describe('Lua -> JS: shared values convert once', () => {
  // What was found 2: 2,000 references to one 30 MB string became 2,000 JS
  // strings (60 GB): V8 ran out of heap and aborted the process.
  test('a task returning 2,000 references to one 30 MB string gets one shared JS string, not a crash', async () => {
    const rt = runtime();
    rt.load(SHARED(30, 2000));
    const t = await rt.call('shared');
    expect(t).toHaveLength(2000);
    expect(t[0]).toHaveLength(30 * MiB);
    expect(t.every((s) => s === t[0])).toBe(true);
    usable(rt);
  });

  test('the same table passed to a JS function as an argument arrives shared, not copied 2,000 times', () => {
    const rt = runtime();
    rt.load(SHARED(30, 2000));
    let got;
    rt.set('take', (t) => {
      got = t;
      return t.length;
    });
    expect(rt.load('return take(shared())')).toEqual([2000]);
    expect(got[1999]).toHaveLength(30 * MiB);
    usable(rt);
  });

  test('a long string returned 200 times as separate results of rt.load is one conversion', () => {
    const rt = runtime();
    rt.load(SHARED(30, 200));
    const out = rt.load('return table.unpack(shared())');
    expect(out).toHaveLength(200);
    expect(out[199]).toHaveLength(30 * MiB);
    usable(rt);
  });

  test('a long string passed as 200 arguments of one JS call crosses once', () => {
    const rt = runtime();
    rt.load(SHARED(30, 200));
    rt.set('count', (...args) => args.length + args[199].length);
    expect(rt.load('return count(table.unpack(shared()))')).toEqual([200 + 30 * MiB]);
    usable(rt);
  });

  test('rt.get of a global holding 2,000 references to one long string returns them shared', () => {
    const rt = runtime();
    rt.load(SHARED(30, 2000));
    rt.load('G = shared()');
    const g = rt.get('G');
    expect(g[0] === g[1999] && g[0].length === 30 * MiB).toBe(true);
    usable(rt);
  });

  test('one long string used as a key of 2,000 tables converts once', () => {
    const rt = runtime();
    rt.load(`function keyed()
      local k = string.rep("k", 8 * 1024 * 1024)
      local t = {}
      for i = 1, 2000 do t[i] = { [k] = i } end
      return t
    end`);
    const t = rt.load('return keyed()')[0];
    expect(t).toHaveLength(2000);
    expect(Object.keys(t[1999])[0]).toHaveLength(8 * MiB);
    expect(t[1999][Object.keys(t[1999])[0]]).toBe(2000);
    usable(rt);
  });

  test('a long invalid UTF-8 string shared 2,000 times becomes one Buffer', () => {
    const rt = runtime();
    rt.load(
      'function bytes() local s = string.rep("\\xff", 16 * 1024 * 1024) local t = {} for i = 1, 2000 do t[i] = s end return t end',
    );
    const t = rt.load('return bytes()')[0];
    expect(Buffer.isBuffer(t[0])).toBe(true);
    expect(t[0].length).toBe(16 * MiB);
    expect(t.every((b) => b === t[0])).toBe(true);
    usable(rt);
  });

  test('an error value holding 2,000 references to one long string rejects with the value, shared', async () => {
    const rt = runtime();
    rt.load(SHARED(30, 2000));
    rt.load('function fail() error(shared()) end');
    const err = await rt.call('fail').catch((e) => e);
    expect(err.code).toBe('ERR_LUA_RUNTIME');
    expect(err.value).toHaveLength(2000);
    expect(err.value[0] === err.value[1999]).toBe(true);
    usable(rt);
  });

  test('a Lua callback called from JS returns a shared table without copying it per reference', () => {
    const rt = runtime();
    rt.load(SHARED(30, 2000));
    let callback;
    rt.set('keep', (f) => {
      callback = f;
    });
    rt.load('keep(function() return shared() end)');
    const t = callback();
    expect(t[0] === t[1999]).toBe(true);
    usable(rt);
  });

  test('a DAG of 60 levels, each table holding the one below twice, converts in linear time with sharing kept', () => {
    const rt = runtime();
    const [t] = rt.load('local t = {leaf = true} for i = 1, 60 do t = {a = t, b = t} end return t');
    let node = t;
    for (let i = 0; i < 60; i++) {
      expect(node.a).toBe(node.b);
      node = node.a;
    }
    expect(node).toEqual({ leaf: true });
    usable(rt);
  });

  test('one Lua function referenced 100,000 times becomes one JS function, not 100,000 handles', () => {
    const rt = runtime();
    const [t] = rt.load('local f = function() return 1 end local t = {} for i = 1, 1e5 do t[i] = f end return t');
    expect(t).toHaveLength(1e5);
    expect(t.every((f) => f === t[0])).toBe(true);
    expect(t[99999]()).toBe(1);
    usable(rt);
  });

  test('100,000 distinct Lua functions are counted as handles and refused past conversionLimit', () => {
    const rt = runtime({ ...LIMITS, conversionLimit: 4 * MiB });
    rt.load('T = {} for i = 1, 1e5 do T[i] = function() return i end end');
    const err = thrownBy(() => rt.get('T'));
    expect(err.code).toBe('ERR_CONVERSION');
    expect(err.message).toMatch(/128 per function or handle/);
    usable(rt);
  });

  test('a short string shared a million times is counted per copy and refused past conversionLimit', () => {
    // Below the memo threshold each reference is a new JS string: counted.
    const rt = runtime({ memoryLimit: 32 * MiB });
    expect(rt.stats().conversionLimit).toBe(128 * MiB);
    rt.load('local s = string.rep("y", 200) T = {} for i = 1, 1e6 do T[i] = s end');
    const err = thrownBy(() => rt.get('T'));
    expect(err.code).toBe('ERR_CONVERSION');
    expect(err.message).toMatch(/conversionLimit/);
    expect(err.message).toMatch(/134217728/);
    usable(rt);
  });

  test('many distinct keys past conversionLimit are refused with ERR_CONVERSION', () => {
    const rt = runtime({ conversionLimit: MiB });
    rt.load('T = {} for i = 1, 1e5 do T["key" .. i] = i end');
    expect(() => rt.get('T')).toThrow(code('ERR_CONVERSION'));
    usable(rt);
  });

  test('a task result past conversionLimit fails the task with ERR_CONVERSION', async () => {
    const rt = runtime({ ...LIMITS, conversionLimit: 4 * MiB });
    rt.load('function big() return string.rep("z", 8 * 1024 * 1024) end');
    await expect(rt.call('big')).rejects.toMatchObject({ code: 'ERR_CONVERSION' });
    usable(rt);
  });

  test('a table nested deeper than the depth limit is refused with ERR_CONVERSION, not a stack overflow', () => {
    const rt = runtime();
    rt.load('T = {} local t = T for i = 1, 10000 do t[1] = {} t = t[1] end');
    expect(() => rt.get('T')).toThrow(code('ERR_CONVERSION'));
    usable(rt);
  });
});

describe('JS -> Lua: the memory limit holds while the value is built', () => {
  // What was found 4: JSON.parse handed to Lua parsed a 30 MB text into a
  // value that took a 64 MiB state to 556 MB for 12 s before it was refused.
  test('JSON.parse handed to Lua: a 30 MB text is refused at the limit, not after building 500 MB', () => {
    const rt = runtime();
    rt.set('parse', JSON.parse);
    const started = Date.now();
    const [ok, err] = rt.load(`
      local text = "[" .. string.rep('{"a":[1,2,3]},', 2 * 1024 * 1024) .. "0]"
      return pcall(parse, text)`);
    expect(ok).toBe(false);
    expect(err).toMatch(
      /^not enough memory: the JS value would take the Lua state to \d+ bytes, past memoryLimit 67108864/,
    );
    expect(rt.stats().memoryPeak).toBeLessThan(80 * MiB);
    expect(Date.now() - started).toBeLessThan(8000);
    usable(rt);
  });

  test('rt.set of an Array too large for the limit is refused before it passes the limit, and freed', () => {
    const rt = runtime({ memoryLimit: 8 * MiB });
    const err = thrownBy(() =>
      rt.set(
        'a',
        Array.from({ length: 1e6 }, (_, i) => i + 0.5),
      ),
    );
    expect(err.code).toBe('ERR_MEMORY_LIMIT');
    expect(err.message).toMatch(/past memoryLimit 8388608/);
    expect(err.message).toMatch(/raise the memoryLimit option/);
    expect(rt.stats().memoryPeak).toBeLessThan(9 * MiB);
    expect(rt.load('return a')).toEqual([null]);
    usable(rt);
  });

  test('a 64 MiB string is refused before it is copied into a 16 MiB runtime', () => {
    const rt = runtime({ memoryLimit: 16 * MiB });
    const err = thrownBy(() => rt.set('s', 'é'.repeat(32 * MiB)));
    expect(err.code).toBe('ERR_MEMORY_LIMIT');
    expect(err.message).toMatch(/a string of 67108864 bytes/);
    expect(rt.stats().memoryPeak).toBeLessThan(MiB);
    usable(rt);
  });

  test.each([
    ['a Buffer', () => Buffer.alloc(64 * MiB)],
    ['a Uint8Array', () => new Uint8Array(64 * MiB)],
    ['an ArrayBuffer', () => new ArrayBuffer(64 * MiB)],
  ])('%s of 64 MiB is refused before it is copied into a 16 MiB runtime', (_, make) => {
    const rt = runtime({ memoryLimit: 16 * MiB });
    const err = thrownBy(() => rt.set('b', make()));
    expect(err.code).toBe('ERR_MEMORY_LIMIT');
    expect(err.message).toMatch(/a Buffer of 67108864 bytes/);
    expect(rt.stats().memoryPeak).toBeLessThan(MiB);
    usable(rt);
  });

  test('a huge Float64Array crosses by reference, never copied', () => {
    const rt = runtime({ memoryLimit: 4 * MiB });
    const big = new Float64Array(16 * MiB);
    rt.set('f', big);
    expect(rt.load('return type(f)')).toEqual(['userdata']);
    expect(rt.get('f')).toBe(big);
    expect(rt.stats().memoryPeak).toBeLessThan(2 * MiB);
    usable(rt);
  });

  test('one Buffer referenced 1,000 times becomes one Lua string', () => {
    const rt = runtime({ memoryLimit: 8 * MiB });
    const b = Buffer.alloc(MiB, 7);
    rt.set('t', new Array(1000).fill(b));
    expect(rt.load('return #t, #t[1], rawequal(t[1], t[1000])')).toEqual([1000, MiB, true]);
    expect(rt.stats().memoryUsed).toBeLessThan(2 * MiB);
    usable(rt);
  });

  test('one JS string referenced 100 times is copied each time, and refused at the limit', () => {
    // JS strings have no identity: each occurrence is a copy, and counted.
    const rt = runtime({ memoryLimit: 16 * MiB });
    const s = 'q'.repeat(MiB);
    const err = thrownBy(() => rt.set('t', new Array(100).fill(s)));
    expect(err.code).toBe('ERR_MEMORY_LIMIT');
    expect(rt.stats().memoryPeak).toBeLessThan(17 * MiB);
    usable(rt);
  });

  test('an object with a million keys is refused before its table is made', () => {
    const rt = runtime({ memoryLimit: 8 * MiB });
    const o = {};
    for (let i = 0; i < 1e6; i++) o[`k${i}`] = i;
    const err = thrownBy(() => rt.set('o', o));
    expect(err.code).toBe('ERR_MEMORY_LIMIT');
    expect(err.message).toMatch(/an object of 1000000 keys/);
    expect(rt.stats().memoryPeak).toBeLessThan(MiB);
    usable(rt);
  });

  test('a Map of a million entries is refused before its table is made, and a smaller one crosses whole', () => {
    const rt = runtime({ memoryLimit: 8 * MiB });
    const m = new Map();
    for (let i = 0; i < 1e6; i++) m.set(i + 1, i);
    const err = thrownBy(() => rt.set('m', m));
    expect(err.code).toBe('ERR_MEMORY_LIMIT');
    expect(err.message).toMatch(/a Map of 1000000 entries/);
    expect(rt.stats().memoryPeak).toBeLessThan(MiB);
    const small = new Map([...m].slice(0, 5000));
    rt.set('m', small);
    expect(rt.load('local n = 0 for _ in pairs(m) do n = n + 1 end return n, m[5000]')).toEqual([5000, 4999]);
    usable(rt);
  });

  test('a Map whose values add entries while it is read stops at its size when conversion began', () => {
    const rt = runtime();
    const m = new Map();
    let n = 0;
    const grow = () => ({
      get v() {
        m.set(`more${n++}`, grow());
        return n;
      },
    });
    m.set('first', grow());
    rt.set('m', m);
    expect(rt.load('local n = 0 for _ in pairs(m) do n = n + 1 end return n')).toEqual([1]);
    usable(rt);
  });

  test('a value a JS function returns to Lua past the limit is a catchable Lua memory error', () => {
    const rt = runtime({ memoryLimit: 4 * MiB });
    rt.set('get', () => 'w'.repeat(8 * MiB));
    const [ok, err] = rt.load('return pcall(get)');
    expect(ok).toBe(false);
    expect(err).toMatch(/^not enough memory: .* past memoryLimit 4194304 \(refused at a string of 8388608 bytes\)$/);
    expect(rt.stats().memoryPeak).toBeLessThan(2 * MiB);
    usable(rt);
  });

  test('an awaited promise value past the limit fails the await, not the runtime', async () => {
    const rt = runtime({ memoryLimit: 4 * MiB });
    rt.set('later', () => Promise.resolve(Array.from({ length: 5e5 }, (_, i) => `v${i}`)));
    rt.load('function waiter() local ok, e = pcall(later) return {ok, e} end');
    const [ok, err] = await rt.call('waiter');
    expect(ok).toBe(false);
    expect(err).toMatch(
      /^not enough memory: the JS value would take the Lua state to \d+ bytes, past memoryLimit 4194304/,
    );
    usable(rt);
  });

  test('arguments to rt.start are one conversion: together they cannot pass the limit', async () => {
    const rt = runtime({ memoryLimit: 8 * MiB });
    rt.load('function n(...) return select("#", ...) end');
    const part = 'a'.repeat(3 * MiB);
    expect(() => rt.start('n', part, part, part)).toThrow(code('ERR_MEMORY_LIMIT'));
    expect(await rt.call('n', part, 1, 2)).toBe(3);
    usable(rt);
  });

  test('the same JS object given twice as arguments is one Lua table', async () => {
    const rt = runtime();
    rt.load('function same(a, b) return rawequal(a, b) end');
    const o = { x: 1 };
    expect(await rt.call('same', o, o)).toBe(true);
    expect(rt.get('same')(o, o)).toBe(true);
    usable(rt);
  });

  test('without memoryLimit, conversionLimit caps what one JS value may add to the state', () => {
    const rt = runtime({ conversionLimit: 4 * MiB });
    const err = thrownBy(() => rt.set('s', 'x'.repeat(8 * MiB)));
    expect(err.code).toBe('ERR_CONVERSION');
    expect(err.message).toMatch(/past conversionLimit 4194304 \(refused at a string of 8388608 bytes\)/);
    expect(rt.stats().memoryUsed).toBeLessThan(MiB);
    usable(rt);
  });

  test('a JS value nested deeper than the depth limit is refused with ERR_CONVERSION, not a stack overflow', () => {
    const rt = runtime();
    let deep = [];
    for (let i = 0; i < 5000; i++) deep = [deep];
    expect(() => rt.set('d', deep)).toThrow(code('ERR_CONVERSION'));
    usable(rt);
  });
});

describe('JS -> Lua: sparse Arrays cost what they hold', () => {
  // What was found 4: length 1e8 took 12 s and 1.6 GB; 2^32 - 1 hung.
  test('a sparse Array of length 1e8 crosses at once with its two elements', () => {
    const rt = runtime();
    const a = [];
    a[0] = 'first';
    a[1e8 - 1] = 'last';
    const started = Date.now();
    rt.set('a', a);
    expect(Date.now() - started).toBeLessThan(1000);
    expect(rt.load('local n = 0 for _ in pairs(a) do n = n + 1 end return n, a[1], a[1e8]')).toEqual([
      2,
      'first',
      'last',
    ]);
    expect(rt.stats().memoryPeak).toBeLessThan(2 * MiB);
    usable(rt);
  });

  test('a sparse Array of length 2^32 - 1 crosses at once instead of hanging', () => {
    const rt = runtime();
    const a = [];
    a[2 ** 32 - 2] = 1;
    a[5] = 2;
    a.name = 'not an element';
    const started = Date.now();
    rt.set('a', a);
    expect(Date.now() - started).toBeLessThan(1000);
    expect(rt.load('local n = 0 for _ in pairs(a) do n = n + 1 end return n, a[6], a[4294967295]')).toEqual([2, 2, 1]);
    usable(rt);
  });

  test('an Array with a long run of holes in the middle keeps every element at its index', () => {
    const rt = runtime();
    const a = Array.from({ length: 100 }, (_, i) => i);
    a.length = 100000;
    a[50000] = 'mid';
    for (let i = 99990; i < 100000; i++) a[i] = i;
    rt.set('a', a);
    expect(
      rt.load('local n = 0 for _ in pairs(a) do n = n + 1 end return n, a[1], a[100], a[50001], a[100000]'),
    ).toEqual([111, 0, 99, 'mid', 99999]);
    usable(rt);
  });

  test('an Array that grows while it is read is bounded by its length when conversion began', () => {
    const rt = runtime();
    const a = [1, 2, 3];
    Object.defineProperty(a, 1, {
      get() {
        for (let i = 0; i < 1000; i++) a.push(i);
        return 'read';
      },
      enumerable: true,
    });
    rt.set('a', a);
    expect(rt.load('return #a, a[2]')).toEqual([3, 'read']);
    usable(rt);
  });
});

describe('the conversionLimit option', () => {
  test("defaults to 4 x memoryLimit, else a quarter of V8's heap limit", () => {
    const heap = require('node:v8').getHeapStatistics().heap_size_limit;
    expect(runtime({ memoryLimit: 8 * MiB }).stats().conversionLimit).toBe(32 * MiB);
    expect(runtime({}).stats().conversionLimit).toBe(Math.floor(heap / 4));
    expect(runtime({ memoryLimit: 8 * MiB, conversionLimit: 0 }).stats().conversionLimit).toBe(0);
  });

  test.each([
    ['a negative number', -1, 'ERR_OUT_OF_RANGE'],
    ['a fraction', 1.5, 'ERR_OUT_OF_RANGE'],
    ['NaN', NaN, 'ERR_OUT_OF_RANGE'],
    ['Infinity', Infinity, 'ERR_OUT_OF_RANGE'],
    ['a string', '1048576', 'ERR_INVALID_ARG_TYPE'],
  ])('refuses %s with %s', (_, value, c) => {
    expect(() => new Runtime({ conversionLimit: value })).toThrow(code(c));
  });

  test('0 means no cap: a value larger than the default cap of a small memoryLimit crosses', () => {
    const rt = runtime({ memoryLimit: MiB, conversionLimit: 0 });
    rt.load('local s = string.rep("y", 300) T = {} for i = 1, 20000 do T[i] = s end');
    expect(rt.get('T')).toHaveLength(20000);
    usable(rt);
  });
});
