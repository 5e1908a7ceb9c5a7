// SPDX-License-Identifier: MIT
// Routed operations at most once: a holder paused while a routed send waits for its acknowledgement.
'use strict';

// The asker (this process) sends to a name held by a member process that is
// SIGSTOPped first: the request waits unacknowledged in the holder's socket.
// The asker looks again after the acknowledgement's timeout and takes the
// name over, then serves the send itself; the holder is let go on (SIGCONT)
// and reads the request. Two ways the name moves while the holder sleeps:
// - "lapsed": its lease expires unrenewed (the holder's own clock tells it
//   so as it wakes);
// - "session": PostgreSQL ends the holder's lock session (a network fault, a
//   server-side timeout; here pg_terminate_backend), so the name is taken at
//   once, while the holder's lease still runs by its clock.
// Each member's inbox task reports every message it takes: the message must
// be taken once in every trial. Before requests were claimed in PostgreSQL
// the "session" trials took it twice (the woken holder served it too; its
// write was refused, its task had run on it).
const path = require('node:path');
const { spawn } = require('node:child_process');
const { Fleet } = require('../../..');
const { describePg, createDatabase, query } = require('../pg-helpers');
const { sleep } = require('../helpers');
const { INBOX_LUA } = require('../fixtures/fleet-lua');
const { lockId, nameLockKey } = require('../../../lib/store/postgres/schema');

const HOLDER = path.join(__dirname, '..', 'fixtures', 'fleet-paused-holder.js');
const TRIALS = Number(process.env.LUA_TASKS_ROUTED_TRIALS || 3); // of each kind
const KINDS = { lapsed: { leaseMs: 1000 }, session: { leaseMs: 6000 } };

// Resolves when pred() is true; fails naming what it waited for.
async function until(pred, what, ms = 15000) {
  const end = Date.now() + ms;
  for (;;) {
    if (await pred()) return;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

// A holder process and the lines it printed.
function startHolder(spec) {
  const child = spawn(process.execPath, [HOLDER, JSON.stringify(spec)], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = [];
  let buf = '';
  child.stdout.on('data', (d) => {
    buf += d;
    const parts = buf.split('\n');
    buf = parts.pop();
    lines.push(...parts);
  });
  return { child, lines };
}

describePg('Routed operations at most once', () => {
  let db;
  const children = new Set();
  beforeAll(async () => {
    db = await createDatabase();
  });
  afterAll(async () => {
    for (const c of children) c.kill('SIGKILL');
    if (db) await db.drop();
  });

  test(`a holder paused mid-acknowledgement while the asker's send falls back: the message is taken once (${TRIALS} trials of each way)`, async () => {
    const twice = [];
    const unclaimed = []; // "session" trials whose holder did not lose the claim
    const counts = { lapsed: 0, session: 0 };
    let trial = 0;
    for (const kind of Object.keys(KINDS)) {
      const { leaseMs } = KINDS[kind];
      for (let k = 0; k < TRIALS; k++) {
        trial++;
        const schema = `routed_once_${trial}`;
        const app = `routed_holder_${process.pid}_${trial}`;
        const name = 'box';
        const seen = [];
        const asker = await Fleet.join({
          connectionString: db.url,
          schema,
          leaseMs,
          idleMs: 0,
          routeTimeoutMs: 15000,
          runtime: {
            setup: (rt) => {
              rt.set('seen', (m) => seen.push(m));
              rt.load(INBOX_LUA);
            },
          },
        });
        asker.on('error', () => {});
        const h = startHolder({ url: `${db.url}?application_name=${app}`, schema, leaseMs, name });
        children.add(h.child);
        try {
          await until(() => h.lines.some((l) => l.startsWith('spawned ')), 'the holder to spawn its inbox');
          const id = h.lines.find((l) => l.startsWith('spawned ')).slice(8);
          const message = `m${trial}`;
          h.child.kill('SIGSTOP');
          const sent = Date.now();
          const sending = asker.send(name, id, message);
          if (kind === 'session') {
            // The request is out, unacknowledged (ACK_MS is 500): now the session ends.
            // The lock session is the one holding the name's lease lock (a
            // session of its pool may hold the name's fence, paused mid-write).
            await sleep(200);
            const { rows } = await query(
              db.url,
              `SELECT count(pg_terminate_backend(a.pid))::int AS n FROM pg_stat_activity a
               WHERE a.application_name = $1 AND a.pid IN (SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted
                 AND ((classid::bigint << 32) | objid::bigint) = ${lockId('$2')})`,
              [app, nameLockKey(schema, name)],
            );
            expect(rows[0].n).toBe(1);
          }
          // Not acknowledged: the asker looks again, takes the name over and serves it here.
          await expect(sending).resolves.toBe(true);
          const ms = Date.now() - sent;
          expect(asker.hosted()).toEqual([name]);
          expect(seen).toEqual([message]);
          if (kind === 'session') expect(ms).toBeLessThan(leaseMs); // taken within the holder's lease
          h.child.kill('SIGCONT');
          // It reads the request as it wakes, then learns the name is gone.
          await until(() => h.lines.some((l) => l.startsWith('claimslost ')), 'the holder to drop the name');
          const there = h.lines.filter((l) => l === `seen ${message}`).length;
          if (there + seen.length !== 1) twice.push({ trial, kind, here: seen.length, there });
          // It did not serve it because it lost the request's claim (in the
          // "lapsed" way it may drop the name before it reads the request).
          if (kind === 'session' && !h.lines.includes('claimslost 1')) unclaimed.push(trial);
          counts[kind]++;
          expect(seen).toEqual([message]);
        } finally {
          h.child.kill('SIGKILL');
          children.delete(h.child);
          await asker.leave();
        }
      }
    }
    expect(counts).toEqual({ lapsed: TRIALS, session: TRIALS });
    expect(twice).toEqual([]);
    expect(unclaimed).toEqual([]);
  }, 180000);

  test('old bug: a holder whose name was taken over while it was paused does not answer its own send with the runtime it no longer holds: the message reaches the task', async () => {
    const schema = 'routed_stale';
    const app = `routed_stale_${process.pid}`;
    const name = 'box';
    const seen = [];
    const leaseMs = 6000; // the holder's lease still runs by its clock as it wakes
    const asker = await Fleet.join({
      connectionString: db.url,
      schema,
      leaseMs,
      idleMs: 0,
      routeTimeoutMs: 15000,
      runtime: {
        setup: (rt) => {
          rt.set('seen', (m) => seen.push(m));
          rt.load(INBOX_LUA);
        },
      },
    });
    asker.on('error', () => {});
    const h = startHolder({ url: `${db.url}?application_name=${app}`, schema, leaseMs, name });
    children.add(h.child);
    try {
      await until(() => h.lines.some((l) => l.startsWith('spawned ')), 'the holder to spawn its inbox');
      h.child.kill('SIGSTOP');
      // Its lock session ends: the asker takes the name over at once and starts a task there.
      const { rows } = await query(
        db.url,
        `SELECT count(pg_terminate_backend(a.pid))::int AS n FROM pg_stat_activity a
         WHERE a.application_name = $1 AND a.pid IN (SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted)`,
        [app],
      );
      expect(rows[0].n).toBe(1);
      const id = await asker.spawn(name, 'inbox');
      expect(asker.hosted()).toEqual([name]);
      // The holder wakes with a send of its own to that task waiting for it.
      h.child.stdin.write(`send ${id} stale-m\n`);
      h.child.kill('SIGCONT');
      await until(() => h.lines.some((l) => l.startsWith('sent ')), "the holder's send to settle");
      expect(h.lines.filter((l) => l.startsWith('sent '))).toEqual(['sent true']);
      await until(() => seen.length > 0, 'the message to be taken');
      expect(seen).toEqual(['stale-m']);
    } finally {
      h.child.kill('SIGKILL');
      children.delete(h.child);
      await asker.leave();
    }
  }, 60000);
});
