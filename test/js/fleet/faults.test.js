// SPDX-License-Identifier: MIT
// Fleet members under faults: a hibernated receive's deadline, PostgreSQL sessions ended under a member.
'use strict';
const { Fleet } = require('../../..');
const { describePg, createDatabase, query } = require('../pg-helpers');
const { sleep } = require('../helpers');

const LEASE_MS = 1000;
const LUA = `
-- Waits s seconds for a message, then records what it got (in a step).
function waiter(s)
  local v, why = tasks.receive(s)
  tasks.step(function() tasks.state.got = v or why end)
  coroutine.yield("COMMIT")
  return v or why
end
-- Sleeps s seconds n times, committing a count each time.
function ticker(n, s)
  for i = 1, n do
    coroutine.yield("FOR", s)
    tasks.step(function() tasks.state.ticks = i end)
    coroutine.yield("COMMIT")
  end
  return n
end
function got() return tasks.state.got end
function ticks() return tasks.state.ticks or 0 end
`;
const runtime = { setup: (rt) => rt.load(LUA) };

// Resolves when pred() is true; fails naming what it waited for.
async function until(pred, what, ms = 10000) {
  const end = Date.now() + ms;
  for (;;) {
    if (await pred()) return;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

describePg('Fleet faults', () => {
  let db;
  let schemas = 0;
  const members = [];
  const join = async (opts = {}) => {
    const m = await Fleet.join({
      connectionString: db.url,
      schema: `fleet_faults_${++schemas}`,
      leaseMs: LEASE_MS,
      idleMs: 0,
      runtime,
      ...opts,
    });
    members.push(m);
    return m;
  };
  beforeAll(async () => {
    db = await createDatabase();
  });
  afterAll(async () => {
    if (db) await db.drop();
  });
  afterEach(async () => {
    await Promise.all(members.splice(0).map((m) => m.leave()));
  });

  test('a hibernated tasks.receive(timeout) is woken at its deadline by the wake index', async () => {
    const a = await join({ idleMs: 150, wakeAheadMs: 200 });
    const hibernated = [];
    const activations = [];
    a.on('hibernate', (e) => hibernated.push(e));
    a.on('activate', (e) => activations.push({ ...e, at: Date.now() }));
    const start = Date.now();
    await a.spawn('recv', 'waiter', { args: [1.5] });
    const spawned = Date.now(); // its receive began between start and now (a spawn runs to the first wait)
    await until(() => hibernated.length > 0, 'the hibernation');
    // Its wake time is its receive's deadline, 1.5 s after the receive on
    // the fleet's clock (PostgreSQL's: this process's plus the member's
    // offset), ahead by wakeAheadMs / 2. (1 ms each way: whole ms.)
    expect(hibernated[0].wakeAt).toBeInstanceOf(Date);
    const deadline = hibernated[0].wakeAt.getTime() + 100 - a.stats().clock.offsetMs;
    expect(deadline).toBeGreaterThanOrEqual(start + 1500 - 1);
    expect(deadline).toBeLessThanOrEqual(spawned + 1500 + 1);
    // Woken by the index (reason 'due'), not by a call, and the receive timed out.
    await until(
      () => activations.some((e) => e.name === 'recv' && e.reason === 'due'),
      'the wake at its deadline',
      8000,
    );
    const rt = await a.runtime('recv');
    await until(() => rt.tasks().length === 0, 'the waiter done');
    expect(rt.load('return got()')).toEqual(['timeout']);
  }, 30000);

  test('every PostgreSQL session of a member ended (pg_terminate_backend): it lives, and its durable task goes on', async () => {
    const app = `fleet_fault_${process.pid}`;
    const a = await join({ connectionString: `${db.url}?application_name=${app}` });
    const errors = [];
    a.on('error', (e) => errors.push(e));
    await a.spawn('ticks', 'ticker', { args: [12, 0.1] });
    let ended = 0;
    for (let round = 0; round < 5; round++) {
      await sleep(150);
      const { rows } = await query(
        db.url,
        `SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
         WHERE datname = current_database() AND application_name = $1`,
        [app],
      );
      ended += rows[0].n;
    }
    expect(ended).toBeGreaterThan(0);
    await until(async () => (await a.call('ticks', 'ticks')) === 12, 'the ticker done', 20000);
    expect(a.hosted()).toEqual(['ticks']);
  }, 40000);

  test("old bug: an activation whose wake-index write fails closes its runtime: the name's lease is let go, and the next operation activates it", async () => {
    const a = await join();
    const schema = `fleet_faults_${schemas}`;
    // The write that marks the name active fails (as it does while the server restarts).
    await query(
      db.url,
      `CREATE FUNCTION "${schema}".injected_fault() RETURNS trigger LANGUAGE plpgsql AS
         $$ BEGIN RAISE EXCEPTION 'injected fault'; END $$`,
    );
    await query(
      db.url,
      `CREATE TRIGGER injected_fault BEFORE INSERT OR UPDATE ON "${schema}".lua_tasks_wake
         FOR EACH ROW EXECUTE FUNCTION "${schema}".injected_fault()`,
    );
    await expect(a.call('stuck', 'ticks')).rejects.toThrow(/injected fault/);
    expect(a.hosted()).toEqual([]);
    // Its runtime closed, nothing holds the name: its lease row has no holder.
    const holder = async () =>
      (await query(db.url, `SELECT holder FROM "${schema}".lua_tasks_leases WHERE name = 'stuck'`)).rows[0].holder;
    await until(async () => (await holder()) === null, 'the lease to be let go', 5000);
    await query(db.url, `DROP TRIGGER injected_fault ON "${schema}".lua_tasks_wake`);
    await expect(a.call('stuck', 'ticks')).resolves.toBe(0);
    expect(a.hosted()).toEqual(['stuck']);
  }, 30000);
});
