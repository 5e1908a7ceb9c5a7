#!/usr/bin/env node
// SPDX-License-Identifier: MIT
// The lua-tasks command line: run a Lua script as a task, or print cron times.
'use strict';

const fs = require('node:fs');
const path = require('node:path');

const HELP = {
  main: `Usage: lua-tasks <command> [options]

Commands:
  run <script.lua> [args...]   run a Lua file's top level as a task
  cron "<expr>"                print the next times of a cron expression

Run "lua-tasks <command> --help" for a command's options.`,
  run: `Usage: lua-tasks run <script.lua> [args...] [options] [-- args...]

Runs the file's top level as a task (so coroutine.yield instructions work),
passing args as its ... values. Exits when no task is left; prints an
uncaught Lua error with its traceback and exits with status 1.

Options:
  --entry <fn>            after the top level, start this global function as a task
  --libs <safe|all|a,b>   standard libraries (default: safe)
  --memory-limit <bytes>  Lua memory limit (default: none)
  --task-timeout <ms>     CPU budget per task (default: none)
  --time-slice <ms>       preempt tasks after this long (default: none)
  --help                  show this help`,
  cron: `Usage: lua-tasks cron "<expr>" [--count N] [--tz Zone] [--from ISO-date]

Prints the next N times (default 5) the expression fires, strictly after now
(or --from), in ISO 8601 UTC and in the zone.`,
};

function fail(msg) {
  process.stderr.write(`lua-tasks: ${msg}\n`);
  process.exit(2);
}

// Splits argv into positionals and known --options (each takes the next
// word). Unknown --words after the script are the script's own arguments,
// and so is every word after a "--".
function parse(argv, valueOpts) {
  const pos = [];
  const opts = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const key = a.startsWith('--') ? a.slice(2) : null;
    if (a === '--') {
      pos.push(...argv.slice(i + 1));
      break;
    } else if (a === '--help' || a === '-h') {
      opts.help = true;
    } else if (key !== null && valueOpts.includes(key)) {
      if (i + 1 >= argv.length) fail(`option ${a} needs a value`);
      opts[key] = argv[++i];
    } else if (key !== null && pos.length === 0) {
      fail(`unknown option ${a} (see --help)`);
    } else {
      pos.push(a);
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
  const { pos, opts } = parse(argv, ['entry', 'libs', 'memory-limit', 'task-timeout', 'time-slice']);
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
      `local s = __lua_tasks_source __lua_tasks_source = nil return load(s, ${JSON.stringify(`@${path.basename(file)}`)}, "t")`);
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
    process.stderr.write(`lua-tasks: ${left} task(s) still waiting with nothing left to wake them ` +
      `(INDEFINITELY, or a promise that never settles)${opts.entry && task.status !== 'done' ? `; --entry ${opts.entry} did not start` : ''}\n`);
    process.exitCode = 1;
    rt.closeSync();
  });
}

function cron(argv) {
  const { pos, opts } = parse(argv, ['count', 'tz', 'from']);
  if (opts.help) return console.log(HELP.cron);
  if (pos.length !== 1) fail('cron needs one expression in quotes (see lua-tasks cron --help)');
  const { cron: cronApi } = require('./index');
  if (!cronApi) fail('cron is not available in this build');
  const count = opts.count === undefined ? 5 : Number(opts.count);
  if (!Number.isInteger(count) || count < 1 || count > 1000) fail(`--count must be an integer from 1 to 1000, got "${opts.count}"`);
  const from = opts.from ? new Date(opts.from) : new Date();
  if (Number.isNaN(from.getTime())) fail(`--from is not a date: "${opts.from}"`);
  let times;
  try {
    times = cronApi.next(pos[0], { from, tz: opts.tz, count });
  } catch (e) {
    process.stderr.write(`${e.message}\n`);
    process.exit(1);
  }
  if (times.length === 0) console.log('no next time');
  for (const t of times) console.log(t.toISOString());
}

function main(argv) {
  const [cmd, ...rest] = argv;
  if (!cmd || cmd === '--help' || cmd === '-h' || cmd === 'help') return console.log(HELP.main);
  if (cmd === 'run') return run(rest);
  if (cmd === 'cron') return cron(rest);
  fail(`unknown command "${cmd}" (commands: run, cron)`);
}

main(process.argv.slice(2));
