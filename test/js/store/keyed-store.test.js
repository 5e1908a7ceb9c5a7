// SPDX-License-Identifier: MIT
// tasks.store: keyed values with copy semantics, made durable by COMMIT in one batch per write, over a v2 store.
'use strict';
const { Runtime } = require('../../..');
const { closeAfterTest } = require('../helpers');

// A v2 store in memory (store interface v2, docs/persistence.md): what the
// SQLite directory store does, without the disk. `failWrites` makes the next
// writes reject; `writes` counts the write calls, `batches` keeps them.
function memoryV2Store() {
  const snapshots = new Map(); // name -> Buffer
  const kv = new Map(); // name -> Map(key -> Buffer)
  const owners = new Map(); // name -> token
  let token = 0;
  const store = {
    batches: [],
    failWrites: 0,
    async acquire(name) {
      if (owners.has(name)) throw Object.assign(new Error(`"${name}" is owned`), { code: 'ERR_STORE_LOCKED' });
      const t = ++token;
      owners.set(name, t);
      return { token: t, release: async () => owners.get(name) === t && owners.delete(name) };
    },
    async load(name) {
      return snapshots.get(name) || null;
    },
    save() {
      throw new Error('a v2 store is written with write(), not save()');
    },
    async write(batch) {
      store.batches.push(batch);
      if (store.failWrites > 0) {
        store.failWrites--;
        throw new Error('disk on fire');
      }
      if (owners.get(batch.name) !== batch.token) {
        throw Object.assign(new Error('fenced'), { code: 'ERR_STORE_LOCKED' });
      }
      await null; // all or nothing: applied in one go below
      if (batch.state) snapshots.set(batch.name, Buffer.from(batch.state));
      if (!kv.has(batch.name)) kv.set(batch.name, new Map());
      const m = kv.get(batch.name);
      for (const w of batch.writes) {
        if (w.value === null) m.delete(w.key);
        else m.set(w.key, Buffer.from(w.value));
      }
    },
    reader(name) {
      const m = () => kv.get(name) || new Map();
      return {
        get: (key) => m().get(key) || null,
        keys: (prefix, after, limit) =>
          [...m().keys()]
            .filter((k) => k.startsWith(prefix) && Buffer.compare(Buffer.from(k), Buffer.from(after)) > 0)
            .sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)))
            .slice(0, limit),
      };
    },
    get writes() {
      return store.batches.length;
    },
    committed: (name) => kv.get(name) || new Map(),
  };
  return store;
}

async function open(store, name = 'game', options = {}) {
  return closeAfterTest(await Runtime.open({ name, store, ...options }));
}

test('get, set, delete and keys read their own writes before any COMMIT', async () => {
  const rt = await open(memoryV2Store());
  expect(
    rt.load(`
      local s = tasks.store
      s.set("player:2", { name = "bob", score = 2 })
      s.set("player:1", { name = "ann", score = 1.5 })
      s.set("player:3", "x")
      s.set("other", true)
      s.delete("player:3")
      return s.get("player:1").name, s.get("player:3"), s.get("missing"), s.keys("player:"), s.keys("")`),
  ).toEqual(['ann', null, null, ['player:1', 'player:2'], ['other', 'player:1', 'player:2']]);
});

test('keys takes a start after a key and a limit', async () => {
  const rt = await open(memoryV2Store());
  rt.load('for i = 1, 9 do tasks.store.set("k" .. i, i) end');
  await rt.commit();
  rt.load('tasks.store.delete("k4"); tasks.store.set("k35", 0)');
  expect(rt.load('return tasks.store.keys("k", "k2", 3), tasks.store.keys("k", "k8")')).toEqual([
    ['k3', 'k35', 'k5'],
    ['k9'],
  ]);
});

test('an empty listing reaches JS as [] (an empty record stays {}), also inside a value and through a task', async () => {
  const rt = await open(memoryV2Store());
  expect(rt.load('return tasks.store.keys(""), {}, { list = tasks.store.keys("none") }')).toEqual([
    [],
    {},
    { list: [] },
  ]);
  rt.load('function listing() return tasks.store.keys("") end');
  expect(await rt.call('listing')).toEqual([]);
  // A list given a field is a record again.
  expect(rt.load('local k = tasks.store.keys("") k.x = 1 return k')).toEqual([{ x: 1 }]);
});

test('values are copies: a table got or set changes nothing until it is set again', async () => {
  const rt = await open(memoryV2Store());
  expect(
    rt.load(`
      local t = { hp = 10, inv = { "sword" } }
      tasks.store.set("p", t)
      t.hp = 0                          -- after set: not in the store
      local a = tasks.store.get("p")
      a.inv[1] = "shield"               -- a copy: not in the store
      local b = tasks.store.get("p")
      local fresh = rawequal(a, b)
      b.hp = 5
      tasks.store.set("p", b)
      return tasks.store.get("p").hp, tasks.store.get("p").inv[1], fresh`),
  ).toEqual([5, 'sword', false]);
});

test('a COMMIT makes the writes durable: a reopened runtime reads them, and tasks.state too', async () => {
  const store = memoryV2Store();
  const a = await open(store);
  a.load(`function play()
    tasks.store.set("player:1", { name = "ann", scores = { 1, 2, 3 } })
    tasks.store.set("gone", 1)
    tasks.state.round = 7
    coroutine.yield("COMMIT")
    tasks.store.delete("gone")
    return coroutine.yield("COMMIT")
  end`);
  expect(await a.call('play')).toBe('COMMIT');
  expect([...store.committed('game').keys()]).toEqual(['player:1']);
  const last = store.batches[store.batches.length - 1];
  expect(last).toMatchObject({ name: 'game', writes: [{ space: 1, key: 'gone', value: null }] });
  // The first COMMIT wrote tasks.state; the second left it as it was.
  expect(store.batches[store.batches.length - 2].state).toBeInstanceOf(Buffer);
  expect(last.state).toBe(null);
  expect(typeof last.seq).toBe('number');
  expect(last.token).toBe(1);
  await a.close();
  const b = await open(store);
  expect(
    b.load(
      'local p = tasks.store.get("player:1"); return p.name, p.scores[3], tasks.state.round, tasks.store.get("gone")',
    ),
  ).toEqual(['ann', 3, 7, null]);
});

test('a set that no COMMIT followed is lost when the runtime is reopened', async () => {
  const store = memoryV2Store();
  const a = await open(store);
  a.load('tasks.store.set("kept", 1)');
  await a.commit();
  a.load('tasks.store.set("lost", 2); tasks.store.set("kept", 99)');
  await a.close();
  const b = await open(store);
  expect(b.load('return tasks.store.get("kept"), tasks.store.get("lost"), tasks.store.keys("")')).toEqual([
    1,
    null,
    ['kept'],
  ]);
});

test('a failed write keeps its writes for the next COMMIT, and newer sets win', async () => {
  const store = memoryV2Store();
  const rt = await open(store);
  rt.load('tasks.store.set("a", 1); tasks.store.set("b", 1)');
  store.failWrites = 1;
  await expect(rt.commit()).rejects.toMatchObject({ code: 'ERR_COMMIT_FAILED', message: /disk on fire/ });
  expect(store.committed('game').size).toBe(0);
  expect(rt.load('return tasks.store.get("a"), tasks.store.get("b")')).toEqual([1, 1]);
  rt.load('tasks.store.set("b", 2); tasks.store.set("c", 3)');
  await rt.commit();
  const last = store.batches[store.batches.length - 1];
  expect(last.writes.map((w) => w.key)).toEqual(['a', 'b', 'c']);
  expect(
    Object.fromEntries([...store.committed('game')].map(([k]) => [k, rt.load(`return tasks.store.get("${k}")`)[0]])),
  ).toEqual({ a: 1, b: 2, c: 3 });
  // Nothing changed since: that COMMIT is written already, and costs no write.
  const batches = store.batches.length;
  await rt.commit();
  expect(store.batches.length).toBe(batches);
});

test('a task sees its COMMIT fail at the yield and can COMMIT again', async () => {
  const store = memoryV2Store();
  const rt = await open(store);
  rt.load(`function t()
    tasks.store.set("k", "v")
    local ok, err = pcall(coroutine.yield, "COMMIT")
    local again = coroutine.yield("COMMIT")
    return { ok, err.code, again }
  end`);
  store.failWrites = 1;
  expect(await rt.call('t')).toEqual([false, 'ERR_COMMIT_FAILED', 'COMMIT']);
  expect(store.committed('game').get('k')).toBeInstanceOf(Buffer);
});

describe('bad keys and values raise clear errors and the runtime goes on', () => {
  test.each([
    ['a number key', 'tasks.store.set(1, 1)', /bad argument #1 to 'set' \(string key expected, got number\)/],
    ['an empty key', 'tasks.store.get("")', /key "" is 0 bytes; keys are 1-512 bytes/],
    ['a long key', 'tasks.store.delete(string.rep("k", 513))', /key "kkkk.*\.\.\. is 513 bytes; keys are 1-512 bytes/],
    ['a key that is not UTF-8', 'tasks.store.set("a\\255", 1)', /key "a.*" is not valid UTF-8/],
    [
      'set with nil',
      'tasks.store.set("k", nil)',
      /nil is not a value \(use tasks.store.delete\(key\) to remove a key\)/,
    ],
    ['set with no value', 'tasks.store.set("k")', /nil is not a value/],
    [
      'a function in a value',
      'tasks.store.set("p:1", { inv = { f = print } })',
      /tasks\.store\.set: store\["p:1"\]\.inv\.f: cannot persist a function/,
    ],
    [
      'a coroutine value',
      'tasks.store.set("co", coroutine.create(print))',
      /store\["co"\]: cannot persist a coroutine/,
    ],
    ['a bad limit', 'tasks.store.keys("", nil, 0)', /limit must be an integer from 1 to 100000/],
    ['a prefix that is not a string', 'tasks.store.keys({})', /bad argument #1 to 'keys'/],
  ])('%s', async (_, code, re) => {
    const rt = await open(memoryV2Store());
    expect(() => rt.load(code)).toThrow(re);
    expect(rt.load('tasks.store.set("ok", 1); return tasks.store.get("ok"), tasks.store.keys("")')).toEqual([
      1,
      ['ok'],
    ]);
  });
});

test('a reader that throws or answers wrongly is a Lua error naming the key', async () => {
  const store = memoryV2Store();
  let mode = 'throw';
  store.reader = () => ({
    get: () => {
      if (mode === 'throw') throw new Error('io error');
      return 'text';
    },
    keys: () => (mode === 'throw' ? [][0].x : 'nope'),
  });
  const rt = await open(store);
  expect(() => rt.load('tasks.store.get("player:7")')).toThrow(
    /tasks\.store\.get: cannot read "player:7" from the store: its reader's get\(\) threw: io error/,
  );
  expect(() => rt.load('tasks.store.keys("p")')).toThrow(
    /tasks\.store\.keys: cannot list the store's keys: its reader's keys\(\) threw/,
  );
  mode = 'wrong';
  expect(() => rt.load('tasks.store.get("player:7")')).toThrow(/returned a string \(expected a Buffer or null\)/);
  expect(() => rt.load('tasks.store.keys("p")')).toThrow(/returned a string \(expected an array of strings\)/);
  expect(rt.load('return pcall(tasks.store.get, "x")')[0]).toBe(false);
  expect(rt.load('return 1 + 1')).toEqual([2]);
});

test('a stored value that does not decode is a Lua error naming the key', async () => {
  const store = memoryV2Store();
  store.reader = () => ({ get: () => Buffer.from('not a snapshot'), keys: () => [] });
  const rt = await open(store);
  expect(() => rt.load('tasks.store.get("k")')).toThrow(
    /tasks\.store\.get: the stored value of "k" does not read: not a lua-tasks state snapshot/,
  );
});

test('a runtime without a store says tasks.store needs one', () => {
  const rt = closeAfterTest(new Runtime());
  expect(() => rt.load('tasks.store.get("k")')).toThrow(
    /tasks\.store\.get: this runtime has no store \(create it with Runtime\.open\(\{ name, store \}\)\)/,
  );
  expect(() => rt.load('tasks.store.set("k", 1)')).toThrow(/tasks\.store\.set: this runtime has no store/);
});

test('a v1 store (load and save) keeps working for tasks.state; tasks.store says what it needs', async () => {
  const saved = new Map();
  const store = { load: async (n) => saved.get(n) || null, save: async (n, b) => void saved.set(n, Buffer.from(b)) };
  const a = await open(store, 'v1');
  expect(() => a.load('tasks.store.set("k", 1)')).toThrow(
    /tasks\.store\.set: the runtime's store keeps only whole snapshots of tasks\.state; tasks\.store needs a store with reader\(\) and write\(\)/,
  );
  a.load('tasks.state.v = 7');
  await a.commit();
  a.closeSync();
  const b = await open(store, 'v1');
  expect(b.load('return tasks.state.v')).toEqual([7]);
});

test('COMMITs asked for while a write is in flight share the next batch', async () => {
  const store = memoryV2Store();
  const rt = await open(store);
  const before = store.writes;
  rt.load('tasks.store.set("a", 1)');
  const first = rt.commit(); // its batch is taken now: the state as of this call
  rt.load('tasks.store.set("b", 2)');
  const rest = [];
  for (let i = 0; i < 100; i++) rest.push(rt.commit());
  rt.load('tasks.store.set("c", 3)');
  await Promise.all([first, ...rest]);
  expect(store.writes - before).toBe(2);
  expect(store.batches.slice(-2).map((b) => b.writes.map((w) => w.key))).toEqual([['a'], ['b', 'c']]);
});

test('the COMMITs of tasks that run in one stretch share one write, round after round', async () => {
  const store = memoryV2Store();
  const rt = await open(store);
  rt.load(`function player(i) for round = 1, 3 do tasks.store.set("p" .. i, round) coroutine.yield("COMMIT") end end`);
  const before = store.writes;
  const tasks = [];
  for (let i = 0; i < 100; i++) tasks.push(rt.start('player', i).result);
  await Promise.all(tasks);
  // One write a round: the committers a write lets go continue together and
  // commit into the next one (not the first of them alone, then the rest).
  expect(store.writes - before).toBe(3);
  expect(store.batches.slice(-3).map((b) => b.writes.length)).toEqual([100, 100, 100]);
  expect(rt.load('return tasks.store.get("p42")')).toEqual([3]);
});

test('big values and many keys round-trip', async () => {
  const store = memoryV2Store();
  const a = await open(store, 'big', { storeCacheBytes: 1024 });
  a.load(`
    tasks.store.set("blob", string.rep("x", 5 * 1024 * 1024))
    local t = {}
    for i = 1, 100000 do t[i] = i end
    tasks.store.set("list", t)
    for i = 1, 2000 do tasks.store.set(string.format("n:%05d", i), { i = i }) end`);
  await a.commit();
  await a.close();
  const b = await open(store, 'big', { storeCacheBytes: 1024 });
  expect(
    b.load(`local n = 0
    for _ = 1, 3 do n = n + #tasks.store.get("blob") end
    local keys = tasks.store.keys("n:", nil, 5000)
    return n, #tasks.store.get("list"), tasks.store.get("list")[100000], #keys, keys[2000], tasks.store.get("n:01234").i`),
  ).toEqual([15 * 1024 * 1024, 100000, 100000, 2000, 'n:02000', 1234]);
});

test('storeCacheBytes is checked', async () => {
  for (const v of [-1, 1.5, Infinity]) {
    await expect(Runtime.open({ name: 'x', store: memoryV2Store(), storeCacheBytes: v })).rejects.toMatchObject({
      code: 'ERR_OUT_OF_RANGE',
    });
  }
  await expect(Runtime.open({ name: 'x', store: memoryV2Store(), storeCacheBytes: '1' })).rejects.toMatchObject({
    code: 'ERR_INVALID_ARG_TYPE',
  });
});

test('while a write is in flight its values are read, and newer writes wait for the next batch', async () => {
  const store = memoryV2Store();
  const write = store.write;
  let release;
  const gate = new Promise((resolve) => {
    release = resolve;
  });
  store.write = async (batch) => {
    await gate;
    return write(batch);
  };
  const rt = await open(store);
  rt.load('tasks.store.set("a", 1)');
  const first = rt.commit();
  await new Promise((resolve) => setImmediate(resolve)); // the write has begun
  expect(store.batches.length).toBe(0);
  expect(rt.load('tasks.store.set("b", 2); return tasks.store.get("a"), tasks.store.keys("")')).toEqual([
    1,
    ['a', 'b'],
  ]);
  const second = rt.commit();
  release();
  await Promise.all([first, second]);
  expect(store.batches.map((b) => b.writes.map((w) => w.key))).toEqual([['a'], ['b']]);
  expect(rt.load('return tasks.store.get("a"), tasks.store.get("b")')).toEqual([1, 2]);
});

test('a tasks.state that cannot persist fails the COMMIT and keeps the writes for the next one', async () => {
  const store = memoryV2Store();
  const rt = await open(store);
  rt.load('tasks.store.set("k", 1); tasks.state.f = print');
  await expect(rt.commit()).rejects.toMatchObject({
    code: 'ERR_COMMIT_FAILED',
    message: /state\.f: cannot persist a function/,
  });
  expect(store.writes).toBe(0);
  rt.load('tasks.state.f = nil');
  await rt.commit();
  expect(store.batches[0].writes.map((w) => w.key)).toEqual(['k']);
});
