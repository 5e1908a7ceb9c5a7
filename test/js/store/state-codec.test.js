// SPDX-License-Identifier: MIT
// Snapshots through the addon: the checksum, slices across loop turns, and the consistency rule.
'use strict';
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const binding = require('../../../lib/binding');
const { DirectoryStore, Runtime } = require('../../..');
const { turn } = require('../helpers');

let dir;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lua-tasks-codec-'));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

// A NativeRuntime as lib/runtime/runtime.js makes one, with no-op listeners.
function native() {
  return new binding.NativeRuntime(
    { libs: 'safe', hasStore: true },
    () => {},
    () => {},
    {},
    () => {},
  );
}

// Enough pairs that a slice of 0 ms leaves most of the work (a clock read
// every 4,096 values), small enough to fill fast.
const BIG = `local s = { x = 1 }
  for i = 1, 60000 do s[i] = { name = "n" .. i, i * 0.5 } end
  tasks.state = s`;

// Runs snapshotStep until it hands over the bytes; returns them.
function finishSnapshot(rt) {
  for (;;) {
    const bytes = rt.snapshotStep(1);
    if (bytes !== undefined) return bytes;
  }
}

// tasks.state.x as restored from `bytes` into a fresh runtime.
function restoredX(bytes) {
  const other = native();
  other.restore(bytes);
  const [x, n] = other.load('return tasks.state.x, #tasks.state');
  other.close();
  expect(n).toBe(60000);
  return x;
}

// The directory store keeps snapshots in its database: they are read and
// replaced through the store (a save without a token is not fenced).
async function rewriteSnapshot(name, fn) {
  const store = new DirectoryStore(dir);
  await store.save(name, fn(await store.load(name)));
  await store.close();
}

function flipByte(bytes, at) {
  bytes[at] ^= 0x10;
  return bytes;
}

describe('the checksum', () => {
  test.each([
    ['in the magic', () => 1],
    ['in the version byte', () => 4],
    ['in the middle', (n) => n >> 1],
    ['in a value near the end', (n) => n - 6],
    ['in the checksum itself', (n) => n - 1],
  ])('a byte changed %s is refused with ERR_STORE_CORRUPT naming the runtime and the file', async (_, where) => {
    const a = await Runtime.open({ name: 'game', store: dir });
    a.load('tasks.state.players = { { name = "ann", score = 1.5 }, { name = "bob", score = 2 } }');
    await a.commit();
    a.closeSync();
    const file = new DirectoryStore(dir).file('game');
    await rewriteSnapshot('game', (bytes) => flipByte(bytes, where(bytes.length)));
    const err = await Runtime.open({ name: 'game', store: dir }).catch((e) => e);
    expect(err).toMatchObject({ code: 'ERR_STORE_CORRUPT' });
    expect(err.message).toContain('runtime "game"');
    expect(err.message).toContain(file);
  });

  test('a snapshot written by 0.1.0 (version 2, no checksum) still loads', async () => {
    const a = await Runtime.open({ name: 'old', store: dir });
    a.load('tasks.state.v = { 1, 2, "three" }');
    await a.commit();
    a.closeSync();
    await rewriteSnapshot('old', (v3) => {
      expect(v3.subarray(0, 5)).toEqual(Buffer.from('LTST\x04', 'latin1'));
      const v2 = Buffer.from(v3.subarray(0, v3.length - 4));
      v2[4] = 2;
      return v2;
    });
    const b = await Runtime.open({ name: 'old', store: dir });
    expect(b.load('return tasks.state.v[3], #tasks.state.v')).toEqual(['three', 3]);
    b.closeSync();
  });

  test("restore() and restoreStep() refuse damaged bytes with the codec's reason", () => {
    const a = native();
    a.load('tasks.state = { a = { 1, 2, 3 }, b = "text" }');
    const good = a.snapshot();
    a.close();
    const truncated = good.subarray(0, good.length - 1);
    const flipped = Buffer.from(good);
    flipped[8] ^= 1;
    const rt = native();
    for (const bad of [truncated, flipped, Buffer.from('nope')]) {
      expect(() => rt.restore(bad)).toThrow(expect.objectContaining({ code: 'ERR_STORE_CORRUPT' }));
      rt.restoreBegin(bad);
      expect(() => {
        while (!rt.restoreStep(1));
      }).toThrow(expect.objectContaining({ code: 'ERR_STORE_CORRUPT' }));
    }
    expect(() => rt.restore(flipped)).toThrow('corrupt state snapshot: checksum mismatch');
    expect(() => rt.restore(Buffer.from('nope'))).toThrow('not a lua-tasks state snapshot (bad magic)');
    rt.restore(good);
    expect(rt.load('return tasks.state.b')).toEqual(['text']);
    rt.close();
  });
});

describe('slices', () => {
  test('a sliced snapshot is the one-shot snapshot, and restores in slices', () => {
    const a = native();
    a.load(BIG);
    a.snapshotBegin();
    let steps = 1;
    let bytes;
    while ((bytes = a.snapshotStep(0)) === undefined) steps++;
    expect(steps).toBeGreaterThan(3);
    expect(Buffer.compare(bytes, a.snapshot())).toBe(0);
    a.close();
    const b = native();
    b.restoreBegin(bytes);
    steps = 1;
    while (!b.restoreStep(0)) steps++;
    expect(steps).toBeGreaterThan(3);
    expect(b.load('return #tasks.state, tasks.state[77].name, tasks.state.x')).toEqual([60000, 'n77', 1]);
    b.close();
  });

  test('one job of each kind at a time; a failed step ends its job', () => {
    const rt = native();
    expect(() => rt.snapshotStep(1)).toThrow(expect.objectContaining({ code: 'ERR_COMMIT_FAILED' }));
    rt.snapshotAbort(); // none: a no-op
    rt.load(BIG);
    rt.snapshotBegin();
    expect(() => rt.snapshotBegin()).toThrow(expect.objectContaining({ code: 'ERR_COMMIT_FAILED' }));
    rt.snapshotAbort();
    rt.snapshotBegin(); // again, after the abort
    finishSnapshot(rt);
    rt.load('tasks.state = { players = { {}, { onHit = function() end } } }');
    rt.snapshotBegin();
    expect(() => finishSnapshot(rt)).toThrow(
      expect.objectContaining({
        code: 'ERR_COMMIT_FAILED',
        message: 'COMMIT failed: state.players[2].onHit: cannot persist a function.',
      }),
    );
    expect(() => rt.snapshotStep(1)).toThrow(/No snapshot is in progress/);
    rt.close();
  });

  test('close() drops a snapshot or a restore in progress', () => {
    const a = native();
    a.load(BIG);
    a.snapshotBegin();
    expect(a.snapshotStep(0)).toBeUndefined();
    a.close();
    expect(() => a.snapshotStep(1)).toThrow(expect.objectContaining({ code: 'ERR_RUNTIME_CLOSED' }));
    a.snapshotAbort(); // closed: a no-op

    const src = native();
    src.load(BIG);
    const bytes = src.snapshot();
    src.close();
    const b = native();
    b.restoreBegin(bytes);
    expect(b.restoreStep(0)).toBe(false);
    b.close();
    expect(() => b.restoreStep(1)).toThrow(expect.objectContaining({ code: 'ERR_RUNTIME_CLOSED' }));
    global.gc?.();
  });

  test('a restore whose buffer is detached between slices is refused', () => {
    const src = native();
    src.load(BIG);
    const bytes = new Uint8Array(src.snapshot()); // an ArrayBuffer of its own, transferable
    src.close();
    const rt = native();
    rt.restoreBegin(bytes);
    expect(rt.restoreStep(0)).toBe(false);
    structuredClone(bytes.buffer, { transfer: [bytes.buffer] });
    expect(bytes.byteLength).toBe(0);
    expect(() => rt.restoreStep(1)).toThrow(
      expect.objectContaining({ code: 'ERR_STORE_CORRUPT', message: expect.stringMatching(/detached/) }),
    );
    expect(rt.load('return type(tasks.state), next(tasks.state)')).toEqual(['table', null]); // as it was
    rt.close();
  });
});

// While a snapshot is unfinished, whatever enters the runtime from JS first
// finishes it: the snapshot is the state at snapshotBegin, and the change
// lands after it.
describe('the consistency rule', () => {
  // A runtime with BIG as its state and a snapshot of it in progress; `ids`
  // names a task waiting (INDEFINITELY) to set x, and one whose <close> sets x.
  function inProgress() {
    const rt = native();
    rt.load(BIG);
    rt.load(`function setX(v) tasks.state.x = v end
      function waiter() local v = coroutine.yield("INDEFINITELY") tasks.state.x = v end
      function guarded()
        local guard <close> = setmetatable({}, { __close = function() tasks.state.x = 2 end })
        coroutine.yield("INDEFINITELY")
      end`);
    const id = (started) =>
      rt.idPrefix() +
      Math.floor(started / 4)
        .toString(36)
        .padStart(13, '0');
    const ids = { waiter: id(rt.start('waiter', [])), guarded: id(rt.start('guarded', [])) };
    rt.snapshotBegin();
    expect(rt.snapshotStep(0)).toBeUndefined(); // in progress
    return { rt, ids };
  }

  test.each([
    ['load', (rt) => rt.load('tasks.state.x = 2')],
    ['a call of a Lua function handle', (rt) => rt.load('return function() tasks.state.x = 2 end')[0]()],
    ['start of a task', (rt) => rt.start('setX', [2])],
    ['resume of a task', (rt, ids) => rt.resume(ids.waiter, [2])],
    ['cancel of a task (its <close> runs)', (rt, ids) => rt.cancel(ids.guarded)],
  ])('%s while a snapshot is in progress finishes it first: the change is not in it', (_, enter) => {
    const { rt, ids } = inProgress();
    enter(rt, ids);
    expect(rt.load('return tasks.state.x')).toEqual([2]);
    const bytes = rt.snapshotStep(0);
    expect(bytes).toBeInstanceOf(Buffer); // finished by the entry: no work left
    expect(restoredX(bytes)).toBe(1);
    rt.close();
  });

  test.each([
    ['get', (rt) => rt.get('setX')],
    ['set', (rt) => rt.set('y', 1)],
    ['isLoaded', (rt) => rt.isLoaded('string')],
    ['preload', (rt) => rt.preload('m', 'return 1')],
  ])('%s while a snapshot is in progress finishes it too', (_, enter) => {
    const { rt } = inProgress();
    enter(rt);
    expect(rt.snapshotStep(0)).toBeInstanceOf(Buffer);
    rt.close();
  });

  test('a promise a task awaits, settling while a snapshot is in progress, lands after it', async () => {
    const rt = native();
    rt.load(BIG);
    let resolve;
    rt.set(
      'later',
      () =>
        new Promise((r) => {
          resolve = r;
        }),
    );
    rt.load('function w() tasks.state.x = tasks.await(later()) end');
    rt.start('w', []);
    rt.snapshotBegin();
    expect(rt.snapshotStep(0)).toBeUndefined();
    resolve(2);
    await turn();
    expect(rt.load('return tasks.state.x')).toEqual([2]);
    expect(restoredX(finishSnapshot(rt))).toBe(1);
    rt.close();
  });

  test('a snapshot begun from JS that Lua called is taken at once', () => {
    const rt = native();
    rt.load(BIG);
    rt.set('begin', () => rt.snapshotBegin());
    rt.load('begin() tasks.state.x = 2'); // Lua goes on after begin(), entering nothing
    expect(restoredX(finishSnapshot(rt))).toBe(1);
    rt.close();
  });

  test('a restore in progress is finished by the next entry', () => {
    const src = native();
    src.load(BIG);
    const bytes = src.snapshot();
    src.close();
    const rt = native();
    rt.restoreBegin(bytes);
    expect(rt.restoreStep(0)).toBe(false);
    expect(rt.load('return #tasks.state, tasks.state.x')).toEqual([60000, 1]);
    expect(rt.restoreStep(0)).toBe(true);
    rt.close();
  });

  test('rt.commit() saves the state as of the call, not a change made while it encodes', async () => {
    const saved = [];
    const store = {
      load: async () => null,
      save: async (name, bytes) => {
        saved.push(Buffer.from(bytes));
      },
    };
    const rt = await Runtime.open({ name: 'c', store });
    rt.load(BIG);
    const commit = rt.commit();
    rt.load('tasks.state.x = 2');
    await commit;
    rt.closeSync();
    expect(saved).toHaveLength(1);
    expect(restoredX(saved[0])).toBe(1);
  });
});

// 50 MB: the loop runs between the slices of a COMMIT, rt.commit() and a
// restore. Asserted by behaviour (a timer fired meanwhile), not by how long.
test('a 50 MB state commits and restores while the loop keeps turning', async () => {
  const rt = await Runtime.open({ name: 'big', store: dir });
  rt.load(`local s = {}
    for i = 1, 500000 do s[i] = { name = "player" .. i, score = i * 1.5, level = i % 60, tags = { "a", "b" } } end
    tasks.state = s
    function c() coroutine.yield("COMMIT") return #tasks.state end`);
  const during = async (p) => {
    let ticks = 0;
    const t = setInterval(() => {
      ticks++;
    }, 1);
    const value = await p;
    clearInterval(t);
    return { value, ticks };
  };
  const task = await during(rt.call('c'));
  expect(task.value).toBe(500000);
  expect(task.ticks).toBeGreaterThan(0);
  const commit = await during(rt.commit());
  expect(commit.ticks).toBeGreaterThan(0);
  rt.closeSync();
  const stored = (f) => (fs.existsSync(path.join(dir, f)) ? fs.statSync(path.join(dir, f)).size : 0);
  expect(stored('lua-tasks.sqlite') + stored('lua-tasks.sqlite-wal')).toBeGreaterThan(50e6);
  const open = await during(Runtime.open({ name: 'big', store: dir }));
  expect(open.ticks).toBeGreaterThan(0);
  expect(open.value.load('return #tasks.state, tasks.state[500000].name')).toEqual([500000, 'player500000']);
  open.value.closeSync();
}, 120000);
