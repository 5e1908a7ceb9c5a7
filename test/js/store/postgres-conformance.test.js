// SPDX-License-Identifier: MIT
// The PostgreSQL store passes the store conformance suite, on a real PostgreSQL (LUA_TASKS_PG_URL).
'use strict';
const path = require('node:path');
const { PostgresStore } = require('../../..');
const { describeStore } = require('./conformance');
const { describePg, createDatabase, query, writeHold, privateCluster } = require('../pg-helpers');

// Each test its own schema in the file's database.
let db;
let schemas = 0;
const LEASE_MS = 2000;

describePg('PostgresStore', () => {
  beforeAll(async () => {
    db = await createDatabase();
  });
  afterAll(async () => {
    if (db) await db.drop();
  });

  describeStore({
    label: 'PostgresStore',
    async setup() {
      const schema = `conf_${++schemas}`;
      // Its sessions are named for the schema: an outage ends exactly them.
      const store = new PostgresStore({
        connectionString: `${db.url}?application_name=${schema}`,
        schema,
        leaseMs: LEASE_MS,
      });
      // The schema made and the connections open (each a SCRAM handshake)
      // before the test: the storeTimeout tests time one hung call, not these.
      await (await store.acquire('warm-up')).release();
      return { schema, store };
    },
    async teardown(ctx) {
      await ctx.store.close();
    },
    // One store object for every runtime of a test: they share its transactions.
    store: (ctx) => ctx.store,
    child: (ctx) => ({
      module: path.join(__dirname, '..', 'fixtures', 'pg-store-spec.js'),
      spec: { url: db.url, schema: ctx.schema, leaseMs: LEASE_MS },
    }),
    // The snapshot row, replaced through the store (a save without a token is not fenced).
    async corrupt(ctx, name, fn) {
      const bytes = await ctx.store.load(name);
      await ctx.store.save(name, fn(Buffer.from(bytes)));
    },
    // A transaction leaves nothing behind in PostgreSQL: no file of a name's own.
    leftovers: () => [],
    faults: [
      {
        label: 'its statement (a trigger raising an error)',
        inject: (ctx) => failWith(ctx, 'BEFORE INSERT OR UPDATE', ''),
      },
      {
        label: 'its COMMIT (a deferred constraint trigger raising an error)',
        inject: (ctx) => failWith(ctx, 'AFTER INSERT OR UPDATE', 'CONSTRAINT', 'DEFERRABLE INITIALLY DEFERRED'),
      },
    ],
    outages: [
      {
        label: "the store's sessions ended mid-COMMIT (pg_terminate_backend)",
        hold: (ctx) => endMidWrite(ctx),
      },
    ],
    // A cluster of the test's own (never the shared server), restarted with
    // pg_ctl restart -m fast (every session ends, the server comes back) or
    // -m immediate (a crash: recovery runs as it comes back), while a write
    // of the store waits on a lock of the keyed-rows table.
    serverRestart: {
      async setup() {
        const cluster = await privateCluster();
        const store = new PostgresStore({ connectionString: cluster.url, leaseMs: LEASE_MS });
        await (await store.acquire('warm-up')).release(); // its tables made
        return {
          store,
          async hold() {
            const h = await writeHold(cluster.url, 'public.lua_tasks_kv');
            return {
              lock: () => h.lock(),
              async restart(mode) {
                await h.writeWaits();
                await cluster.restart(mode);
                await h.release();
              },
            };
          },
          async teardown() {
            await store.close().catch(() => {});
            await cluster.stop();
          },
        };
      },
    },
    kills: Number(process.env.LUA_TASKS_PG_KILLS || 100),
  });
});

// A trigger on the snapshots table that fails every write of a snapshot; undo() drops it.
async function failWith(ctx, when, kind, deferral = '') {
  const s = `"${ctx.schema}"`;
  await query(
    db.url,
    `CREATE OR REPLACE FUNCTION ${s}.injected_fault() RETURNS trigger LANGUAGE plpgsql AS
       $$ BEGIN RAISE EXCEPTION 'injected fault'; END $$`,
  );
  await query(
    db.url,
    `CREATE ${kind} TRIGGER injected_fault ${when} ON ${s}.lua_tasks_snapshots ${deferral}
       FOR EACH ROW EXECUTE FUNCTION ${s}.injected_fault()`,
  );
  return () => query(db.url, `DROP TRIGGER injected_fault ON ${s}.lua_tasks_snapshots`);
}

// Makes the store's writes wait (a lock on its keyed-rows table); end()
// waits until one of them does, then ends every session of the store (that
// write's among them) and lets the writes go. end() resolves with the number
// of sessions ended.
async function endMidWrite(ctx) {
  const hold = await writeHold(db.url, `"${ctx.schema}".lua_tasks_kv`, { app: ctx.schema });
  await hold.lock();
  return {
    async end() {
      try {
        await hold.writeWaits();
        const { rows } = await query(
          db.url,
          `SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
           WHERE datname = current_database() AND application_name = $1`,
          [ctx.schema],
        );
        return rows[0].n;
      } finally {
        await hold.release();
      }
    },
  };
}
