// SPDX-License-Identifier: MIT
// What resources persist is bounded: counts of resources and paths, slots reused and emptied, nothing started by a call that raises.
'use strict';
const { tempDir, openResources, caller } = require('./fixtures');

const STASH = `
local m = {}
function m.init(v) tasks.state.mine = v end
function m.stash(k, v) tasks.store.set(k, v) tasks.state[k] = v coroutine.yield("COMMIT") return true end
function m.peek(k) return { state = tasks.state[k], store = tasks.store.get(k), mine = tasks.state.mine } end
return m
`;

test('maxResources refuses a create past it at the Lua call, naming the count, the limit and the option; nothing is created', async () => {
  const res = await openResources(tempDir(), { maxResources: 3 });
  const rt = caller(res);
  rt.load(`function fill()
    local r = require("resource")
    local made = 0
    for i = 1, 5 do
      local ok, e = pcall(r.create, "counter", "c/" .. i)
      if not ok then return { made, e.code, e.message } end
      made = made + 1
    end
  end`);
  const [made, code, message] = await rt.call('fill');
  expect(made).toBe(3);
  expect(code).toBe('ERR_STORE_LIMIT');
  expect(message).toMatch(/holds 3 resources .* its maxResources \(3\) allows; nothing was created/);
  expect(await res.stats()).toMatchObject({ resources: 3, paths: 3 });
  expect(Object.keys(await res.list('c/*')).sort()).toEqual(['c/1', 'c/2', 'c/3']);
});

test('concurrent creates cannot pass maxResources together', async () => {
  const res = await openResources(tempDir(), { maxResources: 4 });
  const out = await Promise.allSettled(Array.from({ length: 10 }, (_, i) => res.create('counter', `p/${i}`)));
  expect(out.filter((o) => o.status === 'fulfilled')).toHaveLength(4);
  for (const o of out.filter((x) => x.status === 'rejected')) expect(o.reason.code).toBe('ERR_STORE_LIMIT');
  expect((await res.stats()).resources).toBe(4);
});

test('maxPaths counts links too: link and link_path past it are refused and add nothing', async () => {
  const res = await openResources(tempDir(), { maxPaths: 3 });
  const { id } = await res.create('counter', 'a');
  expect(await res.link(id, 'b')).toBe('OK');
  expect(await res.linkPath('a', 'c')).toBe('OK');
  await expect(res.link(id, 'd')).rejects.toMatchObject({ code: 'ERR_STORE_LIMIT', limit: 'maxPaths', max: 3 });
  await expect(res.linkPath('a', 'd')).rejects.toThrow(/maxPaths \(3\)/);
  await expect(res.create('counter', 'e')).rejects.toThrow(/holds 3 paths .* maxPaths/);
  expect(await res.stats()).toMatchObject({ resources: 1, paths: 3 });
  // An unlink frees a path for the next link.
  expect((await res.unlink('b')).code).toBe('OK');
  expect(await res.link(id, 'd')).toBe('OK');
});

test('a destroyed resource gives its slot to the next create, emptied: none of its state or keys is seen', async () => {
  const res = await openResources(tempDir(), { modules: { stash: STASH }, maxResources: 1 });
  const a = await res.create('stash', 'a', 'first');
  await res.invoke(a.id, 'stash', 'secret', 'x'.repeat(100));
  expect((await res.invoke(a.id, 'peek', 'secret')).result).toEqual({
    state: 'x'.repeat(100),
    store: 'x'.repeat(100),
    mine: 'first',
  });
  expect((await res.destroy(a.id)).code).toBe('OK');
  const b = await res.create('stash', 'b', 'second');
  expect(b.id).not.toBe(a.id);
  expect(b.id.split('-')[0]).toBe(a.id.split('-')[0]); // the same slot
  expect((await res.invoke(b.id, 'peek', 'secret')).result).toEqual({ mine: 'second' });
  expect((await res.invoke(a.id, 'peek', 'secret')).code).toBe('RESOURCE_NOT_FOUND');
});

test('create and destroy in a loop uses no more slots than maxResources', async () => {
  const res = await openResources(tempDir(), { maxResources: 2 });
  const seen = new Set();
  for (let i = 0; i < 6; i++) {
    const { id } = await res.create('counter', `x/${i}`);
    seen.add(id.split('-')[0]);
    await res.destroy(id);
  }
  expect([...seen]).toEqual(['0']);
});

test.each([
  ['resource.create', 'require("resource").create("counter", "m")'],
  ['resource.invoke', 'require("resource").invoke(ID, "add", 1)'],
  ['resource.invoke_path', 'require("resource").invoke_path("a", "add", 1)'],
  ['resource.destroy', 'require("resource").destroy(ID)'],
  ['index.link', 'require("index").link(ID, "m")'],
  ['index.link_path', 'require("index").link_path("a", "m")'],
  ['index.unlink', 'require("index").unlink("a")'],
  ['index.list', 'require("index").list("*")'],
])('%s from the main chunk raises before anything is started', async (name, body) => {
  const res = await openResources(tempDir());
  const { id } = await res.create('counter', 'a');
  const rt = caller(res);
  rt.set('ID', id);
  expect(() => rt.load(body)).toThrow(new RegExp(`${name.replace('.', '\\.')}: call it from a task`));
  await new Promise((r) => setTimeout(r, 20));
  expect(await res.list('*')).toEqual({ a: id });
  expect((await res.invoke(id, 'get')).result).toBe(0);
});
