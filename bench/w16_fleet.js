// SPDX-License-Identifier: MIT
// W16: the fleet: routing by name between member processes, takeover after a kill, throughput by member count.
//
// Every member is a process of its own (`node bench/w16_fleet.js member
// SPEC`), driven by this one over its stdin and stdout (a JSON line each
// way), on a database of the run's own on the server of LUA_TASKS_PG_URL,
// made and dropped by the run (a schema per case). Three row groups:
//
// 1. Routing: a holder process hosts W16_ROUTE_NAMES names, a durable task
//    receiving messages in each; another member process, which holds none
//    of them, sends to them (member.send: rt.sendDurable at the holder,
//    answered once the message is durable): latency p50/p99 of sequential
//    sends, and messages/s with W16_INFLIGHT sends in flight. Beside each,
//    the same sends made on the holder itself (local: no routing), the
//    ratio's base. Sampled round-robin; every message is counted and summed
//    by its receiver, checked against what was sent.
// 2. Takeover: a member process hosting W16_TAKEOVER_NAMES names (each with
//    W16_PARKED durable tasks waiting for a message after a few steps) is
//    stopped by another member process, which then calls every name from
//    that moment on (a fresh call every PROBE_MS): the time from the signal
//    to the first call served, and to every name served, on the other
//    member. SIGKILL (the dead member's PostgreSQL session ends: its leases
//    are taken at once) and SIGSTOP (a hung or cut-off member: its session
//    stays, its leases must lapse), beside the target "lease + restore"
//    (W16_LEASE_MS, and restore the slowest activation the survivor
//    reported). Checked: every parked task is back, waiting, and finishes
//    with the sum its replayed steps gave.
// 3. Throughput: W16_NAMES names, each W16_TASKS durable tasks doing
//    W16_STEPS tasks.step and a COMMIT, spread over 1, 2 and 3 member
//    processes (each hosts its share of names): durable steps/s from the
//    go to every result in and written, each member count round-robin (a
//    new schema and new processes each rep). Beside it, the CPU a step
//    cost the members (process.cpuUsage) and PostgreSQL's backends serving
//    the run's database (/proc/PID/stat), and how busy the whole machine
//    was (/proc/stat): the last row's note says what they predict for more
//    cores. Checked: every job's sum, and each runtime's count of COMMITs.
//
// Without LUA_TASKS_PG_URL every row says it was not measured. Sizes are
// W16_* knobs (below); the defaults run in about a minute here.
'use strict';

const fs = require('fs');
const os = require('os');
const { serve, DrivenProcess } = require('./driven');
const { fmt, nowMs, median, percentile, check, pgDatabase } = require('./harness');

const env = (name, def) => Number(process.env[name]) || def;
const LEASE_MS = env('W16_LEASE_MS', 2000);
const ROUTE_NAMES = env('W16_ROUTE_NAMES', 4);
const SEQ_SENDS = env('W16_SEQ_SENDS', 200);
const MANY_SENDS = env('W16_MANY_SENDS', 2000);
const INFLIGHT = env('W16_INFLIGHT', 64);
const ROUTE_REPS = env('W16_ROUTE_REPS', 3);
const TAKEOVER_NAMES = env('W16_TAKEOVER_NAMES', 8);
const PARKED = env('W16_PARKED', 20);
const PARKED_STEPS = 10;
const TAKEOVER_REPS = env('W16_TAKEOVER_REPS', 3);
const PROBE_MS = 20;
const POLL_MS = Math.max(50, Math.min(1000, Math.floor(LEASE_MS / 4))); // Fleet.join's default pollMs
const NAMES = env('W16_NAMES', 12);
const TASKS = env('W16_TASKS', 20);
const STEPS = env('W16_STEPS', 100);
const THROUGHPUT_REPS = env('W16_THROUGHPUT_REPS', 3);
const MEMBER_COUNTS = [1, 2, 3];
const CALL_TIMEOUT_MS = 120000;
// W16_ONLY=route (or takeover, throughput; comma-separated): only those row groups, for an A/B of one.
const ONLY = new Set((process.env.W16_ONLY || 'route,takeover,throughput').split(','));

const LUA = `
-- Routing: adds up the messages it receives, forever.
got_n, got_sum = 0, 0
function inbox()
  while true do
    local v = tasks.receive()
    got_n, got_sum = got_n + 1, got_sum + v
  end
end
function got() return { n = got_n, sum = got_sum } end
-- Takeover: k steps, then a message; the total is counted where it finishes.
parked_n, parked_sum = 0, 0
function parked(k)
  local s = 0
  for i = 1, k do s = s + tasks.step(function() return i end) end
  local v = tasks.receive()
  parked_n, parked_sum = parked_n + 1, parked_sum + s + v
  return s + v
end
function parked_got() return { n = parked_n, sum = parked_sum } end
function ping(x) return x end
-- Throughput: k durable steps and a COMMIT.
function job(k)
  local s = 0
  for i = 1, k do s = s + tasks.step(function() return i end) end
  tasks.state.done = (tasks.state.done or 0) + 1
  coroutine.yield("COMMIT")
  return s
end
function jobs_done() return tasks.state.done or 0 end
`;

// ------------------------------------------------------------ a member process

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

async function until(pred, what, ms = 30000) {
  const end = Date.now() + ms;
  while (!(await pred())) {
    if (Date.now() > end) throw new Error(`${what}: not done within ${ms} ms`);
    await sleep(10);
  }
}

const sumTo = (k) => (k * (k + 1)) / 2;

// The commands a member process answers; each returns a JSON value.
function commands(member) {
  const activations = [];
  member.on('activate', (e) => activations.push({ ...e, at: nowMs() }));

  // Sends n messages to targets in turn, at most `inflight` at once; values
  // base+1.. Returns the time, per-send latencies when sequential, and the
  // count and sum sent to each name.
  async function sends({ targets, n, inflight, base }) {
    const sent = {};
    for (const t of targets) sent[t.name] = { n: 0, sum: 0 };
    const lat = [];
    let next = 0;
    const one = async () => {
      while (next < n) {
        const i = next++;
        const t = targets[i % targets.length];
        const v = base + i + 1;
        const t0 = nowMs();
        check(`send to ${t.name}`, await member.send(t.name, t.id, v), true);
        if (inflight === 1) lat.push(nowMs() - t0);
        sent[t.name].n++;
        sent[t.name].sum += v;
      }
    };
    const t0 = nowMs();
    await Promise.all(Array.from({ length: inflight }, one));
    const ms = nowMs() - t0;
    return {
      ms,
      sent,
      hosted: member.hosted().length,
      p50: lat.length ? percentile(lat, 50) : null,
      p99: lat.length ? percentile(lat, 99) : null,
    };
  }

  return {
    // Hosts the names here, an inbox task in each: their ids.
    async inboxes({ names }) {
      const targets = [];
      for (const name of names) {
        await member.runtime(name);
        targets.push({ name, id: await member.spawn(name, 'inbox', { key: 'inbox' }) });
      }
      check('names hosted here', member.hosted().length, names.length);
      return targets;
    },
    sends,
    // What the inboxes of these names (hosted here) got, once they got `want`.
    async received({ want }) {
      const out = {};
      for (const [name, w] of Object.entries(want)) {
        const rt = await member.runtime(name);
        await until(async () => (await rt.call('got')).n >= w.n, `${name}: ${w.n} messages received`);
        out[name] = await rt.call('got');
      }
      return out;
    },
    // Hosts the names here, each with `tasks` durable tasks parked after
    // `steps` steps, waiting for a message; resolves once all are durable.
    async park({ names, tasks, steps }) {
      const ids = {};
      for (const name of names) {
        const rt = await member.runtime(name);
        ids[name] = [];
        for (let t = 0; t < tasks; t++) ids[name].push(rt.spawn('parked', { durable: true, args: [steps] }).id);
        await until(
          () => ids[name].every((id) => rt.task(id).waiting && rt.task(id).waiting.instruction === 'RECEIVE'),
          `${name}: the parked tasks waiting`,
        );
        await rt.commit();
      }
      return ids;
    },
    // A call by name to each (routed when another member holds it).
    async ping({ names }) {
      const before = member.stats().routed;
      for (const name of names) check(`ping ${name}`, await member.call(name, 'ping', name), name);
      check('pings routed to the holder', member.stats().routed - before, names.length);
      return names.length;
    },
    // Stops member process `pid` with `signal`, then calls every name, a
    // fresh call every PROBE_MS until each has answered.
    async takeover({ pid, signal, names, ids, steps }) {
      const from = activations.length;
      const served = new Map();
      const t0 = nowMs();
      process.kill(pid, signal);
      let failures = 0;
      const probe = (name) =>
        member.call(name, 'ping', name).then(
          (v) => {
            check(`ping ${name}`, v, name);
            if (!served.has(name)) served.set(name, nowMs() - t0);
          },
          () => failures++, // ERR_FLEET_TIMEOUT while it moves: the next probe tries again
        );
      // The call made at the signal: a caller that knew the holder.
      const firstCalls = Promise.all(
        names.map(async (name) => {
          for (;;) {
            try {
              await member.call(name, 'ping', name);
              return nowMs() - t0;
            } catch {
              if (nowMs() - t0 > 60000) throw new Error(`${name}: not served within 60 s of the ${signal}`);
            }
          }
        }),
      );
      const probes = [];
      while (served.size < names.length) {
        if (nowMs() - t0 > 60000) throw new Error(`takeover: ${served.size} of ${names.length} names served in 60 s`);
        for (const name of names) if (!served.has(name)) probes.push(probe(name));
        await sleep(PROBE_MS);
      }
      const atSignal = await firstCalls;
      await Promise.all(probes);
      const times = [...served.values()];
      const mine = activations.slice(from).filter((e) => names.includes(e.name));
      check('takeover: names activated here', new Set(mine.map((e) => e.name)).size, names.length);
      // Every parked task is back, waiting; a message finishes each with the
      // sum of its replayed steps.
      for (const name of names) {
        const rt = await member.runtime(name);
        for (const id of ids[name]) check(`${name} ${id} after takeover`, rt.task(id).waiting.instruction, 'RECEIVE');
        for (const id of ids[name]) check(`send to ${id}`, await member.send(name, id, 1), true);
        await until(async () => (await rt.call('parked_got')).n === ids[name].length, `${name}: the parked tasks done`);
        check(`${name}: parked sum`, (await rt.call('parked_got')).sum, ids[name].length * (sumTo(steps) + 1));
      }
      return {
        firstMs: Math.min(...times),
        allMs: Math.max(...times),
        atSignalMs: Math.max(...atSignal),
        restoreMs: Math.max(...mine.map((e) => e.ms)),
        activatedMs: Math.max(...mine.map((e) => e.at - t0)),
        reasons: [...new Set(mine.map((e) => e.reason))],
        failures,
      };
    },
    // Hosts the names here (the throughput case's share).
    async prepare({ names }) {
      for (const name of names) await member.runtime(name);
      check('names hosted here', member.hosted().length, names.length);
      return names.length;
    },
    // In each name, `tasks` durable jobs of `steps` steps; resolves once every
    // result is in and written.
    async work({ names, tasks, steps }) {
      const cpu0 = process.cpuUsage();
      const t0 = nowMs();
      const rts = await Promise.all(names.map((name) => member.runtime(name)));
      const results = [];
      for (const rt of rts) {
        for (let t = 0; t < tasks; t++) results.push(rt.spawn('job', { durable: true, args: [steps] }).result);
      }
      const sums = await Promise.all(results);
      await Promise.all(rts.map((rt) => rt.commit()));
      const ms = nowMs() - t0;
      const cpu = process.cpuUsage(cpu0);
      for (const s of sums) check('a job sum', s, sumTo(steps));
      for (const rt of rts) check('jobs done in a runtime', await rt.call('jobs_done'), tasks);
      return { ms, cpuMs: (cpu.user + cpu.system) / 1000 };
    },
  };
}

async function memberMain(spec) {
  const { Fleet } = require('..');
  const member = await Fleet.join({
    connectionString: spec.url,
    schema: spec.schema,
    leaseMs: spec.leaseMs,
    idleMs: 0,
    // Names stay where the bench put them: each row measures routing to, or
    // takeover from, a holder it chose (balancing is not what is timed).
    balanceMs: 0,
    runtime: { setup: (rt) => rt.load(LUA) },
  });
  member.on('error', (e) => process.stderr.write(`member error: ${e.message}\n`));
  serve(commands(member), () => member.leave(), member.id);
}

// --------------------------------------------------------------- the parent

// Starts member processes; `all` keeps every one, for the final cleanup.
// The first joins alone: members joining a new schema at once can fail on
// its tables' creation (WakeIndex.create is not serialized as the store's is).
async function startMembers(all, specs) {
  const ps = [];
  for (const [i, s] of specs.entries()) {
    const p = new DrivenProcess(__filename, s, CALL_TIMEOUT_MS);
    all.push(p);
    ps.push(p);
    if (i === 0) await p.ready();
  }
  await Promise.all(ps.map((p) => p.ready()));
  return ps;
}

const IMPL = {
  routed: 'lua-tasks fleet, routed (another member process)',
  local: 'lua-tasks fleet, local (on the holder)',
  kill: 'lua-tasks fleet, holder SIGKILLed',
  stop: 'lua-tasks fleet, holder SIGSTOPped',
  members: (m) => `lua-tasks fleet, ${m} member process${m > 1 ? 'es' : ''}`,
};

const CASES = {
  routeP50: `send by name, sequential: latency p50`,
  routeP99: `send by name, sequential: latency p99`,
  routeRate: `send by name, ${fmt(INFLIGHT)} in flight: messages/s`,
  takeover: `Takeover: signal to the first call by name served on another member`,
  takeoverAll: `Takeover: signal to all ${fmt(TAKEOVER_NAMES)} names served on another member`,
  throughput: `${fmt(NAMES)} names × ${fmt(TASKS)} durable tasks × ${fmt(STEPS)} tasks.step + a COMMIT: steps/s`,
};

function notMeasured(why) {
  const row = (kase, impl, unit, extra = {}) => ({ case: kase, impl, value: NaN, unit, ...extra, note: why });
  const target = { target: `≤ lease (${fmt(LEASE_MS)} ms) + restore`, ok: false };
  return [
    row(CASES.routeP50, IMPL.routed, 'ms'),
    row(CASES.routeP50, IMPL.local, 'ms'),
    row(CASES.routeP99, IMPL.routed, 'ms'),
    row(CASES.routeP99, IMPL.local, 'ms'),
    row(CASES.routeRate, IMPL.routed, 'msg/s'),
    row(CASES.routeRate, IMPL.local, 'msg/s'),
    row(CASES.takeover, IMPL.kill, 'ms', target),
    row(CASES.takeoverAll, IMPL.kill, 'ms', target),
    row(CASES.takeover, IMPL.stop, 'ms', target),
    row(CASES.takeoverAll, IMPL.stop, 'ms', target),
    ...MEMBER_COUNTS.map((m) => row(CASES.throughput, IMPL.members(m), 'steps/s')),
  ];
}

// Row group 1.
async function routeRows(db, all) {
  const spec = { url: db.url, schema: 'w16_route', leaseMs: LEASE_MS };
  const [holder, sender] = await startMembers(all, [spec, spec]);
  const names = Array.from({ length: ROUTE_NAMES }, (_, i) => `route-${i}`);
  const targets = await holder.call('inboxes', { names });
  const want = Object.fromEntries(names.map((n) => [n, { n: 0, sum: 0 }]));
  let base = 0;
  const send = async (who, n, inflight) => {
    const r = await who.call('sends', { targets, n, inflight, base });
    check('names hosted by the member sending', r.hosted, who === sender ? 0 : ROUTE_NAMES); // routed, or local
    base += n;
    for (const [name, s] of Object.entries(r.sent)) {
      want[name].n += s.n;
      want[name].sum += s.sum;
    }
    return r;
  };
  // Warm-up: the sender learns where the names are; both warm their pools.
  for (const who of [sender, holder]) await send(who, 50, 1);
  const got = { routed: { p50: [], p99: [], rate: [] }, local: { p50: [], p99: [], rate: [] } };
  for (let rep = 0; rep < ROUTE_REPS; rep++) {
    for (const [impl, who] of [
      ['routed', sender],
      ['local', holder],
    ]) {
      const seq = await send(who, SEQ_SENDS, 1);
      got[impl].p50.push(seq.p50);
      got[impl].p99.push(seq.p99);
    }
    for (const [impl, who] of [
      ['routed', sender],
      ['local', holder],
    ]) {
      const many = await send(who, MANY_SENDS, INFLIGHT);
      got[impl].rate.push(MANY_SENDS / (many.ms / 1000));
    }
  }
  const received = await holder.call('received', { want });
  for (const name of names) {
    check(`${name}: messages received`, received[name].n, want[name].n);
    check(`${name}: their sum`, received[name].sum, want[name].sum);
  }
  await Promise.all([holder.stop(), sender.stop()]);

  const rows = [];
  const seqNote = `${fmt(SEQ_SENDS)} sends one after another over ${fmt(ROUTE_NAMES)} names, each resolved once the message is durable at the holder (rt.sendDurable); median of ${ROUTE_REPS} reps`;
  for (const [kase, key, unit, note] of [
    [CASES.routeP50, 'p50', 'ms', seqNote],
    [CASES.routeP99, 'p99', 'ms', seqNote],
    [
      CASES.routeRate,
      'rate',
      'msg/s',
      `${fmt(MANY_SENDS)} sends, ${fmt(INFLIGHT)} in flight, each durable before it resolves; median of ${ROUTE_REPS} reps`,
    ],
  ]) {
    const base = median(got.local[key]);
    for (const impl of ['routed', 'local']) {
      const v = median(got[impl][key]);
      const min = key === 'rate' ? undefined : Math.min(...got[impl][key]);
      rows.push({
        case: kase,
        impl: IMPL[impl],
        value: v,
        ...(min === undefined ? {} : { min }),
        unit,
        ratio: v / base,
        note:
          impl === 'routed'
            ? `${note}; a routed send is a NOTIFY to the holder, its acknowledgement and its answer (LISTEN/NOTIFY), around the local send`
            : `${note}; the ratio's base`,
      });
    }
  }
  return rows;
}

// Row group 2.
async function takeoverRows(db, all) {
  const spec = { url: db.url, schema: 'w16_takeover', leaseMs: LEASE_MS };
  const [survivor] = await startMembers(all, [spec]);
  const got = { SIGKILL: [], SIGSTOP: [] };
  let n = 0;
  for (let rep = 0; rep < TAKEOVER_REPS; rep++) {
    for (const signal of ['SIGKILL', 'SIGSTOP']) {
      const names = Array.from({ length: TAKEOVER_NAMES }, (_, i) => `take-${n}-${i}`);
      n++;
      const [victim] = await startMembers(all, [spec]);
      const ids = await victim.call('park', { names, tasks: PARKED, steps: PARKED_STEPS });
      await survivor.call('ping', { names }); // the survivor has routed to the holder: it knows where they are
      const r = await survivor.call('takeover', { pid: victim.pid, signal, names, ids, steps: PARKED_STEPS });
      victim.kill(); // a stopped one ends too
      got[signal].push(r);
    }
  }
  await survivor.stop();

  const rows = [];
  const pick = (rs, k) => rs.map((r) => r[k]);
  const found = `a member finds a name to take at its next look (every ${fmt(POLL_MS)} ms) or when a routed call's wait for the holder's acknowledgement (2,000 ms in FleetRouter) ends`;
  for (const [signal, impl, why, after] of [
    ['SIGKILL', IMPL.kill, 'its PostgreSQL session ends at once: its leases are taken without waiting for them', found],
    [
      'SIGSTOP',
      IMPL.stop,
      'hung or cut off: its session stays, so its leases must lapse',
      `each lease lapses ${fmt((LEASE_MS * 2) / 3)}-${fmt(LEASE_MS)} ms after the stop (renewed every third of it); then ${found}`,
    ],
  ]) {
    const rs = got[signal];
    const restore = median(pick(rs, 'restoreMs'));
    const first = median(pick(rs, 'firstMs'));
    const allMs = median(pick(rs, 'allMs'));
    const target = LEASE_MS + restore;
    rows.push(
      {
        case: CASES.takeover,
        impl,
        value: first,
        min: Math.min(...pick(rs, 'firstMs')),
        unit: 'ms',
        target: `≤ lease (${fmt(LEASE_MS)} ms) + restore (${fmt(restore)} ms)`,
        ok: first <= target,
        note: `${why}; leaseMs ${fmt(LEASE_MS)} (members look for due names every ${fmt(POLL_MS)} ms), a fresh call every ${PROBE_MS} ms from the survivor; restore: the slowest activation there (${fmt(TAKEOVER_NAMES)} runtimes × ${fmt(PARKED)} durable tasks replayed, ${PARKED_STEPS + 2} journal records each); median of ${rs.length}`,
      },
      {
        case: CASES.takeoverAll,
        impl,
        value: allMs,
        min: Math.min(...pick(rs, 'allMs')),
        unit: 'ms',
        target: `≤ lease (${fmt(LEASE_MS)} ms) + restore (${fmt(restore)} ms)`,
        ok: allMs <= target,
        note: `activated there by ${fmt(median(pick(rs, 'activatedMs')))} ms (${[...new Set(rs.flatMap((r) => r.reasons))].join(', ')}); a call made at the signal by a caller that knew the holder answered after ${fmt(median(pick(rs, 'atSignalMs')))} ms (it waits for the dead holder's acknowledgement first); ${after}`,
      },
    );
  }
  return rows;
}

// CPU time (ms) of PostgreSQL's backends serving database `name`, by pid,
// from /proc (Linux; the server on this machine): the members' share of
// PostgreSQL's work (its WAL writer and checkpointer are not counted).
async function backendCpu(client, name) {
  const { rows } = await client.query('SELECT pid FROM pg_stat_activity WHERE datname = $1', [name]);
  const tick = 1000 / 100; // USER_HZ: 100 on Linux
  const out = new Map();
  for (const { pid } of rows) {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      out.set(pid, (Number(f[11]) + Number(f[12])) * tick); // utime, stime
    } catch {
      return null; // not on this machine, or not readable: not counted
    }
  }
  return out;
}

// Busy CPU time (ms) of the whole machine since boot, from /proc/stat (null elsewhere).
function machineCpu() {
  try {
    const f = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1, 9).map(Number);
    const idle = f[3] + f[4]; // idle, iowait
    return ((f.reduce((a, b) => a + b, 0) - idle) * 1000) / 100;
  } catch {
    return null;
  }
}

function cpuBetween(before, after) {
  if (!before || !after) return null;
  let ms = 0;
  for (const [pid, t] of after) ms += t - (before.get(pid) || 0);
  return ms;
}

// Row group 3.
async function throughputRows(db, all) {
  const { Client } = require('pg');
  const admin = new Client({ connectionString: db.url });
  await admin.connect();
  try {
    return await throughputOn(db, all, admin);
  } finally {
    await admin.end();
  }
}

async function throughputOn(db, all, admin) {
  const names = Array.from({ length: NAMES }, (_, i) => `work-${i}`);
  const steps = NAMES * TASKS * STEPS;
  const got = new Map(MEMBER_COUNTS.map((m) => [m, []]));
  let n = 0;
  for (let rep = 0; rep < THROUGHPUT_REPS + 1; rep++) {
    for (const m of MEMBER_COUNTS) {
      const spec = { url: db.url, schema: `w16_work_${n++}`, leaseMs: LEASE_MS };
      const specs = Array.from({ length: m }, () => spec);
      const ps = await startMembers(all, specs);
      const shares = ps.map((_, i) => names.filter((_, j) => j % m === i));
      await Promise.all(ps.map((p, i) => p.call('prepare', { names: shares[i] })));
      const pg0 = await backendCpu(admin, db.name);
      const all0 = machineCpu();
      const t0 = nowMs();
      const rs = await Promise.all(ps.map((p, i) => p.call('work', { names: shares[i], tasks: TASKS, steps: STEPS })));
      const ms = nowMs() - t0;
      const all1 = machineCpu();
      const pgMs = cpuBetween(pg0, await backendCpu(admin, db.name));
      await Promise.all(ps.map((p) => p.stop()));
      if (rep === 0) continue; // the first round warms up
      got.get(m).push({
        rate: steps / (ms / 1000),
        memberUs: (rs.reduce((a, r) => a + r.cpuMs, 0) * 1000) / steps,
        pgUs: pgMs === null ? null : (pgMs * 1000) / steps,
        cores: (rs.reduce((a, r) => a + r.cpuMs, 0) + (pgMs || 0)) / ms,
        machine: all0 === null ? null : (all1 - all0) / ms,
      });
    }
  }
  const med = (m, k) => median(got.get(m).map((r) => r[k]));
  const base = med(1, 'rate');
  const cores = os.cpus().length;
  const rows = MEMBER_COUNTS.map((m) => {
    const v = med(m, 'rate');
    const pgUs = got.get(m).some((r) => r.pgUs === null) ? null : med(m, 'pgUs');
    const memberUs = med(m, 'memberUs');
    const cpu =
      `CPU a step: members ${fmt(memberUs, 1)} µs` +
      (pgUs === null ? '' : `, PostgreSQL's backends ${fmt(pgUs, 1)} µs`) +
      `; ${fmt(med(m, 'cores'), 2)} of ${cores} cores busy with them` +
      (got.get(m).some((r) => r.machine === null) ? '' : `, ${fmt(med(m, 'machine'), 2)} with everything`);
    return {
      case: CASES.throughput,
      impl: IMPL.members(m),
      value: v,
      min: Math.min(...got.get(m).map((r) => r.rate)),
      unit: 'steps/s',
      ratio: v / base,
      note: `${m === 1 ? `every name on one member; ` : `${fmt(NAMES / m, 1)} names each; `}${cpu}; median of ${THROUGHPUT_REPS}`,
    };
  });
  // What it predicts, from this run's own figures: whether the members
  // waited or computed, the CPU ceiling of this machine, PostgreSQL's share.
  const m = MEMBER_COUNTS[MEMBER_COUNTS.length - 1];
  const busy = med(m, 'cores');
  const machine = got.get(m).some((r) => r.machine === null) ? null : med(m, 'machine');
  const memberUs = med(m, 'memberUs');
  const pgUs = got.get(m).some((r) => r.pgUs === null) ? null : med(m, 'pgUs');
  const perStep = memberUs + (pgUs || 0);
  const waited =
    machine !== null && machine >= cores * 0.9
      ? `with ${m} members ${fmt(machine, 2)} of ${cores} cores were busy (${fmt(busy, 2)} with this run's members and PostgreSQL's backends, the rest other processes on the machine): the CPU ran out`
      : `with ${m} members ${fmt(busy, 2)} of ${cores} cores were busy with them: they mostly waited (a member's store has one transaction in flight at a time, and a COMMIT waits for its WAL flush), and more members overlap those waits`;
  const pgShare =
    pgUs === null
      ? "PostgreSQL's share was not measured (its backends' CPU is read from /proc)"
      : `PostgreSQL's share (${fmt(pgUs, 1)} µs a step, one WAL) saturates the cores it is given: ≈ ${fmt(1e6 / pgUs)} steps/s a PostgreSQL core if it scaled linearly, which one WAL and its locks will not quite do`;
  rows[rows.length - 1].note +=
    `. What this predicts: ${waited}. With the machine to itself, its CPU ceiling would be ≈ ${cores} cores ÷ ${fmt(perStep, 1)} µs a step ≈ ${fmt((cores * 1e6) / perStep)} steps/s, PostgreSQL and the members sharing the cores. ` +
    `Members share nothing but PostgreSQL (each its own names, leases, transactions), so on more cores steps/s should grow with members until ${pgShare}. A prediction from these figures, not measured`;
  return rows;
}

async function run() {
  const url = process.env.LUA_TASKS_PG_URL;
  if (!url) {
    return notMeasured('NOT measured: needs LUA_TASKS_PG_URL (export LUA_TASKS_PG_URL=$(bash scripts/pg.sh start))');
  }
  if (!/^postgres(ql)?:\/\/\S+$/.test(url)) {
    throw new Error(`LUA_TASKS_PG_URL is not one postgres:// URL: ${JSON.stringify(url)}`);
  }
  const db = await pgDatabase(url, 'w16');
  const all = [];
  try {
    const groups = { route: routeRows, takeover: takeoverRows, throughput: throughputRows };
    const rows = [];
    for (const [name, group] of Object.entries(groups)) if (ONLY.has(name)) rows.push(...(await group(db, all)));
    return rows;
  } finally {
    for (const p of all) p.kill();
    await db.drop();
  }
}

module.exports = {
  id: 'w16',
  title: 'W16: the fleet: routing by name between member processes, takeover after a kill, throughput by member count',
  run,
};

if (require.main === module) {
  if (process.argv[2] !== 'member') {
    console.error('usage: node bench/w16_fleet.js member SPEC (npm run bench -- w16 runs the workload)');
    process.exit(2);
  }
  memberMain(JSON.parse(process.argv[3])).catch((e) => {
    console.error(e && e.stack ? e.stack : e);
    process.exit(1);
  });
}
