// SPDX-License-Identifier: MIT
// Fleet members on a real PostgreSQL: routing by name, activation, hibernation, handover, failover, fencing.
'use strict';
const path = require('node:path');
const { spawn } = require('node:child_process');
const { Fleet, FleetError } = require('../../..');
const { describePg, createDatabase, query } = require('../pg-helpers');
const { sleep } = require('../helpers');
const { FLEET_LUA } = require('../fixtures/fleet-lua');

const LEASE_MS = 1000;
const runtime = { setup: (rt) => rt.load(FLEET_LUA) };

// Resolves when pred() is true; fails naming what it waited for.
async function until(pred, what, ms = 10000) {
  const end = Date.now() + ms;
  for (;;) {
    if (await pred()) return;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

describe('Fleet.join options', () => {
  test('bad options are refused naming the option', async () => {
    await expect(Fleet.join()).rejects.toMatchObject({ code: 'ERR_INVALID_ARG_TYPE' });
    await expect(Fleet.join({})).rejects.toThrow(/options.connectionString/);
    await expect(Fleet.join({ connectionString: 'postgres://x/y', leaseMs: 5 })).rejects.toThrow(
      /"options.leaseMs" option must be an integer number of milliseconds from 100/,
    );
    await expect(Fleet.join({ connectionString: 'postgres://x/y', idleMs: -1 })).rejects.toThrow(/options.idleMs/);
    await expect(Fleet.join({ connectionString: 'postgres://x/y', runtime: 5 })).rejects.toThrow(/options.runtime/);
    await expect(Fleet.join({ connectionString: 'postgres://x/y', balanceMs: -1 })).rejects.toThrow(
      /"options.balanceMs" option must be an integer number of milliseconds from 0/,
    );
    await expect(Fleet.join({ connectionString: 'postgres://x/y', leasMs: 5 })).rejects.toThrow(
      /"leasMs" is not an option of Fleet.join/,
    );
  });
});

describePg('Fleet on PostgreSQL', () => {
  let db;
  let schemas = 0;
  let schema;
  const members = [];
  const children = [];
  const join = async (opts = {}) => {
    const m = await Fleet.join({ connectionString: db.url, schema, leaseMs: LEASE_MS, idleMs: 0, runtime, ...opts });
    members.push(m);
    return m;
  };
  // Activations heard, by name: [{ member, token, reason }]
  const record = (m, label, log) =>
    m.on('activate', (e) => log.push({ member: label, name: e.name, token: e.token, reason: e.reason }));

  beforeAll(async () => {
    db = await createDatabase();
  });
  afterAll(async () => {
    if (db) await db.drop();
  });
  beforeEach(() => {
    schema = `fleet_${++schemas}`;
  });
  afterEach(async () => {
    for (const c of children.splice(0)) c.kill('SIGKILL');
    await Promise.all(members.splice(0).map((m) => m.leave()));
  });

  test('members joining a new schema at once all join (its wake table is made once)', async () => {
    // CREATE TABLE IF NOT EXISTS is not safe against itself: two at once
    // could fail with a duplicate key in pg_type.
    const joined = await Promise.all([join(), join(), join(), join()]);
    expect(new Set(joined.map((m) => m.id)).size).toBe(4);
  });

  test('an operation by name from a member that does not hold it is routed to the holder', async () => {
    const a = await join();
    const b = await join();
    const id = await a.spawn('room', 'counter', { key: 'c', args: [3] });
    expect(a.hosted()).toEqual(['room']);
    expect(await b.send('room', id, 5)).toBe(true);
    expect(await b.send('room', id, 6)).toBe(true);
    expect(await b.call('room', 'hello', 'fleet')).toBe('hello fleet');
    // A key spawned again from the other member is the same task.
    expect(await b.spawn('room', 'counter', { key: 'c', args: [3] })).toBe(id);
    expect(await b.send('room', id, 7)).toBe(true);
    const rt = await a.runtime('room');
    await expect(rt.spawn('counter', { durable: true, key: 'c' }).result).resolves.toBe(18);
    expect(await b.task('room', id)).toEqual({ id, status: 'done' });
    expect(b.hosted()).toEqual([]);
    expect(b.stats()).toMatchObject({ routed: 6, hosted: 0 });
    expect(b.stats().routeLatencyMs.samples).toBe(6);
    expect(a.stats()).toMatchObject({ served: 6, hosted: 1, leases: { room: 1 } });
  });

  test('member.run answers a durable task by its key: run again, from any member or after its holder left, it runs nothing again', async () => {
    const a = await join();
    const b = await join();
    await a.runtime('once'); // hosted by a: b's runs are routed
    expect(await b.run('once', 'sleeper', { key: 'k1', args: [0.05, 't'], name: 'nap' })).toEqual('t');
    expect(await b.run('once', 'sleeper', { key: 'k1', args: [0.05, 't'] })).toEqual('t');
    expect(await a.run('once', 'sleeper', { key: 'k1', args: [0.05, 't'] })).toEqual('t');
    expect(await b.call('once', 'done_count', 't')).toBe(1);
    await expect(b.run('once', 'boom', { key: 'k2' })).rejects.toThrow(/boom in the holder/);
    await expect(a.run('once', 'boom', { key: 'k2' })).rejects.toThrow(/boom in the holder/);
    await expect(b.run('once', 'hello', {})).rejects.toThrow(
      /member.run must be an object \{ key, args\?, name\? \} with a string key/,
    );
    await expect(b.run('once', 42, { key: 'k' })).rejects.toMatchObject({ code: 'ERR_INVALID_ARG_TYPE' });
    // Its holder leaves mid-run: sent again, the run finds the same task where the name is now.
    await a.runtime('moving');
    const first = b.run('moving', 'sleeper', { key: 'k3', args: [0.4, 'm'] }).then(
      (v) => v,
      (e) => e,
    );
    await sleep(100);
    await a.leave();
    const out = await first;
    const again = await b.run('moving', 'sleeper', { key: 'k3', args: [0.4, 'm'] });
    expect({ out: out instanceof Error ? out.code : out, again }).toEqual({
      out: out instanceof Error ? expect.stringMatching(/^ERR_/) : 'm',
      again: 'm',
    });
    expect(await b.call('moving', 'done_count', 'm')).toBe(1);
  });

  test("a task's address names it fleet-wide: Lua's tasks.resume and member.resume reach it from any member, true once written", async () => {
    const a = await join();
    const b = await join();
    const id = await a.spawn('parkroom', 'parked', { key: 'p' });
    const address = (await a.runtime('parkroom')).address(id);
    expect(address).toBe(`${id}@parkroom`);
    await b.runtime('other'); // hosted by b: its Lua reaches a's runtime through b
    expect(await b.call('other', 'wake', address, 5)).toBe(true);
    expect(await b.task('parkroom', id)).toEqual({ id, status: 'done' });
    expect(await b.call('other', 'wake', address, 6)).toBeUndefined(); // ended: nil, and why
    const id2 = await a.spawn('parkroom', 'parked', { key: 'p2' });
    expect(await b.resume(`${id2}@parkroom`, 7)).toBe(true);
    const rt = await a.runtime('parkroom');
    await expect(rt.spawn('parked', { durable: true, key: 'p2' }).result).resolves.toBe(7);
    await expect(b.call('other', 'wake', 'nope@parkroom', 1)).resolves.toBeUndefined();
  });

  test('errors come back from the holder as errors, with their code', async () => {
    const a = await join();
    const b = await join();
    await a.runtime('errs');
    await expect(b.call('errs', 'boom')).rejects.toMatchObject({
      code: 'ERR_LUA_RUNTIME',
      name: 'LuaError',
      message: expect.stringContaining('boom in the holder'),
    });
    await expect(b.call('errs', 'hello', () => 1)).rejects.toMatchObject({
      code: 'ERR_INVALID_ARG_VALUE',
      message: expect.stringContaining('cannot be routed to the member holding it'),
    });
    await expect(b.send('errs', 'no-such-task', 1)).resolves.toBe(false);
    await expect(b.spawn('errs', () => 1)).rejects.toMatchObject({ code: 'ERR_INVALID_ARG_TYPE' });
    await expect(b.call('bad name!', 'hello')).rejects.toMatchObject({ code: 'ERR_INVALID_ARG_VALUE' });
    // The runtime there goes on.
    expect(await b.call('errs', 'hello', 2)).toBe('hello 2');
  });

  test('a small routed answer comes in its notification; the asker drops its row after', async () => {
    const a = await join();
    const b = await join();
    await a.runtime('small');
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => b.call('small', 'hello', i)));
    expect(answers).toEqual(Array.from({ length: 20 }, (_, i) => `hello ${i}`));
    expect(b.stats()).toMatchObject({ routed: 20 });
    const rows = async () =>
      (await query(db.url, `SELECT count(*)::int AS n FROM "${schema}".lua_tasks_requests`)).rows[0].n;
    await until(async () => (await rows()) === 0, 'the answered rows dropped');
  });

  test('a routed call carries a 100 KB argument and answer in its request row; past 64 MiB either is refused naming its size and the limit', async () => {
    // 64 MiB strings take a while to make and copy: leases long enough for it.
    const BIG = 'function big(n) return string.rep("y", n) end function echo(s) return { n = #s, s = s } end';
    const opts = { leaseMs: 10000, runtime: { setup: (rt) => rt.load(BIG) } };
    const a = await join(opts);
    const b = await join(opts);
    await a.runtime('big');
    const arg = 'x'.repeat(100 * 1024);
    expect(await b.call('big', 'echo', arg)).toEqual({ n: arg.length, s: arg });
    expect(await b.call('big', 'big', 100 * 1024)).toBe('y'.repeat(100 * 1024));
    expect(b.stats()).toMatchObject({ routed: 2 });
    // The asker took each answer out of its row (deleting it).
    const { rows } = await query(db.url, `SELECT count(*)::int AS n FROM "${schema}".lua_tasks_requests`);
    expect(rows[0].n).toBe(0);
    const limit = 64 * 1024 * 1024;
    const refused = {
      code: 'ERR_STORE_LIMIT',
      name: 'StoreError',
      message: expect.stringMatching(
        new RegExp(
          `bytes encoded, over the fleet's limit of ${limit} bytes \\(64 MiB, .*Send large data through tasks.store`,
        ),
      ),
    };
    // A request: refused at the asker, before anything is written.
    await expect(b.call('big', 'echo', 'x'.repeat(limit))).rejects.toMatchObject({
      ...refused,
      message: expect.stringMatching(/^A routed request \(call "big"\) is \d+ bytes encoded/),
    });
    // An answer: the holder answers the error instead.
    await expect(b.call('big', 'big', limit)).rejects.toMatchObject({
      ...refused,
      message: expect.stringMatching(/^A routed answer \(call "big"\) is \d+ bytes encoded/),
    });
    expect(await b.call('big', 'echo', 'still')).toEqual({ n: 5, s: 'still' });
  });

  test('a server that refuses the connection fails the join, saying where it tried, and leaves nothing open', async () => {
    const err = await Fleet.join({ connectionString: 'postgres://someone:s3cret@127.0.0.1:1/nowhere' }).then(
      () => null,
      (e) => e,
    );
    expect(err).toMatchObject({ code: 'ECONNREFUSED' });
    expect(err.message).toContain('host 127.0.0.1, port 1, database "nowhere", user "someone"');
    expect(err.message).not.toContain('s3cret');
  });

  test('an operation racing leave() does not leave a runtime open behind it', async () => {
    const a = await join();
    const pending = a.call('racer', 'hello', 1).then(
      (v) => v,
      (e) => e.code,
    );
    await a.leave();
    expect(['hello 1', 'ERR_RUNTIME_CLOSED']).toContain(await pending);
    expect(a.hosted()).toEqual([]);
    const b = await join();
    expect(await b.call('racer', 'hello', 2)).toBe('hello 2'); // free: b activates it
    expect(b.hosted()).toEqual(['racer']);
  });

  test('a name nobody holds is activated on the member that asks', async () => {
    const a = await join();
    const b = await join();
    expect(await b.call('fresh', 'hello', 1)).toBe('hello 1');
    expect(b.hosted()).toEqual(['fresh']);
    expect(a.hosted()).toEqual([]);
    expect(await a.call('fresh', 'hello', 2)).toBe('hello 2');
    expect(a.stats().routed).toBe(1);
  });

  test('an idle runtime whose tasks sleep durably hibernates and is woken at its timer', async () => {
    const log = [];
    const a = await join({ idleMs: 200, wakeAheadMs: 200 });
    const hibernated = [];
    a.on('hibernate', (e) => hibernated.push(e));
    record(a, 'a', log);
    const id = await a.spawn('sleepy', 'sleeper', { args: [1.5, 't'] });
    await until(() => hibernated.length > 0, 'the hibernation');
    expect(a.hosted()).toEqual([]);
    expect(hibernated[0].name).toBe('sleepy');
    expect(hibernated[0].wakeAt).toBeInstanceOf(Date);
    // Woken at its timer by the wake index, not by a call.
    await until(() => log.some((e) => e.reason === 'due'), 'the wake at its timer', 5000);
    const rt = await a.runtime('sleepy');
    await until(() => rt.task(id) && rt.task(id).status === 'done', 'the sleeper done');
    expect(await a.call('sleepy', 'done_count', 't')).toBe(1);
  });

  test('a hibernated receiver is woken by a message sent from another member', async () => {
    const a = await join({ idleMs: 150 });
    const b = await join();
    const hibernated = [];
    a.on('hibernate', (e) => hibernated.push(e));
    const id = await a.spawn('inbox', 'counter', { args: [2] });
    expect(await b.send('inbox', id, 1)).toBe(true);
    await until(() => hibernated.length > 0, 'the hibernation');
    expect(hibernated[0]).toEqual({ name: 'inbox', wakeAt: null });
    expect(await b.send('inbox', id, 41)).toBe(true); // activates it on b
    expect(b.hosted()).toEqual(['inbox']);
    const rt = await b.runtime('inbox');
    await until(() => rt.task(id) && rt.task(id).status === 'done', 'the counter done');
  });

  test('a runtime with an ephemeral task, or a timer nearer than wakeAheadMs, is not hibernated', async () => {
    // The timer outlasts the test (a runtime whose timer fired would rightly hibernate).
    const a = await join({ idleMs: 50, wakeAheadMs: 120000 });
    let hibernations = 0;
    a.on('hibernate', () => hibernations++);
    const rt = await a.runtime('busy');
    rt.start('counter', 1); // ephemeral
    await a.spawn('near', 'sleeper', { args: [60, 'n'] });
    await sleep(400); // eight idle periods
    expect(hibernations).toBe(0);
    expect(a.hosted().sort()).toEqual(['busy', 'near']);
  });

  test('leave() hands the names over: another member takes them at once, tokens go up', async () => {
    const log = [];
    // a's lease outlasts the test: b can take the name only because a let it go.
    const a = await join({ leaseMs: 600000 });
    const b = await join();
    record(a, 'a', log);
    record(b, 'b', log);
    const id = await a.spawn('moving', 'sleeper', { args: [0.6, 'm'] });
    await a.leave();
    await until(() => b.hosted().includes('moving'), 'the takeover');
    const rt = await b.runtime('moving');
    await until(() => rt.task(id) && rt.task(id).status === 'done', 'the sleeper done on b');
    expect(await b.call('moving', 'done_count', 'm')).toBe(1);
    expect(log.filter((e) => e.name === 'moving')).toEqual([
      { member: 'a', name: 'moving', token: 1, reason: 'call' },
      { member: 'b', name: 'moving', token: 2, reason: 'takeover' },
    ]);
    await expect(a.call('moving', 'hello')).rejects.toMatchObject({ code: 'ERR_RUNTIME_CLOSED' });
  });

  test('leave() tells the others at once, also in a schema of the longest name (63 bytes)', async () => {
    schema = 's'.repeat(63); // channel and statement names are cut at 63 bytes by PostgreSQL
    const a = await join({ pollMs: 600000 });
    const b = await join({ pollMs: 600000 }); // no poll in the test's time: only leave()'s notice wakes b
    await a.spawn('near', 'sleeper', { args: [0.3, 'n'] }); // a timer too near to hibernate
    await a.leave();
    await until(() => b.hosted().includes('near'), 'the takeover on notice', 5000);
    expect(await b.call('near', 'hello', 1)).toBe('hello 1');
  });

  test('a lease taken away (a partition) stops the runtime here; its writes are fenced', async () => {
    const a = await join();
    const lost = [];
    a.on('lost', (e) => lost.push(e));
    const rt = await a.runtime('cut');
    rt.load('tasks.state.x = "before"');
    await rt.commit();
    const snapshot = async () =>
      (await query(db.url, `SELECT bytes FROM "${schema}".lua_tasks_snapshots WHERE name = 'cut'`)).rows[0].bytes;
    const before = await snapshot();
    // What a member that lost its network would see: another holder's token.
    // (locked = false: that holder's lease runs an hour; left true, the row
    // would say a lock session holds it, and since none does, this member's
    // next activation of "cut" would rightly take it back.)
    await query(
      db.url,
      `UPDATE "${schema}".lua_tasks_leases SET token = token + 1, holder = '{"store":"elsewhere"}', locked = false, expires_at = now() + interval '1 hour' WHERE name = 'cut'`,
    );
    // Its COMMIT now is refused (or, if it already noticed, it runs no more Lua).
    const err = await Promise.resolve()
      .then(() => {
        rt.load('tasks.state.x = "after"');
        return rt.commit();
      })
      .then(
        () => null,
        (e) => e,
      );
    expect(err).not.toBeNull();
    expect(['ERR_COMMIT_FAILED', 'ERR_RUNTIME_CLOSED']).toContain(err.code);
    expect((await snapshot()).equals(before)).toBe(true);
    await until(() => lost.length > 0, 'the lost lease');
    expect(lost).toEqual([{ name: 'cut', token: 1 }]);
    expect(a.hosted()).toEqual([]);
    expect(() => rt.load('x = 1')).toThrow(expect.objectContaining({ code: 'ERR_RUNTIME_CLOSED' }));
  });

  test('SIGKILL: the killed member names are taken over, its durable tasks finish once there', async () => {
    const log = [];
    const b = await join();
    record(b, 'b', log);
    // The child's leases outlast the test: its names are taken because its
    // sessions (and their advisory locks) ended with it, not by expiry.
    const spec = {
      url: db.url,
      schema,
      leaseMs: 600000,
      spawn: [0, 1, 2].map((i) => ({ name: `k${i}`, entry: 'sleeper', key: `s${i}`, args: [0.8, `s${i}`] })),
    };
    const child = spawnMember(spec);
    children.push(child.p);
    const spawned = await child.waitFor(/^ready /);
    const ids = child.lines.filter((l) => l.startsWith('spawned ')).map((l) => l.split(' ').slice(1));
    expect(ids).toHaveLength(3);
    expect(spawned).toMatch(/^ready /);
    child.p.kill('SIGKILL');
    await until(() => b.hosted().length === 3, 'the takeover of the three names', 10000);
    for (const [name, id] of ids) {
      const rt = await b.runtime(name);
      await until(() => rt.task(id) && rt.task(id).status === 'done', `${id} done`);
      expect(await b.call(name, 'done_count', `s${name.slice(1)}`)).toBe(1);
    }
    // Tokens: the child's were 1, b's are higher.
    for (const e of log) expect(e.token).toBeGreaterThan(1);
    expect(log.every((e) => e.reason === 'takeover')).toBe(true);
  });

  test('an operation its holder does not answer in time rejects with a FleetError naming the runtime and the operation', async () => {
    const child = spawnMember({
      url: db.url,
      schema,
      leaseMs: 20000,
      spawn: [{ name: 'deaf', entry: 'sleeper', key: 'd', args: [60, 'd'] }],
    });
    children.push(child.p);
    await child.waitFor(/^ready /);
    child.p.kill('SIGSTOP'); // holds its lease and its sessions, answers nothing
    try {
      const a = await join({ routeTimeoutMs: 1500 });
      const err = await a.call('deaf', 'done_count', 'd').catch((e) => e);
      expect(err).toBeInstanceOf(FleetError);
      expect(err).toMatchObject({ name: 'FleetError', code: 'ERR_FLEET_TIMEOUT', runtime: 'deaf', op: 'call' });
    } finally {
      child.p.kill('SIGKILL');
    }
  });

  // A member on a Worker thread hosting `name`: 'block <ms>' busies its loop,
  // 'leave' leaves; it answers each with a message.
  function workerMember(name) {
    const { Worker } = require('node:worker_threads');
    const w = new Worker(
      `const { parentPort, workerData } = require('node:worker_threads');
       const { Fleet } = require(workerData.lib);
       const { FLEET_LUA } = require(workerData.lua);
       (async () => {
         const m = await Fleet.join({ connectionString: workerData.url, schema: workerData.schema, leaseMs: 5000, idleMs: 0,
           runtime: { setup: (rt) => rt.load(FLEET_LUA + ' function whereami() return "worker" end') } });
         await m.runtime(workerData.name);
         parentPort.postMessage('ready');
         parentPort.on('message', async (cmd) => {
           if (cmd === 'leave') { await m.leave(); parentPort.postMessage('left'); return; }
           parentPort.postMessage('blocking');
           const end = Date.now() + Number(cmd.split(' ')[1]);
           while (Date.now() < end); // a loop busy with something else: no NOTIFY is read meanwhile
         });
       })().catch((e) => parentPort.postMessage('failed: ' + e.stack));`,
      {
        eval: true,
        workerData: {
          lib: path.join(__dirname, '..', '..', '..'),
          lua: path.join(__dirname, '..', 'fixtures', 'fleet-lua.js'),
          url: db.url,
          schema,
          name,
        },
      },
    );
    const next = () => new Promise((resolve) => w.once('message', resolve));
    return { w, next };
  }

  test('a Worker thread is a member like a process: names it holds are reached from the main thread', async () => {
    const a = await join();
    const { w, next } = workerMember('in-worker');
    try {
      expect(await next()).toBe('ready');
      await a.runtime('in-main');
      expect(await a.call('in-worker', 'hello', 'from main')).toBe('hello from main');
      expect(await a.call('in-worker', 'whereami')).toBe('worker'); // the main thread's runtimes have no whereami
      expect(a.hosted()).toEqual(['in-main']);
      expect(a.stats().routed).toBe(2);
      w.postMessage('leave');
      expect(await next()).toBe('left');
    } finally {
      await w.terminate();
    }
  });

  test('a holder too busy to acknowledge in time gets the request again, and serves it once', async () => {
    const a = await join();
    const { w, next } = workerMember('slow');
    try {
      expect(await next()).toBe('ready');
      const id = await a.spawn('slow', 'counter', { args: [2] });
      w.postMessage('block 1800');
      expect(await next()).toBe('blocking');
      // Unacknowledged for 1.8 s (its lease of 5 s runs on): sent again, same id, every half second.
      expect(await a.send('slow', id, 5)).toBe(true);
      expect(await a.send('slow', id, 7)).toBe(true); // a repeat served twice would have ended the task: false
      await until(async () => (await a.task('slow', id)).status === 'done', 'the counter done');
      w.postMessage('leave');
      expect(await next()).toBe('left');
    } finally {
      await w.terminate();
    }
  });

  // A member process (fixtures/fleet-member.js): its output lines, and a wait for one.
  function spawnMember(spec) {
    const p = spawn(
      process.execPath,
      [path.join(__dirname, '..', 'fixtures', 'fleet-member.js'), JSON.stringify(spec)],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    const lines = [];
    let buf = '';
    let err = '';
    const waiters = [];
    p.stdout.on('data', (d) => {
      buf += d;
      const parts = buf.split('\n');
      buf = parts.pop();
      for (const l of parts) {
        lines.push(l);
        for (const w of [...waiters]) {
          if (w.re.test(l)) {
            waiters.splice(waiters.indexOf(w), 1);
            w.resolve(l);
          }
        }
      }
    });
    p.stderr.on('data', (d) => (err += d));
    p.on('exit', (code) => {
      for (const w of waiters.splice(0)) w.reject(new Error(`member exited (${code}): ${err}`));
    });
    return {
      p,
      lines,
      waitFor: (re) => {
        const l = lines.find((x) => re.test(x));
        if (l) return Promise.resolve(l);
        return new Promise((resolve, reject) => waiters.push({ re, resolve, reject }));
      },
    };
  }
});
