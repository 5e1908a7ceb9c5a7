// SPDX-License-Identifier: MIT
// Every example runs and prints what it promises.
'use strict';
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { describePg } = require('./pg-helpers');

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

test('examples/durable-quest.js kills its quest server with SIGKILL and the quests resume where they were', () => {
  const out = node(['examples/durable-quest.js']);
  const ids = /alice's quest is task (\S+); bob's is (\S+),/.exec(out);
  expect(ids).not.toBeNull();
  const [, alice, bob] = ids;
  const [before, after] = out.split('SIGKILL the server');
  const where = `alice: ${alice} waiting (RECEIVE): 2 of 3 stages done, waiting for slay-dragon`;
  expect(before).toContain(where);
  expect(after).toContain(where); // restored after the kill, with the same id and place
  const reset = /daily reset (\S+): UNTIL_NEXT until (\S+)/;
  expect(reset.exec(after).slice(1)).toEqual(reset.exec(before).slice(1));
  expect(out).toContain(`bob: ${bob} done: failed: time ran out`);
  expect(out).toContain(`alice: ${alice} done: completed`);
  // Each announcement (a JS call from the quest) ran once, the kill notwithstanding.
  for (const stage of ['enter-cave', 'find-sword', 'slay-dragon']) {
    expect(out.split(`alice did ${stage}`)).toHaveLength(2);
  }
  expect(out).toMatch(/Done: the quests resumed where they were\.\n$/);
});

describePg('examples/fleet.js (on PostgreSQL)', () => {
  test('two member processes share a room; its holder is SIGKILLed and the other takes it over, history whole', () => {
    const out = node(['examples/fleet.js']);
    expect(out).toContain(
      "lobby, asked of the second member, answered by the first member: [ 'ann: hello', 'bob: hi ann' ]",
    );
    // Taken over by the wake index's poll, or activated by the next call,
    // whichever comes first after the kill: both are the second member's.
    expect(out).toMatch(/hosts lobby \(token 2, (takeover|call)\)/);
    expect(out).toContain(
      "lobby after the kill, answered by the second member: [ 'ann: hello', 'bob: hi ann', 'ann: still here?' ]",
    );
    expect(out).toMatch(/Done: the room moved to the member left standing, its history whole\.\n$/);
  });
});

describePg('examples/update-resources-fleet.js (on PostgreSQL)', () => {
  test("the seed's endpoint over two member processes, one SIGKILLed mid-fan-out: every resource updated once", () => {
    const out = node(['examples/update-resources-fleet.js']);
    expect(out).toContain('member B SIGKILLed mid-fan-out\n');
    // The invocations B did not answer are sent again and run on A, from
    // B's last durable point: the endpoint succeeds at once, each update once.
    expect(out).toContain('updated 5 resources\n');
    for (const item of ['boots', 'helmet', 'ring', 'shield', 'sword']) {
      expect(out).toContain(`resources/ada/${item} -> ${item}: 1\n`);
    }
    expect(out).toContain('resources/bob/sword -> sword: 0\n');
    expect(out).toMatch(/Every resource of ada was updated once\.\n$/);
  });
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

test('the CLI runs examples/coroutine-tour.lua as a task, each wait reporting its reason, elapsed time and unit', () => {
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
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lua-tasks-cli-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));
  const runCli = (bytes, ...args) => {
    const file = path.join(dir, 's.lua');
    fs.writeFileSync(file, bytes);
    return spawnSync(process.execPath, ['lib/cli.js', 'run', file, ...args], {
      cwd: root,
      encoding: 'latin1',
      timeout: 30000,
    });
  };

  test('bytes as they are (the file was read as UTF-8: "\\xff" became 3 bytes)', () => {
    const r = runCli(Buffer.from('print(#"\xff\xfe", ("\xff"):byte())\n', 'latin1'));
    expect([r.status, r.stdout]).toEqual([0, '2\t255\n']);
  });

  test('a BOM and a #! first line are skipped, line numbers kept', () => {
    const r = runCli(
      Buffer.concat([
        Buffer.from([0xef, 0xbb, 0xbf]),
        Buffer.from('#!/usr/bin/env lua-tasks\nprint("ok")\nerror("on line 3")\n'),
      ]),
    );
    expect(r.stdout).toBe('ok\n');
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/s\.lua:3: on line 3/);
  });

  test('an --entry that names no function, and tasks left with nothing to wake them, are said plainly with status 1', () => {
    let r = runCli('x = 5\n', '--entry', 'x');
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/^Cannot start a task: "x" is not a Lua function/);
    expect(r.stderr).not.toMatch(/\n\s+at /); // no Node stack
    r = runCli('coroutine.yield("INDEFINITELY")\nprint("after")\n', '--entry', 'x');
    expect(r.status).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(
      'lua-tasks: 1 task(s) still waiting with nothing left to wake them (INDEFINITELY, or a promise that never settles); --entry x did not start\n',
    );
  });

  test("every word after -- is the script's own, and --memory-limit takes whole bytes only", () => {
    let r = runCli('print(select("#", ...), ...)\n', 'a', '--', '--entry', 'x', '--');
    expect([r.status, r.stdout]).toEqual([0, '4\ta\t--entry\tx\t--\n']);
    r = runCli('print("ran")\n', '--memory-limit', '0.5');
    expect([r.status, r.stdout, r.stderr]).toEqual([
      2,
      '',
      'lua-tasks: --memory-limit must be a whole number, got "0.5"\n',
    ]);
  });

  test('a script larger than --memory-limit is an error, not a crash', () => {
    const r = runCli(`local s = "${'a'.repeat(3 << 20)}"\n`, '--memory-limit', String(1 << 20));
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/memoryLimit/);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });
});

describe('the CLI refuses what it does not know, with a suggestion', () => {
  const { spawnSync } = require('node:child_process');
  let dir;
  let script;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lua-tasks-cli-'));
    script = path.join(dir, 'args.lua');
    fs.writeFileSync(script, 'print(select("#", ...), ...)\n');
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));
  const cli = (...args) =>
    spawnSync(process.execPath, ['lib/cli.js', ...args], { cwd: root, encoding: 'utf8', timeout: 30000 });

  test('a misspelled option after the script is refused, naming the option meant, and the script does not run', () => {
    const r = cli('run', script, '--task-timout', '100');
    expect([r.status, r.stdout]).toEqual([2, '']);
    expect(r.stderr).toBe(
      'lua-tasks: unknown option --task-timout; did you mean --task-timeout? ' +
        '(to pass it to the script, put it after --)\n',
    );
    expect(cli('run', script, '--Time_Slice', '5').stderr).toMatch(/did you mean --time-slice\?/);
  });

  test('a misspelled or unknown option before the script is refused', () => {
    let r = cli('run', '--memory-limt', '100', script);
    expect([r.status, r.stdout, r.stderr]).toEqual([
      2,
      '',
      'lua-tasks: unknown option --memory-limt; did you mean --memory-limit?\n',
    ]);
    r = cli('run', '--verbose', script);
    expect([r.status, r.stderr]).toEqual([2, 'lua-tasks: unknown option --verbose (see lua-tasks run --help)\n']);
    r = cli('cron', '* * * * *', '--cont', '3');
    expect([r.status, r.stderr]).toEqual([2, 'lua-tasks: unknown option --cont; did you mean --count?\n']);
  });

  test('words after the script that are not like ours still go to the script, and -- passes anything', () => {
    let r = cli('run', script, 'a', '--verbose=1', '-x', '-5', '--', '--task-timout');
    expect([r.status, r.stdout]).toEqual([0, '5\ta\t--verbose=1\t-x\t-5\t--task-timout\n']);
    r = cli('run', script, '--', '--task-timeout', '5');
    expect([r.status, r.stdout]).toEqual([0, '2\t--task-timeout\t5\n']);
  });

  test('no arguments is a usage error: usage on stderr, status 2; --help is not', () => {
    const r = cli();
    expect([r.status, r.stdout]).toEqual([2, '']);
    expect(r.stderr).toMatch(/^Usage: lua-tasks <command>/);
    const h = cli('--help');
    expect([h.status, h.stderr]).toEqual([0, '']);
    expect(h.stdout).toMatch(/^Usage: lua-tasks <command>/);
    expect(cli('rnu').stderr).toBe(
      'lua-tasks: unknown command "rnu"; did you mean run? (commands: run, cron, inspect, replay)\n',
    );
  });

  test('cron --tz prints the local times in that zone with their offsets, as its help says', () => {
    const from = ['--from', '2030-06-30T00:00:00Z', '--count', '2'];
    let r = cli('cron', '0 0 12 * * ?', '--tz', 'Europe/Berlin', ...from);
    expect([r.status, r.stdout]).toEqual([0, '2030-06-30T12:00:00+02:00\n2030-07-01T12:00:00+02:00\n']);
    r = cli('cron', '0 30 9 * * ?', '--tz', 'America/New_York', '--from', '2030-01-01T00:00:00Z', '--count', '1');
    expect(r.stdout).toBe('2030-01-01T09:30:00-05:00\n');
    r = cli('cron', '0 0 12 * * ?', '--tz', 'Asia/Kolkata', ...from);
    expect(r.stdout).toBe('2030-06-30T12:00:00+05:30\n2030-07-01T12:00:00+05:30\n');
    r = cli('cron', '0 0 12 * * ?', ...from); // no zone: UTC instants
    expect(r.stdout).toBe('2030-06-30T12:00:00.000Z\n2030-07-01T12:00:00.000Z\n');
    const help = cli('cron', '--help').stdout;
    expect(help).toMatch(
      /with --tz, as the local time in that zone\s+with its UTC offset \(2030-01-01T07:00:00-05:00\)/,
    );
    // The help's own example is what the command prints.
    expect(
      cli('cron', '0 0 7 1 1 ?', '--tz', 'America/New_York', '--from', '2029-12-31T00:00:00Z', '--count', '1').stdout,
    ).toBe('2030-01-01T07:00:00-05:00\n');
  });

  test('--count takes exactly what cron.next takes', () => {
    const { cron } = require('../..');
    const at = { from: Date.UTC(2030, 0, 1) };
    expect(cron.next('* * * * *', { ...at, count: 10000 })).toHaveLength(10000);
    expect(() => cron.next('* * * * *', { ...at, count: 10001 })).toThrow(
      expect.objectContaining({ code: 'ERR_OUT_OF_RANGE' }),
    );
    let r = cli('cron', '* * * * *', '--from', '2030-01-01T00:00:00Z', '--count', '10000');
    expect([r.status, r.stdout.split('\n').length - 1]).toEqual([0, 10000]);
    r = cli('cron', '* * * * *', '--count', '10001');
    expect([r.status, r.stderr]).toEqual([2, 'lua-tasks: --count must be an integer from 1 to 10000, got "10001"\n']);
    expect(cli('cron', '--help').stdout).toMatch(/at most 10000/);
  });
});

test("examples/update-resources.js runs the seed's endpoint: every listed resource updated once, the others not", () => {
  const out = node(['examples/update-resources.js']);
  expect(out).toMatch(/^updated 5 resources concurrently/);
  for (const item of ['boots', 'helmet', 'ring', 'shield', 'sword']) {
    expect(out).toContain(`resources/ada/${item} -> ${item}: 1\n`);
  }
  expect(out).toContain('resources/bob/sword -> sword: 0\n');
});
