// SPDX-License-Identifier: MIT
// `LUA_TASKS_PG_URL=... node --expose-gc bench/open_pg.js [tasks]`: Runtime.open
// on PostgreSQL of `tasks` (default 100,000) durable tasks each waiting
// INDEFINITELY after 8 steps (10 journal records), lazily and with
// durableRestore: 'all', two opens each in turn: its time, the tasks left
// dormant and the RSS each task adds (docs/performance.md#durable-tasks).
//
// Not a W row: filling the name takes a quarter of a minute at 100,000.
'use strict';

const { Runtime, PostgresStore } = require('..');

const LUA = `function w() for i = 1, 8 do tasks.step(function() return i end) end
  return coroutine.yield("INDEFINITELY") end`;

async function main() {
  const url = process.env.LUA_TASKS_PG_URL;
  if (!url) throw new Error('LUA_TASKS_PG_URL is not set (export LUA_TASKS_PG_URL=$(scripts/pg.sh start))');
  const n = Number(process.argv[2] || 100000);
  const schema = `bench_open_${process.pid}`;
  const open = async (durableRestore) => {
    const store = new PostgresStore({ connectionString: url, schema });
    const rt = await Runtime.open({ name: 'b', store, durableRestore, setup: (r) => r.load(LUA) });
    return { rt, store };
  };
  let { rt, store } = await open('lazy');
  const t0 = Date.now();
  for (let i = 0; i < n; i++) {
    rt.spawn('w', { durable: true });
    if (i % 2000 === 1999) await rt.commit();
  }
  await rt.commit();
  console.log(`filled ${n} tasks in ${Date.now() - t0} ms`);
  await rt.close();
  await store.close();
  for (const mode of ['lazy', 'all', 'lazy', 'all']) {
    if (global.gc) global.gc();
    const rss = process.memoryUsage().rss;
    const start = Date.now();
    ({ rt, store } = await open(mode));
    const ms = Date.now() - start;
    const { dormantTasks, tasks } = rt.stats();
    const perTask = (process.memoryUsage().rss - rss) / n;
    console.log(
      `${mode}: open ${ms} ms, ${dormantTasks} dormant, ${tasks} live, ${perTask.toFixed(0)} B of RSS a task`,
    );
    await rt.close();
    await store.close();
  }
  const { Client } = require('pg');
  const c = new Client({ connectionString: url });
  await c.connect();
  await c.query(`DROP SCHEMA "${schema}" CASCADE`);
  await c.end();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
