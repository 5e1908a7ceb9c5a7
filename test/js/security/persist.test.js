// SPDX-License-Identifier: MIT
// Bytes a script makes the runtime persist are bounded: encoded close to their
// size in Lua, refused at the call past a limit, decoded under memoryLimit,
// and the work stops when the thread must (docs/security.md#persistence-routes).
// Each block names the finding it keeps closed.
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { Worker } = require('node:worker_threads');
const { Runtime, DirectoryStore, Resources } = require('../../..');
const { root, tempDirs } = require('../helpers');

const tempDir = tempDirs('lua-tasks-persist-');

// Bytes the store directory holds (the database and its WAL).
function dirBytes(dir) {
  let n = 0;
  for (const f of fs.readdirSync(dir, { recursive: true })) {
    const st = fs.statSync(path.join(dir, f));
    if (st.isFile()) n += st.size;
  }
  return n;
}

// One 64 KiB string in 16,000 slots: ~250 KiB of Lua memory.
const REPEATED = `
  local s = string.rep("x", 65536)
  big = {}
  for i = 1, 16000 do big[i] = s end
`;

async function caught(promise) {
  try {
    await promise;
  } catch (e) {
    return e;
  }
  throw new Error('expected a rejection');
}

describe('encoded size stays close to Lua size, on every route that encodes', () => {
  const limits = { memoryLimit: 8 << 20, taskTimeout: 200 };

  test('tasks.store.set of one string in 16,000 slots (finding 1)', async () => {
    const dir = tempDir();
    const rt = await Runtime.open({ name: 'a', store: dir, ...limits });
    rt.load(REPEATED);
    rt.load('function put() tasks.store.set("k", big) coroutine.yield("COMMIT") return #tasks.store.get("k") end');
    expect(await rt.start('put').result).toBe(16000);
    await rt.close();
    expect(dirBytes(dir)).toBeLessThan(4 << 20);
  });

  test('tasks.state of the same table commits small and opens again under the same limit (finding 2)', async () => {
    const dir = tempDir();
    const rt = await Runtime.open({ name: 'a', store: dir, ...limits });
    rt.load(REPEATED);
    rt.load('function keep() tasks.state.big = big coroutine.yield("COMMIT") end');
    await rt.start('keep').result;
    await rt.close();
    expect(dirBytes(dir)).toBeLessThan(4 << 20);
    const again = await Runtime.open({ name: 'a', store: dir, ...limits });
    expect(again.load('return #tasks.state.big, #tasks.state.big[16000]')).toEqual([16000, 65536]);
    await again.close();
  });

  test('a durable step result, a message, an end record and start arguments', async () => {
    const dir = tempDir();
    const rt = await Runtime.open({
      name: 'a',
      store: dir,
      ...limits,
      setup: (r) =>
        r.load(`${REPEATED}
          function durable(arg)
            local got = tasks.step(function() return big end)
            local msg = tasks.receive()
            return #got + #msg + #arg
          end
          function sender(id) tasks.send(id, big) end`),
    });
    const task = rt.spawn('durable', { durable: true, args: [Array(16000).fill('y'.repeat(100))] });
    await new Promise((r) => setTimeout(r, 20));
    await rt.start('sender', task.id).result;
    expect(await task.result).toBe(48000);
    await rt.close();
    expect(dirBytes(dir)).toBeLessThan(8 << 20);
  });
});

describe('decoding runs under memoryLimit and never bricks a name', () => {
  test('a saved state too large for memoryLimit fails the open clearly, and a larger limit opens it (finding 2)', async () => {
    const dir = tempDir();
    const rt = await Runtime.open({ name: 'n', store: dir });
    rt.load('for i = 1, 100000 do tasks.state[i] = "distinct " .. i end');
    await rt.commit();
    await rt.close();
    const err = await caught(Runtime.open({ name: 'n', store: dir, memoryLimit: 2 << 20 }));
    expect(err.code).toBe('ERR_MEMORY_LIMIT');
    expect(err.message).toMatch(/runtime "n"/);
    expect(err.message).toMatch(/larger memoryLimit/);
    const big = await Runtime.open({ name: 'n', store: dir, memoryLimit: 64 << 20 });
    expect(big.load('return tasks.state[100000]')).toEqual(['distinct 100000']);
    await big.close();
  });

  test('tasks.store.get refuses a value past memoryLimit while decoding, not after (finding 7)', async () => {
    const dir = tempDir();
    const writer = await Runtime.open({ name: 'g', store: dir });
    writer.load('local t = {} for i = 1, 400000 do t[i] = "distinct value " .. i end tasks.store.set("big", t)');
    await writer.commit();
    await writer.close();
    const limit = 16 << 20;
    const rt = await Runtime.open({ name: 'g', store: dir, memoryLimit: limit });
    const [ok, msg] = rt.load('return pcall(tasks.store.get, "big")');
    expect(ok).toBe(false);
    expect(msg).toMatch(/not enough memory: tasks\.store\.get\("big"\)/);
    expect(msg).toMatch(/memoryLimit/);
    expect(rt.stats().memoryPeak).toBeLessThan(limit + (2 << 20));
    expect(rt.load('return 1 + 1')).toEqual([2]); // usable
    await rt.close();
  });
});

describe('limits are refused at the Lua call, alone (ERR_STORE_LIMIT)', () => {
  // A directory store that declares the limits a PostgreSQL store has.
  function strictStore(dir, limits) {
    const store = new DirectoryStore(dir);
    Object.defineProperty(store, 'limits', { value: limits });
    return store;
  }

  test('a key with a NUL byte, on a store that forbids it, and later COMMITs land (finding 3)', async () => {
    const dir = tempDir();
    const rt = await Runtime.open({ name: 'k', store: strictStore(dir, { keyForbidsNul: true }) });
    rt.load(`function bad()
      local ok, err = pcall(tasks.store.set, "a\\0b", 1)
      tasks.store.set("fine", 2)
      coroutine.yield("COMMIT")
      return { ok, err.code, tostring(err) }
    end`);
    const [ok, code, msg] = await rt.start('bad').result;
    expect(ok).toBe(false);
    expect(code).toBe('ERR_STORE_LIMIT');
    expect(msg).toMatch(/holds a NUL byte/);
    rt.load('tasks.store.set("later", 3)');
    await rt.commit();
    await rt.close();
    const again = await Runtime.open({ name: 'k', store: dir });
    expect(again.load('return tasks.store.get("fine"), tasks.store.get("later")')).toEqual([2, 3]);
    await again.close();
  });

  test('a value past the store maximum is refused at set; the runtime commits on (finding 4)', async () => {
    const dir = tempDir();
    const rt = await Runtime.open({ name: 'v', store: strictStore(dir, { maxValueBytes: 1 << 20 }) });
    rt.load(`function bad()
      local ok, err = pcall(tasks.store.set, "huge", string.rep("z", 2 << 20))
      tasks.store.set("small", "ok")
      coroutine.yield("COMMIT")
      return { ok, err.code, tostring(err) }
    end`);
    const [ok, code, msg] = await rt.start('bad').result;
    expect(ok).toBe(false);
    expect(code).toBe('ERR_STORE_LIMIT');
    expect(msg).toMatch(/store\["huge"\]: encodes to more than 1048576 bytes/);
    expect(msg).toMatch(/maxValueBytes limit is 1 MiB/);
    expect(rt.load('return tasks.store.get("small"), tasks.store.get("huge")')).toEqual(['ok', null]);
    await rt.close();
  });

  test('maxPendingBytes bounds writes waiting for a COMMIT; a COMMIT frees the room', async () => {
    const dir = tempDir();
    const rt = await Runtime.open({ name: 'p', store: dir, maxPendingBytes: 1 << 20 });
    rt.load(`function fill()
      local chunk = string.rep("p", 300000)
      local n, err = 0
      while true do
        local ok, e = pcall(tasks.store.set, "k" .. n, chunk .. n)
        if not ok then err = e break end
        n = n + 1
      end
      coroutine.yield("COMMIT")
      tasks.store.set("after", chunk)
      return { n, err.code, tostring(err) }
    end`);
    const [n, code, msg] = await rt.start('fill').result;
    expect(n).toBe(3);
    expect(code).toBe('ERR_STORE_LIMIT');
    expect(msg).toMatch(/maxPendingBytes limit is 1 MiB/);
    expect(msg).toMatch(/COMMIT/);
    await rt.close();
  });

  test("a durable child's arguments are bounded by maxValueBytes, and its starts by the parent's journal", async () => {
    const dir = tempDir();
    const rt = await Runtime.open({
      name: 'c',
      store: dir,
      memoryLimit: 8 << 20,
      maxValueBytes: 1 << 20,
      maxJournalBytes: 64 << 10,
      taskTimeout: 2000,
      setup: (r) =>
        r.load(`
          function kid(x) return #x end
          function large() return tasks.start(kid, string.rep("a", 2 << 20)) end
          function many() for i = 1, 1000000 do tasks.start(kid, "x") end end`),
    });
    const big = await caught(rt.spawn('large', { durable: true }).result);
    expect(big.code).toBe('ERR_STORE_LIMIT');
    expect(big.message).toMatch(/tasks\.start: its arguments .*maxValueBytes/);
    // Each start is a record of the parent's: its journal's bound ends the loop.
    const many = await caught(rt.spawn('many', { durable: true }).result);
    expect(many.code).toBe('ERR_STORE_LIMIT');
    expect(many.message).toMatch(/maxJournalBytes limit is 64 KiB/);
    await rt.close();
  });

  test('a durable journal is bounded: patch names and step results (finding 5)', async () => {
    const dir = tempDir();
    const rt = await Runtime.open({
      name: 'j',
      store: dir,
      memoryLimit: 8 << 20,
      taskTimeout: 1000,
      setup: (r) =>
        r.load(`
          function patches()
            local name = string.rep("n", 1 << 20)
            for i = 1, 300 do tasks.patched(name .. i) end
          end
          function steps()
            for i = 1, 500 do tasks.step(function() return string.rep("s", 1 << 20) .. i end) end
          end`),
    });
    for (const entry of ['patches', 'steps']) {
      const err = await caught(rt.spawn(entry, { durable: true }).result);
      expect(err.code).toBe('ERR_STORE_LIMIT');
      expect(err.message).toMatch(/maxJournalBytes limit is 8 MiB/);
      expect(err.message).toMatch(/continue_as_new/);
    }
    await rt.close();
    expect(dirBytes(dir)).toBeLessThan(32 << 20);
  });

  test('bad limit options say what was wrong', () => {
    expect(() => new Runtime({ maxValueBytes: 0 })).toThrow(
      /"options.maxValueBytes" option must be an integer number of bytes from 1 to 2\^30/,
    );
    expect(() => new Runtime({ maxJournalBytes: 'lots' })).toThrow(/options.maxJournalBytes/);
    expect(() => new Runtime({ maxValueBytes: 2 ** 31 })).toThrow(/from 1 to 2\^30/);
  });
});

// Every Lua call that encodes, decodes or writes (docs/security.md#persistence-routes),
// spun on: `body` runs in a durable task when `durable`, else from JS; with
// `resources`, the runtime is given resources holding an echo resource at "c";
// `waits`: each call waits for another runtime, so the loop spends little
// CPU and taskTimeout is not what ends it (as for any loop of awaited JS
// calls): what it may persist is, the durable journal's maxJournalBytes
// (durable), and for a `counted` call maxResources or maxPaths (any task).
const SPINNERS = [
  ['tasks.store.set', 'while true do tasks.store.set("k", big) end'],
  ['tasks.store.get', 'while true do tasks.store.get("k") end'],
  ['tasks.store.delete', 'while true do tasks.store.delete("k") end'],
  ['tasks.store.keys', 'while true do tasks.store.keys("") end'],
  ['tasks.step', 'while true do tasks.step(function() return big end) end', true],
  ['tasks.step with a name', 'while true do tasks.step("s", function() return big end) end', true],
  ['tasks.patched', 'local i = 0 while true do i = i + 1 tasks.patched("p" .. i) end', true],
  ['tasks.send to a durable task', 'local me = tasks.current_id() while true do pcall(tasks.send, me, big) end', true],
  ['os.time, math.random (journaled reads)', 'while true do os.time() math.random() end', true],
  ['tasks.start in a durable task (a durable child)', 'while true do tasks.start("type", big) end', true],
  // The resources' calls (docs/resources.md): each waits for its answer, in
  // a task. `counted`: an ephemeral loop of it is ended by maxResources or maxPaths.
  ['index.list', 'local ix = require("index") while true do ix.list("*") end', true, true, true],
  [
    'resource.invoke_path',
    'local r = require("resource") while true do r.invoke_path("c", "echo", big) end',
    true,
    true,
    true,
  ],
  [
    'resource.invoke',
    'local r = require("resource") local id = require("index").list("c").c while true do r.invoke(id, "echo", big) end',
    true,
    true,
    true,
  ],
  [
    'resource.create',
    'local r = require("resource") local i = 0 while true do i = i + 1 r.create("echo", "x/" .. i, i) end',
    true,
    true,
    true,
    'counted',
  ],
  [
    'resource.create with a large argument',
    'local r = require("resource") local i = 0 while true do i = i + 1 r.create("echo", "x/" .. i, big) end',
    true,
    true,
    true,
  ],
  [
    'resource.create and resource.destroy',
    'local r = require("resource") local i = 0 while true do i = i + 1 r.destroy((r.create("echo", "d/" .. i))) end',
    true,
    true,
    true,
  ],
  [
    'index.link_path',
    'local ix = require("index") local i = 0 while true do i = i + 1 ix.link_path("c", "a/" .. i) end',
    true,
    true,
    true,
    'counted',
  ],
  [
    'index.link',
    'local ix = require("index") local id = ix.list("c").c local i = 0 while true do i = i + 1 ix.link(id, "l/" .. i) end',
    true,
    true,
    true,
    'counted',
  ],
  [
    'tasks.resume by the address of a task of a resource',
    'while true do tasks.resume("t0-0000000000001@lua-tasks.r.0", big) end',
    true,
    true,
    true,
  ],
  [
    'index.link_path and index.unlink',
    'local ix = require("index") while true do ix.link_path("c", "u") ix.unlink("u") end',
    true,
    true,
    true,
  ],
];

// The modules of the resources a spinner is given.
const ECHO = { echo: 'return { echo = function(v) return v end }' };

// The runtime's setup: the repeated table, and a committed value to get.
const SETUP = `${REPEATED}
  tasks.store.set("k", big)
`;

function spin(rt, body, durable) {
  if (durable) {
    rt.load(`function spin() ${body} end`);
    return rt.spawn('spin', { durable: true }).result;
  }
  return Promise.resolve().then(() => rt.load(body));
}

describe('native work on Lua behalf stops', () => {
  // A Worker that opens a runtime on a store, commits `big`, then spins.
  function persistWorker(dir, body, durable, resources = false) {
    const code = `
      const { Runtime, Resources } = require(${JSON.stringify(root)});
      const { parentPort } = require('node:worker_threads');
      (async () => {
        const res = ${resources} ? await Resources.open(${JSON.stringify(dir)}, { modules: ${JSON.stringify(ECHO)} }) : undefined;
        if (res) await res.create('echo', 'c');
        const rt = await Runtime.open({ name: 'w', store: ${JSON.stringify(dir)}, resources: res });
        rt.load(${JSON.stringify(SETUP)});
        await rt.commit();
        parentPort.postMessage('go');
        ${durable ? `rt.load(${JSON.stringify(`function spin() ${body} end`)}); rt.spawn('spin', { durable: true });` : `rt.load(${JSON.stringify(body)});`}
        parentPort.postMessage('returned');
      })();
    `;
    return new Worker(code, { eval: true });
  }

  for (const [name, body, durable, resources, waits, counted] of SPINNERS) {
    test(`a Worker spinning on ${name} with no limits terminates (finding 6)`, async () => {
      const w = persistWorker(tempDir(), body, durable, resources);
      await new Promise((resolve, reject) => {
        w.on('error', reject);
        w.on('message', (m) => (m === 'go' ? resolve() : reject(new Error(`the worker said ${m}`))));
      });
      await new Promise((r) => setTimeout(r, 150));
      const t0 = Date.now();
      await w.terminate();
      expect(Date.now() - t0).toBeLessThan(3000); // the contract: about 0.2 s
    });

    // A durable loop journals a record a turn: its journal's bound may end
    // it first (a small one here keeps the store's work short: ending the
    // task deletes every record, and a sanitizer build writes slowly).
    if (waits) {
      test(`a loop of ${name} ends at its bound of persisted bytes`, async () => {
        const dir = tempDir();
        const res = await Resources.open(dir, { modules: ECHO, maxResources: 20, maxPaths: 20 });
        await res.create('echo', 'c');
        const rt = await Runtime.open({ name: 't', store: dir, maxJournalBytes: 16 << 10, resources: res });
        rt.load(SETUP);
        await rt.commit();
        rt.load(`function spin() ${body} end`);
        // The journal refuses the record of a call's outcome: the call raises why.
        expect((await caught(rt.spawn('spin', { durable: true }).result)).message).toMatch(
          /maxJournalBytes|maxResources|maxPaths|memoryLimit|not enough memory/,
        );
        if (counted) {
          const err = await caught(rt.spawn('spin').result);
          expect(err.code).toBe('ERR_STORE_LIMIT');
          expect(err.message).toMatch(/maxResources|maxPaths/);
        }
        await rt.close();
        await res.close();
      });
      continue;
    }
    test(`taskTimeout holds through a loop of ${name} (finding 1)`, async () => {
      const dir = tempDir();
      const res = resources ? await Resources.open(dir, { modules: ECHO }) : undefined;
      if (res) await res.create('echo', 'c');
      const rt = await Runtime.open({
        name: 't',
        store: dir,
        taskTimeout: 200,
        maxJournalBytes: 256 << 10,
        resources: res,
      });
      rt.load(SETUP);
      await rt.commit();
      const err = await caught(spin(rt, body, durable));
      expect(durable ? ['ERR_TASK_TIMEOUT', 'ERR_STORE_LIMIT'] : ['ERR_TASK_TIMEOUT']).toContain(err.code);
      await rt.close();
      if (res) await res.close();
    });
  }
});
