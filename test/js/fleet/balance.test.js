// SPDX-License-Identifier: MIT
// Balance: a member that joins is given names until the spread is within one, each name hosted once throughout.
'use strict';
const { Fleet } = require('../../..');
const { describePg, createDatabase, query } = require('../pg-helpers');
const { sleep } = require('../helpers');

const NAMES = Array.from({ length: 9 }, (_, i) => `room-${i}`);

// Resolves when pred() is true; fails naming what it waited for.
async function until(pred, what, ms = 10000) {
  const end = Date.now() + ms;
  for (;;) {
    if (await pred()) return;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

// Adds up n messages, keeping the total in tasks.state.
const LUA = `
function tally(n)
  local t = 0
  for _ = 1, n do t = t + tasks.receive() end
  tasks.step(function() tasks.state.total = t end)
  coroutine.yield("COMMIT")
  return t
end
function total() return tasks.state.total end
`;

describePg('Fleet balance', () => {
  let db;
  let schemas = 0;
  const members = [];
  const join = async (schema, opts = {}) => {
    const m = await Fleet.join({
      connectionString: db.url,
      schema,
      leaseMs: 2000,
      pollMs: 50,
      idleMs: 0,
      balanceMs: 100,
      runtime: { setup: (rt) => rt.load(LUA) },
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

  test('a member that joins is given names until both host within one of even; each name hosted once throughout; durable tasks go on', async () => {
    const schema = `balance_${++schemas}`;
    // Leases no stall of a loaded machine outlasts: every move is a handover.
    const long = { leaseMs: 15000 };
    const a = await join(schema, long);
    const ids = {};
    for (const name of NAMES) {
      ids[name] = await a.spawn(name, 'tally', { args: [2] });
      expect(await a.send(name, ids[name], 1)).toBe(true); // journaled before any move
    }
    expect(a.hosted().sort()).toEqual([...NAMES].sort());

    // Checked at every activation, wherever: no name hosted twice.
    const twice = [];
    const moves = [];
    let balanced;
    const even = new Promise((resolve) => {
      balanced = resolve;
    });
    const b = await join(schema, long);
    const check = (e) => {
      const here = a.hosted();
      const there = b.hosted();
      const both = here.filter((n) => there.includes(n));
      if (both.length) twice.push({ at: e.name, both });
      if (here.length + there.length === NAMES.length && Math.abs(here.length - there.length) <= 1) balanced();
    };
    a.on('activate', check);
    b.on('activate', (e) => {
      moves.push(e);
      check(e);
    });
    await even;

    expect(twice).toEqual([]);
    expect([...a.hosted(), ...b.hosted()].sort()).toEqual([...NAMES].sort());
    expect(moves.length).toBe(Math.floor(NAMES.length / 2));
    expect(moves.every((e) => e.reason === 'balance')).toBe(true);
    expect(a.stats().handovers).toBe(moves.length);
    // The rows say so too: each name's lease held by the member hosting it.
    const { rows } = await query(
      db.url,
      `SELECT name, holder->>'store' AS store FROM "${schema}".lua_tasks_leases WHERE holder IS NOT NULL`,
    );
    const holders = Object.fromEntries(rows.map((r) => [r.name, r.store]));
    for (const name of a.hosted()) expect(holders[name]).toBe(a.id);
    for (const name of b.hosted()) expect(holders[name]).toBe(b.id);
    // Every task kept its first message across the moves and takes its second.
    for (const name of NAMES) {
      expect(await a.send(name, ids[name], 2)).toBe(true);
      await until(async () => (await b.task(name, ids[name])).status === 'done', `${name}'s task done`);
      expect(await b.call(name, 'total')).toBe(3);
    }
  }, 60000);

  test('balanceMs: 0 gives no name away, and such a member is given none', async () => {
    const schema = `balance_${++schemas}`;
    const a = await join(schema, { balanceMs: 0 });
    for (const name of NAMES.slice(0, 4)) await a.runtime(name);
    const b = await join(schema);
    // Heard from before c hosts anything: c may give b a name as soon as it
    // hosts two, while it still activates the others.
    let given = 0;
    const twoGiven = new Promise((resolve) => {
      b.on('activate', () => {
        if (++given === 2) resolve();
      });
    });
    const c = await join(schema);
    for (const name of NAMES.slice(4, 8)) await c.runtime(name);
    // c hosts 4 and b none: c gives b names; a (not balancing) keeps its 4.
    await twoGiven;
    expect(a.hosted().length).toBe(4);
    expect(a.stats().handovers).toBe(0);
    expect(c.hosted().length).toBe(2);
    expect(b.hosted().length).toBe(2);
  }, 60000);
});
