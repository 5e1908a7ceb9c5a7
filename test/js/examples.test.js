// SPDX-License-Identifier: MIT
// Every example runs and prints what it promises.
'use strict';
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

const root = path.join(__dirname, '..', '..');
const node = (args) => execFileSync(process.execPath, args, { cwd: root, encoding: 'utf8', timeout: 30000 });

test('examples/hello.js loads Lua, calls functions both ways and prints the results', () => {
  expect(node(['examples/hello.js'])).toBe(
    [
      'loaded: Lua 5.4 answer = 42',
      'greet("lua") -> hello, LUA!',
      'stats([1, 2, 3, 4]) -> n = 4, sum = 10, mean = 2.5',
      'Lua calling shout -> FROM LUA!',
      'math.maxinteger -> 9223372036854775807n',
      'countdown(3) as a task -> liftoff',
      '',
    ].join('\n'),
  );
});

test('examples/hello.js also runs from another working directory', () => {
  const out = execFileSync(process.execPath, [path.join(root, 'examples', 'hello.js')], {
    cwd: os.tmpdir(),
    encoding: 'utf8',
    timeout: 30000,
  });
  expect(out).toMatch(/^greet\("lua"\) -> hello, LUA!$/m);
});

test.each([
  ['examples/block-awake.js', /Waking up t[0-9a-z]+-\d+\nGot wake signal\. {2}Exiting\.\nawake: OK block: OK/],
  ['examples/fan-out.js', /total 180 in /],
  ['examples/worker-pool.js', /1\^2=1 2\^2=4 3\^2=9 4\^2=16 5\^2=25 6\^2=36 \(2 workers\)/],
])('%s runs', (file, expected) => {
  expect(node([file])).toMatch(expected);
});

test('examples/sandbox.js contains every hostile script and runs the good one', () => {
  const out = node(['examples/sandbox.js']);
  expect(out).toMatch(/reads a file: stopped \(ERR_LUA_RUNTIME\).*global 'io'/);
  expect(out).toMatch(/runs a command: stopped \(ERR_LUA_RUNTIME\)/);
  expect(out).toMatch(/eats memory: stopped \(ERR_MEMORY_LIMIT\)/);
  expect(out).toMatch(/spins forever: stopped \(ERR_TASK_TIMEOUT\)/);
  expect(out).toMatch(/loads bytecode: stopped \(ERR_LUA_RUNTIME\)/);
  expect(out).toMatch(/behaves: returned 5050/);
});

test('the CLI runs the seed coroutine tour as a task', () => {
  const out = node(['lib/cli.js', 'run', 'examples/coroutine-tour.lua']);
  expect(out).toMatch(/SCHEDULER\t yielded for \t[0-9.e-]+\t \tSECONDS/);
  expect(out).toMatch(/SCHEDULER\t yielded for \t(9\d|1\d\d)\.\d+\t \tMILLISECONDS/);
});

test('the CLI prints an uncaught Lua error with its traceback and exits 1', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lua-tasks-cli-'));
  const file = path.join(dir, 'bad.lua');
  fs.writeFileSync(file, 'local function f() error("boom") end\ncoroutine.yield()\nf()\n');
  let err;
  try {
    node(['lib/cli.js', 'run', file]);
  } catch (e) {
    err = e;
  }
  fs.rmSync(dir, { recursive: true, force: true });
  expect(err.status).toBe(1);
  expect(err.stderr).toMatch(/bad\.lua:1: boom/);
  expect(err.stderr).toMatch(/stack traceback:/);
});

test('the CLI passes arguments and knows --help', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lua-tasks-cli-'));
  const file = path.join(dir, 'args.lua');
  fs.writeFileSync(file, 'print(select("#", ...), ...)\n');
  expect(node(['lib/cli.js', 'run', file, 'a', '--b'])).toBe('2\ta\t--b\n');
  fs.rmSync(dir, { recursive: true, force: true });
  expect(node(['lib/cli.js', 'run', '--help'])).toMatch(/Usage: lua-tasks run/);
  expect(node(['lib/cli.js', '--help'])).toMatch(/Commands:/);
});

describe('the CLI reads a script as the lua CLI does', () => {
  const { spawnSync } = require('node:child_process');
  let dir;
  beforeEach(() => { dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lua-tasks-cli-')); });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));
  const runCli = (bytes, ...args) => {
    const file = path.join(dir, 's.lua');
    fs.writeFileSync(file, bytes);
    return spawnSync(process.execPath, ['lib/cli.js', 'run', file, ...args], { cwd: root, encoding: 'latin1', timeout: 30000 });
  };

  test('bytes as they are (the file was read as UTF-8: "\\xff" became 3 bytes)', () => {
    const r = runCli(Buffer.from('print(#"\xff\xfe", ("\xff"):byte())\n', 'latin1'));
    expect([r.status, r.stdout]).toEqual([0, '2\t255\n']);
  });

  test('a BOM and a #! first line are skipped, line numbers kept', () => {
    const r = runCli(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('#!/usr/bin/env lua-tasks\nprint("ok")\nerror("on line 3")\n')]));
    expect(r.stdout).toBe('ok\n');
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/s\.lua:3: on line 3/);
  });

  test('an --entry that names no function, and tasks left with nothing to wake them, are said plainly with status 1', () => {
    let r = runCli('x = 5\n', '--entry', 'x');
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/^Cannot start a task: "x" is not a Lua function/);
    expect(r.stderr).not.toMatch(/\n\s+at /);  // no Node stack
    r = runCli('coroutine.yield("INDEFINITELY")\nprint("after")\n', '--entry', 'x');
    expect(r.status).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe('lua-tasks: 1 task(s) still waiting with nothing left to wake them (INDEFINITELY, or a promise that never settles); --entry x did not start\n');
  });

  test('every word after -- is the script\'s own, and --memory-limit takes whole bytes only', () => {
    let r = runCli('print(select("#", ...), ...)\n', 'a', '--', '--entry', 'x', '--');
    expect([r.status, r.stdout]).toEqual([0, '4\ta\t--entry\tx\t--\n']);
    r = runCli('print("ran")\n', '--memory-limit', '0.5');
    expect([r.status, r.stdout, r.stderr]).toEqual([2, '', 'lua-tasks: --memory-limit must be a whole number, got "0.5"\n']);
  });

  test('a script larger than --memory-limit is an error, not a crash', () => {
    const r = runCli(`local s = "${'a'.repeat(3 << 20)}"\n`, '--memory-limit', String(1 << 20));
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/memoryLimit/);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });
});
