// SPDX-License-Identifier: MIT
// The 'safe' sandbox: one test per escape attempt, and the allow list is complete.
'use strict';
const path = require('node:path');
const { Runtime } = require('../../..');
const { makeRuntime, makeRuntimeWithLines } = require('../helpers');

const modules = path.join(__dirname, '..', 'fixtures', 'modules');
let rt;
beforeEach(() => {
  rt = makeRuntime({ modulePaths: [modules] });
});

// Runs `src` under pcall; returns [ok, message].
function attempt(src) {
  return rt.load(`local ok, err = pcall(function() ${src} end) return ok, tostring(err)`);
}

test('the global allow list is exactly what docs/design.md#limits-and-sandbox names', () => {
  const [keys] = rt.load(
    `local t = {} for k in pairs(_G) do t[#t + 1] = k end table.sort(t) return table.concat(t, " ")`,
  );
  expect(keys.split(' ')).toEqual([
    '_G',
    '_VERSION',
    'assert',
    'collectgarbage',
    'coroutine',
    'dofile',
    'error',
    'getmetatable',
    'ipairs',
    'load',
    'loadfile',
    'math',
    'next',
    'os',
    'pairs',
    'pcall',
    'print',
    'rawequal',
    'rawget',
    'rawlen',
    'rawset',
    'require',
    'select',
    'setmetatable',
    'string',
    'table',
    'tasks',
    'tonumber',
    'tostring',
    'type',
    'utf8',
    'xpcall',
  ]);
  expect(
    rt.load('local t = {} for k in pairs(os) do t[#t + 1] = k end table.sort(t) return table.concat(t, " ")'),
  ).toEqual(['clock date difftime time']);
});

test.each([
  ['io.open', 'io.open("/etc/passwd")'],
  ['os.execute', 'os.execute("true")'],
  ['os.exit', 'os.exit(1)'],
  ['os.getenv', 'os.getenv("HOME")'],
  ['os.remove', 'os.remove("/tmp/x")'],
  ['package.loadlib', 'package.loadlib("libc.so.6", "system")'],
  ['debug.getregistry', 'debug.getregistry()'],
  ['debug.sethook', 'debug.sethook()'],
])('%s is not reachable', (_, src) => {
  const [ok, msg] = attempt(src);
  expect(ok).toBe(false);
  expect(msg).toMatch(/attempt to index a nil value|attempt to call a nil value/);
});

test('requiring a C module or an unknown module fails clearly', () => {
  const [ok, msg] = attempt('require("socket.core")');
  expect(ok).toBe(false);
  expect(msg).toMatch(/module 'socket.core' not found/);
});

test('binary chunks are refused: string.dump output and mode "b"', () => {
  expect(attempt('assert(load(string.dump(function() return 1 end)))')).toEqual([
    false,
    expect.stringMatching(/attempt to load a binary chunk/),
  ]);
  expect(attempt('load("return 1", "x", "b")')).toEqual([
    false,
    expect.stringMatching(/binary chunks are not allowed/),
  ]);
  expect(attempt('loadfile("greet.lua", "b")')).toEqual([
    false,
    expect.stringMatching(/binary chunks are not allowed/),
  ]);
});

test('modules load from modulePaths as text, and dofile/loadfile cannot leave them', () => {
  expect(rt.load('return require("greet").hello("you"), require("pkg").name')).toEqual(['hello you', 'pkg']);
  expect(rt.load('return dofile("greet.lua").hello("again")')).toEqual(['hello again']);
  for (const file of ['/etc/passwd', '../../../package.json', `${modules}/../../../../package.json`]) {
    const [f, msg] = rt.load(`return loadfile(${JSON.stringify(file)})`);
    expect(f).toBeNull();
    expect(msg).toMatch(/only files inside modulePaths/);
  }
  expect(attempt('dofile("/etc/passwd")')).toEqual([false, expect.stringMatching(/only files inside modulePaths/)]);
});

test('without modulePaths there is no dofile or loadfile at all', () => {
  const plain = makeRuntime();
  expect(plain.load('return dofile, loadfile')).toEqual([null, null]);
});

test("changing one runtime's string metatable or _G does not reach another", () => {
  const other = makeRuntime();
  rt.load(
    'getmetatable("").__index = { upper = function() return "pwned" end } _G.print = nil setmetatable(_G, { __index = function() return "x" end })',
  );
  expect(other.load('return ("a"):upper(), type(print), undefined_global')).toEqual(['A', 'function', null]);
});

test('JS -> Lua -> JS recursion is bounded with a clear error, not a stack overflow', () => {
  rt.set('js', (n) => rt.get('lua')(n));
  rt.load('function lua(n) return js(n + 1) end');
  expect(() => rt.get('lua')(0)).toThrow(
    /call each other \d+ levels deep \(at most 150 levels and 512 KiB of C stack\)/,
  );
  expect(rt.load('return 1')).toEqual([1]);
});

test('a module file\'s bytes reach Lua as they are (it was read as UTF-8: "\\xff" became 3 bytes)', () => {
  const fs = require('node:fs');
  const os = require('node:os');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lua-tasks-mod-'));
  fs.writeFileSync(path.join(dir, 'latin.lua'), Buffer.from('return "\xff\xfe"\n', 'latin1'));
  const r = new Runtime({ modulePaths: [dir] });
  expect(r.load('local s = require("latin") return #s, s:byte(1), #dofile("latin.lua")')).toEqual([2, 255, 2]);
  r.closeSync();
  fs.rmSync(dir, { recursive: true, force: true });
});

test('a module name is dot-separated parts, none empty ("a." found <dir>/a/.lua)', () => {
  const fs = require('node:fs');
  const os = require('node:os');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lua-tasks-mod-'));
  fs.mkdirSync(path.join(dir, 'a'));
  fs.writeFileSync(path.join(dir, 'a', '.lua'), 'return "hidden"');
  fs.writeFileSync(path.join(dir, 'a', 'b.lua'), 'return "a.b"');
  const r = new Runtime({ modulePaths: [dir] });
  expect(r.load('return require "a.b"')).toEqual(['a.b']);
  for (const name of ['a.', '.a', 'a..b', 'a.b.']) {
    expect(() => r.load(`return require "${name}"`)).toThrow(
      `module '${name}' not found (modules come from the Runtime's modules and modulePaths options)`,
    );
  }
  r.closeSync();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('a module whose top level waits', () => {
  const modules = {
    slow: 'print("loading") tasks.sleep(0.02) print("loaded") return { n = 1 }',
    loop: 'require "loop" return 1',
  };
  let rt;
  let lines;
  beforeEach(() => {
    ({ rt, lines } = makeRuntimeWithLines({ modules }));
    rt.load('seen = {} function use(m) local v = require(m) seen[#seen + 1] = v return v end');
  });

  test('runs once: a second task requiring it meanwhile waits for it and gets the same value', async () => {
    const a = rt.call('use', 'slow');
    const b = rt.call('use', 'slow');
    const [va, vb] = await Promise.all([a, b]);
    expect(lines).toEqual(['loading', 'loaded']);
    expect(va).toEqual({ n: 1 });
    expect(vb).toEqual({ n: 1 });
    expect(rt.load('return seen[1] == seen[2]')).toEqual([true]);
  });

  test('a require outside a task meanwhile fails clearly; a cancelled load lets the next require load it again', async () => {
    const task = rt.start('use', 'slow');
    expect(() => rt.load('return require "slow"')).toThrow(
      /module 'slow' is loading in task .* \(its top level waits\); require it from a task to wait for it/,
    );
    rt.cancel(task.id);
    await expect(task.result).rejects.toMatchObject({ code: 'ERR_TASK_CANCELLED' });
    expect(await rt.call('use', 'slow')).toEqual({ n: 1 });
    expect(lines).toEqual(['loading', 'loading', 'loaded']);
  });

  test('a require loop across two tasks is an error, not a wait for ever', async () => {
    const r = makeRuntime({
      modules: {
        a: 'tasks.sleep(0.01) require "b" return "a"',
        b: 'tasks.sleep(0.01) require "a" return "b"',
      },
    });
    r.load('function use(m) return require(m) end');
    const results = await Promise.allSettled([r.call('use', 'a'), r.call('use', 'b')]);
    for (const res of results) {
      expect(res.status).toBe('rejected');
      expect(res.reason.message).toMatch(/a require loop/);
    }
    expect(r.stats().tasks).toBe(0);
  });

  test('requiring itself while it loads is a clear error, not a stack overflow', async () => {
    await expect(rt.call('use', 'loop')).rejects.toThrow(
      /module 'loop' requires itself while it loads \(a require loop\)/,
    );
  });
});
