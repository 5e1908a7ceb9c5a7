// SPDX-License-Identifier: MIT
// Routed requests as rows beside members of the older form, whose requests and answers travel in the NOTIFY itself.
'use strict';

// The older member is played here by a client of its own speaking its form
// (what lua-tasks did before requests were rows): a request's body in its
// notification (base64 of v8.serialize({ t: 'req', id, from, op, name, ... }))
// with a row of (id, claimed_by, at, expires_at) opened beside it, claimed
// with its acknowledgement; its answer in the answer's notification.
const v8 = require('node:v8');
const { Fleet } = require('../../..');
const { FleetRouter, channelOf } = require('../../../lib/fleet/router');
const { describePg, createDatabase, query } = require('../pg-helpers');
const { sleep } = require('../helpers');
const { FLEET_LUA } = require('../fixtures/fleet-lua');

const runtime = { setup: (rt) => rt.load(FLEET_LUA) };
const encode = (v) => v8.serialize(v).toString('base64');
const decode = (t) => v8.deserialize(Buffer.from(t, 'base64'));
// The requests table as the older form made it.
const OLDER_TABLE = (schema) =>
  `CREATE UNLOGGED TABLE "${schema}".lua_tasks_requests (id text PRIMARY KEY, claimed_by text, at timestamptz, expires_at timestamptz NOT NULL)`;

// A listening session of its own on `channel`, with the notifications it heard.
async function listener(url, channel) {
  const { Client } = require('pg');
  const c = new Client({ connectionString: url });
  c.on('error', () => {});
  const heard = [];
  c.on('notification', (n) => heard.push(decode(n.payload)));
  await c.connect();
  await c.query(`LISTEN "${channel}"`);
  return { c, heard };
}

async function until(pred, what, ms = 10000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await pred();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

describePg('Requests as rows beside older members', () => {
  let db;
  let schemas = 0;
  const members = [];
  const clients = [];
  const join = async (schema) => {
    const m = await Fleet.join({ connectionString: db.url, schema, leaseMs: 2000, idleMs: 0, balanceMs: 0, runtime });
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
    for (const c of clients.splice(0)) await c.end().catch(() => {});
    await Promise.all(members.splice(0).map((m) => m.leave()));
  });
  const newSchema = async (older) => {
    const schema = `upgrade_${++schemas}`;
    await query(db.url, `CREATE SCHEMA "${schema}"`);
    if (older) await query(db.url, OLDER_TABLE(schema));
    return schema;
  };

  test('a member joining a schema whose requests table an older member made adds its body and answer, and routes through it', async () => {
    const schema = await newSchema(true);
    const [a, b] = await Promise.all([join(schema), join(schema)]);
    const { rows } = await query(
      db.url,
      `SELECT column_name FROM information_schema.columns WHERE table_schema = $1 AND table_name = 'lua_tasks_requests' ORDER BY ordinal_position`,
      [schema],
    );
    expect(rows.map((r) => r.column_name)).toEqual(['id', 'claimed_by', 'at', 'expires_at', 'body', 'answer']);
    await a.runtime('room');
    expect(await b.call('room', 'hello', 'x'.repeat(20000))).toBe(`hello ${'x'.repeat(20000)}`);
    // A third joining finds the columns there and changes nothing.
    await join(schema);
  });

  test("an older member's request (its body in the notification) is served once and answered in the notification", async () => {
    const schema = await newSchema(true);
    const a = await join(schema);
    await a.runtime('room');
    const from = 'lua_tasks_olderasker';
    const older = await listener(db.url, from);
    clients.push(older.c);
    const req = { t: 'req', id: 7, from, op: 'call', name: 'room', args: { fn: 'hello', args: ['older'] } };
    const send = () =>
      query(
        db.url,
        `WITH o AS (INSERT INTO "${schema}".lua_tasks_requests (id, expires_at) VALUES ($1, now() + interval '10 seconds')
                    ON CONFLICT (id) DO NOTHING)
         SELECT pg_notify($2, $3)`,
        [`${from} 7`, channelOf(a.id), encode(req)],
      );
    await send();
    const res = await until(() => older.heard.find((m) => m.t === 'res'), 'the answer');
    expect(older.heard[0]).toEqual({ t: 'ack', id: 7 });
    expect(res).toEqual({ t: 'res', id: 7, value: 'hello older' });
    // Sent again (a repeat): the first answer again, not a second run.
    await send();
    await until(() => older.heard.filter((m) => m.t === 'res').length === 2, 'the repeat answer');
    expect(older.heard.filter((m) => m.t === 'res')).toEqual([res, res]);
    expect(a.stats().served).toBe(1);
  });

  test("a request to an older member is answered 'moved' by it (it cannot read the row), sent again in its form, and served once", async () => {
    const schema = await newSchema(true);
    const m = await join(schema); // makes the columns; its router is not used here
    const older = await listener(db.url, channelOf('older-holder'));
    clients.push(older.c);
    const t = `"${schema}".lua_tasks_requests`;
    const runs = [];
    // The older holder: claims with its acknowledgement; a request without
    // its body (it reads none from rows) is given back and answered "moved".
    older.c.on('notification', async (n) => {
      const msg = decode(n.payload);
      const key = `${msg.from} ${msg.id}`;
      const { rows } = await older.c.query(
        `WITH c AS (UPDATE ${t} SET claimed_by = 'older', at = now() WHERE id = $1 AND expires_at > now()
                    AND (claimed_by IS NULL OR claimed_by = 'older') RETURNING id)
         SELECT pg_notify($2, $3) FROM c`,
        [key, msg.from, encode({ t: 'ack', id: msg.id })],
      );
      if (rows.length === 0) return;
      if (msg.op === undefined) {
        await older.c.query(`UPDATE ${t} SET claimed_by = NULL WHERE id = $1`, [key]);
        await older.c.query('SELECT pg_notify($1, $2)', [msg.from, encode({ t: 'res', id: msg.id, moved: true })]);
        return;
      }
      runs.push(msg.args);
      await older.c.query('SELECT pg_notify($1, $2)', [
        msg.from,
        encode({ t: 'res', id: msg.id, value: 'older ran it' }),
      ]);
    });
    const { Pool } = require('pg');
    const pool = new Pool({ connectionString: db.url, max: 2 });
    const router = new FleetRouter({
      pg: require('pg'),
      pool,
      connection: { connectionString: db.url },
      storeId: 'new-asker',
      schema,
      onRequest: async () => null,
      onWake: () => {},
      onError: () => {},
    });
    try {
      await router.start();
      const answer = await router.request(
        'older-holder',
        { name: 'room', op: 'send', args: { id: 'x' } },
        5000,
        1,
        true,
      );
      expect(answer).toMatchObject({ value: 'older ran it' });
      expect(runs).toEqual([{ id: 'x' }]);
      // Too large for the older form: "moved", the name looked up again.
      const big = await router.request(
        'older-holder',
        { name: 'room', op: 'send', args: 'x'.repeat(9000) },
        5000,
        2,
        true,
      );
      expect(big).toMatchObject({ moved: true });
      expect(runs).toHaveLength(1);
    } finally {
      await router.close();
      await pool.end();
    }
    expect(m.stats().served).toBe(0);
  });
});
