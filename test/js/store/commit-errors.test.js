// SPDX-License-Identifier: MIT
// What COMMIT and Runtime.open say when a store fails, and how long a store may hold the lock.
'use strict';
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { Runtime, StoreError } = require('../../..');

function memoryStore(extra) {
  const saved = new Map();
  return {
    saved,
    load: async (name) => saved.get(name) || null,
    save: async (name, bytes) => {
      saved.set(name, Buffer.from(bytes));
    },
    ...extra,
  };
}

describe('a save that fails says what happened', () => {
  test.each([
    ['an Error', new Error('disk on fire'), /disk on fire/],
    ['a string', 'quota exceeded', /quota exceeded/],
    ['a plain object', { code: 'EFAIL', detail: 42 }, /EFAIL.*42/],
    ['a number', 42, /: 42\./],
    ['undefined', undefined, /: undefined\./],
  ])('a rejection with %s is rendered in the message, with the previous snapshot intact', async (_, reason, re) => {
    const store = memoryStore({ save: () => Promise.reject(reason) });
    const rt = await Runtime.open({ name: 'r', store });
    const err = await rt.commit().then(
      () => null,
      (e) => e,
    );
    expect(err).toMatchObject({ code: 'ERR_COMMIT_FAILED' });
    expect(err.message).toMatch(re);
    expect(err.message).toMatch(/previous snapshot is intact/);
    expect(err.cause).toBe(reason);
    await rt.close();
  });

  test('a failure after the new snapshot is in place says so, not "intact"', async () => {
    const store = memoryStore({
      save: () => Promise.reject(Object.assign(new Error('EIO: fsync of the directory failed'), { replaced: true })),
    });
    const rt = await Runtime.open({ name: 'r', store });
    rt.load('function t() local ok, e = pcall(coroutine.yield, "COMMIT") return e.message end');
    const message = await rt.call('t');
    expect(message).toMatch(/new snapshot of "r" is in place/);
    expect(message).toMatch(/not survive a crash/);
    expect(message).not.toMatch(/intact/);
    await expect(rt.commit()).rejects.toMatchObject({ code: 'ERR_COMMIT_FAILED', replaced: true });
    await rt.close();
  });
});

describe('Runtime.open names the runtime and where its state is', () => {
  let dir;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lua-tasks-errors-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  test('a file that is not a snapshot: ERR_STORE_CORRUPT with the runtime and the file', async () => {
    fs.writeFileSync(path.join(dir, 'junk.state'), 'not a snapshot');
    const err = await Runtime.open({ name: 'junk', store: dir }).then(
      () => null,
      (e) => e,
    );
    expect(err).toBeInstanceOf(StoreError);
    expect(err.code).toBe('ERR_STORE_CORRUPT');
    expect(err.message).toContain('"junk"');
    expect(err.message).toContain(path.join(dir, 'junk.state'));
  });

  test("a truncated snapshot of a custom store: ERR_STORE_CORRUPT naming the store's load", async () => {
    const store = memoryStore();
    const a = await Runtime.open({ name: 'cut', store });
    a.load('tasks.state.v = string.rep("x", 100)');
    await a.commit();
    await a.close();
    store.saved.set('cut', store.saved.get('cut').subarray(0, 50));
    const err = await Runtime.open({ name: 'cut', store }).then(
      () => null,
      (e) => e,
    );
    expect(err).toMatchObject({ code: 'ERR_STORE_CORRUPT' });
    expect(err.message).toMatch(/"cut".*load\("cut"\)/);
  });

  test('a load that rejects: ERR_COMMIT_FAILED with the runtime, the file and the reason', async () => {
    fs.mkdirSync(path.join(dir, 'dirname.state')); // reading a directory fails with EISDIR
    const err = await Runtime.open({ name: 'dirname', store: dir }).then(
      () => null,
      (e) => e,
    );
    expect(err).toMatchObject({ code: 'ERR_COMMIT_FAILED' });
    expect(err.message).toContain('"dirname"');
    expect(err.message).toContain(path.join(dir, 'dirname.state'));
    expect(err.message).toMatch(/EISDIR/);
  });

  test('a load that resolves to something else than bytes is refused', async () => {
    const store = memoryStore({ load: async () => 'text' });
    await expect(Runtime.open({ name: 'x', store })).rejects.toMatchObject({
      code: 'ERR_STORE_CORRUPT',
      message: expect.stringMatching(/Buffer or null/),
    });
  });
});

describe('storeTimeout', () => {
  test('"30" is refused with ERR_INVALID_ARG_TYPE', async () => {
    await expect(Runtime.open({ name: 'x', store: memoryStore(), storeTimeout: '30' })).rejects.toMatchObject({
      code: 'ERR_INVALID_ARG_TYPE',
    });
  });

  test.each([[-1], [Infinity], [2 ** 31]])('%p is refused with ERR_OUT_OF_RANGE', async (v) => {
    await expect(Runtime.open({ name: 'x', store: memoryStore(), storeTimeout: v })).rejects.toMatchObject({
      code: 'ERR_OUT_OF_RANGE',
    });
  });

  test('an acquire that never answers fails the open with ERR_STORE_TIMEOUT', async () => {
    const store = memoryStore({ acquire: () => new Promise(() => {}) });
    const err = await Runtime.open({ name: 'x', store, storeTimeout: 50 }).then(
      () => null,
      (e) => e,
    );
    expect(err).toMatchObject({ code: 'ERR_STORE_TIMEOUT' });
    expect(err.message).toMatch(/acquire\("x"\).*50 ms.*storeTimeout/);
  });

  test('a hung save fails its COMMIT after storeTimeout, and the other tasks run meanwhile', async () => {
    let hang = true;
    const inner = memoryStore();
    const store = { ...inner, save: (n, b) => (hang ? new Promise(() => {}) : inner.save(n, b)) };
    const rt = await Runtime.open({ name: 'slow', store, storeTimeout: 400 });
    const woke = [];
    rt.set('woke', (n) => {
      woke.push(n);
    });
    rt.load(`function committer() local ok, e = pcall(coroutine.yield, "COMMIT") return ok, e.code end
             function sleeper() for i = 1, 3 do tasks.sleep(0.01) woke(i) end end`);
    const s = rt.start('sleeper');
    const c = rt.start('committer');
    let settled = false;
    c.result.finally(() => {
      settled = true;
    });
    await s.result; // the save hangs, but it holds no lock: the sleeper's timers run
    expect(woke).toEqual([1, 2, 3]);
    expect(settled).toBe(false);
    expect(await c.result).toBe(false);
    hang = false;
    rt.load('tasks.state.v = 1');
    await rt.commit(); // usable
    expect(inner.saved.has('slow')).toBe(true);
    await rt.close();
  });
});
