// SPDX-License-Identifier: MIT
// Fleet members with skewed wall clocks (libfaketime): a timer one records and another fires fires at its deadline by PostgreSQL's clock.
'use strict';
//
// Each member is a process of its own (test/js/fixtures/fleet-skew-member.js)
// whose wall clock libfaketime shifts by a few seconds (FAKETIME), its
// monotonic clock left alone. A member 4 s behind records the timers; a
// member 4 s ahead takes them over, once by a takeover (the holder is
// SIGKILLed) and once from the wake index (the holder hibernated them, then
// died). Deadlines and firing times are both read on PostgreSQL's clock, so
// the counts say what one clock says: none fired before its deadline (by
// more than the documented bound, docs/fleet.md#one-clock), all fired, none
// long after.

const { fork } = require('node:child_process');
const path = require('node:path');
const { describePg, createDatabase, query } = require('../pg-helpers');
const { sleep } = require('../helpers');
const { SKEW_REQUIRED_MISSING, skewUnavailable, skewedEnv } = require('./faketime');

const MEMBER = path.join(__dirname, '..', 'fixtures', 'fleet-skew-member.js');
const LEASE_MS = 2000;
const TIMER_MS = 8000; // long enough that the handover is over before any is due
const NAMES = 6;
// Late by more than this is a failure too (a poll, a takeover, a busy machine).
const LATE_MS = 2500;

describePg('Fleet members with skewed clocks', () => {
  if (SKEW_REQUIRED_MISSING) {
    test('libfaketime is installed (LUA_TASKS_REQUIRE_PG=1)', () => {
      throw new Error('libfaketime is not installed: apt-get install faketime libfaketime (.ci/run installs it).');
    });
    return;
  }
  if (skewUnavailable()) {
    process.stderr.write(`Fleet members with skewed clocks: skipped, ${skewUnavailable()}\n`);
    test.skip(skewUnavailable(), () => {});
    return;
  }

  let db;
  let schemas = 0;
  const children = [];

  beforeAll(async () => {
    db = await createDatabase();
    await query(db.url, 'CREATE TABLE skew_fired (label text NOT NULL, at timestamptz NOT NULL)');
  });
  afterEach(async () => {
    for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    await query(db.url, 'TRUNCATE skew_fired');
  });
  afterAll(async () => {
    if (db) await db.drop();
  });

  // Starts a member process with its wall clock `skew` off; resolves once it
  // printed "ready". Its lines go to m.lines; "spawned" lines fill m.deadlines.
  function startMember(skew, spec) {
    const p = fork(MEMBER, [JSON.stringify(spec)], { stdio: ['ignore', 'pipe', 'pipe', 'ipc'], env: skewedEnv(skew) });
    children.push(p);
    const m = { p, lines: [], deadlines: new Map(), hibernated: new Set(), rttMs: null, stderr: '' };
    let buf = '';
    let ready;
    const readyP = new Promise((resolve, reject) => {
      ready = resolve;
      p.on('exit', (code, signal) => reject(new Error(`member (${skew}) exited ${code ?? signal}: ${m.stderr}`)));
    });
    p.stderr.on('data', (d) => {
      m.stderr += d;
    });
    p.stdout.on('data', (d) => {
      buf += d;
      const lines = buf.split('\n');
      buf = lines.pop();
      for (const l of lines) {
        m.lines.push(l);
        const w = l.split(' ');
        if (w[0] === 'spawned') m.deadlines.set(w[1], { lo: Number(w[2]), hi: Number(w[3]) });
        else if (w[0] === 'hibernate') m.hibernated.add(w[1]);
        else if (w[0] === 'ready') {
          m.rttMs = Number(w[1]);
          ready(m);
        }
      }
    });
    m.ready = readyP;
    return m;
  }

  async function kill(m) {
    const gone = new Promise((resolve) => m.p.once('exit', resolve));
    m.p.kill('SIGKILL');
    await gone;
  }

  // The tasks each name gets: one FOR and one UNTIL_TIME, both TIMER_MS out.
  function timers(prefix) {
    const spawn = [];
    for (let i = 0; i < NAMES; i++) {
      spawn.push({ name: `${prefix}-${i}`, kind: 'FOR', ms: TIMER_MS });
      spawn.push({ name: `${prefix}-${i}`, kind: 'UNTIL_TIME', ms: TIMER_MS });
    }
    return spawn;
  }

  // When each label first fired, ms on PostgreSQL's clock.
  async function firedAt() {
    const { rows } = await query(
      db.url,
      'SELECT label, extract(epoch FROM min(at))::float8 * 1000 AS ms, count(*)::int AS n FROM skew_fired GROUP BY label',
    );
    return new Map(rows.map((r) => [r.label, r.ms]));
  }

  // Waits until every deadline has passed by LATE_MS (on PostgreSQL's clock)
  // or every timer fired, then counts: early, fired, late.
  async function judge(deadlines, allowedEarlyMs) {
    const last = Math.max(...[...deadlines.values()].map((d) => d.hi));
    for (;;) {
      const fired = await firedAt();
      const { rows } = await query(db.url, 'SELECT extract(epoch FROM clock_timestamp())::float8 * 1000 AS ms');
      if (fired.size === deadlines.size || rows[0].ms > last + LATE_MS + 500) break;
      await sleep(200);
    }
    await sleep(300); // an insert on its way
    const fired = await firedAt();
    const early = [];
    const late = [];
    for (const [label, d] of deadlines) {
      const at = fired.get(label);
      if (at === undefined) continue;
      if (at < d.lo - allowedEarlyMs) early.push(`${label} ${Math.round(d.lo - at)} ms early`);
      if (at > d.hi + LATE_MS) late.push(`${label} ${Math.round(at - d.hi)} ms late`);
    }
    return { total: deadlines.size, fired: fired.size, early, late };
  }

  // The documented bound: half the offset measurement's round trip, plus
  // half a ms for Date.now()'s whole ms; 1 ms more for the UNTIL_TIME target
  // in whole ms.
  const bound = (m) => m.rttMs / 2 + 1.5;

  test('timers recorded 4 s behind and taken over 4 s ahead (the holder killed) fire at their deadlines', async () => {
    const spec = { url: db.url, schema: `skew_${++schemas}`, leaseMs: LEASE_MS, idleMs: 0 };
    const behind = startMember('-4s', { ...spec, spawn: timers('kill') });
    await behind.ready;
    await kill(behind); // its PostgreSQL sessions end: the names are free at once
    const ahead = startMember('+4s', spec);
    await ahead.ready;
    const r = await judge(behind.deadlines, Math.max(bound(behind), bound(ahead)));
    expect({ fired: r.fired, early: r.early, late: r.late }).toEqual({ fired: r.total, early: [], late: [] });
    expect(r.total).toBe(2 * NAMES);
  }, 60000);

  test('timers hibernated 4 s behind and woken 4 s ahead (the index hands them over) fire at their deadlines', async () => {
    const spec = { url: db.url, schema: `skew_${++schemas}`, leaseMs: LEASE_MS, idleMs: 100 };
    const behind = startMember('-4s', { ...spec, spawn: timers('hib') });
    await behind.ready;
    const end = Date.now() + 10000;
    while (behind.hibernated.size < NAMES && Date.now() < end) await sleep(50);
    expect(behind.hibernated.size).toBe(NAMES);
    await kill(behind); // it cannot take them back: the other member wakes them
    const ahead = startMember('+4s', spec);
    await ahead.ready;
    const r = await judge(behind.deadlines, Math.max(bound(behind), bound(ahead)));
    expect({ fired: r.fired, early: r.early, late: r.late }).toEqual({ fired: r.total, early: [], late: [] });
    expect(r.total).toBe(2 * NAMES);
  }, 60000);
});
