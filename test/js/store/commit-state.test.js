// SPDX-License-Identifier: MIT
// A batch carries the tasks.state snapshot only when it differs from the one the store confirmed last.
'use strict';
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { Runtime, DirectoryStore } = require('../../..');
const { closeAfterTest, delegatingStore } = require('../helpers');

let dir;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lua-tasks-test-'));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

// A directory store that keeps every batch handed to write(). `landThenFail`
// makes the next writes land and still reject, as a write whose connection
// broke during its COMMIT does.
function recording() {
  const inner = new DirectoryStore(dir);
  const store = delegatingStore(inner, {
    batches: [],
    landThenFail: 0,
    async write(batch) {
      store.batches.push(batch);
      await inner.write(batch);
      if (store.landThenFail > 0) {
        store.landThenFail--;
        throw Object.assign(new Error('connection lost during COMMIT'), { transient: false });
      }
    },
  });
  return store;
}

const states = (store) => store.batches.map((b) => (b.state === null ? null : 'state'));

async function open(store) {
  return closeAfterTest(await Runtime.open({ name: 'game', store }));
}

test('a COMMIT that changed tasks.state writes it; one that did not writes none (one that changed nothing, no batch), and a reopen reads the last', async () => {
  const store = recording();
  const rt = await open(store);
  rt.load('tasks.state.round = 1');
  await rt.commit();
  await rt.commit();
  rt.load('tasks.state.round = 2');
  await rt.commit();
  rt.load('tasks.store.set("k", 1)');
  await rt.commit();
  expect(states(store)).toEqual(['state', 'state', null]);
  expect(store.batches[2].writes.map((w) => w.key)).toEqual(['k']);
  await rt.close();
  const again = await open(store);
  expect(again.load('return tasks.state.round, tasks.store.get("k")')).toEqual([2, 1]);
});

test('the steps and COMMITs of a durable task that leaves tasks.state alone write its records and no snapshot', async () => {
  const store = recording();
  const rt = await open(store);
  rt.load(`function work(n)
    local sum = 0
    for i = 1, n do
      sum = sum + tasks.step(function() return i end)
      coroutine.yield("COMMIT")
    end
    return sum
  end`);
  await rt.commit();
  const first = store.batches.length;
  expect(await rt.spawn('work', { durable: true, args: [5] }).result).toBe(15);
  await rt.commit();
  const later = store.batches.slice(first);
  expect(later.length).toBeGreaterThanOrEqual(5);
  expect(later.every((b) => b.state === null)).toBe(true);
  expect(later.some((b) => b.writes.some((w) => w.space === 2))).toBe(true);
});

test('after a write that failed the next batch carries the snapshot, unchanged or not: the failed one may have landed', async () => {
  const store = recording();
  const rt = await open(store);
  rt.load('tasks.state.v = 1');
  await rt.commit();
  store.landThenFail = 1;
  rt.load('tasks.state.v = 2');
  await expect(rt.commit()).rejects.toMatchObject({ code: 'ERR_COMMIT_FAILED' });
  rt.load('tasks.state.v = 1'); // the same bytes as the snapshot confirmed before the failure
  await rt.commit();
  expect(states(store)).toEqual(['state', 'state', 'state']);
  await rt.close();
  const again = await open(store);
  expect(again.load('return tasks.state.v')).toEqual([1]);
});

test('a store that keeps only whole snapshots gets one at every COMMIT', async () => {
  const inner = recording();
  const saves = [];
  const store = {
    load: (name) => inner.load(name),
    async save(name, bytes, info) {
      saves.push(bytes.length);
      await inner.save(name, bytes, info);
    },
  };
  const rt = closeAfterTest(await Runtime.open({ name: 'v1', store }));
  rt.load('tasks.state.v = 1');
  await rt.commit();
  await rt.commit();
  expect(saves.length).toBe(2);
});
