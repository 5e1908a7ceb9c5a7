// SPDX-License-Identifier: MIT
// Runtime basics: options, load, set/get, close, isolation, print and stats.
'use strict';
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { Runtime, LuaError, RuntimeClosedError } = require('../../..');
const { makeRuntime } = require('../helpers');

const code = (c) => expect.objectContaining({ code: c });
const root = path.join(__dirname, '..', '..', '..');
// Runs `script` in a fresh node from the checkout's root, so a crash fails
// the test instead of ending the run; returns what it printed.
const inChild = (script) =>
  execFileSync(process.execPath, ['-e', script], { cwd: root, encoding: 'utf8', timeout: 20000 });

let rt;
beforeEach(() => {
  rt = makeRuntime();
});

describe('constructor options', () => {
  test.each([
    ['options that are a number', 5, TypeError, 'ERR_INVALID_ARG_TYPE'],
    ['options that are a string', 'safe', TypeError, 'ERR_INVALID_ARG_TYPE'],
    ['options that are null', null, TypeError, 'ERR_INVALID_ARG_TYPE'],
    ['an unknown libs profile', { libs: 'none' }, TypeError, 'ERR_INVALID_ARG_VALUE'],
    ['libs as a number', { libs: 1 }, TypeError, 'ERR_INVALID_ARG_VALUE'],
    ['libs as an object', { libs: { base: true } }, TypeError, 'ERR_INVALID_ARG_VALUE'],
    ['an unknown library in the list', { libs: ['base', 'net'] }, TypeError, 'ERR_INVALID_ARG_VALUE'],
    ['a non-string in the libs list', { libs: [1] }, TypeError, 'ERR_INVALID_ARG_VALUE'],
    ['a negative memoryLimit', { memoryLimit: -1 }, RangeError, 'ERR_OUT_OF_RANGE'],
    ['a fractional memoryLimit', { memoryLimit: 1.5 }, RangeError, 'ERR_OUT_OF_RANGE'],
    ['a NaN memoryLimit', { memoryLimit: NaN }, RangeError, 'ERR_OUT_OF_RANGE'],
    ['an infinite memoryLimit', { memoryLimit: Infinity }, RangeError, 'ERR_OUT_OF_RANGE'],
    ['a memoryLimit past 2^53 (it became 0, no limit)', { memoryLimit: 1e30 }, RangeError, 'ERR_OUT_OF_RANGE'],
    ['print as a number', { print: 1 }, TypeError, 'ERR_INVALID_ARG_TYPE'],
    ['print as a string', { print: 'console.log' }, TypeError, 'ERR_INVALID_ARG_TYPE'],
    ['print as null', { print: null }, TypeError, 'ERR_INVALID_ARG_TYPE'],
    ['a module given as null', { modules: { m: null } }, TypeError, 'ERR_INVALID_ARG_VALUE'],
    [
      'a module named as a built-in one (it was silently ignored)',
      { modules: { tasks: 'return 1' } },
      TypeError,
      'ERR_INVALID_ARG_VALUE',
    ],
    [
      'a module named as a standard library the profile opens',
      { modules: { string: {} } },
      TypeError,
      'ERR_INVALID_ARG_VALUE',
    ],
    ['a module named _G', { libs: ['string'], modules: { _G: {} } }, TypeError, 'ERR_INVALID_ARG_VALUE'],
  ])('refuses %s', (_, options, Cls, errCode) => {
    let err;
    try {
      new Runtime(options).closeSync();
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(Cls);
    expect(err.code).toBe(errCode);
  });

  // Regression (issue 20): it said 'holds an unknown library the string "bogus"'.
  test('names an unknown library in the libs list plainly, and a non-string as what it is', () => {
    const allowed = 'Allowed: base, coroutine, string, table, math, utf8, os, io, debug, package.';
    expect(() => new Runtime({ libs: ['bogus'] })).toThrow(
      `The "options.libs" list holds an unknown library "bogus". ${allowed}`,
    );
    expect(() => new Runtime({ libs: [1] })).toThrow(
      `The "options.libs" list holds number 1, not a library name. ${allowed}`,
    );
    expect(() => new Runtime({ libs: [undefined] })).toThrow(
      `The "options.libs" list holds undefined, not a library name. ${allowed}`,
    );
  });

  test('accepts a module named as a standard library the profile leaves out (require does not answer it)', () => {
    const rt = new Runtime({ modules: { io: 'return { shim = true }' }, libs: ['base', 'string'] });
    expect(rt.load('return require("io").shim')).toEqual([true]);
    rt.closeSync();
    const safe = makeRuntime({ modules: { debug: { shim: 1 } } });
    expect(safe.load('return require("debug").shim')).toEqual([1]);
  });

  // Regression: the name was cut at the NUL, so 'a\0b' was registered as 'a'.
  test('registers a module whose name holds a NUL byte under its whole name', () => {
    const rt = new Runtime({ modules: { 'a\u0000b': 'return "source"', 'c\u0000d': { value: 1 } } });
    expect(rt.load('return require("a\\0b"), require("c\\0d").value')).toEqual(['source', 1]);
    expect(rt.load('return pcall(require, "a")')[0]).toBe(false);
    expect(rt.load('return pcall(require, "c")')[0]).toBe(false);
    rt.closeSync();
    // Its errors name it whole too (a chunk name is a C string: \0 shown).
    expect(() => new Runtime({ modules: { 'a\u0000b': 'return (' } })).toThrow(/^a\\0b:1: /);
  });

  // STYLE §5: TypeError for a wrong type, RangeError for a value out of range.
  // Regression: a string memoryLimit was reported as RangeError ERR_OUT_OF_RANGE.
  test('refuses a memoryLimit of the wrong type with TypeError ERR_INVALID_ARG_TYPE', () => {
    expect(() => new Runtime({ memoryLimit: '1048576' })).toThrow(TypeError);
    expect(() => new Runtime({ memoryLimit: '1048576' })).toThrow(code('ERR_INVALID_ARG_TYPE'));
  });

  test.each([
    ['no options', undefined],
    ['an empty object', {}],
    ["libs 'safe'", { libs: 'safe' }],
    ["libs 'all'", { libs: 'all' }],
    ['a memoryLimit of 0 (no limit)', { memoryLimit: 0 }],
    ['a memoryLimit in bytes', { memoryLimit: 4 << 20 }],
    ['a print function', { print: () => {} }],
  ])('accepts %s', (_, options) => {
    const r = makeRuntime(options);
    expect(r.load('return 1 + 1')).toEqual([2]);
  });

  test('the error message names the option and the value given', () => {
    expect(() => new Runtime({ memoryLimit: -5 })).toThrow(/memoryLimit.*-5/);
    expect(() => new Runtime({ libs: ['net'] })).toThrow(/"net"/);
  });
});

describe('load', () => {
  test.each([
    ['nothing', '', []],
    ['a single nil', 'return nil', [null]],
    ['scalars in order', 'return 1, 2.5, "x", true, false', [1, 2.5, 'x', true, false]],
    ['nil in the middle and at the end as null', 'return 1, nil, 3, nil', [1, null, 3, null]],
    ['a table', 'return { a = 1 }', [{ a: 1 }]],
  ])('returns %s', (_, src, expected) => {
    expect(rt.load(src)).toEqual(expected);
  });

  test('runs the chunk now, with its side effects visible afterwards', () => {
    rt.load('counter = (counter or 0) + 1');
    rt.load('counter = counter + 1');
    expect(rt.get('counter')).toBe(2);
  });

  test('passes no arguments to the chunk', () => {
    expect(rt.load('return select("#", ...)')).toEqual([0]);
  });

  test.each([
    ['a syntax error', 'x = = 1', 'ERR_LUA_SYNTAX', 1],
    ['a runtime error', '\n\nerror("bad")', 'ERR_LUA_RUNTIME', 3],
  ])('names the chunk in %s', (_, src, errCode, line) => {
    let err;
    try {
      rt.load(src, { name: 'conf.lua' });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(LuaError);
    expect(err.code).toBe(errCode);
    expect(err.source).toBe('conf.lua');
    expect(err.line).toBe(line);
    expect(err.message).toMatch(new RegExp(`^conf\\.lua:${line}: `));
  });

  test('names an unnamed chunk after its source text', () => {
    let err;
    try {
      rt.load('error("unnamed")');
    } catch (e) {
      err = e;
    }
    expect(err.source).toBe('[string "error("unnamed")"]');
    expect(err.line).toBe(1);
  });

  test.each([
    ['a number', 42],
    ['undefined', undefined],
    ['a Buffer', Buffer.from('return 1')],
    ['an object', { source: 'return 1' }],
  ])('refuses %s as the source with TypeError ERR_INVALID_ARG_TYPE', (_, src) => {
    expect(() => rt.load(src)).toThrow(TypeError);
    expect(() => rt.load(src)).toThrow(code('ERR_INVALID_ARG_TYPE'));
    expect(rt.load('return 1')).toEqual([1]);
  });

  test.each([
    ['options as a string', 'conf.lua'],
    ['a numeric name', { name: 5 }],
  ])('refuses %s with TypeError ERR_INVALID_ARG_TYPE', (_, options) => {
    expect(() => rt.load('return 1', options)).toThrow(code('ERR_INVALID_ARG_TYPE'));
  });
});

describe('set and get', () => {
  test('set makes a Lua global and get reads it back', () => {
    rt.set('answer', 42);
    expect(rt.load('return answer')).toEqual([42]);
    rt.load('greeting = "hi"');
    expect(rt.get('greeting')).toBe('hi');
  });

  test('get of a missing global is undefined', () => {
    expect(rt.get('nothing_here')).toBeUndefined();
  });

  test('set to undefined or null removes the global', () => {
    rt.set('g', 1);
    rt.set('g', undefined);
    expect(rt.load('return g == nil')).toEqual([true]);
    rt.set('g', 1);
    rt.set('g', null);
    expect(rt.load('return g == nil')).toEqual([true]);
  });

  test('set and get are raw: a metatable on _G runs no Lua code', () => {
    rt.load(
      'hits = 0 setmetatable(_G, { __index = function() hits = hits + 1 end, __newindex = function() hits = hits + 1 end })',
    );
    rt.set('fresh', 1);
    expect(rt.get('absent')).toBeUndefined();
    expect(rt.load('return rawget(_G, "fresh"), hits')).toEqual([1, 0]);
  });

  test('names that are not identifiers are still plain keys of _G', () => {
    rt.set('not an identifier', 'ok');
    expect(rt.load('return _G["not an identifier"]')).toEqual(['ok']);
    expect(rt.get('not an identifier')).toBe('ok');
  });

  test.each([
    ['a number', 1],
    ['a Symbol', Symbol('x')],
    ['undefined', undefined],
  ])('refuses %s as the name with ERR_INVALID_ARG_TYPE', (_, name) => {
    expect(() => rt.set(name, 1)).toThrow(code('ERR_INVALID_ARG_TYPE'));
    expect(() => rt.get(name)).toThrow(code('ERR_INVALID_ARG_TYPE'));
  });
});

describe('close', () => {
  test('close() resolves and is idempotent; closeSync() too', async () => {
    await expect(rt.close()).resolves.toBeUndefined();
    await expect(rt.close()).resolves.toBeUndefined();
    expect(() => rt.closeSync()).not.toThrow();
  });

  test('every method called after close throws ERR_RUNTIME_CLOSED', () => {
    rt.closeSync();
    const calls = {
      load: () => rt.load('return 1'),
      set: () => rt.set('x', 1),
      get: () => rt.get('x'),
      stats: () => rt.stats(),
      start: () => rt.start('f'),
      resume: () => rt.resume('t1'),
      cancel: () => rt.cancel('t1'),
      task: () => rt.task('t1'),
      tasks: () => rt.tasks(),
      ref: () => rt.ref(),
      unref: () => rt.unref(),
    };
    for (const [name, call] of Object.entries(calls)) {
      let err;
      try {
        call();
      } catch (e) {
        err = e;
      }
      expect({ name, code: err && err.code }).toEqual({ name, code: 'ERR_RUNTIME_CLOSED' });
      expect(err).toBeInstanceOf(RuntimeClosedError);
    }
  });

  test('async methods called after close reject with ERR_RUNTIME_CLOSED', async () => {
    rt.closeSync();
    await expect(rt.call('f')).rejects.toThrow(code('ERR_RUNTIME_CLOSED'));
    await expect(rt.commit()).rejects.toThrow(code('ERR_RUNTIME_CLOSED'));
  });

  test('a Lua function obtained before close throws ERR_RUNTIME_CLOSED when called', () => {
    const [f] = rt.load('return function() return 1 end');
    rt.load('function g() return 2 end');
    const g = rt.get('g');
    expect(f()).toBe(1);
    rt.closeSync();
    expect(() => f()).toThrow(code('ERR_RUNTIME_CLOSED'));
    expect(() => g()).toThrow(code('ERR_RUNTIME_CLOSED'));
  });

  test('finalizers and <close> handlers that run at close get errors, not freed memory', () => {
    // lua_close runs every pending __gc after the scheduler and the JS side
    // are gone: most calls below used to touch freed memory or crash there.
    const calls = [
      'tasks.current_id()',
      'tasks.start(function() end)',
      'tasks.status("x")',
      'tasks.resume("x")',
      'tasks.cancel("x")',
      'tasks.wait("x")',
      'tasks.sleep(1)',
      'coroutine.yield()',
      'mark()',
      'print("from a finalizer")',
      'tostring(obj)',
      'local _ = obj.a',
      'tasks.await(obj)',
    ];
    let marked = 0;
    const printed = [];
    for (const call of calls) {
      const r = new Runtime({ libs: 'all', print: (s) => printed.push(s) }); // 'safe' refuses __gc
      r.set('mark', () => {
        marked += 1;
      });
      r.set('obj', { a: 1 });
      r.load(`
        local function try() local ok, err = pcall(function() ${call} end) return ok, err end
        keep = setmetatable({}, { __gc = function() try() end })  -- finalized only by close
        function park()
          local guard <close> = setmetatable({}, { __close = function() try() end })
          coroutine.yield("INDEFINITELY")
        end`);
      r.start('park');
      r.closeSync();
    }
    // <close> handlers run while close() cancels the waiting task, with the
    // runtime still whole: only there do JS calls go through.
    expect(marked).toBe(1);
    expect(printed).toEqual(['from a finalizer']);
    expect(rt.load('return 1 + 1')).toEqual([2]);
  });

  test('a finalizer run at close is told why its call was refused', () => {
    const file = path.join(os.tmpdir(), `lua-tasks-fin-${process.pid}.txt`);
    const r = new Runtime({ libs: 'all' });
    r.set('f', () => 1);
    r.set('file', file);
    r.load(`keep = setmetatable({}, { __gc = function()
      local out = io.open(file, "w")
      out:write(select(2, pcall(tasks.current_id)), "\\n", select(2, pcall(f)))
      out:close()
    end })`);
    r.closeSync();
    const lines = fs.readFileSync(file, 'utf8').split('\n');
    fs.unlinkSync(file);
    expect(lines).toHaveLength(2);
    for (const line of lines) {
      expect(line).toMatch(/^the runtime is closed: .*cannot use the tasks functions or JS values$/);
    }
  });

  test('closing one runtime leaves the others working', () => {
    const other = makeRuntime();
    const [f] = other.load('return function(x) return x + 1 end');
    rt.closeSync();
    expect(f(1)).toBe(2);
    expect(other.load('return "still here"')).toEqual(['still here']);
  });
});

describe('many runtimes', () => {
  test('globals are invisible to other runtimes', () => {
    const runtimes = Array.from({ length: 10 }, () => new Runtime());
    runtimes.forEach((r, i) => r.load(`mine = ${i}`));
    expect(runtimes.map((r) => r.get('mine'))).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(rt.get('mine')).toBeUndefined();
    runtimes.forEach((r) => r.closeSync());
  });

  test('a change to the string metatable stays in its own runtime', () => {
    const other = makeRuntime();
    rt.load('getmetatable("").__index.shout = function(s) return s:upper() .. "!" end');
    expect(rt.load('return ("hey"):shout()')).toEqual(['HEY!']);
    expect(other.load('return ("hey").shout')).toEqual([null]);
  });

  test('a change to a standard library stays in its own runtime', () => {
    const other = makeRuntime();
    rt.load('math.floor = nil string.len = function() return -1 end');
    expect(other.load('return math.floor(1.5), string.len("ab")')).toEqual([1, 2]);
  });

  test('a global of a closed runtime does not leak into a new one', () => {
    const first = new Runtime();
    first.load('leaked = true');
    first.closeSync();
    const second = makeRuntime();
    expect(second.get('leaked')).toBeUndefined();
  });
});

describe('the native binding', () => {
  // Jest evaluates lib/binding.js again for each test file, in the same
  // addon instance: its init replaces the helpers, and a runtime made before
  // must keep its own `this` for the JS functions Lua calls (it read a
  // deleted reference: another helper's function came as `this`).
  test('a second init leaves the runtimes made before it their receiver', () => {
    const out = inChild(`
      const { Runtime } = require('.');
      const rt = new Runtime();
      const seen = [];
      rt.set('f', function () { seen.push(this); });
      rt.load('f()');
      for (const k of Object.keys(require.cache)) if (!k.endsWith('.node')) delete require.cache[k];
      require('./lib/binding');
      rt.load('for i = 1, 20 do f() end');
      rt.closeSync();
      console.log(JSON.stringify({
        same: seen.every((t) => t === seen[0]),
        type: typeof seen[20],
        frozen: Object.isFrozen(seen[20]),
      }));
    `);
    expect(JSON.parse(out)).toEqual({ same: true, type: 'object', frozen: true });
  });

  // The old reference was deleted before the new one failed, and stayed to be
  // deleted again by close(): SIGSEGV.
  test('setActivate with no function throws, and close() after it is safe', () => {
    const out = inChild(`
      const binding = require('./lib/binding');
      const native = new binding.NativeRuntime({}, undefined, () => {}, {}, () => {});
      native.setActivate(() => {});
      let code;
      try {
        native.setActivate(42);
      } catch (e) {
        code = e.code;
      }
      native.close();
      console.log(code);
    `);
    expect(out.trim()).toBe('ERR_INVALID_ARG_TYPE');
  });
});

describe('print option', () => {
  const printed = (src) => {
    const lines = [];
    const r = new Runtime({ print: (line) => lines.push(line) });
    r.load(src);
    r.closeSync();
    return lines;
  };

  test.each([
    ['no arguments as an empty line', 'print()', ['']],
    ['several arguments joined by tabs', 'print("a", "b", "c")', ['a\tb\tc']],
    ['nil and booleans by name', 'print(nil, true, false)', ['nil\ttrue\tfalse']],
    [
      'integers and floats as Lua writes them',
      'print(1, 2.0, -0.0, 1e100, math.maxinteger)',
      ['1\t2.0\t-0.0\t1e+100\t9223372036854775807'],
    ],
    ['one line per call', 'print(1) print(2)', ['1', '2']],
    ['__tostring results', 'print(setmetatable({}, { __tostring = function() return "custom" end }))', ['custom']],
    ['embedded zero bytes', 'print("a\\0b")', ['a\u0000b']],
  ])('receives %s', (_, src, expected) => {
    expect(printed(src)).toEqual(expected);
  });

  test('receives tables and functions in Lua tostring form', () => {
    const [line] = printed('print({}, print, setmetatable({}, { __name = "MyType" }))');
    expect(line).toMatch(/^table: 0x[0-9a-f]+\tfunction: (builtin: )?0x[0-9a-f]+\tMyType: 0x[0-9a-f]+$/);
  });

  test('calls print synchronously, during load', () => {
    const seen = [];
    const r = makeRuntime({ print: (line) => seen.push(`print ${line}`) });
    r.set('mark', () => seen.push('mark'));
    r.load('print(1) mark() print(2)');
    expect(seen).toEqual(['print 1', 'mark', 'print 2']);
  });

  test('an exception in the print function is a Lua error catchable by pcall', () => {
    const boom = new Error('print failed');
    const r = makeRuntime({
      print: () => {
        throw boom;
      },
    });
    expect(r.load('local ok, e = pcall(print, "x") return ok, e.message')).toEqual([false, 'print failed']);
    expect(() => r.load('print("x")')).toThrow(boom);
  });
});

describe('stats', () => {
  test('reports memory figures and the task count', () => {
    const s = rt.stats();
    expect(s).toEqual(
      expect.objectContaining({
        memoryUsed: expect.any(Number),
        memoryPeak: expect.any(Number),
        memoryLimit: 0,
        tasks: 0,
      }),
    );
    expect(s.memoryUsed).toBeGreaterThan(0);
    expect(s.memoryPeak).toBeGreaterThanOrEqual(s.memoryUsed);
  });

  test('memoryUsed grows with data Lua holds and shrinks after it is collected', () => {
    const before = rt.stats().memoryUsed;
    rt.load('big = {} for i = 1, 1e5 do big[i] = i end');
    const grown = rt.stats().memoryUsed;
    expect(grown - before).toBeGreaterThan(1e5 * 8);
    rt.load('big = nil collectgarbage() collectgarbage()');
    expect(rt.stats().memoryUsed).toBeLessThan(grown);
    expect(rt.stats().memoryPeak).toBeGreaterThanOrEqual(grown);
  });

  test('memoryLimit is the option given', () => {
    const r = makeRuntime({ memoryLimit: 8 << 20 });
    expect(r.stats().memoryLimit).toBe(8 << 20);
  });

  test('tasks counts live tasks', () => {
    rt.load('function w() coroutine.yield("INDEFINITELY") end');
    rt.start('w');
    rt.start('w');
    expect(rt.stats().tasks).toBe(2);
  });
});
