// SPDX-License-Identifier: MIT
// A routed call's round trip by the size of its values: member B calls a Lua function of a name member A hosts.
//
// usage: LUA_TASKS_PG_URL=postgres://... node bench/route_size.js [bytes ...]
//   (default sizes 10, 4000 and 102400; ROUTE_CALLS sequential calls each,
//   default 400, after 50 to warm up). ROUTE_LOCAL=1 makes the same calls on
//   A itself (no routing), the base. ROUTE_PACKAGE=<dir> measures the
//   lua-tasks in <dir> (another checkout) with the same script.
//
// Both members are in this process, on a schema of the run's own (dropped
// after): a call's round trip is the asker's work, PostgreSQL's and the
// holder's in turn. Not a row of `npm run bench`.
'use strict';

const path = require('node:path');

const pkg = path.resolve(process.env.ROUTE_PACKAGE || path.join(__dirname, '..'));
const { Fleet } = require(pkg);
const { Client } = require('pg');

const CALLS = Number(process.env.ROUTE_CALLS) || 400;
const WARM = 50;

function quantile(sorted, q) {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

async function main() {
  const url = process.env.LUA_TASKS_PG_URL;
  if (!url) throw new Error('LUA_TASKS_PG_URL is not set (export LUA_TASKS_PG_URL=$(scripts/pg.sh start))');
  const sizes = process.argv.slice(2).map(Number);
  const schema = `route_size_${process.pid}`;
  const runtime = { setup: (rt) => rt.load('function ping(x) return x end') };
  const o = { connectionString: url, schema, idleMs: 0, balanceMs: 0, runtime };
  const a = await Fleet.join(o);
  const b = await Fleet.join(o);
  const asker = process.env.ROUTE_LOCAL === '1' ? a : b;
  try {
    await a.runtime('room');
    for (const n of sizes.length ? sizes : [10, 4000, 102400]) {
      const v = 'x'.repeat(n);
      for (let i = 0; i < WARM; i++) await asker.call('room', 'ping', v);
      const ms = [];
      for (let i = 0; i < CALLS; i++) {
        const t0 = process.hrtime.bigint();
        const r = await asker.call('room', 'ping', v);
        ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
        if (r.length !== n) throw new Error(`ping answered ${r.length} bytes, not ${n}`);
      }
      ms.sort((x, y) => x - y);
      const mean = ms.reduce((x, y) => x + y, 0) / ms.length;
      const f = (x) => x.toFixed(3);
      console.log(
        `${n} bytes each way: p50 ${f(quantile(ms, 0.5))} ms, p99 ${f(quantile(ms, 0.99))} ms, mean ${f(mean)} ms (${CALLS} sequential calls${asker === a ? ', local' : ''})`,
      );
    }
  } finally {
    await b.leave();
    await a.leave();
    const c = new Client({ connectionString: url });
    await c.connect();
    await c.query(`DROP SCHEMA "${schema}" CASCADE`);
    await c.end();
  }
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : e);
  process.exit(1);
});
