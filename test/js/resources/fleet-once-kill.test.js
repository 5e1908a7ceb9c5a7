// SPDX-License-Identifier: MIT
// Exactly-once invocations on a fleet, the caller and the resources in member processes of their own, under faults at random instants.
'use strict';
//
// Two target member processes each create two items (so they host them);
// a caller member process runs the durable fan-out of once-kill.test.js
// over the four (its journal in a directory store of its own, its
// Resources over its member): each item's `add` is called 12 times in turn,
// each answer recorded in a step (docs/resources.md#exactly-once, "On a
// fleet"). While it runs, at random instants: the caller is SIGKILLed, or
// the target hosting the most items is, or either (each restarted at once);
// the busiest target is paused (SIGSTOP) past its lease, so its names are
// taken over, then let go on (SIGCONT); the PostgreSQL sessions of every
// member, of the caller or of one target are ended (pg_terminate_backend;
// the server itself is never touched).
// Then, as in once-kill: every call ran once in its item, every answer was
// recorded once, and call j of an item was its j-th. A run that finishes
// before its faults landed is checked, and the faults go on over new items
// and a new caller journal. LUA_TASKS_FLEET_ONCE_KILLS: faults a test (4).

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { Fleet, Resources } = require('../../..');
const { describePg, createDatabase, query } = require('../pg-helpers');
const { sleep } = require('../helpers');
const { ITEM, onceCounts } = require('../fixtures/resource-once-child');
const { table } = require('../../../lib/store/postgres/schema');

const MEMBER = path.join(__dirname, '..', 'fixtures', 'resource-fleet-once-member.js');
const FAULTS = Number(process.env.LUA_TASKS_FLEET_ONCE_KILLS || 4);
const TARGETS = 2;
const ITEMS = 2; // a target
const PER = 12;
const FLEET = { leaseMs: 1000, idleMs: 0, routeTimeoutMs: 3000, balanceMs: 500 };
const HANG_MS = 120000; // a guard against hangs only: every wait ends long before

const rand = (n) => Math.floor(Math.random() * n);

// Resolves when pred() holds; fails naming what it waited for.
async function until(pred, what, ms = HANG_MS) {
  const end = Date.now() + ms;
  for (;;) {
    if (await pred()) return;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

// A member process of the fixture and what it printed.
function start(role, spec) {
  const child = spawn(process.execPath, [MEMBER, role, JSON.stringify(spec)], { stdio: ['pipe', 'pipe', 'pipe'] });
  const p = { role, child, pid: child.pid, lines: [], stderr: '', exit: null };
  let buf = '';
  child.stdout.setEncoding('utf8').on('data', (d) => {
    buf += d;
    const parts = buf.split('\n');
    buf = parts.pop();
    p.lines.push(...parts);
  });
  child.stderr.setEncoding('utf8').on('data', (d) => (p.stderr += d));
  child.stdin.on('error', () => {}); // killed with a line on its way
  p.exited = new Promise((resolve) => {
    child.on('close', (code, signal) => {
      p.exit = { code, signal };
      resolve(p.exit);
    });
  });
  p.has = (prefix) => p.lines.some((l) => l.startsWith(prefix));
  p.finished = () => p.has('finished ');
  return p;
}

// A runtime that closes as its member drops a name, its session ended, may
// not give its lease back; a warning says so (the lease lapses instead).
const UNRELEASED =
  /^\(node:\d+\) \[LUA_TASK_FAILED\] Warning: lua-tasks: could not release the store's lease on .*\n/gm;
const TRACE_HINT = /^\(Use `node --trace-warnings \.\.\.` to show where the warning was created\)\n/m;

// What a process said that it should not have: an error line, or stderr
// (but the warnings of leases not given back).
function trouble(p) {
  const warned = p.stderr.replace(UNRELEASED, '');
  const stderr = warned === p.stderr ? warned : warned.replace(TRACE_HINT, '');
  return { role: p.role, errors: p.lines.filter((l) => l.startsWith('error ')), stderr };
}

describePg('exactly-once invocations on a fleet under faults', () => {
  let db;
  const procs = new Set();
  beforeAll(async () => {
    db = await createDatabase();
  });
  afterAll(async () => {
    for (const p of procs) {
      p.child.kill('SIGCONT');
      p.child.kill('SIGKILL');
    }
    if (db) await db.drop();
  });

  // A scenario's members: targets, the caller, the items of this attempt.
  function fleet(tag) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lua-tasks-fleet-once-'));
    const schema = `once_${tag}`;
    const url = (who) => `${db.url}?application_name=once_${tag}_${who}`;
    const f = {
      tag,
      schema,
      dir,
      targets: [],
      caller: null,
      attempt: 0,
      prefix: null,
      callerRuns: 0,
      async startTarget(i) {
        const t = start('target', { url: url(`t${i}`), schema, fleet: FLEET });
        procs.add(t);
        f.targets[i] = t;
        await until(() => t.has('ready ') || t.exit, `target ${i} to be ready`);
        expect(trouble(t)).toEqual({ role: 'target', errors: [], stderr: '' });
        return t;
      },
      startCaller() {
        const store = path.join(dir, `c${f.attempt}`);
        const c = start('caller', { url: url('c'), schema, fleet: FLEET, store, prefix: f.prefix, per: PER });
        procs.add(c);
        f.caller = c;
        f.callerRuns++;
        return c;
      },
      // New items, ITEMS on each target (created there, so hosted there).
      async newItems() {
        f.prefix = `items/a${f.attempt}`;
        const want = [];
        f.targets.forEach((t, i) => {
          for (let k = 1; k <= ITEMS; k++) {
            const p = `${f.prefix}/t${i}-${k}`;
            want.push(p);
            t.child.stdin.write(`create ${p}\n`);
          }
        });
        const created = (p) => f.targets.some((t) => t.lines.includes(`created ${p} OK`));
        await until(() => want.every(created), 'the items to be created');
      },
      // item slot name -> pid of the member whose lease on it runs now
      async holders() {
        const { rows } = await query(
          db.url,
          `SELECT name, holder->>'pid' AS pid FROM ${table(schema, 'leases')}
           WHERE name LIKE 'lua-tasks.r.%' AND holder IS NOT NULL AND expires_at > now()`,
        );
        return new Map(rows.map((r) => [r.name, Number(r.pid)]));
      },
      // The index of the target hosting the most resources (at random among equals), and their names.
      async busiest() {
        const held = await f.holders();
        const names = f.targets.map((t) => [...held].filter(([, pid]) => pid === t.pid).map(([n]) => n));
        const most = Math.max(...names.map((n) => n.length));
        const ties = names.map((n, i) => (n.length === most ? i : -1)).filter((i) => i >= 0);
        const i = ties[rand(ties.length)];
        return { i, names: names[i] };
      },
      // Whether the caller runs and has not finished (a fault now lands mid-run).
      running() {
        return f.caller.exit === null && !f.caller.finished();
      },
      async close() {
        for (const p of [...f.targets, f.caller]) {
          if (!p) continue;
          p.child.kill('SIGCONT');
          p.child.kill('SIGKILL');
          await p.exited;
          procs.delete(p);
        }
        await query(db.url, `DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
        fs.rmSync(dir, { recursive: true, force: true });
      },
    };
    return f;
  }

  // Every call of the attempt's items ran once there, every answer was
  // recorded once by the caller, call j of an item answered j.
  async function check(f) {
    const member = await Fleet.join({ connectionString: db.url, schema: f.schema, ...FLEET });
    member.on('error', () => {});
    const res = await Resources.open(member, { modules: { item: ITEM } });
    let counts;
    let ids;
    try {
      ids = Object.values(await res.list(`${f.prefix}/*`)).sort();
      counts = await onceCounts(res, path.join(f.dir, `c${f.attempt}`, 'caller'), ids, PER);
    } finally {
      await res.close();
      await member.leave();
    }
    expect(ids).toHaveLength(TARGETS * ITEMS);
    expect(counts.got).toEqual(counts.want);
  }

  // Runs the fan-out with `fault(f)` done at random instants while it runs
  // until `faults` of them landed mid-run (fault answers whether it did),
  // then lets it finish and checks it. Answers what happened, for the log.
  async function scenario(tag, fault, faults = FAULTS) {
    const f = fleet(tag);
    try {
      for (let i = 0; i < TARGETS; i++) await f.startTarget(i);
      await f.newItems();
      f.startCaller();
      let landed = 0;
      for (;;) {
        const c = f.caller;
        if (landed < faults) {
          await until(() => c.has('fan ') || c.exit, 'the caller to fan out');
          await sleep(rand(300));
          if (f.running()) {
            if (await fault(f)) landed++;
            continue;
          }
        }
        await until(() => c.exit, 'the caller to finish');
        const end = c.exit;
        if (c !== f.caller) continue; // killed by the fault and started again
        expect({ exit: end, ...trouble(c) }).toEqual({
          exit: { code: 0, signal: null },
          role: 'caller',
          errors: [],
          stderr: '',
        });
        if (landed >= faults) break;
        // Finished before its faults landed: check it, then go on with new items.
        await check(f);
        f.attempt++;
        await f.newItems();
        f.startCaller();
      }
      await check(f);
      expect(f.targets.map((t) => t.exit)).toEqual(f.targets.map(() => null)); // none crashed
      for (const t of f.targets) expect(trouble(t)).toEqual({ role: 'target', errors: [], stderr: '' });
      return { landed, callerRuns: f.callerRuns, attempts: f.attempt + 1 };
    } finally {
      await f.close();
    }
  }

  // ---- faults: each answers whether it landed while the caller ran

  async function killCaller(f) {
    const c = f.caller;
    c.child.kill('SIGKILL');
    const { signal } = await c.exited;
    if (signal !== 'SIGKILL') return false; // it finished first
    f.startCaller();
    return true;
  }

  async function killTarget(f) {
    const { i } = await f.busiest();
    const mid = f.running();
    f.targets[i].child.kill('SIGKILL');
    await f.targets[i].exited;
    procs.delete(f.targets[i]);
    await f.startTarget(i);
    return mid;
  }

  async function killEither(f) {
    return rand(2) === 0 ? killCaller(f) : killTarget(f);
  }

  // SIGSTOP the busiest target until its leases lapsed and another member
  // took one of its names over (or the caller finished), then SIGCONT.
  async function pauseTarget(f) {
    const { i, names } = await f.busiest();
    const t = f.targets[i];
    if (names.length === 0) return false;
    const mid = f.running();
    t.child.kill('SIGSTOP');
    try {
      await until(async () => {
        const held = await f.holders();
        return names.every((n) => held.get(n) !== t.pid);
      }, "the paused target's leases to lapse");
      await until(async () => {
        const held = await f.holders();
        return !f.running() || names.some((n) => held.has(n));
      }, "the paused target's names to be taken over");
    } finally {
      t.child.kill('SIGCONT');
    }
    return mid;
  }

  // Ends the PostgreSQL sessions of every member, of the caller's, or of one
  // target's (at random): each member's pool, listening and lock sessions.
  async function endSessions(f) {
    const whose = ['%', 'c', `t${rand(TARGETS)}`][rand(3)];
    const mid = f.running();
    const { rows } = await query(
      db.url,
      `SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
       WHERE datname = current_database() AND application_name LIKE $1`,
      [`once\\_${f.tag}\\_${whose}`],
    );
    return mid && rows[0].n > 0;
  }

  const log = (what, r) =>
    console.log(
      `fleet exactly-once (${what}): ${r.landed} faults mid-run, ${r.callerRuns} caller runs, ${r.attempts} fan-outs`,
    );

  test(`a durable fan-out whose caller is SIGKILLed ${FAULTS} times runs each call once in its resource`, async () => {
    log('caller SIGKILLs', await scenario('caller', killCaller));
  }, 600000);

  test(`a durable fan-out whose targets are SIGKILLed ${FAULTS} times runs each call once in its resource`, async () => {
    log('target SIGKILLs', await scenario('target', killTarget));
  }, 600000);

  test(`a durable fan-out whose caller or targets are SIGKILLed ${FAULTS} times at random runs each call once`, async () => {
    log('either SIGKILLed', await scenario('either', killEither));
  }, 600000);

  test('a target paused past its lease mid-fan-out (SIGSTOP, then SIGCONT) runs no call twice and loses no answer', async () => {
    log('target paused', await scenario('paused', pauseTarget));
  }, 600000);

  test("the members' PostgreSQL sessions ended mid-fan-out (pg_terminate_backend) run no call twice and lose no answer", async () => {
    log('sessions ended', await scenario('sessions', endSessions));
  }, 600000);
});
