// SPDX-License-Identifier: MIT
// Resources on a fleet: one Resources per member, the registry and each resource a name of the fleet, routed to its holder.
'use strict';
const { Fleet, Resources, Runtime } = require('../../..');
const { describePg, createDatabase } = require('../pg-helpers');
const { COUNTER } = require('./fixtures');

// A caller resource: its method invokes another resource by path, from inside its own runtime.
const RELAY = `
local resource = require("namazu.resource")
local relay = {}
function relay.forward(path, n)
  local result, code = resource.invoke_path(path, "add", n)
  return { result = result, code = code, me = tasks.state.me }
end
function relay.init(me) tasks.state.me = me end
return relay
`;

describePg('resources on a fleet', () => {
  let db;
  let schemas = 0;
  const members = [];
  const opened = [];
  beforeAll(async () => {
    db = await createDatabase();
  });
  afterAll(async () => {
    if (db) await db.drop();
  });
  afterEach(async () => {
    for (const r of opened.splice(0)) await r.close();
    await Promise.all(members.splice(0).map((m) => m.leave()));
  });

  async function twoMembers(options = {}) {
    const schema = `res_${++schemas}`;
    const join = async () => {
      const m = await Fleet.join({ connectionString: db.url, schema, leaseMs: 1000, idleMs: 0 });
      members.push(m);
      const res = await Resources.open(m, { modules: { counter: COUNTER, relay: RELAY }, ...options });
      opened.push(res);
      return { m, res };
    };
    return [await join(), await join()];
  }

  test('a resource created through member A is invoked from member B; the registry is one for the fleet', async () => {
    const [a, b] = await twoMembers();
    const { id, code } = await a.res.create('counter', 'players/ada/gold', 10);
    expect(code).toBe('OK');
    expect(await b.res.list('players/ada/*')).toEqual({ 'players/ada/gold': id });
    expect(await b.res.invoke(id, 'add', 5)).toEqual({ result: 15, code: 'OK' });
    expect(await a.res.invokePath('players/ada/gold', 'get')).toEqual({ result: 15, code: 'OK' });
    expect((await b.res.create('counter', 'players/ada/gold')).code).toBe('DUPLICATE_RESOURCE');
    expect(await b.res.stats()).toMatchObject({ resources: 1, paths: 1 });
  });

  test('an invocation from a resource hosted on member A reaches a resource hosted on member B', async () => {
    const [a, b] = await twoMembers();
    const target = await b.res.create('counter', 'bank/vault', 100);
    const relay = await a.res.create('relay', 'bank/teller', 'teller');
    // Each resource's runtime is hosted where it was created.
    const slot = (id) => `lua-tasks.r.${id.split('-')[0]}`;
    expect(b.m.hosted()).toContain(slot(target.id));
    expect(a.m.hosted()).toContain(slot(relay.id));
    expect(a.m.hosted()).not.toContain(slot(target.id));
    const out = await b.res.invoke(relay.id, 'forward', 'bank/vault', 7);
    expect(out).toEqual({ result: { result: 107, code: 'OK', me: 'teller' }, code: 'OK' });
    expect(b.m.hosted()).toContain(slot(target.id)); // it ran at its holder, B
    expect((await a.res.invoke(target.id, 'get')).result).toBe(107);
  });

  test('the counts hold fleet-wide; a destroyed resource is gone for every member', async () => {
    const [a, b] = await twoMembers({ maxResources: 2 });
    const x = await a.res.create('counter', 'x');
    await b.res.create('counter', 'y');
    await expect(b.res.create('counter', 'z')).rejects.toMatchObject({ code: 'ERR_STORE_LIMIT' });
    expect((await b.res.destroy(x.id)).code).toBe('OK');
    expect((await a.res.invoke(x.id, 'get')).code).toBe('RESOURCE_NOT_FOUND');
    expect(await a.res.list('*')).toEqual({ y: expect.any(String) });
  });

  test('a Lua caller on a member runtime uses the fleet resources; values past the routed bound are refused', async () => {
    const [a, b] = await twoMembers();
    const { id } = await a.res.create('counter', 'c', 1);
    const rt = new Runtime({ resources: b.res });
    try {
      rt.load('function bump(id) local r, code = require("resource").invoke(id, "add", 2) return { r, code } end');
      expect(await rt.call('bump', id)).toEqual([3, 'OK']);
      // Past the bound on a fleet (16 MiB: a quarter of the router's 64 MiB), refused at the call.
      await expect(b.res.invoke(id, 'echo', 'x'.repeat(16 * 1024 * 1024))).rejects.toMatchObject({
        code: 'ERR_STORE_LIMIT',
      });
    } finally {
      await rt.close();
    }
  });

  test('a call whose values are past 4096 bytes (100 KB each way) runs on the member that hosts the resource, its values in the request row', async () => {
    const [a, b] = await twoMembers();
    const { id } = await a.res.create('counter', 'big', 0, 'l'.repeat(5000));
    const slot = `lua-tasks.r.${id.split('-')[0]}`;
    expect(a.m.hosted()).toContain(slot);
    const v = { text: 'x'.repeat(100 * 1024), list: Array.from({ length: 1000 }, (_, i) => `item ${i}`) };
    expect(await b.res.invoke(id, 'echo', v)).toEqual({ result: v, code: 'OK' });
    expect(await b.res.invokePath('big', 'label')).toEqual({ result: 'l'.repeat(5000), code: 'OK' });
    expect(b.m.hosted()).not.toContain(slot); // routed to A
    expect(b.m.stats().routed).toBeGreaterThanOrEqual(2);
  });
});
