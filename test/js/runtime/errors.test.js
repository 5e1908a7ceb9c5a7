// SPDX-License-Identifier: MIT
// Errors through the boundary: Lua errors to JS, JS exceptions through Lua.
'use strict';
const { LuaError, LuaTasksError } = require('../../..');
const { fixture, makeRuntime, runNode, thrownBy } = require('../helpers');

const code = (c) => expect.objectContaining({ code: c });

let rt;
beforeEach(() => {
  rt = makeRuntime();
});

describe('syntax errors', () => {
  test.each([
    ['an unexpected symbol', 'x = = 1', 1, /unexpected symbol near '='/],
    ['an unfinished statement on line 2', 'x = 1\ny = ', 2, /unexpected symbol near <eof>|expected near <eof>/],
    ['an unfinished string on line 3', '\n\nx = "abc', 3, /unfinished string/],
    ['a missing end', 'if true then\n', 2, /'end' expected/],
  ])('%s is a LuaError ERR_LUA_SYNTAX naming chunk and line', (_, src, line, msg) => {
    const err = thrownBy(() => rt.load(src, { name: 'conf.lua' }));
    expect(err).toBeInstanceOf(LuaError);
    expect(err).toBeInstanceOf(LuaTasksError);
    expect(err).toBeInstanceOf(Error);
    expect(err.name).toBe('LuaError');
    expect(err.code).toBe('ERR_LUA_SYNTAX');
    expect(err.source).toBe('conf.lua');
    expect(err.line).toBe(line);
    expect(err.message).toMatch(new RegExp(`^conf\\.lua:${line}: `));
    expect(err.message).toMatch(msg);
  });

  test('a syntax error runs none of the chunk and leaves the runtime usable', () => {
    expect(() => rt.load('ran = true\nx = = 1')).toThrow(code('ERR_LUA_SYNTAX'));
    expect(rt.get('ran')).toBeUndefined();
    expect(rt.load('return 1')).toEqual([1]);
  });

  test('a syntax error inside Lua load() is a nil-plus-message result, not an exception', () => {
    expect(rt.load('return load("x = = 1", "=inner")')).toEqual([null, "inner:1: unexpected symbol near '='"]);
  });
});

describe('runtime errors', () => {
  test('a string error is ERR_LUA_RUNTIME with the location, a traceback and no value', () => {
    const err = thrownBy(() => rt.load('local function f()\n  error("bad thing")\nend\nf()', { name: 'run.lua' }));
    expect(err).toBeInstanceOf(LuaError);
    expect(err.code).toBe('ERR_LUA_RUNTIME');
    expect(err.message).toBe('run.lua:2: bad thing');
    expect(err.source).toBe('run.lua');
    expect(err.line).toBe(2);
    expect(typeof err.luaStack).toBe('string');
    expect(err.luaStack).toMatch(/^stack traceback:/);
    expect(err.luaStack).toMatch(/run\.lua:2: in/);
    expect(err.luaStack).toMatch(/run\.lua:4: in/);
    expect(err.value).toBeUndefined();
    expect(err.stack).toMatch(/run\.lua:2: bad thing/);
  });

  test('an error raised by Lua itself (indexing nil) names the variable', () => {
    const err = thrownBy(() => rt.load('local t = nil\nreturn t.x', { name: 'idx.lua' }));
    expect(err.code).toBe('ERR_LUA_RUNTIME');
    expect(err.message).toBe("idx.lua:2: attempt to index a nil value (local 't')");
    expect(err.line).toBe(2);
  });

  test('an error at level 0 has no location', () => {
    const err = thrownBy(() => rt.load('error("plain", 0)'));
    expect(err.message).toBe('plain');
    expect(err.source).toBeUndefined();
    expect(err.line).toBeUndefined();
  });

  test('a table error value is kept as .value', () => {
    const err = thrownBy(() => rt.load('error({ code = 7, why = "no", list = { 1, 2 } })'));
    expect(err).toBeInstanceOf(LuaError);
    expect(err.code).toBe('ERR_LUA_RUNTIME');
    expect(err.value).toEqual({ code: 7, why: 'no', list: [1, 2] });
    expect(err.message).toMatch(/table/);
    expect(err.luaStack).toMatch(/stack traceback/);
    expect(rt.load('return 1')).toEqual([1]);
  });

  test.each([
    ['a number', 'error(42)', 42, '42'],
    ['a boolean', 'error(true)', true, /boolean/],
    ['nil', 'error()', undefined, /nil/],
  ])('%s error value is kept as .value with a message', (_, src, value, msg) => {
    const err = thrownBy(() => rt.load(src));
    expect(err.code).toBe('ERR_LUA_RUNTIME');
    expect(err.value).toBe(value);
    expect(err.message).toMatch(msg);
  });

  test('a table error value with __tostring gives the message from it', () => {
    const err = thrownBy(() =>
      rt.load('error(setmetatable({ k = 1 }, { __tostring = function() return "custom" end }))'),
    );
    expect(err.message).toBe('custom');
    expect(err.value).toEqual({ k: 1 });
  });

  test('an error value that cannot cross still gives a LuaError with a message', () => {
    const err = thrownBy(() => rt.load('error({ [{}] = 1 })'));
    expect(err).toBeInstanceOf(LuaError);
    expect(err.code).toBe('ERR_LUA_RUNTIME');
    expect(rt.load('return 1')).toEqual([1]);
  });

  test('an error in a Lua function called from JS is thrown from the call', () => {
    const [f] = rt.load('return function(x) if x < 0 then error("negative: " .. x) end return x end', {
      name: 'f.lua',
    });
    expect(f(1)).toBe(1);
    const err = thrownBy(() => f(-1));
    expect(err.code).toBe('ERR_LUA_RUNTIME');
    expect(err.message).toBe('f.lua:1: negative: -1');
    expect(err.luaStack).toMatch(/stack traceback/);
    expect(f(2)).toBe(2);
  });

  test('a Lua error passing through a JS function reaches Lua pcall and JS', () => {
    rt.set('callsLua', () => rt.load('error("deep")', { name: 'inner.lua' }));
    const [ok, type, msg] = rt.load('local ok, e = pcall(callsLua) return ok, type(e), e.message');
    expect([ok, type, msg]).toEqual([false, 'userdata', 'inner.lua:1: deep']);
    const err = thrownBy(() => rt.load('callsLua()'));
    expect(err).toBeInstanceOf(LuaError);
    expect(err.message).toBe('inner.lua:1: deep');
  });

  test('a stack overflow in Lua is an error, not a crash', () => {
    const err = thrownBy(() => rt.load('local function f() return 1 + f() end return f()'));
    expect(err.code).toBe('ERR_LUA_RUNTIME');
    expect(err.message).toMatch(/stack overflow/);
    expect(rt.load('return 1')).toEqual([1]);
  });

  test('unbounded JS <-> Lua recursion is an error, not a crash', () => {
    rt.set('js', () => rt.get('lua')());
    rt.load('function lua() return js() end');
    expect(() => rt.load('return lua()')).toThrow(LuaError);
    expect(rt.load('return 1')).toEqual([1]);
  });
});

describe('JS exceptions thrown into Lua', () => {
  // An error value reads message, name, code and stack only (docs/security.md);
  // before issue 18 any field of the Error read through (e.extra was 'x').
  test('Lua pcall catches a JS Error and the error value keeps it', () => {
    const err = new TypeError('boom');
    err.extra = 'x';
    rt.set('thrower', () => {
      throw err;
    });
    expect(rt.load('local ok, e = pcall(thrower) return ok, type(e), tostring(e), e.message, e.name, e.extra')).toEqual(
      [false, 'userdata', 'TypeError: boom', 'boom', 'TypeError', null],
    );
    expect(rt.load('local ok, e = pcall(thrower) return e')[0]).toBe(err);
  });

  test('uncaught, it reaches the JS caller as the same Error object', () => {
    const err = new Error('same');
    rt.set('thrower', () => {
      throw err;
    });
    expect(thrownBy(() => rt.load('thrower()'))).toBe(err);
    expect(thrownBy(() => rt.load('local ok, e = pcall(thrower) error(e)'))).toBe(err);
    expect(rt.load('return 1')).toEqual([1]);
  });

  test('through a Lua function called from JS, it is the same Error object', () => {
    const err = new Error('via handle');
    rt.set('thrower', () => {
      throw err;
    });
    rt.load('function calls() thrower() end');
    expect(thrownBy(() => rt.get('calls')())).toBe(err);
  });

  test('through nested JS -> Lua -> JS -> Lua -> JS it is the same Error object', () => {
    const err = new Error('nested');
    rt.set('thrower', () => {
      throw err;
    });
    rt.load('function inner() thrower() end');
    const inner = rt.get('inner');
    rt.set('middle', () => inner());
    rt.load('function outer() middle() end');
    expect(thrownBy(() => rt.get('outer')())).toBe(err);
    expect(thrownBy(() => rt.load('outer()'))).toBe(err);
    expect(rt.load('local ok, e = pcall(outer) return ok, e.message')).toEqual([false, 'nested']);
    expect(rt.load('return 1')).toEqual([1]);
  });

  test('an Error caught and rethrown in a middle JS frame stays the same object', () => {
    const err = new Error('rethrown');
    rt.set('thrower', () => {
      throw err;
    });
    rt.load('function inner() thrower() end');
    const inner = rt.get('inner');
    rt.set('middle', () => {
      try {
        inner();
      } catch (e) {
        expect(e).toBe(err);
        throw e;
      }
    });
    expect(thrownBy(() => rt.load('middle()'))).toBe(err);
  });

  test('a thrown plain object round-trips as the same object', () => {
    const obj = { reason: 'plain' };
    rt.set('t', () => {
      throw obj;
    });
    // Only message/name/code/stack read (before issue 18, e.reason was 'plain').
    expect(rt.load('local ok, e = pcall(t) return ok, e.reason, tostring(e)')).toEqual([
      false,
      null,
      '(error object is a JS object)',
    ]);
    expect(thrownBy(() => rt.load('t()'))).toBe(obj);
  });

  // A non-Error primitive thrown from JS must round-trip like an Error does.
  // Run in a child process. Regression: it used to abort the whole process
  // (a Node-API reference to a primitive failed inside a noexcept function).
  const runChild = async (kind, how) => {
    const r = await runNode([fixture('throw-value.js'), kind, how], { timeout: 20000 });
    return { status: r.code, signal: r.signal, stderr: r.stderr, out: r.code === 0 ? JSON.parse(r.stdout) : null };
  };
  const roundTripped = {
    pcall: false,
    uncaught: { same: true, type: expect.any(String) },
    rethrown: { same: true, type: expect.any(String) },
    usable: 2,
  };

  test('the child script reports an Error thrown by a function or a getter as round-tripped', async () => {
    for (const how of ['call', 'getter']) {
      const r = await runChild('error', how);
      expect(r.status).toBe(0);
      expect(r.out).toEqual(roundTripped);
    }
  });

  test.each([
    ['a string', 'string'],
    ['a number', 'number'],
    ['false', 'boolean'],
    ['null', 'null'],
    ['undefined', 'undefined'],
    ['a BigInt', 'bigint'],
  ])('%s thrown by a JS function is catchable by pcall and reaches JS as the same value', async (_, kind) => {
    const r = await runChild(kind, 'call');
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(r.out).toEqual(roundTripped);
  });

  test('a string thrown by a getter that Lua reads is catchable by pcall and reaches JS unchanged', async () => {
    const r = await runChild('string', 'getter');
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(r.out).toEqual(roundTripped);
  });
});

describe('bad arguments', () => {
  test.each([
    ['a number', 1],
    ['null', null],
    ['a function', () => 'return 1'],
  ])('load(%s) is a TypeError ERR_INVALID_ARG_TYPE', (_, src) => {
    const err = thrownBy(() => rt.load(src));
    expect(err).toBeInstanceOf(TypeError);
    expect(err.code).toBe('ERR_INVALID_ARG_TYPE');
    expect(err.message).toMatch(/"source"/);
    expect(rt.load('return 1')).toEqual([1]);
  });
});

describe('memory limit', () => {
  let small;
  beforeEach(() => {
    small = makeRuntime({ memoryLimit: 1 << 20 });
  });

  test.each([
    ['a growing table', 'local t = {} for i = 1, 1e7 do t[i] = i end'],
    ['a large string', 'return string.rep("x", 1 << 21)'],
    ['string concatenation in a loop', 'local s = "" for i = 1, 1e6 do s = s .. "xxxxxxxx" end'],
  ])('%s fails with LuaError ERR_MEMORY_LIMIT and the runtime stays usable', (_, src) => {
    const err = thrownBy(() => small.load(src));
    expect(err).toBeInstanceOf(LuaError);
    expect(err.code).toBe('ERR_MEMORY_LIMIT');
    expect(err.message).toMatch(/memory/i);
    expect(small.load('local t = {} for i = 1, 100 do t[i] = i end return #t')).toEqual([100]);
    expect(small.stats().memoryUsed).toBeLessThan(1 << 20);
  });

  test.each([
    ['a string', 'local keep = string.rep("x", 400 * 1024) return keep .. keep'],
    ['a table', 'local t = {} for i = 1, 1e7 do t[i] = i end'],
  ])(
    'the message for %s gives the refused allocation and what was in use then, which together pass the limit',
    (_, src) => {
      const err = thrownBy(() => small.load(src));
      expect(err.code).toBe('ERR_MEMORY_LIMIT');
      const m = /an allocation of (\d+) bytes with (\d+) in use passes memoryLimit 1048576$/.exec(err.message);
      expect(m).not.toBeNull();
      const [size, used] = [Number(m[1]), Number(m[2])];
      expect(used).toBeLessThanOrEqual(1 << 20);
      // A growing block's old size is in `used` and goes when it moves.
      expect(used + size).toBeGreaterThan(1 << 20);
    },
  );

  test('source text too large to parse within the limit fails with ERR_MEMORY_LIMIT', () => {
    expect(() => small.load(`return #"${'y'.repeat(1 << 21)}"`)).toThrow(code('ERR_MEMORY_LIMIT'));
    expect(small.load('return 3')).toEqual([3]);
  });

  test('Lua pcall catches a memory error and the runtime stays usable', () => {
    expect(
      small.load('local ok, e = pcall(function() local t = {} for i = 1, 1e7 do t[i] = i end end) return ok, e'),
    ).toEqual([false, 'not enough memory']);
    expect(small.load('return 1')).toEqual([1]);
  });

  test('the limit holds again after a failure', () => {
    for (let i = 0; i < 3; i++) {
      expect(() => small.load('local t = {} for i = 1, 1e7 do t[i] = i end')).toThrow(code('ERR_MEMORY_LIMIT'));
    }
    expect(small.load('return "ok"')).toEqual(['ok']);
  });

  // docs/design.md#limits-and-sandbox: an allocation past memoryLimit fails as a Lua memory error and
  // the runtime stays usable. Regression: set() of a value larger than the
  // limit used to succeed and leave the state over its limit.
  test.each([
    ['a string', () => 'x'.repeat(1 << 21)],
    ['an array', () => Array.from({ length: 100000 }, (_, i) => i)],
  ])('set() of %s larger than the limit fails with ERR_MEMORY_LIMIT and the runtime stays usable', (_, make) => {
    let err;
    try {
      small.set('big', make());
    } catch (e) {
      err = e;
    }
    expect(small.load('return 2')).toEqual([2]);
    expect(err && err.code).toBe('ERR_MEMORY_LIMIT');
  });
});
