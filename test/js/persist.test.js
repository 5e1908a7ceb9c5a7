// SPDX-License-Identifier: MIT
// COMMIT and persistent state: restore, durability, errors, the lock, crash safety.
'use strict';
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn, execFileSync } = require('node:child_process');
const { Runtime } = require('../..');

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
  expect(b.load(`local s = tasks.state
    return s.players[2].name, math.type(s.players[2].score), math.type(s.players[1].score),
           rawequal(s.shared, s.players[1]), rawequal(s.cycle, s), #s.bytes`)).toEqual(['bob', 'integer', 'float', true, true, 2]);
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
  const store = { load: async () => null, save: async () => { throw new Error('disk full'); } };
  const rt = await Runtime.open({ name: 'y', store });
  rt.load('function t() coroutine.yield("COMMIT") end');
  await expect(rt.call('t')).rejects.toMatchObject({ code: 'ERR_COMMIT_FAILED', message: expect.stringMatching(/disk full/) });
  expect(rt.load('return 1')).toEqual([1]);
  rt.closeSync();
});

test('no other task runs while a COMMIT is being written', async () => {
  let release;
  const store = { load: async () => null, save: () => new Promise((r) => { release = r; }) };
  const rt = await Runtime.open({ name: 'z', store });
  const order = [];
  rt.set('note', (s) => { order.push(s); });
  rt.load(`function committer() note("commit") coroutine.yield("COMMIT") note("after commit") end
           function other() note("other") end
           function ticker() coroutine.yield() note("tick") end`);
  const c = rt.start('committer');
  rt.start('ticker');
  rt.start('other');
  await new Promise((r) => setTimeout(r, 20));
  expect(order).toEqual(['commit']);
  release();
  await c.result;
  await new Promise((r) => setTimeout(r, 5));
  // At the unlock the starts it held back run (the ticker to its yield),
  // then the committer continues from the ready queue, ahead of the tick
  // queued after it.
  expect(order).toEqual(['commit', 'other', 'after commit', 'tick']);
  rt.closeSync();
});

test('without a store COMMIT raises at the yield and rt.commit() rejects', async () => {
  const rt = new Runtime();
  rt.load('function t() local ok, e = pcall(coroutine.yield, "COMMIT") return e end');
  expect(await rt.call('t')).toMatch(/COMMIT failed: this runtime has no store/);
  await expect(rt.commit()).rejects.toMatchObject({ code: 'ERR_COMMIT_FAILED' });
  expect(() => new Runtime({ name: 'n', store: dir })).toThrow(/Runtime\.open/);
  rt.closeSync();
});

test('a corrupt or foreign snapshot is refused with ERR_STORE_CORRUPT', async () => {
  fs.writeFileSync(path.join(dir, 'junk.state'), 'not a snapshot');
  await expect(Runtime.open({ name: 'junk', store: dir })).rejects.toMatchObject({
    code: 'ERR_STORE_CORRUPT', message: expect.stringMatching(/bad magic/) });
  await expect(Runtime.open({ name: '../etc', store: dir })).rejects.toMatchObject({ code: 'ERR_INVALID_ARG_VALUE' });
});

test('examples/persistent-counter.js keeps counting across restarts', () => {
  const ex = path.join(__dirname, '..', '..', 'examples', 'persistent-counter.js');
  const one = execFileSync(process.execPath, [ex, dir, '2'], { encoding: 'utf8' });
  const two = execFileSync(process.execPath, [ex, dir, '3'], { encoding: 'utf8' });
  expect(one).toMatch(/count was 0, now 2/);
  expect(two).toMatch(/count was 2, now 5/);
});

test('SIGKILL at random moments never leaves a torn or lost snapshot', async () => {
  const child = path.join(__dirname, 'fixtures', 'commit-loop.js');
  let last = 0;
  const kills = Number(process.env.LUA_TASKS_CRASH_KILLS || 200);
  for (let i = 0; i < kills; i++) {
    const p = spawn(process.execPath, [child, dir], { stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise((resolve) => p.stdout.once('data', resolve));
    await new Promise((r) => setTimeout(r, Math.random() * 30));
    p.kill('SIGKILL');
    await new Promise((r) => p.once('exit', r));
    const rt = await Runtime.open({ name: 'crash', store: dir });
    const [n, count, lastN, selfOk] = rt.load(`local s = tasks.state
      if not s.n then return 0, 0, 0, true end
      return s.n, #s.items, s.last.n, rawequal(s.last.self, s)`);
    rt.closeSync();
    expect(count).toBe(n); // complete: every item of the snapshot is there
    expect(lastN).toBe(n);
    expect(selfOk).toBe(true);
    expect(n).toBeGreaterThanOrEqual(last); // never lost: at least the last one seen
    last = n;
  }
  expect(last).toBeGreaterThan(0);
}, 180000);

test('a second Runtime.open of a name that is open is refused with ERR_STORE_LOCKED until the first is closed', async () => {
  // Both used to open, and each lost the other's acknowledged commits (issue 19).
  // Two stores writing one name at once: directory-store.test.js.
  const a = await Runtime.open({ name: 'same', store: dir });
  await expect(Runtime.open({ name: 'same', store: dir })).rejects.toMatchObject({
    code: 'ERR_STORE_LOCKED',
    holder: { pid: process.pid },
    message: expect.stringMatching(/^Runtime "same" is already open in this process/),
  });
  a.load('tasks.state.who = "a"');
  await a.commit();
  await a.close();
  const b = await Runtime.open({ name: 'same', store: dir });
  expect(b.load('return tasks.state.who')).toEqual(['a']);
  await b.close();
  expect(fs.readdirSync(dir).filter((f) => f.startsWith('same.')).sort()).toEqual(['same.lock', 'same.state']);
});
