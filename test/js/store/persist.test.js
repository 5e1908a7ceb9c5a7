// SPDX-License-Identifier: MIT
// COMMIT and persistent state: restore, values, errors at the yield, the lock.
'use strict';
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { Runtime } = require('../../..');
const { makeRuntime, sleep } = require('../helpers');

let dir;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lua-tasks-test-'));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

test('state committed by a task is restored by Runtime.open with the same name', async () => {
  const a = await Runtime.open({ name: 'game', store: dir });
  a.load(`function save()
    local s = tasks.state
    s.players = { { name = "ann", score = 1.5 }, { name = "bob", score = 2 } }
    s.shared = s.players[1]
    s.bytes = "\\0\\255"
    s.cycle = s
    local r, x, y = coroutine.yield("COMMIT", "extra", 42)
    return { r, x, y }
  end`);
  expect(await a.call('save')).toEqual(['COMMIT', 'extra', 42]);
  a.closeSync();
  const b = await Runtime.open({ name: 'game', store: dir });
  expect(
    b.load(`local s = tasks.state
    return s.players[2].name, math.type(s.players[2].score), math.type(s.players[1].score),
           rawequal(s.shared, s.players[1]), rawequal(s.cycle, s), #s.bytes`),
  ).toEqual(['bob', 'integer', 'float', true, true, 2]);
  b.closeSync();
  const c = await Runtime.open({ name: 'other', store: dir });
  expect(c.load('return next(tasks.state)')).toEqual([null]);
  c.closeSync();
});

test('rt.commit() saves from JS, and a store object receives the bytes', async () => {
  const saved = new Map();
  const store = {
    load: async (name) => saved.get(name) || null,
    save: async (name, bytes) => {
      saved.set(name, Buffer.from(bytes));
    },
  };
  const a = await Runtime.open({ name: 'x', store });
  a.load('tasks.state.v = 7');
  await a.commit();
  expect(saved.get('x')).toBeInstanceOf(Buffer);
  a.closeSync();
  const b = await Runtime.open({ name: 'x', store });
  expect(b.load('return tasks.state.v')).toEqual([7]);
  b.closeSync();
});

test('a function in the state fails the COMMIT at its yield, naming its path', async () => {
  const rt = await Runtime.open({ name: 'bad', store: dir });
  rt.load(`function t()
    tasks.state.players = { {}, {}, { onHit = function() end } }
    local ok, err = pcall(coroutine.yield, "COMMIT")
    return err.message
  end`);
  expect(await rt.call('t')).toMatch(/state\.players\[3\]\.onHit: cannot persist a function/);
  await expect(rt.commit()).rejects.toMatchObject({ code: 'ERR_COMMIT_FAILED' });
  rt.closeSync();
});

test('a store that rejects fails the COMMIT with ERR_COMMIT_FAILED and the runtime goes on', async () => {
  const store = {
    load: async () => null,
    save: async () => {
      throw new Error('disk full');
    },
  };
  const rt = await Runtime.open({ name: 'y', store });
  rt.load('function t() coroutine.yield("COMMIT") end');
  await expect(rt.call('t')).rejects.toMatchObject({
    code: 'ERR_COMMIT_FAILED',
    message: expect.stringMatching(/disk full/),
  });
  expect(rt.load('return 1')).toEqual([1]);
  rt.closeSync();
});

test('other tasks run while a COMMIT is being written; the committer continues once it is durable', async () => {
  let release;
  const store = {
    load: async () => null,
    save: () =>
      new Promise((r) => {
        release = r;
      }),
  };
  const rt = await Runtime.open({ name: 'z', store });
  const order = [];
  rt.set('note', (s) => {
    order.push(s);
  });
  rt.load(`function committer() note("commit") coroutine.yield("COMMIT") note("after commit") end
           function other() note("other") end
           function ticker() coroutine.yield() note("tick") end`);
  const c = rt.start('committer');
  rt.start('ticker');
  rt.start('other');
  await sleep(20);
  // The snapshot was taken at the COMMIT; the write's I/O holds no lock.
  expect(order).toEqual(['commit', 'other', 'tick']);
  release();
  await c.result;
  expect(order).toEqual(['commit', 'other', 'tick', 'after commit']);
  rt.closeSync();
});

test('without a store COMMIT raises at the yield and rt.commit() rejects', async () => {
  const rt = makeRuntime();
  rt.load('function t() local ok, e = pcall(coroutine.yield, "COMMIT") return tostring(e) end');
  expect(await rt.call('t')).toMatch(/COMMIT failed: this runtime has no store/);
  await expect(rt.commit()).rejects.toMatchObject({ code: 'ERR_COMMIT_FAILED' });
  expect(() => new Runtime({ name: 'n', store: dir })).toThrow(/Runtime\.open/);
});

test('a corrupt or foreign snapshot is refused with ERR_STORE_CORRUPT', async () => {
  fs.writeFileSync(path.join(dir, 'junk.state'), 'not a snapshot');
  await expect(Runtime.open({ name: 'junk', store: dir })).rejects.toMatchObject({
    code: 'ERR_STORE_CORRUPT',
    message: expect.stringMatching(/bad magic/),
  });
  await expect(Runtime.open({ name: '../etc', store: dir })).rejects.toMatchObject({ code: 'ERR_INVALID_ARG_VALUE' });
});

test('examples/persistent-counter.js keeps counting across restarts', () => {
  const ex = path.join(__dirname, '..', '..', '..', 'examples', 'persistent-counter.js');
  const one = execFileSync(process.execPath, [ex, dir, '2'], { encoding: 'utf8' });
  const two = execFileSync(process.execPath, [ex, dir, '3'], { encoding: 'utf8' });
  expect(one).toMatch(/count was 0, now 2/);
  expect(two).toMatch(/count was 2, now 5/);
});

// Crashes, ownership, draining close, corruption and faults: store-directory.test.js
// (the store conformance suite) and directory-store.test.js.
