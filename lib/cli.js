#!/usr/bin/env node
// SPDX-License-Identifier: MIT
// The lua-tasks command line: run a Lua script as a task, print cron times, look into a store, check a deploy.
'use strict';

const fs = require('node:fs');
const path = require('node:path');

const { parseArgs } = require('node:util');
const { nearest } = require('./nearest');

// Our options per command; every one but --help takes a value.
const OPTIONS = {
  run: ['entry', 'libs', 'memory-limit', 'task-timeout', 'time-slice'],
  cron: ['count', 'tz', 'from'],
  inspect: ['pattern', 'after', 'limit', 'schema'],
  replay: ['name', 'setup', 'libs', 'task-timeout', 'schema'],
};
const COUNT_MAX = 10000; // cron.next's own bound on count (lib/cron.js); a test keeps them equal

const HELP = {
  main: `Usage: lua-tasks <command> [options]

Commands:
  run <script.lua> [args...]   run a Lua file's top level as a task
  cron "<expr>"                print the next times of a cron expression
  inspect <store> [name] [id]  list a store's names, a name's durable tasks, a task's history
  replay <store> <code>        replay the stored durable tasks against new code (before a deploy)

Run "lua-tasks <command> --help" for a command's options.`,
  run: `Usage: lua-tasks run <script.lua> [args...] [options] [-- args...]

Runs the file's top level as a task (so coroutine.yield instructions work),
passing args as its ... values. Exits when no task is left; prints an
uncaught Lua error with its traceback and exits with status 1.

Words after the script that are not options of ours go to the script; one
that looks like a misspelling of ours is refused (put it after -- to pass
it on). Every word after -- goes to the script.

Options:
  --entry <fn>            after the top level, start this global function as a task
  --libs <safe|all|a,b>   standard libraries (default: safe)
  --memory-limit <bytes>  Lua memory limit (default: none)
  --task-timeout <ms>     CPU budget per task (default: none)
  --time-slice <ms>       preempt tasks after this long (default: none)
  --help                  show this help`,
  cron: `Usage: lua-tasks cron "<expr>" [--count N] [--tz Zone] [--from ISO-date]

Prints the next N times (default 5, at most ${COUNT_MAX}) the expression fires,
strictly after now (or --from), one a line in ISO 8601: in UTC
(2030-01-01T12:00:00.000Z), or with --tz, as the local time in that zone
with its UTC offset (2030-01-01T07:00:00-05:00). --tz is also the zone the
expression is read in, unless it has a CRON_TZ= prefix.`,
  inspect: `Usage: lua-tasks inspect <store> [name] [task id] [options]

Reads a store without opening any name for writing: no lease is taken, and
a name open in another process (or fleet member) can be read meanwhile.
<store> is a directory (the directory store) or a postgres:// URL.

  lua-tasks inspect <store>              its runtime names, one a line
  lua-tasks inspect <store> <name>       the name's durable tasks: id, status,
                                         entry, wait (from their journals)
  lua-tasks inspect <store> <name> <id>  one durable task's journal, record
                                         by record

Options:
  --pattern <glob>  names matching it; * is any run of characters (default *)
  --after <name>    names after this one (the next page)
  --limit <n>       names at most (default 1000)
  --schema <name>   the PostgreSQL store's schema (default lua_tasks)`,
  replay: `Usage: lua-tasks replay <store> <code> [options]

The check before a deploy: replays every stored unfinished durable task (of
every name, or of --name) against the new code, with no side effects. JS
calls, steps, clock reads and waits are answered from each task's journal;
where its journal ends the task stops, before it would run anything live.
Nothing is written and no lease is taken. Prints each task the new code
would break (ERR_NONDETERMINISM: where its journal and the code part) and
exits 1 if there is one, 0 if none.

<code> is a Lua file (run at the top level first: it defines the entry
functions) or a directory (require and "mod.fn" entries read .lua files
there).

Options:
  --name <name>         only this runtime name
  --setup <file.js>     a module exporting (rt) => void: the JS globals the code
                        calls (rt.set(name, fn)); never called during a replay
  --libs <safe|all|a,b> standard libraries (default: safe)
  --task-timeout <ms>   CPU budget of one task's replay (default 10000)
  --schema <name>       the PostgreSQL store's schema (default lua_tasks)`,
};

function fail(msg) {
  process.stderr.write(`lua-tasks: ${msg}\n`);
  process.exit(2);
}

// Parses a command's argv with util.parseArgs: its options (each takes a
// value) and --help/-h. Unknown options are refused, naming the nearest one,
// except, when `passOn` is set, after the first positional (the script):
// there they are the script's own words unless they look like a misspelling
// of ours. Every word after a "--" is positional.
function parse(argv, command, passOn = false) {
  const names = OPTIONS[command];
  const options = { help: { type: 'boolean', short: 'h' } };
  for (const n of names) options[n] = { type: 'string' };
  const { tokens } = parseArgs({ args: argv, options, strict: false, allowPositionals: true, tokens: true });
  const pos = [];
  const opts = {};
  let lastPassed = -1; // -abc is three tokens of one word
  for (const t of tokens) {
    if (t.kind === 'option-terminator') {
      pos.push(...argv.slice(t.index + 1));
      break;
    }
    if (t.kind === 'positional') {
      pos.push(t.value);
    } else if (t.name === 'help') {
      if (t.inlineValue) fail(`option ${t.rawName} takes no value (see lua-tasks ${command} --help)`);
      opts.help = true;
    } else if (names.includes(t.name)) {
      if (t.value === undefined) fail(`option ${t.rawName} needs a value`);
      // As parseArgs' strict mode: "--entry --libs" is more likely a missing value.
      if (!t.inlineValue && t.value.startsWith('-')) {
        fail(
          `option ${t.rawName} needs a value, got "${t.value}" (write ${t.rawName}=${t.value} if that is the value)`,
        );
      }
      opts[t.name] = t.value;
    } else {
      const near = t.rawName.startsWith('--') ? nearest(t.name, [...names, 'help']) : undefined;
      if (passOn && pos.length > 0 && near === undefined) {
        if (t.index !== lastPassed) pos.push(argv[t.index]);
        lastPassed = t.index;
      } else {
        const hint = near !== undefined ? `; did you mean --${near}?` : ` (see lua-tasks ${command} --help)`;
        const after = passOn && pos.length > 0 ? ' (to pass it to the script, put it after --)' : '';
        fail(`unknown option ${argv[t.index]}${hint}${after}`);
      }
    }
  }
  return { pos, opts };
}

function number(opts, key, whole = false) {
  if (opts[key] === undefined) return undefined;
  const n = Number(opts[key]);
  if (!Number.isFinite(n) || n <= 0) fail(`--${key} must be a positive number, got "${opts[key]}"`);
  if (whole && !Number.isInteger(n)) fail(`--${key} must be a whole number, got "${opts[key]}"`);
  return n;
}

function printError(err) {
  let text = err && err.message ? err.message : String(err);
  if (err && err.luaStack) text += `\n${err.luaStack}`;
  process.stderr.write(`${text}\n`);
}

async function run(argv) {
  const { pos, opts } = parse(argv, 'run', true);
  if (opts.help) return console.log(HELP.run);
  const [file, ...args] = pos;
  if (!file) fail('run needs a script file (see lua-tasks run --help)');
  let source;
  try {
    source = fs.readFileSync(file); // bytes: Lua strings in it are byte strings, not UTF-8
  } catch (e) {
    fail(`cannot read ${file}: ${e.message}`);
  }
  // As the lua CLI does: skip a UTF-8 BOM, and a first line starting with #
  // (a #! line), keeping its newline so line numbers stay right.
  if (source[0] === 0xef && source[1] === 0xbb && source[2] === 0xbf) source = source.subarray(3);
  if (source[0] === 0x23) {
    const nl = source.indexOf(0x0a);
    source = nl < 0 ? Buffer.alloc(0) : source.subarray(nl);
  }
  const { Runtime } = require('./index');
  let libs = opts.libs || 'safe';
  if (libs !== 'safe' && libs !== 'all') libs = libs.split(',');
  const options = { libs };
  const mem = number(opts, 'memory-limit', true); // 0.5 floored to 0, which means no limit
  if (mem !== undefined) options.memoryLimit = mem;
  const timeout = number(opts, 'task-timeout');
  if (timeout !== undefined) options.taskTimeout = timeout;
  const slice = number(opts, 'time-slice');
  if (slice !== undefined) options.timeSlice = slice;
  let rt;
  try {
    rt = new Runtime(options);
  } catch (e) {
    fail(e.message);
  }
  rt.on('taskerror', (task, err) => {
    printError(err);
    process.exitCode = 1;
  });
  let task;
  try {
    // Compile without running: Lua's own load, with the file as chunk name.
    rt.set('__lua_tasks_source', source);
    const [main, loadError] = rt.load(
      `local s = __lua_tasks_source __lua_tasks_source = nil return load(s, ${JSON.stringify(`@${path.basename(file)}`)}, "t")`,
    );
    if (!main) {
      process.stderr.write(`${loadError}\n`);
      process.exit(1);
    }
    task = rt.start(main, ...args);
  } catch (e) {
    printError(e); // e.g. a script larger than --memory-limit
    process.exit(1);
  }
  task.result.then(
    () => {
      if (!opts.entry) return;
      try {
        rt.start(opts.entry);
      } catch (e) {
        printError(e); // --entry names no Lua function
        process.exitCode = 1;
      }
    },
    () => {}, // reported through 'taskerror'
  );
  // The loop is empty but tasks are left: nothing can wake them.
  process.once('beforeExit', () => {
    const left = rt.stats().tasks;
    if (left === 0) return;
    process.stderr.write(
      `lua-tasks: ${left} task(s) still waiting with nothing left to wake them ` +
        `(INDEFINITELY, or a promise that never settles)${opts.entry && task.status !== 'done' ? `; --entry ${opts.entry} did not start` : ''}\n`,
    );
    process.exitCode = 1;
    rt.closeSync();
  });
}

// An instant as the local time in `tz` with its UTC offset, ISO 8601
// (2030-01-01T07:00:00-05:00); cron times have whole seconds.
function inZone(date, tz) {
  const fmt = new Intl.DateTimeFormat('en-US', {
    timeZone: tz,
    hourCycle: 'h23',
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
  });
  const p = Object.fromEntries(fmt.formatToParts(date).map(({ type, value }) => [type, value]));
  const local = Date.UTC(
    Number(p.year),
    Number(p.month) - 1,
    Number(p.day),
    Number(p.hour),
    Number(p.minute),
    Number(p.second),
  );
  const offset = Math.round((local - date.getTime()) / 60000);
  const abs = Math.abs(offset);
  const hhmm = `${String(Math.floor(abs / 60)).padStart(2, '0')}:${String(abs % 60).padStart(2, '0')}`;
  return `${p.year.padStart(4, '0')}-${p.month}-${p.day}T${p.hour}:${p.minute}:${p.second}${offset < 0 ? '-' : '+'}${hhmm}`;
}

function cron(argv) {
  const { pos, opts } = parse(argv, 'cron');
  if (opts.help) return console.log(HELP.cron);
  if (pos.length !== 1) fail('cron needs one expression in quotes (see lua-tasks cron --help)');
  const { cron: cronApi } = require('./index');
  if (!cronApi) fail('cron is not available in this build');
  const count = opts.count === undefined ? 5 : Number(opts.count);
  if (!Number.isInteger(count) || count < 1 || count > COUNT_MAX) {
    fail(`--count must be an integer from 1 to ${COUNT_MAX}, got "${opts.count}"`);
  }
  const from = opts.from ? new Date(opts.from) : new Date();
  if (Number.isNaN(from.getTime())) fail(`--from is not a date: "${opts.from}"`);
  let times;
  try {
    times = cronApi.next(pos[0], { from, tz: opts.tz, count });
  } catch (e) {
    process.stderr.write(`${e.message}\n`);
    process.exit(1);
  }
  let show = (t) => t.toISOString();
  if (opts.tz !== undefined) {
    try {
      inZone(new Date(0), opts.tz);
      show = (t) => inZone(t, opts.tz);
    } catch {
      // The system tzdata knew the zone (cron.next took it) but Node's ICU does not.
      process.stderr.write(`lua-tasks: cannot show times in "${opts.tz}" (unknown to Node's Intl); showing UTC\n`);
    }
  }
  if (times.length === 0) console.log('no next time');
  for (const t of times) console.log(show(t));
}

const COMMANDS = ['run', 'cron', 'inspect', 'replay'];

// A command's promise: its exit code, or its error printed (exit 1).
function exitWith(done) {
  done.then(
    (code) => {
      process.exitCode = code;
    },
    (e) => {
      process.stderr.write(`lua-tasks: ${e && e.message ? e.message : String(e)}\n`);
      process.exitCode = 1;
    },
  );
}

function main(argv) {
  const [cmd, ...rest] = argv;
  if (cmd === undefined) {
    // A usage error, not a request for help: say how, and fail.
    process.stderr.write(`${HELP.main}\n`);
    process.exit(2);
  }
  if (cmd === '--help' || cmd === '-h' || cmd === 'help') return console.log(HELP.main);
  if (cmd === 'run') return run(rest);
  if (cmd === 'cron') return cron(rest);
  if (cmd === 'inspect') return exitWith(require('./cli_store').inspect(rest, parse, HELP.inspect, fail));
  if (cmd === 'replay') return exitWith(require('./cli_store').replay(rest, parse, HELP.replay, fail));
  const near = nearest(cmd, COMMANDS);
  fail(`unknown command "${cmd}"${near ? `; did you mean ${near}?` : ''} (commands: ${COMMANDS.join(', ')})`);
}

main(process.argv.slice(2));
