// SPDX-License-Identifier: MIT
// W17: resource invocations: round trips embedded and routed, a fan-out of 100, invocations/s by member count.
//
// Every lua-tasks measure runs in member processes of its own (`node
// bench/w17_resources.js member SPEC`), driven by this one over stdin and
// stdout (a JSON line each way), as W16 drives its members. The resource is
// a counter whose `add(n)` does not wait (it changes `tasks.state` and
// returns the new count). Four row groups:
//
// 1. Round trip, embedded (Resources on a directory store in a temp
//    directory, one process): p50 and p99 of W17_SEQ sequential `add(1)`
//    calls of one resource by (a) `res.invoke` from JS: at most once, the
//    method a plain task, nothing written; (b) `resource.invoke` in a
//    durable caller task (its own directory store): exactly once, a
//    request-id step and a COMMIT in the caller, then the method as the
//    durable task that id names, its end written before the answer; each
//    call timed by a JS call `mark()` in the loop (journaled with that
//    COMMIT); (c) `res.invokeOnce` from JS: the method a durable task, its
//    end written before the answer. Beside them the floor: SQLite's
//    one-row transaction as the directory store opens its database
//    (bench/step_floor.js's child, better-sqlite3, WAL, synchronous=FULL).
//    Each call's transactions are counted on the two stores (store.stats()).
// 2. Round trip, routed (a fleet on the PostgreSQL of LUA_TASKS_PG_URL, a
//    database of the run's own): a resource hosted by member process B
//    invoked by `res.invoke` from member process A (every fleet invocation
//    runs once with a request id: a durable task at B, its end written
//    before the answer), p50/p99 of W17_PG_SEQ sequential calls; the same
//    calls made on B itself (local), the ratio's base; DBOS's child
//    workflow round trip on the same server (a parent workflow starting a
//    child workflow with DBOS.startWorkflow and awaiting handle.getResult(),
//    one after another, in a process of its own driven the same way, its
//    system database a database of its own), sampled round-robin with them.
//    Restate's service-to-service call needs its own server, which this
//    machine does not have: its row says so.
// 3. Fan-out: a caller task invokes W17_FANOUT resources at once and waits
//    for all: the seed's idiom from a plain task (coroutine.create +
//    coroutine.resume per resource, each calling resource.invoke, then a
//    loop yielding until a counter is zero), and a durable task starting one
//    durable child per invocation (tasks.start) and joining each
//    (tasks.wait). Wall time, embedded and routed (the caller on A, the
//    resources hosted on B).
// 4. Invocations/s with 1, 2 and 3 member processes: W17_RESOURCES
//    resources spread over them (each creates its share, hosted there),
//    every member calling `res.invoke` on all of them in turn (most calls
//    routed), W17_INFLIGHT in flight each, W17_CALLS calls a rep in all.
//
// Every case checks its answers: each call's count is the one before it
// plus one, every fan-out answered OK for every resource, and at the end
// each resource's count equals the calls made to it. Sizes are W17_* knobs
// (below); the defaults run in one to two minutes on a 2-core machine.
// Without LUA_TASKS_PG_URL the routed rows say they were not measured.
'use strict';

const fs = require('fs');
const os = require('os');
const path = require('path');
const { serve, DrivenProcess } = require('./driven');
const { fmt, nowMs, median, percentile, check, nodeChild, pgDatabase } = require('./harness');

const env = (name, def) => Number(process.env[name]) || def;
const SEQ = env('W17_SEQ', 300);
const PG_SEQ = env('W17_PG_SEQ', 100);
const REPS = env('W17_REPS', 3);
const FANOUT = env('W17_FANOUT', 100);
const FANOUT_REPS = env('W17_FANOUT_REPS', 3);
const RESOURCES = env('W17_RESOURCES', 12);
const CALLS = env('W17_CALLS', 600);
const INFLIGHT = env('W17_INFLIGHT', 16);
const THROUGHPUT_REPS = env('W17_THROUGHPUT_REPS', 3);
const MEMBER_COUNTS = [1, 2, 3];
const CALL_TIMEOUT_MS = 180000;
const CHILD_TIMEOUT_MS = 180000;
// Fleet options of every member: names stay where they were created (no
// balance rounds move them), and none hibernates during the run.
const FLEET = { idleMs: 0, balanceMs: 0 };

// The resource: add(n) does not wait.
const COUNTER = `
local counter = {}
function counter.init() tasks.state.count = 0 end
function counter.add(n)
  tasks.state.count = tasks.state.count + n
  return tasks.state.count
end
function counter.get() return tasks.state.count end
return counter
`;

// The callers, loaded in a plain runtime and in a durable one (given the resources).
const CALLER = `
local resource = require("resource")

local function must(r, code)
  if code ~= "OK" then error("add answered " .. tostring(code), 2) end
  return r
end

-- Durable: n sequential invocations, each timed by mark() (a JS call, journaled).
function seq_invoke(id, n)
  local got = {}
  for i = 1, n do
    mark()
    got[i] = must(resource.invoke(id, "add", 1))
  end
  mark()
  return got
end

-- The seed's fan-out: a coroutine per resource, then wait until none is left.
function fan_plain(ids)
  local active, codes = 0, {}
  for i, id in ipairs(ids) do
    local co = coroutine.create(function()
      active = active + 1
      local _, code = resource.invoke(id, "add", 1)
      codes[i] = code
      active = active - 1
    end)
    coroutine.resume(co)
  end
  while active > 0 do coroutine.yield() end
  local ok = 0
  for i = 1, #ids do if codes[i] == "OK" then ok = ok + 1 end end
  return ok
end

-- Durable: one durable child per invocation, each joined.
function fan_kid(id)
  local _, code = resource.invoke(id, "add", 1)
  return code
end
function fan_durable(ids)
  local kids = {}
  for i, id in ipairs(ids) do kids[i] = tasks.start(fan_kid, id) end
  local ok = 0
  for i = 1, #ids do if tasks.wait(kids[i]) == "OK" then ok = ok + 1 end end
  return ok
end
`;

// ------------------------------------------------------------ a member process

// The commands a member process answers; each returns a JSON value.
function commands({ res, plain, durable, marks, stores }) {
  let rid = 0;
  const tx = () => Object.fromEntries(Object.entries(stores).map(([k, s]) => [k, s.stats().transactions]));
  const txSince = (t0) => Object.fromEntries(Object.entries(tx()).map(([k, v]) => [k, v - t0[k]]));
  const add = {
    js: (id) => res.invoke(id, 'add', 1),
    once: (id) => res.invokeOnce(`w17-${process.pid}-${++rid}`, id, 'add', 1),
  };
  return {
    // Creates n counters at <prefix>/<i> (hosted here on a fleet): their ids.
    async create({ prefix, n }) {
      const ids = [];
      for (let i = 0; i < n; i++) {
        const r = await res.create('counter', `${prefix}/${i}`);
        check(`create ${prefix}/${i}`, r.code, 'OK');
        ids.push(r.id);
      }
      return ids;
    },
    // n sequential add(1) on one resource whose count is `base`: p50, p99 and
    // the transactions of each store.
    async seq({ impl, id, n, base }) {
      const t0 = tx();
      let lat = [];
      if (impl === 'durable') {
        marks.length = 0;
        const got = await durable.spawn('seq_invoke', { durable: true, args: [id, n] }).result;
        for (let i = 0; i < n; i++) check(`durable caller: call ${i + 1}'s count`, got[i], base + i + 1);
        check('durable caller: marks', marks.length, n + 1);
        lat = marks.slice(1).map((t, i) => t - marks[i]);
      } else {
        for (let i = 0; i < n; i++) {
          const t = nowMs();
          const out = await add[impl](id);
          lat.push(nowMs() - t);
          check(`${impl}: call ${i + 1}'s code`, out.code, 'OK');
          check(`${impl}: call ${i + 1}'s count`, out.result, base + i + 1);
        }
      }
      return { p50: percentile(lat, 50), p99: percentile(lat, 99), tx: txSince(t0) };
    },
    // One caller task invokes add(1) on every resource at once and waits for all.
    async fanout({ impl, ids }) {
      const t0 = nowMs();
      const ok =
        impl === 'durable'
          ? await durable.spawn('fan_durable', { durable: true, args: [ids] }).result
          : await plain.spawn('fan_plain', { args: [ids] }).result;
      const ms = nowMs() - t0;
      check(`${impl} fan-out: invocations answered OK`, ok, ids.length);
      return { ms };
    },
    // n add(1) calls from JS on the ids in turn (from `offset`), `inflight`
    // at once: the time, and the calls made to each.
    async blast({ ids, n, inflight, offset }) {
      const made = Object.fromEntries(ids.map((id) => [id, 0]));
      let next = 0;
      const one = async () => {
        while (next < n) {
          const id = ids[(offset + next++) % ids.length];
          const out = await res.invoke(id, 'add', 1);
          check('blast: a code', out.code, 'OK');
          made[id]++;
        }
      };
      const t0 = nowMs();
      await Promise.all(Array.from({ length: Math.min(inflight, n) }, one));
      return { ms: nowMs() - t0, made };
    },
    // Each resource's count.
    async counts({ ids }) {
      const out = {};
      for (const id of ids) {
        const r = await res.invoke(id, 'get');
        check(`get ${id}`, r.code, 'OK');
        out[id] = r.result;
      }
      return out;
    },
  };
}

async function memberMain(spec) {
  if (spec.mode === 'dbos') return dbosMain(spec);
  const { Fleet, Resources, Runtime, DirectoryStore } = require('..');
  const modules = { counter: COUNTER };
  const callerStore = new DirectoryStore(path.join(spec.dir, 'caller'));
  const stores = { caller: callerStore };
  let member = null;
  let res;
  if (spec.mode === 'fleet') {
    member = await Fleet.join({ connectionString: spec.url, schema: spec.schema, ...FLEET });
    member.on('error', (e) => process.stderr.write(`member error: ${e.message}\n`));
    res = await Resources.open(member, { modules });
  } else {
    stores.resources = new DirectoryStore(path.join(spec.dir, 'resources'));
    res = await Resources.open(stores.resources, { modules });
  }
  const marks = [];
  const plain = new Runtime({ resources: res });
  plain.load(CALLER);
  const durable = await Runtime.open({
    name: 'caller',
    store: callerStore,
    resources: res,
    setup: (rt) => {
      rt.set('mark', () => {
        marks.push(nowMs());
      });
      rt.load(CALLER);
    },
  });
  serve(commands({ res, plain, durable, marks, stores }), async () => {
    await plain.close();
    await durable.close();
    await res.close();
    if (member) await member.leave();
  });
}

// DBOS's peer process: a parent workflow that starts n child workflows one
// after another, each awaited (DBOS.startWorkflow, handle.getResult()), on a
// system database at spec.url; `seq` answers p50/p99 of each start + result.
async function dbosMain(spec) {
  const { DBOS } = require('@dbos-inc/dbos-sdk');
  const { Client } = require('pg');
  const marks = [];
  const child = DBOS.registerWorkflow(async (i) => i, { name: 'child' });
  const parent = DBOS.registerWorkflow(
    async (k) => {
      let sum = 0;
      for (let i = 1; i <= k; i++) {
        marks.push(nowMs());
        const handle = await DBOS.startWorkflow(child)(i);
        sum += await handle.getResult();
      }
      marks.push(nowMs());
      return sum;
    },
    { name: 'parent' },
  );
  DBOS.setConfig({ name: 'w17', systemDatabaseUrl: spec.url, logLevel: 'error' });
  await DBOS.launch();
  const c = new Client({ connectionString: spec.url });
  await c.connect();
  const succeeded = async () =>
    (await c.query(`SELECT count(*)::int AS n FROM dbos.workflow_status WHERE status = 'SUCCESS'`)).rows[0].n;
  serve(
    {
      async seq({ n }) {
        const before = await succeeded();
        marks.length = 0;
        check("dbos: the parent's sum", await parent(n), (n * (n + 1)) / 2);
        check('dbos: marks', marks.length, n + 1);
        check('dbos: workflows SUCCESS (the parent and its children)', (await succeeded()) - before, n + 1);
        const lat = marks.slice(1).map((t, i) => t - marks[i]);
        return { p50: percentile(lat, 50), p99: percentile(lat, 99) };
      },
    },
    async () => {
      await c.end();
      await DBOS.shutdown();
    },
  );
}

// The fan-out reps, plain and durable in turn, called on member `m`: the ms
// of each rep after the first (a warm-up), by kind; every call tallied.
async function fanouts(m, fanIds, tally) {
  const fans = { plain: [], durable: [] };
  for (let rep = 0; rep <= FANOUT_REPS; rep++) {
    for (const how of ['plain', 'durable']) {
      const r = await m.call('fanout', { impl: how, ids: fanIds });
      for (const f of fanIds) tally.add(f);
      if (rep > 0) fans[how].push(r.ms);
    }
  }
  return fans;
}

// --------------------------------------------------------------- the parent

// Starts member processes, each with a directory of its own under `root`;
// `all` keeps every one, for the final cleanup. The first joins alone:
// members joining a new schema at once can fail on its tables' creation.
async function startMembers(all, root, specs) {
  const ps = [];
  for (const [i, s] of specs.entries()) {
    const p = new DrivenProcess(__filename, { ...s, dir: fs.mkdtempSync(path.join(root, 'member-')) }, CALL_TIMEOUT_MS);
    all.push(p);
    ps.push(p);
    if (i === 0) await p.ready();
  }
  await Promise.all(ps.map((p) => p.ready()));
  return ps;
}

// The count each resource should have: the calls the parent had made.
class Tally {
  #want = new Map();
  base(id) {
    return this.#want.get(id) || 0;
  }
  add(id, n = 1) {
    this.#want.set(id, this.base(id) + n);
  }
  // Checks every resource's count (read through `member`).
  async verify(member, what) {
    const ids = [...this.#want.keys()];
    const got = await member.call('counts', { ids });
    for (const id of ids) check(`${what}: ${id}'s count (the calls made to it)`, got[id], this.base(id));
  }
}

const IMPL = {
  js: 'lua-tasks res.invoke from JS (at most once)',
  durable: 'lua-tasks resource.invoke in a durable task (exactly once)',
  once: 'lua-tasks res.invokeOnce from JS (once per request id)',
  floor: 'SQLite one-row transaction (better-sqlite3, WAL, synchronous=FULL)',
  routed: 'lua-tasks fleet res.invoke, routed (member A → resource on member B)',
  local: 'lua-tasks fleet res.invoke, local (on member B)',
  dbos: 'DBOS child workflow (startWorkflow + getResult in a parent workflow)',
  restate: 'Restate service-to-service call',
  fan: (where, how) =>
    `lua-tasks ${where}, ${how === 'plain' ? 'plain task, the seed’s coroutines' : 'durable task, a durable child each'}`,
  members: (m) => `lua-tasks fleet, ${m} member process${m > 1 ? 'es' : ''}`,
};

const CASES = {
  embP50: `Round trip, embedded (directory store): ${fmt(SEQ)} sequential add(1), p50`,
  embP99: `Round trip, embedded (directory store): ${fmt(SEQ)} sequential add(1), p99`,
  pgP50: `Round trip, routed (PostgreSQL): ${fmt(PG_SEQ)} sequential add(1), p50`,
  pgP99: `Round trip, routed (PostgreSQL): ${fmt(PG_SEQ)} sequential add(1), p99`,
  fanout: `Fan-out: one caller task invokes ${fmt(FANOUT)} resources at once and waits for all: wall time`,
  throughput: `Invocations/s: ${fmt(RESOURCES)} resources spread over the members, res.invoke from each, ${fmt(INFLIGHT)} in flight each`,
};

const RESTATE_NOTE =
  'NOT measured: Restate runs as its own server (restate-server), which this machine does not have; not installed for the bench';

// Row group 1, and the embedded fan-out of group 3.
async function embeddedRows(root, all) {
  const [m] = await startMembers(all, root, [{ mode: 'dir' }]);
  const tally = new Tally();
  const [id] = await m.call('create', { prefix: 'seq', n: 1 });
  const fanIds = await m.call('create', { prefix: 'fan', n: FANOUT });
  const impls = ['js', 'durable', 'once'];
  const got = Object.fromEntries([...impls, 'floor'].map((k) => [k, []]));
  const floorDir = fs.mkdtempSync(path.join(root, 'floor-'));
  for (let rep = 0; rep <= REPS; rep++) {
    for (const impl of impls) {
      const r = await m.call('seq', { impl, id, n: SEQ, base: tally.base(id) });
      tally.add(id, SEQ);
      if (rep > 0) got[impl].push(r);
    }
    const dir = path.join(floorDir, String(rep));
    const f = nodeChild(path.join(__dirname, 'step_floor.js'), ['sqlite', dir, SEQ], { timeoutMs: CHILD_TIMEOUT_MS });
    fs.rmSync(dir, { recursive: true, force: true });
    if (rep > 0) got.floor.push(f.ms / f.steps);
  }
  const fans = await fanouts(m, fanIds, tally);
  await tally.verify(m, 'embedded');
  await m.stop();

  const rows = [];
  const floor = median(got.floor);
  const perCall = (impl) => {
    const t = got[impl][got[impl].length - 1].tx;
    return { caller: t.caller / SEQ, resources: t.resources / SEQ };
  };
  const notes = {
    js: 'the method a plain task; nothing written before the answer (its change is written with the resource’s next write)',
    durable:
      'a request-id step + COMMIT in the caller, then the method as the durable task that id names, its end written before the answer; each call timed by a JS call mark() in the loop',
    once: 'the method as the durable task the request id names, its end written before the answer',
  };
  for (const [kase, key] of [
    [CASES.embP50, 'p50'],
    [CASES.embP99, 'p99'],
  ]) {
    const base = median(got.js.map((r) => r[key]));
    for (const impl of impls) {
      const xs = got[impl].map((r) => r[key]);
      const v = median(xs);
      const t = perCall(impl);
      rows.push({
        case: kase,
        impl: IMPL[impl],
        value: v,
        min: Math.min(...xs),
        unit: 'ms',
        ratio: v / base,
        note: `${notes[impl]}; store transactions a call: caller ${fmt(t.caller, 2)}, resource ${fmt(t.resources, 2)}; ${fmt(v / floor, 1)}× the floor's transaction; median of ${REPS} reps`,
      });
    }
    if (key === 'p50') {
      const durable = median(got.durable.map((r) => r.p50));
      const once = median(got.once.map((r) => r.p50));
      rows.push({
        case: kase,
        impl: IMPL.floor,
        value: floor,
        min: Math.min(...got.floor),
        unit: 'ms',
        ratio: floor / base,
        note: `the floor: ${fmt(SEQ)} one-row transactions (a mean each), the directory store's fsync; a durable caller's call costs ≈ ${fmt(durable / floor, 1)} of them, res.invokeOnce ≈ ${fmt(once / floor, 1)}`,
      });
    }
  }
  const fanBase = median(fans.plain);
  for (const how of ['plain', 'durable']) {
    const v = median(fans[how]);
    rows.push({
      case: CASES.fanout,
      impl: IMPL.fan('embedded', how),
      value: v,
      min: Math.min(...fans[how]),
      unit: 'ms',
      ratio: v / fanBase,
      note: `${how === 'plain' ? 'at most once each: the methods plain tasks' : 'exactly once each: a request-id step + COMMIT in each child, the method a durable task'}; directory store; median of ${FANOUT_REPS} reps`,
    });
  }
  return rows;
}

// Row group 2, and the routed fan-out of group 3.
async function routedRows(db, dbosDb, root, all) {
  const spec = { mode: 'fleet', url: db.url, schema: 'w17_route' };
  const [b, a] = await startMembers(all, root, [spec, spec]);
  const [dbos] = await startMembers(all, root, [{ mode: 'dbos', url: dbosDb.url }]);
  const tally = new Tally();
  const [id] = await b.call('create', { prefix: 'seq', n: 1 });
  const fanIds = await b.call('create', { prefix: 'fan', n: FANOUT });
  const got = { routed: [], local: [], dbos: [] };
  for (let rep = 0; rep <= REPS; rep++) {
    for (const [impl, who] of [
      ['routed', a],
      ['local', b],
    ]) {
      const r = await who.call('seq', { impl: 'js', id, n: PG_SEQ, base: tally.base(id) });
      tally.add(id, PG_SEQ);
      if (rep > 0) got[impl].push(r);
    }
    const r = await dbos.call('seq', { n: PG_SEQ });
    if (rep > 0) got.dbos.push(r);
  }
  const fans = await fanouts(a, fanIds, tally);
  await tally.verify(a, 'routed');
  await Promise.all([a.stop(), b.stop(), dbos.stop()]);

  const rows = [];
  const notes = {
    routed:
      'a request id each, run once as the durable task it names at B, its end written before the answer; request and answer as rows of the requests table, a NOTIFY waking each side',
    local: 'the same invocation made on B, no routing: the ratio’s base',
    dbos: 'each child workflow started by the parent and awaited; its own system database on the same server, in a process of its own',
  };
  for (const [kase, key] of [
    [CASES.pgP50, 'p50'],
    [CASES.pgP99, 'p99'],
  ]) {
    const base = median(got.local.map((r) => r[key]));
    for (const impl of ['routed', 'local', 'dbos']) {
      const xs = got[impl].map((r) => r[key]);
      const v = median(xs);
      rows.push({
        case: kase,
        impl: IMPL[impl],
        value: v,
        min: Math.min(...xs),
        unit: 'ms',
        ratio: v / base,
        note: `${notes[impl]}; median of ${REPS} reps`,
      });
    }
    rows.push({ case: kase, impl: IMPL.restate, value: NaN, unit: 'ms', note: RESTATE_NOTE });
  }
  for (const how of ['plain', 'durable']) {
    const v = median(fans[how]);
    rows.push({
      case: CASES.fanout,
      impl: IMPL.fan('fleet, routed (caller on A, resources on B)', how),
      value: v,
      min: Math.min(...fans[how]),
      unit: 'ms',
      note: `every invocation run once at B (a request id each)${how === 'durable' ? ', and each child’s request id a step + COMMIT in its own directory store' : ''}; median of ${FANOUT_REPS} reps`,
    });
  }
  return rows;
}

// Row group 4.
async function throughputRows(db, root, all) {
  const got = new Map();
  for (const m of MEMBER_COUNTS) {
    const spec = { mode: 'fleet', url: db.url, schema: `w17_tp_${m}` };
    const ps = await startMembers(
      all,
      root,
      Array.from({ length: m }, () => spec),
    );
    const tally = new Tally();
    const ids = [];
    for (const [i, p] of ps.entries()) {
      const share = Math.floor(RESOURCES / m) + (i < RESOURCES % m ? 1 : 0);
      ids.push(...(await p.call('create', { prefix: `m${i}`, n: share })));
    }
    const round = async (n) => {
      const per = Math.floor(n / m);
      const t0 = nowMs();
      const rs = await Promise.all(
        ps.map((p, i) => p.call('blast', { ids, n: per, inflight: INFLIGHT, offset: i * Math.ceil(ids.length / m) })),
      );
      const ms = nowMs() - t0;
      for (const r of rs) for (const [id, k] of Object.entries(r.made)) tally.add(id, k);
      return (per * m) / (ms / 1000);
    };
    await round(ids.length * m * 4); // warm-up: every member learns where each resource is
    const rates = [];
    for (let rep = 0; rep < THROUGHPUT_REPS; rep++) rates.push(await round(CALLS));
    await tally.verify(ps[0], `${m} members`);
    await Promise.all(ps.map((p) => p.stop()));
    got.set(m, rates);
  }
  const base = median(got.get(1));
  return MEMBER_COUNTS.map((m) => {
    const v = median(got.get(m));
    return {
      case: CASES.throughput,
      impl: IMPL.members(m),
      value: v,
      min: Math.min(...got.get(m)),
      unit: 'calls/s',
      ratio: v / base,
      note: `${fmt(CALLS)} calls a rep, each run once (a request id, a durable task at the resource, its end written before the answer)${m > 1 ? `, ${fmt(((m - 1) / m) * 100)}% of them routed to another member` : ''}; the same processes for every rep; median of ${THROUGHPUT_REPS}`,
    };
  });
}

function pgNotMeasured(why) {
  const note = `NOT measured: ${why}`;
  const row = (kase, impl, unit) => ({ case: kase, impl, value: NaN, unit, note });
  return [
    ...[CASES.pgP50, CASES.pgP99].flatMap((k) => [
      row(k, IMPL.routed, 'ms'),
      row(k, IMPL.local, 'ms'),
      row(k, IMPL.dbos, 'ms'),
      { ...row(k, IMPL.restate, 'ms'), note: RESTATE_NOTE },
    ]),
    row(CASES.fanout, IMPL.fan('fleet, routed (caller on A, resources on B)', 'plain'), 'ms'),
    row(CASES.fanout, IMPL.fan('fleet, routed (caller on A, resources on B)', 'durable'), 'ms'),
    ...MEMBER_COUNTS.map((m) => row(CASES.throughput, IMPL.members(m), 'calls/s')),
  ];
}

async function run() {
  const url = process.env.LUA_TASKS_PG_URL || '';
  if (url && !/^postgres(ql)?:\/\/\S+$/.test(url)) {
    throw new Error(`LUA_TASKS_PG_URL is not one postgres:// URL: ${JSON.stringify(url)}`);
  }
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'lua-tasks-w17-'));
  const all = [];
  try {
    const rows = await embeddedRows(root, all);
    if (!url) {
      return [
        ...rows,
        ...pgNotMeasured('needs LUA_TASKS_PG_URL (a PostgreSQL role with CREATEDB; scripts/pg.sh start prints one)'),
      ];
    }
    const db = await pgDatabase(url, 'w17');
    let dbosDb = null;
    try {
      dbosDb = await pgDatabase(url, 'w17dbos');
      const routed = await routedRows(db, dbosDb, root, all);
      const tp = await throughputRows(db, root, all);
      // The fan-out rows side by side.
      const fan = [...rows, ...routed].filter((r) => r.case === CASES.fanout);
      const rest = [...rows, ...routed].filter((r) => r.case !== CASES.fanout);
      const base = fan[0].value;
      for (const r of fan) r.ratio = r.value / base;
      return [...rest, ...fan, ...tp];
    } finally {
      for (const p of all) p.kill();
      await db.drop();
      if (dbosDb) await dbosDb.drop();
    }
  } finally {
    for (const p of all) p.kill();
    fs.rmSync(root, { recursive: true, force: true });
  }
}

module.exports = {
  id: 'w17',
  title: 'W17: resource invocations: round trips embedded and routed, a fan-out, invocations/s by member count',
  run,
};

if (require.main === module) {
  if (process.argv[2] !== 'member') {
    console.error('usage: node bench/w17_resources.js member SPEC (npm run bench -- w17 runs the workload)');
    process.exit(2);
  }
  memberMain(JSON.parse(process.argv[3])).catch((e) => {
    console.error(e && e.stack ? e.stack : e);
    process.exit(1);
  });
}
