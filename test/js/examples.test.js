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
