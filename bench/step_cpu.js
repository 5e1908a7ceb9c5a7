// SPDX-License-Identifier: MIT
// Durable step + COMMIT rates with each thread's CPU a step, beside SQLite transactions of N rows.
//
// A probe beside bench/step_floor.js, for alternating runs of two builds:
//
//   node bench/step_cpu.js seq <dir> <steps> [tasks]
//     `tasks` durable tasks (default 1), each `steps` times
//     `tasks.step(function() return js(i) end)` then COMMIT, resumed
//     together once each waits INDEFINITELY (its start written): steps a
//     second from the resume until the last COMMIT returned, and the CPU
//     of the loop's thread and of the three busiest others (the store's
//     writer first), in µs a step, from /proc/self/task/*/stat (10 ms
//     ticks: run enough steps).
//   node bench/step_cpu.js floor <dir> <transactions> <rows>
//     better-sqlite3 transactions of `rows` one-row upserts each, as the
//     directory store opens its database (WAL, synchronous=FULL): rows a
//     second.
//
// ROOT picks the lua-tasks tree to load (default: this one).
'use strict';

const fs = require('fs');
const path = require('path');

const LUA = `
function seq_commit(n)
  coroutine.yield("INDEFINITELY")
  local sum = 0
  for i = 1, n do
    sum = sum + tasks.step(function() return js(i) end)
    coroutine.yield("COMMIT")
  end
  finished()
  return sum
end`;

// CPU ms of each thread of this process, by thread id.
function threadCpuMs() {
  const out = {};
  for (const t of fs.readdirSync('/proc/self/task')) {
    const s = fs.readFileSync(`/proc/self/task/${t}/stat`, 'utf8');
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    out[t] = (Number(f[11]) + Number(f[12])) * 10; // utime + stime, 100 ticks a second
  }
  return out;
}

async function seq(dir, steps, tasks) {
  const { Runtime } = require(process.env.ROOT || '..');
  let done = 0;
  let allDone;
  const all = new Promise((resolve) => {
    allDone = resolve;
  });
  const rt = await Runtime.open({
    name: 'floor',
    store: dir,
    setup: (r) => {
      r.set('js', (i) => i);
      r.set('finished', () => {
        if (++done === tasks) allDone();
      });
      r.load(LUA);
    },
  });
  const list = [];
  for (let i = 0; i < tasks; i++) list.push(rt.spawn('seq_commit', { durable: true, args: [steps] }));
  const parked = () => list.every((t) => (t.waiting || {}).instruction === 'INDEFINITELY');
  while (!parked()) await new Promise((resolve) => setTimeout(resolve, 2));
  const c0 = threadCpuMs();
  const t0 = performance.now();
  for (const t of list) rt.resume(t.id);
  await all;
  const ms = performance.now() - t0;
  const c1 = threadCpuMs();
  const n = steps * tasks;
  const per = (x) => Number(((x * 1000) / n).toFixed(1));
  const main = String(process.pid);
  const others = Object.keys(c1)
    .filter((k) => k !== main)
    .map((k) => c1[k] - (c0[k] || 0))
    .sort((a, b) => b - a)
    .slice(0, 3);
  for (const t of list) await t.result;
  await rt.close();
  return {
    steps: n,
    ms,
    rate: Math.round(n / (ms / 1000)),
    loopUs: per(c1[main] - c0[main]),
    othersUs: others.map(per),
  };
}

function floor(dir, transactions, rows) {
  const Database = require('better-sqlite3');
  const db = new Database(path.join(dir, 'floor.sqlite'));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.exec(`CREATE TABLE kv(name TEXT NOT NULL, space INTEGER NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL,
    PRIMARY KEY (name, space, key)) WITHOUT ROWID`);
  const put = db.prepare(
    `INSERT INTO kv(name, space, key, value) VALUES('floor', 2, ?, ?)
     ON CONFLICT(name, space, key) DO UPDATE SET value = excluded.value`,
  );
  const value = Buffer.alloc(24, 7);
  // Row j of each transaction goes to "journal" j, as each task's record does.
  const tx = db.transaction((i) => {
    for (let j = 0; j < rows; j++) put.run(`${j}/${String(i).padStart(10, '0')}`, value);
  });
  const t0 = performance.now();
  for (let i = 0; i < transactions; i++) tx(i);
  const ms = performance.now() - t0;
  db.close();
  const n = transactions * rows;
  return { rows: n, ms, rate: Math.round(n / (ms / 1000)) };
}

async function main([what, dir, a, b]) {
  if (what === 'seq') return seq(dir, Number(a), Number(b || 1));
  if (what === 'floor') return floor(dir, Number(a), Number(b));
  throw new Error(`step_cpu: unknown case ${what} (seq or floor)`);
}

main(process.argv.slice(2)).then(
  (out) => console.log(JSON.stringify(out)),
  (e) => {
    console.error(e && e.stack ? e.stack : e);
    process.exit(1);
  },
);
