// SPDX-License-Identifier: MIT
// Resources from JS and from Lua: create, invoke, invoke_path, destroy, list, link, link_path, unlink and their codes.
'use strict';
const { Runtime } = require('../../..');
const { tempDir, openResources, caller } = require('./fixtures');

describe('from JS', () => {
  test('create, then invoke by id and by path; the method runs as a task of the resource', async () => {
    const res = await openResources(tempDir());
    const { id, code } = await res.create('counter', 'resources/alice/sword', 10, 'blade');
    expect(code).toBe('OK');
    expect(typeof id).toBe('string');
    expect(await res.invoke(id, 'add', 5)).toEqual({ result: 15, code: 'OK' });
    expect(await res.invokePath('resources/alice/sword', 'add')).toEqual({ result: 16, code: 'OK' });
    expect(await res.invoke(id, 'label')).toEqual({ result: 'blade', code: 'OK' });
    expect(await res.invoke(id, 'slow', 0.01, 2)).toEqual({ result: 18, code: 'OK' });
  });

  test('ordinary misses answer codes: a taken path, a missing resource or method, destroy twice', async () => {
    const res = await openResources(tempDir());
    const { id } = await res.create('counter', 'a/b');
    expect(await res.create('counter', 'a/b')).toEqual({ id: null, code: 'DUPLICATE_RESOURCE' });
    expect(await res.invoke('nope', 'get')).toEqual({ result: null, code: 'RESOURCE_NOT_FOUND' });
    expect(await res.invokePath('a/c', 'get')).toEqual({ result: null, code: 'RESOURCE_NOT_FOUND' });
    expect(await res.invoke(id, 'missing')).toEqual({ result: null, code: 'METHOD_NOT_FOUND' });
    expect(await res.destroy(id)).toEqual({ ok: true, code: 'OK' });
    expect(await res.destroy(id)).toEqual({ ok: false, code: 'RESOURCE_NOT_FOUND' });
    expect(await res.invoke(id, 'get')).toEqual({ result: null, code: 'RESOURCE_NOT_FOUND' });
    expect(await res.list('a/*')).toEqual({});
  });

  test('invokeOnce runs a method once per request id: a repeat answers the first outcome, across a reopen too', async () => {
    const dir = tempDir();
    let res = await openResources(dir);
    const { id } = await res.create('counter', 'c', 10);
    expect(await res.invokeOnce('r1', id, 'add', 5)).toEqual({ result: 15, code: 'OK' });
    expect(await res.invokeOnce('r1', id, 'add', 5)).toEqual({ result: 15, code: 'OK' });
    // Concurrent repeats share the one run.
    const both = await Promise.all([
      res.invokeOnce('r2', id, 'slow', 0.05, 1),
      res.invokeOnce('r2', id, 'slow', 0.05, 1),
    ]);
    expect(both).toEqual([
      { result: 16, code: 'OK' },
      { result: 16, code: 'OK' },
    ]);
    const failed = await res.invokeOnce('r3', id, 'fail');
    expect(failed.code).toBe('METHOD_FAILED');
    expect((await res.invokeOnce('r3', id, 'fail')).error.message).toMatch(/no way/);
    expect(await res.invokeOnce('r4', id, 'missing')).toEqual({ result: null, code: 'METHOD_NOT_FOUND' });
    expect(await res.invokeOnce('r4', 'nope', 'get')).toEqual({ result: null, code: 'RESOURCE_NOT_FOUND' });
    await res.close();
    res = await openResources(dir);
    expect(await res.invokeOnce('r1', id, 'add', 5)).toEqual({ result: 15, code: 'OK' });
    expect(await res.invokeOnce('r2', id, 'slow', 0, 1)).toEqual({ result: 16, code: 'OK' });
    expect(await res.invoke(id, 'get')).toEqual({ result: 16, code: 'OK' });
    // A run-once method is a durable task of the resource, labelled by its method.
    const { tasks } = await res.tasks('c');
    expect(tasks.map((t) => `${t.name} ${t.status}`).sort()).toEqual([
      'add done',
      'fail failed',
      'missing done',
      'slow done',
    ]);
  });

  test('a method that raises answers METHOD_FAILED with its error; the resource goes on', async () => {
    const res = await openResources(tempDir());
    const { id } = await res.create('counter', 'x');
    const out = await res.invoke(id, 'fail');
    expect(out.code).toBe('METHOD_FAILED');
    expect(out.error.message).toMatch(/no way/);
    expect((await res.invoke(id, 'add')).result).toBe(1);
  });

  test('list matches one segment per "*"; link, link_path and unlink keep the paths', async () => {
    const res = await openResources(tempDir());
    const a = (await res.create('counter', 'resources/alice/sword')).id;
    const b = (await res.create('counter', 'resources/alice/shield')).id;
    await res.create('counter', 'resources/bob/sword');
    await res.create('counter', 'resources/alice/bag/coin');
    expect(await res.list('resources/alice/*')).toEqual({ 'resources/alice/sword': a, 'resources/alice/shield': b });
    expect(await res.list('resources/*/sword')).toEqual(expect.objectContaining({ 'resources/alice/sword': a }));
    expect(Object.keys(await res.list('*/*/*'))).toHaveLength(3);
    expect(await res.list('resources/alice/sword')).toEqual({ 'resources/alice/sword': a });

    expect(await res.link(a, 'equipped/alice')).toBe('OK');
    expect(await res.link(a, 'equipped/alice')).toBe('DUPLICATE_RESOURCE');
    expect(await res.link('nope', 'equipped/x')).toBe('RESOURCE_NOT_FOUND');
    expect(await res.linkPath('resources/alice/shield', 'equipped/alice2')).toBe('OK');
    expect(await res.linkPath('resources/none', 'equipped/alice3')).toBe('RESOURCE_NOT_FOUND');
    expect((await res.invokePath('equipped/alice', 'add')).result).toBe(1);

    expect(await res.unlink('equipped/alice')).toEqual({ id: a, removed: false, code: 'OK' });
    expect(await res.unlink('equipped/alice')).toEqual({ id: null, removed: false, code: 'RESOURCE_NOT_FOUND' });
    expect(await res.unlink('resources/alice/sword')).toEqual({ id: a, removed: true, code: 'OK' });
    expect(await res.invoke(a, 'get')).toEqual({ result: null, code: 'RESOURCE_NOT_FOUND' });
    expect((await res.stats()).resources).toBe(3);
  });
});

test('from a durable task, an invocation inside a coroutine it resumed is refused before anything is sent', async () => {
  const dir = tempDir();
  const res = await openResources(dir);
  const { id } = await res.create('counter', 'c');
  const rt = await Runtime.open({ name: 'caller', store: dir, resources: res });
  rt.load(`function fan(id)
    local co = coroutine.create(function() return require("resource").invoke(id, "add", 1) end)
    return coroutine.resume(co)
  end`);
  await expect(rt.spawn('fan', { durable: true, args: [id] }).result).rejects.toThrow(
    /would go on as a detached part of the task, which a durable task cannot replay/,
  );
  expect(await res.invoke(id, 'get')).toEqual({ result: 0, code: 'OK' });
  await rt.close();
});

describe('task addresses', () => {
  test("a method's task id from namazu.coroutine.current_task_id is its address: another resource, JS and an embedder's task resume it", async () => {
    const dir = tempDir();
    const res = await openResources(dir);
    const a = (await res.create('counter', 'a')).id;
    const b = (await res.create('counter', 'b')).id;
    const parked = res.invoke(a, 'park');
    let address;
    while (!address) address = (await res.invoke(a, 'parked')).result;
    expect(address).toMatch(/^t[0-9a-z]+-\d+@lua-tasks\.r\.0$/);
    expect(await res.invoke(b, 'wake', address, 'from b')).toEqual({ result: true, code: 'OK' });
    expect(await parked).toEqual({ result: 'from b', code: 'OK' });
    expect(await res.invoke(b, 'wake', address, 'again')).toEqual({ result: false, code: 'OK' });
    // From JS, and from an embedder's named runtime's task.
    const second = res.invoke(a, 'park');
    let next;
    while (!next || next === address) next = (await res.invoke(a, 'parked')).result;
    expect(await res.resume(next, 'from JS')).toBe(true);
    expect(await second).toEqual({ result: 'from JS', code: 'OK' });
    const third = res.invoke(a, 'park');
    let last;
    while (!last || last === next) last = (await res.invoke(a, 'parked')).result;
    const rt = await Runtime.open({ name: 'embedder', store: dir, resources: res });
    rt.load('function wake(a, v) return tasks.resume(a, v) end function me() return tasks.address() end');
    expect(await rt.call('wake', last, 'from Lua')).toBe(true);
    expect(await third).toEqual({ result: 'from Lua', code: 'OK' });
    expect(await rt.call('me')).toMatch(/@embedder$/);
    // Bad addresses are clear errors.
    await expect(rt.call('wake', 'x@embedder2', 1)).rejects.toThrow(
      /the runtime "embedder2" is not one of these resources'/,
    );
    expect(() => rt.load('return tasks.resume("x@other", 1)')).toThrow(/waits for its answer: call it from a task/);
    await expect(res.resume('no-address', 1)).rejects.toThrow(/must be a task address "<id>@<runtime name>"/);
    expect(() => new Runtime().address('x')).toThrow(/has no name, so its tasks have no addresses/);
    await rt.close();
  });
});

describe('from Lua', () => {
  test('the seed names and return conventions', async () => {
    const res = await openResources(tempDir());
    const rt = caller(res);
    rt.load(`
      local resource = require("namazu.resource")
      local index = require("namazu.index")
      local code = require("namazu.response.code")
      assert(require("resource") ~= nil and require("index") ~= nil)
      assert(require("namazu.response").code.OK == code.OK)
      function run()
        local out = {}
        local id, c = resource.create("counter", "resources/p1/a", 3)
        out[#out + 1] = c
        local id2, c2 = resource.create("counter", "resources/p1/a")
        out[#out + 1] = tostring(id2) .. " " .. c2
        local r, c3 = resource.invoke(id, "add", 4)
        out[#out + 1] = r .. " " .. c3
        r, c3 = resource.invoke_path("resources/p1/a", "get")
        out[#out + 1] = r .. " " .. c3
        r, c3 = resource.invoke(id, "nothing")
        out[#out + 1] = tostring(r) .. " " .. c3
        local r4, c4, msg = resource.invoke(id, "fail")
        out[#out + 1] = c4 .. " " .. tostring(msg:find("no way") ~= nil)
        out[#out + 1] = index.link(id, "alias/a")
        out[#out + 1] = index.link_path("alias/a", "alias/b")
        local n = 0
        for path, rid in pairs(index.list("alias/*")) do assert(rid == id) n = n + 1 end
        out[#out + 1] = n
        local uid, removed, c5 = index.unlink("alias/a")
        out[#out + 1] = tostring(uid == id) .. " " .. tostring(removed) .. " " .. c5
        local ok, c6 = resource.destroy(id)
        out[#out + 1] = tostring(ok) .. " " .. c6
        ok, c6 = resource.destroy(id)
        out[#out + 1] = tostring(ok) .. " " .. c6
        out[#out + 1] = tostring(select(2, index.unlink("alias/b")))
        return table.concat(out, "|")
      end
    `);
    expect(await rt.call('run')).toBe(
      [
        'OK',
        'nil DUPLICATE_RESOURCE',
        '7 OK',
        '7 OK',
        'nil METHOD_NOT_FOUND',
        'METHOD_FAILED true',
        'OK',
        'OK',
        2,
        'true false OK',
        'true OK',
        'false RESOURCE_NOT_FOUND',
        'false',
      ].join('|'),
    );
  });

  test('a resource method can invoke another resource', async () => {
    const res = await openResources(tempDir(), {
      modules: {
        counter: require('./fixtures').COUNTER,
        relay: `return { pass = function(path, n)
          local r, c = require("resource").invoke_path(path, "add", n)
          return c .. ":" .. r
        end }`,
      },
    });
    await res.create('counter', 'c');
    const { id } = await res.create('relay', 'r');
    expect(await res.invoke(id, 'pass', 'c', 5)).toEqual({ result: 'OK:5', code: 'OK' });
  });

  test('outside a task a call is an error, not a hang', async () => {
    const res = await openResources(tempDir());
    const rt = caller(res);
    expect(() => rt.load('return require("resource").create("counter", "a")')).toThrow(/task/);
  });
});

describe('persistence and hibernation', () => {
  test('the registry and each resource state survive close and reopen', async () => {
    const dir = tempDir();
    const res = await openResources(dir);
    const { id } = await res.create('counter', 'resources/alice/sword', 1);
    await res.link(id, 'best/sword');
    await res.invoke(id, 'add', 41);
    await res.close();
    const again = await openResources(dir);
    expect(await again.list('*/*')).toEqual({ 'best/sword': id });
    expect(await again.invokePath('resources/alice/sword', 'get')).toEqual({ result: 42, code: 'OK' });
  });

  test('a second Resources on the same store is refused while the first is open', async () => {
    const dir = tempDir();
    await openResources(dir);
    await expect(openResources(dir)).rejects.toMatchObject({ code: 'ERR_STORE_LOCKED' });
  });

  test('an idle resource hibernates and is activated again by the next call, its state kept', async () => {
    const res = await openResources(tempDir(), { idleMs: 0 });
    const { id } = await res.create('counter', 'p', 7);
    while ((await res.stats()).active > 0) await new Promise((r) => setTimeout(r, 5));
    expect((await res.stats()).hibernations).toBeGreaterThanOrEqual(1);
    const before = (await res.stats()).activations;
    expect(await res.invoke(id, 'add')).toEqual({ result: 8, code: 'OK' });
    expect((await res.stats()).activations).toBe(before + 1);
  });

  test('a resource with an invocation in flight does not hibernate', async () => {
    const res = await openResources(tempDir(), { idleMs: 0 });
    const { id } = await res.create('counter', 'p');
    // In flight until woken below, however long the wait takes.
    const parked = res.invoke(id, 'park');
    await new Promise((r) => setTimeout(r, 20));
    expect((await res.stats()).active).toBe(1);
    let address;
    while (!address) address = (await res.invoke(id, 'parked')).result;
    expect(await res.invoke(id, 'wake', address, 'woken')).toEqual({ result: true, code: 'OK' });
    expect(await parked).toEqual({ result: 'woken', code: 'OK' });
  });
});

describe('listing', () => {
  const QUEST = `return {
    -- COMMIT: the started task's records are in the store before the answer.
    begin = function(n) local id = tasks.start_durable("quest.wait", n) coroutine.yield("COMMIT") return id end,
    wait = function(n) coroutine.yield("INDEFINITELY") return n end,
  }`;

  test('Resources.tasks lists the durable tasks of the resources a pattern matches, by path, paged, filtered', async () => {
    const res = await openResources(tempDir(), { modules: { quest: QUEST } });
    const made = {};
    for (const path of ['resources/ada/a', 'resources/ada/b', 'resources/bob/c']) {
      made[path] = (await res.create('quest', path)).id;
      expect((await res.invoke(made[path], 'begin', path)).code).toBe('OK');
    }
    const all = await res.tasks('resources/ada/*', { status: 'waiting' });
    expect(all.next).toBeNull();
    expect(all.tasks.map((t) => [t.path, t.resource, t.status, t.entry])).toEqual([
      ['resources/ada/a', made['resources/ada/a'], 'waiting', 'quest.wait'],
      ['resources/ada/b', made['resources/ada/b'], 'waiting', 'quest.wait'],
    ]);
    const first = await res.tasks('resources/*/*', { limit: 2 });
    expect(first.tasks.map((t) => t.path)).toEqual(['resources/ada/a', 'resources/ada/b']);
    const rest = await res.tasks('resources/*/*', { limit: 2, after: first.next });
    expect(rest.tasks.map((t) => t.path)).toEqual(['resources/bob/c']);
    expect(rest.next).toBeNull();
    expect((await res.tasks('resources/ada/*', { status: 'done' })).tasks).toEqual([]);
    await expect(res.tasks('resources/ada/*', { status: 'asleep' })).rejects.toThrow(/"status" must be one of/);
    await expect(res.tasks('resources//x')).rejects.toThrow();
  });
});
