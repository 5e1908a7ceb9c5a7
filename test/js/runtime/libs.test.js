// SPDX-License-Identifier: MIT
// Library profiles ('safe', 'all', a list) and the refusal of binary chunks.
'use strict';
const { Runtime } = require('../../..');
const { makeRuntime } = require('../helpers');

const withRuntime = (options, fn) => {
  const rt = new Runtime(options);
  try {
    return fn(rt);
  } finally {
    rt.closeSync();
  }
};
const keysOf = (rt, expr) =>
  rt.load(`local t = {} for k in pairs(${expr}) do t[#t + 1] = k end table.sort(t) return t`)[0];

// Lua 5.4's base library, less what 'safe' takes away (dofile, loadfile, warn).
const SAFE_BASE = [
  '_G',
  '_VERSION',
  'assert',
  'collectgarbage',
  'error',
  'getmetatable',
  'ipairs',
  'load',
  'next',
  'pairs',
  'pcall',
  'print',
  'rawequal',
  'rawget',
  'rawlen',
  'rawset',
  'select',
  'setmetatable',
  'tonumber',
  'tostring',
  'type',
  'xpcall',
];
const SAFE_LIBS = ['coroutine', 'math', 'os', 'string', 'table', 'utf8'];
// Added by lua-tasks itself: the task API, and require for options.modules.
const LUA_TASKS_GLOBALS = ['require', 'tasks'];

describe("the 'safe' profile (the default)", () => {
  let rt;
  beforeEach(() => {
    rt = makeRuntime();
  });

  test('has exactly the allowed globals', () => {
    expect(keysOf(rt, '_G')).toEqual([...SAFE_BASE, ...SAFE_LIBS, ...LUA_TASKS_GLOBALS].sort());
  });

  test("is what 'safe' names explicitly", () => {
    withRuntime({ libs: 'safe' }, (safe) => expect(keysOf(safe, '_G')).toEqual(keysOf(rt, '_G')));
  });

  test.each(['io', 'debug', 'package', 'dofile', 'loadfile', 'warn'])('has no %s', (name) => {
    expect(rt.load(`return ${name} == nil, rawget(_G, "${name}") == nil`)).toEqual([true, true]);
  });

  test('os has only time, clock, date and difftime', () => {
    expect(keysOf(rt, 'os')).toEqual(['clock', 'date', 'difftime', 'time']);
    expect(rt.load('return math.type(os.time()), type(os.clock()), type(os.date("%Y")), os.difftime(2, 1)')).toEqual([
      'integer',
      'number',
      'string',
      1,
    ]);
  });

  test.each(['execute', 'exit', 'getenv', 'remove', 'rename', 'tmpname', 'setlocale'])('os.%s is absent', (name) => {
    expect(rt.load(`return os.${name}`)).toEqual([null]);
  });

  test.each([
    ['coroutine', 'coroutine.wrap(function() coroutine.yield(7) end)()', 7],
    ['string', 'string.format("%05.1f", 3.14159)', '003.1'],
    ['table', 'table.concat({ 1, 2, 3 }, ",")', '1,2,3'],
    ['math', 'math.max(3, 9, 4)', 9],
    ['utf8', 'utf8.len("h\\u{E9}")', 2],
  ])('the %s library works', (_, expr, expected) => {
    expect(rt.load(`return ${expr}`)).toEqual([expected]);
  });

  test.each([
    ['io', 'require("io")'],
    ['debug', 'require("debug")'],
    ['os (the full one)', 'require("os").execute'],
    ['a Lua file', 'require("test.js.fixtures.nothing")'],
  ])('require cannot reach %s', (_, expr) => {
    expect(rt.load(`local ok, v = pcall(function() return ${expr} end) return ok and v ~= nil`)).toEqual([false]);
  });

  test('package.loaded is not reachable to bring a library back', () => {
    expect(rt.load('return package')).toEqual([null]);
    expect(rt.load('local ok = pcall(function() return require("package") end) return ok')).toEqual([false]);
  });
});

describe("the 'all' profile", () => {
  test.each(['io', 'debug', 'package', 'os', 'coroutine', 'string', 'table', 'math', 'utf8'])('has %s', (name) => {
    withRuntime({ libs: 'all' }, (rt) => expect(rt.load(`return type(${name})`)).toEqual(['table']));
  });

  test.each(['dofile', 'loadfile', 'require', 'warn'])('has %s', (name) => {
    withRuntime({ libs: 'all' }, (rt) => expect(rt.load(`return type(${name})`)).toEqual(['function']));
  });

  test('has the full os library', () => {
    withRuntime({ libs: 'all' }, (rt) => {
      expect(rt.load('return type(os.execute), type(os.getenv), type(os.remove)')).toEqual([
        'function',
        'function',
        'function',
      ]);
    });
  });

  test('has every global of the safe profile', () => {
    const safe = withRuntime({}, (rt) => keysOf(rt, '_G'));
    const all = withRuntime({ libs: 'all' }, (rt) => keysOf(rt, '_G'));
    expect(all).toEqual(expect.arrayContaining(safe));
  });
});

describe('a list profile', () => {
  test('has base plus the listed libraries, and nothing else', () => {
    withRuntime({ libs: ['coroutine', 'string', 'table', 'math'] }, (rt) => {
      expect(rt.load('return type(string), type(table), type(math), type(coroutine)')).toEqual([
        'table',
        'table',
        'table',
        'table',
      ]);
      expect(rt.load('return io, debug, package, os, utf8')).toEqual([null, null, null, null, null]);
      expect(rt.load('return type(print), type(pcall), type(load)')).toEqual(['function', 'function', 'function']);
    });
  });

  test('can name base explicitly', () => {
    withRuntime({ libs: ['base', 'coroutine', 'table'] }, (rt) => {
      expect(rt.load('return type(pairs), type(table), string')).toEqual(['function', 'table', null]);
    });
  });

  test('with io has io and the file loaders', () => {
    withRuntime({ libs: ['coroutine', 'table', 'io'] }, (rt) => {
      expect(rt.load('return type(io), type(io.open), type(dofile), type(loadfile)')).toEqual([
        'table',
        'function',
        'function',
        'function',
      ]);
    });
  });

  test('with debug has debug', () => {
    withRuntime({ libs: ['coroutine', 'table', 'debug'] }, (rt) => {
      expect(rt.load('return type(debug.traceback)')).toEqual(['function']);
    });
  });

  test('with os has os', () => {
    withRuntime({ libs: ['coroutine', 'table', 'os'] }, (rt) => {
      expect(rt.load('return type(os.time)')).toEqual(['function']);
    });
  });

  test('is copied: changing the array later changes nothing', () => {
    const libs = ['coroutine', 'table'];
    withRuntime({ libs }, (rt) => {
      libs.push('io');
      expect(rt.load('return io')).toEqual([null]);
    });
  });

  // docs/design.md#limits-and-sandbox: any list of library names is a valid profile. Regression: a
  // list without 'coroutine' could not create a runtime (the task prelude
  // indexed the missing coroutine table); coroutine now always comes with base.
  test.each([
    ['an empty list', []],
    ['only base', ['base']],
    ['only string', ['string']],
    ['string and math', ['string', 'math']],
  ])('%s creates a runtime with base and those libraries', (_, libs) => {
    withRuntime({ libs }, (rt) => {
      expect(rt.load('return type(print), type(pairs), io, debug')).toEqual(['function', 'function', null, null]);
      for (const name of libs.filter((n) => n !== 'base')) {
        expect(rt.load(`return type(${name})`)).toEqual(['table']);
      }
    });
  });
});

describe('binary chunks are refused in every profile', () => {
  const profiles = [
    ['safe', 'safe'],
    ['all', 'all'],
    ['a list', ['coroutine', 'string', 'table', 'io']],
  ];

  test.each(profiles)('rt.load refuses string.dump output (%s)', (_, libs) => {
    withRuntime({ libs }, (rt) => {
      const [bytes] = rt.load('return string.dump(function() return 1 end)');
      expect(Buffer.isBuffer(bytes)).toBe(true);
      expect(bytes[0]).toBe(0x1b);
      expect(() => rt.load(bytes.toString('latin1'))).toThrow(expect.objectContaining({ code: 'ERR_LUA_SYNTAX' }));
      expect(() => rt.load('\x1bLua')).toThrow(expect.objectContaining({ code: 'ERR_LUA_SYNTAX' }));
      expect(rt.load('return 1')).toEqual([1]);
    });
  });

  test.each(profiles)("Lua's load refuses string.dump output (%s)", (_, libs) => {
    withRuntime({ libs }, (rt) => {
      const [f, msg] = rt.load('return load(string.dump(function() return 1 end))');
      expect(f).toBeNull();
      expect(msg).toMatch(/binary chunk/);
    });
  });

  test.each(profiles)("Lua's load refuses a binary chunk given by a reader function (%s)", (_, libs) => {
    withRuntime({ libs }, (rt) => {
      const src =
        'local s = string.dump(function() return 1 end) local done = false ' +
        'return load(function() if done then return nil end done = true return s end)';
      expect(rt.load(src)[0]).toBeNull();
    });
  });

  test.each(profiles.flatMap(([name, libs]) => ['b', 'bt'].map((mode) => [mode, name, libs])))(
    'load with mode "%s" raises an error (%s)',
    (mode, _, libs) => {
      withRuntime({ libs }, (rt) => {
        let err;
        try {
          rt.load(`return load("return 1", "x", "${mode}")`);
        } catch (e) {
          err = e;
        }
        expect(err && err.code).toBe('ERR_LUA_RUNTIME');
        expect(err.message).toMatch(/binary chunks are not allowed/);
      });
    },
  );

  test.each(profiles)('load of text with mode "t" and with an env still works (%s)', (_, libs) => {
    withRuntime({ libs }, (rt) => {
      expect(rt.load('return load("return 1", "x", "t")(), load("return y", "x", "t", { y = 2 })()')).toEqual([1, 2]);
    });
  });

  test('loadfile and dofile refuse binary chunks when present', () => {
    const fs = require('node:fs');
    const os = require('node:os');
    const path = require('node:path');
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lua-tasks-libs-'));
    const file = path.join(dir, 'chunk.luac');
    try {
      withRuntime({ libs: 'all' }, (rt) => {
        rt.set('file', file);
        rt.load('local f = io.open(file, "wb") f:write(string.dump(function() return 1 end)) f:close()');
        const [fn, msg] = rt.load('return loadfile(file)');
        expect(fn).toBeNull();
        expect(msg).toMatch(/binary chunk/);
        expect(() => rt.load('return loadfile(file, "b")')).toThrow(/binary chunks are not allowed/);
        expect(() => rt.load('return dofile(file)')).toThrow(/binary chunk/);
      });
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
