// SPDX-License-Identifier: MIT
// `node --expose-gc bench/open_million.js [tasks] [lazy|all]`: Runtime.open of a
// directory store holding `tasks` (default 1,000,000) durable tasks waiting
// INDEFINITELY (2 records each): its time and the RSS each task adds.
//
// Not a W row: filling the store takes minutes (it is filled once, in a
// child, then opened three times, each in a fresh child). Issue 34's
// targets: <= 1 s and <= 0.5 KB a sleeper, lazily
// (docs/performance.md#durable-tasks).
'use strict';

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { nodeChild, median, fmt } = require('./harness');

const LUA = 'function w() return coroutine.yield("INDEFINITELY") end';

async function fill(dir, n) {
  const { Runtime } = require('..');
  const rt = await Runtime.open({ name: 'm', store: dir, setup: (r) => r.load(LUA) });
  for (let i = 0; i < n; i += 1000) {
    for (let j = i; j < Math.min(n, i + 1000); j++) rt.spawn('w', { durable: true });
    await rt.commit();
  }
  await rt.close();
  return { n };
}

async function open(dir, mode) {
  const { Runtime } = require('..');
  new Runtime().close(); // the addon and a Lua state, loaded before the measure
  global.gc();
  const before = process.memoryUsage().rss;
  const t0 = process.hrtime.bigint();
  const rt = await Runtime.open({ name: 'm', store: dir, durableRestore: mode, setup: (r) => r.load(LUA) });
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  global.gc();
  const { tasks, dormantTasks } = rt.stats();
  const rss = (process.memoryUsage().rss - before) / (tasks + dormantTasks);
  await rt.close();
  return { ms, rss, tasks: tasks + dormantTasks, dormant: dormantTasks };
}

async function main() {
  const [what, ...rest] = process.argv.slice(2);
  if (what === 'fill') return fill(rest[0], Number(rest[1]));
  if (what === 'open') return open(rest[0], rest[1]);
  const n = Number(what || 1000000);
  const mode = rest[0] || 'lazy';
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lua-tasks-million-'));
  try {
    const child = (...args) => nodeChild(__filename, args, { nodeArgs: ['--expose-gc'], timeoutMs: 3600000 });
    child('fill', dir, n);
    const runs = [0, 1, 2].map(() => child('open', dir, mode));
    for (const r of runs) if (r.tasks !== n) throw new Error(`${r.tasks} of ${n} tasks after open`);
    const ms = median(runs.map((r) => r.ms));
    const rss = median(runs.map((r) => r.rss));
    console.log(`Runtime.open, ${fmt(n)} tasks waiting (${mode}): ${fmt(ms)} ms, ${fmt(rss)} B of RSS a task`);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  return null;
}

if (require.main === module) {
  main().then(
    (r) => {
      if (r !== null) process.stdout.write(`${JSON.stringify(r)}\n`);
    },
    (e) => {
      console.error(e);
      process.exit(1);
    },
  );
}
