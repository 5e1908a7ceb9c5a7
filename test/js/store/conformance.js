// SPDX-License-Identifier: MIT
// The store conformance suite: what every store must guarantee (docs/design.md, Persistence).
//
// A store's test file calls describeStore(adapter) once. The adapter:
//   label                    the store's name in test titles
//   setup() -> ctx           a fresh, empty place to store in (a directory, a schema)
//   teardown(ctx)
//   store(ctx)               the `store` option for Runtime.open
//   child(ctx) -> { module, spec }
//                            how a child process opens the same store: `module`
//                            exports (spec) => the store option
//   corrupt(ctx, name, fn)   replaces the saved bytes of `name` with fn(bytes)
//   leftovers(ctx, name)     anything a failed or killed save left behind ([] if none)
//   faults                   [{ label, inject(ctx) -> undo() }]: each makes the
//                            store's next saves fail at one of its steps
//   kills                    how many SIGKILLs the kill test makes (default 200)
//   outages                  [{ label, hold(ctx) -> Promise<{ end() -> Promise<number> }> }]:
//                            hold() makes the store's writes wait from when it resolves;
//                            end() waits for one to wait, ends the store's connections
//                            (that write's among them: the number ended) and lets the
//                            writes go; for a store that has connections
//   serverRestart            { setup() -> { store, hold() -> { lock(), restart(mode) }, teardown() } }:
//                            a store on a server of the test's own; hold() resolves
//                            ready to make its writes wait: lock() does, at once;
//                            restart(mode) waits for a write to wait, restarts the
//                            server (mode 'fast': sessions ended, a clean stop;
//                            'immediate': a crash) and lets the writes go
'use strict';

const path = require('node:path');
const { spawn } = require('node:child_process');
const { Runtime } = require('../../..');
const { sleep } = require('../helpers');
const { SPACES, SPACE_LIST } = require('../../../lib/store/contract');

const CHILD = path.join(__dirname, '..', 'fixtures', 'store-child.js');

/** Starts the child fixture in `mode`; resolves with it once it printed its first line. */
function startChild(adapter, ctx, name, mode) {
  const { module, spec } = adapter.child(ctx);
  const p = spawn(process.execPath, [CHILD, mode, name, module, JSON.stringify(spec)], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines = [];
  let err = '';
  p.stderr.on('data', (d) => {
    err += d;
  });
  let buffered = '';
  const first = new Promise((resolve, reject) => {
    p.stdout.on('data', (d) => {
      buffered += d;
      const parts = buffered.split('\n');
      buffered = parts.pop();
      for (const line of parts) lines.push(line);
      if (lines.length > 0) resolve();
    });
    p.once('exit', (code) => reject(new Error(`child exited (${code}) before it was ready: ${err}`)));
  });
  const exited = new Promise((resolve) => p.once('exit', resolve));
  return first.then(() => ({ p, lines, exited, stderr: () => err }));
}

function describeStore(adapter) {
  describe(`store conformance: ${adapter.label}`, () => {
    let ctx;
    beforeEach(async () => {
      ctx = undefined;
      ctx = await adapter.setup();
    });
    afterEach(async () => {
      // A setup that failed has its own error; a teardown of nothing adds none.
      if (ctx) await adapter.teardown(ctx);
    });
    const open = (name, extra) => Runtime.open({ name, store: adapter.store(ctx), ...extra });

    // The batch format of lib/store/contract.js: every store takes and refuses the same batches.
    describe('the batch format', () => {
      const key = (i) => `k${i}`;
      const bytes = (s) => Buffer.from(s);
      let store;
      let lease;
      beforeEach(async () => {
        store = await storeObject(adapter.store(ctx));
        lease = await store.acquire('format');
      });
      afterEach(async () => {
        await lease.release();
      });
      const write = (extra) => store.write({ name: 'format', token: lease.token, ...extra });

      // (Values are read back as keys: a store may check what a value holds.)
      test("it keeps the contract's spaces, and each space is its own", async () => {
        expect(store.spaces).toEqual([...SPACE_LIST]);
        await write({ writes: SPACE_LIST.map((space) => ({ space, key: `s${space}`, value: bytes('v') })) });
        // (scan of space 1 is left out: a store may check its values as snapshots)
        for (const space of [SPACES.journal, SPACES.inbox, SPACES.index]) {
          const { keys, values } = await store.scan('format', space, '', -1);
          expect(keys).toEqual([`s${space}`]);
          expect(values.map(String)).toEqual(['v']);
        }
        const r = store.reader('format');
        expect(r.keys('s', '', -1, SPACES.store)).toEqual([`s${SPACES.store}`]);
        await write({ writes: [{ key: 'default', value: bytes('d') }] });
        expect(r.keys('d', '', -1, SPACES.store)).toEqual(['default']);
      });

      test('scan pages through a space in byte order, after a key, at most limit', async () => {
        const keys = ['t/2', 't/10', 't/1', '\u00e9', 'u'];
        await write({ writes: keys.map((key) => ({ space: SPACES.journal, key, value: bytes(key) })) });
        const sorted = [...keys].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y)));
        const page1 = await store.scan('format', SPACES.journal, '', 2);
        expect(page1.keys).toEqual(sorted.slice(0, 2));
        const page2 = await store.scan('format', SPACES.journal, page1.keys[1], 10);
        expect(page2.keys).toEqual(sorted.slice(2));
        expect(page2.values.map(String)).toEqual(sorted.slice(2));
        expect((await store.scan('format', SPACES.inbox, '', 10)).keys).toEqual([]);
        await expect(store.scan('format', 5, '', 10)).rejects.toMatchObject({
          code: 'ERR_INVALID_ARG_VALUE',
          message: expect.stringContaining('Received number 5'),
        });
        await expect(store.scan('format', SPACES.journal, 7, 10)).rejects.toMatchObject({
          code: 'ERR_INVALID_ARG_TYPE',
          message: expect.stringContaining('"after"'),
        });
        await expect(store.scan('format', SPACES.journal, '', 1.5)).rejects.toMatchObject({
          code: 'ERR_INVALID_ARG_VALUE',
          message: expect.stringContaining('Received number 1.5'),
        });
        expect((await store.scan('format', SPACES.journal)).keys).toEqual(sorted); // defaults: from the first, every key
      });

      test('names() lists the names it holds by pattern, in byte order, a page at a time, without a lease', async () => {
        const names = ['player-2', 'player-10', 'player-1', 'guild.a', 'player_x'];
        const held = await store.names(); // 'format' (its lease), and what the adapter's setup made
        expect(held).toContain('format');
        for (const name of names) {
          await store.write({ name, writes: [{ space: SPACES.journal, key: 'k', value: bytes('v') }] });
        }
        await store.write({ name: 'snap-only', state: bytes('s') });
        const all = [...names, ...held, 'snap-only'].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y)));
        expect(await store.names()).toEqual(all); // every name, held or not
        expect(await store.names('player-*')).toEqual(['player-1', 'player-10', 'player-2']);
        expect(await store.names('*_*')).toEqual(['player_x']); // "_" is a character, not a wildcard
        expect(await store.names('*.*')).toEqual(['guild.a']);
        expect(await store.names('player-1')).toEqual(['player-1']);
        expect(await store.names('player-*', '', 2)).toEqual(['player-1', 'player-10']);
        expect(await store.names('player-*', 'player-10', 2)).toEqual(['player-2']);
        for (const pattern of ['', 'a b', 'x?', '%', 5]) {
          await expect(store.names(pattern)).rejects.toMatchObject({
            code: 'ERR_INVALID_ARG_VALUE',
            message: expect.stringContaining('names() pattern'),
          });
        }
        await expect(store.names('*', 3)).rejects.toMatchObject({ code: 'ERR_INVALID_ARG_TYPE' });
        await expect(store.names('*', '', 0)).rejects.toMatchObject({ code: 'ERR_OUT_OF_RANGE' });
      });

      test.each([0, 5, -1, 1.5, '1', null])(
        'a write naming space %p is refused: ERR_INVALID_ARG_VALUE',
        async (space) => {
          await expect(write({ writes: [{ space, key: key(1), value: bytes('x') }] })).rejects.toMatchObject({
            code: 'ERR_INVALID_ARG_VALUE',
            message: expect.stringContaining('spaces 1 (tasks.store), 2'),
          });
          expect(store.reader('format').keys()).toEqual([]);
        },
      );

      test('a state of null or undefined is no snapshot; the batch lands', async () => {
        await write({ state: bytes('snap') });
        await write({ state: null, writes: [{ key: key(1), value: bytes('a') }] });
        await write({ state: undefined, writes: [{ key: key(2), value: bytes('b') }] });
        await write({ writes: [{ key: key(3), value: bytes('c') }] });
        expect(await store.load('format')).toEqual(bytes('snap'));
        expect(store.reader('format').keys('k')).toEqual([key(1), key(2), key(3)]);
      });

      test('null deletes a key; undefined or a string is refused: ERR_INVALID_ARG_TYPE naming what came', async () => {
        await write({ writes: [{ key: key(1), value: bytes('a') }] });
        await write({ writes: [{ key: key(1), value: null }] });
        expect(store.reader('format').keys()).toEqual([]);
        await expect(write({ writes: [{ key: key(1), value: undefined }] })).rejects.toMatchObject({
          code: 'ERR_INVALID_ARG_TYPE',
          message: expect.stringContaining('or null to delete it. Received undefined.'),
        });
        await expect(write({ writes: [{ key: key(1), value: 'a' }] })).rejects.toMatchObject({
          code: 'ERR_INVALID_ARG_TYPE',
          message: expect.stringContaining('Received the string "a"'),
        });
      });

      test('a batch of the wrong type says what it received, as Node does', async () => {
        await expect(store.write(null)).rejects.toMatchObject({
          code: 'ERR_INVALID_ARG_TYPE',
          message: expect.stringContaining('Received null.'),
        });
        await expect(write({ writes: {} })).rejects.toMatchObject({
          code: 'ERR_INVALID_ARG_TYPE',
          message: expect.stringContaining('Received an object.'),
        });
        await expect(write({ state: [1] })).rejects.toMatchObject({
          code: 'ERR_INVALID_ARG_TYPE',
          message: expect.stringContaining('Received an array.'),
        });
        await expect(write({ writes: [{ key: '', value: null }] })).rejects.toMatchObject({
          code: 'ERR_INVALID_ARG_TYPE',
        });
        await expect(store.write({ name: 'format', token: 0 })).rejects.toMatchObject({ code: 'ERR_INVALID_ARG_TYPE' });
        await expect(write({ seq: NaN })).rejects.toMatchObject({ code: 'ERR_INVALID_ARG_TYPE' });
        await expect(store.write({ name: '../x' })).rejects.toMatchObject({ code: 'ERR_INVALID_ARG_VALUE' });
        await expect(store.save('format', 'x', { token: lease.token })).rejects.toMatchObject({
          code: 'ERR_INVALID_ARG_TYPE',
          message: expect.stringContaining('Received the string "x"'),
        });
        await expect(store.save('format', bytes('x'), 5)).rejects.toMatchObject({
          code: 'ERR_INVALID_ARG_TYPE',
          message: expect.stringContaining('Received number 5'),
        });
      });
    });

    test('a committed state comes back whole: types, shared tables, cycles, bytes', async () => {
      const a = await open('whole');
      a.load(`local s = tasks.state
        s.players = { { name = "ann", score = 1.5 }, { name = "bob", score = 2 } }
        s.shared = s.players[1]
        s.cycle = s
        s.bytes = "\\0\\255"
        s.f = 1.0`);
      await a.commit();
      await a.close();
      const b = await open('whole');
      expect(
        b.load(`local s = tasks.state
        return s.players[2].name, math.type(s.players[2].score), math.type(s.f), rawequal(s.shared, s.players[1]),
          rawequal(s.cycle, s), #s.bytes`),
      ).toEqual(['bob', 'integer', 'float', true, true, 2]);
      await b.close();
    });

    describe('close() drains', () => {
      test('an rt.commit() not awaited lands before close() resolves, and a later owner is never overwritten', async () => {
        const a = await open('drain');
        a.load('tasks.state.blob = string.rep("x", 4 << 20) tasks.state.who = "a"');
        const pending = a.commit();
        await a.close();
        await expect(pending).resolves.toBeUndefined();
        const b = await open('drain');
        expect(b.load('return tasks.state.who')).toEqual(['a']);
        b.load('tasks.state.who = "b" tasks.state.blob = nil');
        await b.commit();
        await sleep(300); // a late write of the closed runtime would land here
        await b.close();
        const c = await open('drain');
        expect(c.load('return tasks.state.who, tasks.state.blob')).toEqual(['b', null]);
        await c.close();
      });

      test('a task that yielded COMMIT just before close() is written, and its result says so', async () => {
        const a = await open('drain-task');
        a.load(`function save(v) tasks.state.v = v coroutine.yield("COMMIT") return "after" end`);
        const t = a.start('save', 42);
        await a.close();
        const err = await t.result.then(
          () => null,
          (e) => e,
        );
        // Either it went on after its COMMIT (done), or close() cancelled it
        // after the write: then the error says the snapshot was written.
        if (err) expect(err).toMatchObject({ code: 'ERR_TASK_CANCELLED', committed: true });
        const b = await open('drain-task');
        expect(b.load('return tasks.state.v')).toEqual([42]);
        await b.close();
      });

      test('closeSync() during a write: the task is told whether its snapshot was written, and the name stays owned until it is', async () => {
        const a = await open('sync-close');
        a.load(`function save() tasks.state.v = 7 coroutine.yield("COMMIT") end`);
        const t = a.start('save');
        a.closeSync();
        const err = await t.result.then(
          () => null,
          (e) => e,
        );
        expect(err).toMatchObject({ code: 'ERR_TASK_CANCELLED' });
        expect(typeof err.committed).toBe('boolean');
        // Once the outcome is known the name is free again, and the state
        // is exactly what the outcome said.
        // (Its lease is let go just after, asynchronously: on a loaded
        // machine that may take a while; the bound guards against a hang.)
        let b;
        for (const end = Date.now() + 15000; !b && Date.now() < end;) {
          b = await open('sync-close').catch((e) => {
            if (e.code !== 'ERR_STORE_LOCKED') throw e;
            return sleep(20).then(() => undefined);
          });
        }
        expect(b.load('return tasks.state.v')).toEqual([err.committed ? 7 : null]);
        await b.close();
      });

      test('after close(), commit() rejects with ERR_RUNTIME_CLOSED and close() is idempotent', async () => {
        const a = await open('closed');
        await a.close();
        await expect(a.commit()).rejects.toMatchObject({ code: 'ERR_RUNTIME_CLOSED' });
        await expect(a.close()).resolves.toBeUndefined();
      });
    });

    describe('one owner per name', () => {
      test('a second open in this process fails with ERR_STORE_LOCKED naming the holder, and works after close()', async () => {
        const a = await open('owned');
        const err = await open('owned').then(
          () => null,
          (e) => e,
        );
        expect(err).toMatchObject({ code: 'ERR_STORE_LOCKED' });
        expect(err.message).toMatch(/owned/);
        expect(err.message).toMatch(/this process/);
        expect(err.holder).toMatchObject({ pid: process.pid });
        await a.close();
        const b = await open('owned');
        await b.close();
      });

      test('another name in the same store is free', async () => {
        const a = await open('one');
        const b = await open('two');
        await Promise.all([a.close(), b.close()]);
      });

      test('a name held by another process fails with its pid; SIGKILL frees it', async () => {
        const child = await startChild(adapter, ctx, 'held', 'hold');
        try {
          const err = await open('held').then(
            () => null,
            (e) => e,
          );
          expect(err).toMatchObject({ code: 'ERR_STORE_LOCKED', holder: { pid: child.p.pid } });
          expect(err.message).toContain(String(child.p.pid));
        } finally {
          child.p.kill('SIGKILL');
          await child.exited;
        }
        const b = await open('held');
        await b.close();
      });

      test('a failed open (corrupt snapshot) leaves the name free', async () => {
        const a = await open('bad-open');
        a.load('tasks.state.v = 1');
        await a.commit();
        await a.close();
        await adapter.corrupt(ctx, 'bad-open', (b) =>
          Buffer.concat([b.subarray(0, b.length - 1), Buffer.from([b[b.length - 1] ^ 1])]),
        );
        await expect(open('bad-open')).rejects.toMatchObject({ code: 'ERR_STORE_CORRUPT' });
        await expect(open('bad-open')).rejects.toMatchObject({ code: 'ERR_STORE_CORRUPT' }); // not ERR_STORE_LOCKED
      });
    });

    test('every single-bit corruption of a snapshot is refused with ERR_STORE_CORRUPT naming the runtime', async () => {
      const a = await open('bits');
      a.load('tasks.state.v = { 1, 2.5, "three", { x = true } } tasks.state.v[5] = tasks.state.v');
      await a.commit();
      await a.close();
      let original;
      await adapter.corrupt(ctx, 'bits', (b) => {
        original = Buffer.from(b);
        return b;
      });
      // Every bit of a small snapshot (a few dozen bytes).
      expect(original.length).toBeLessThan(200);
      for (let bit = 0; bit < original.length * 8; bit++) {
        await adapter.corrupt(ctx, 'bits', () => {
          const c = Buffer.from(original);
          c[bit >> 3] ^= 1 << (bit & 7);
          return c;
        });
        const err = await open('bits').then(
          (rt) => rt.close().then(() => null),
          (e) => e,
        );
        if (!err || err.code !== 'ERR_STORE_CORRUPT' || !err.message.includes('"bits"')) {
          throw new Error(`bit ${bit} flipped: ${err ? `${err.code}: ${err.message}` : 'loaded without an error'}`);
        }
      }
    }, 60000);

    describe('a store that does not answer', () => {
      test('a save that never settles fails the COMMIT after storeTimeout, and the runtime stays usable', async () => {
        const inner = adapter.store(ctx);
        const a = await Runtime.open({ name: 'hang', store: inner, storeTimeout: 100 });
        a.load('tasks.state.v = 1');
        await a.commit();
        await a.close();
        const hung = hangingSave(await storeObject(inner));
        const b = await Runtime.open({ name: 'hang', store: hung, storeTimeout: 100 });
        b.load(`function t() tasks.state.v = 2 local ok, e = pcall(coroutine.yield, "COMMIT") return ok, e.code end`);
        expect(await b.call('t')).toBe(false);
        await expect(b.commit()).rejects.toMatchObject({
          code: 'ERR_COMMIT_FAILED',
          cause: { code: 'ERR_STORE_TIMEOUT' },
        });
        expect(b.load('return tasks.state.v')).toEqual([2]);
        await b.close();
      });

      test('a load that never settles fails the open with ERR_STORE_TIMEOUT and frees the name', async () => {
        const inner = await storeObject(adapter.store(ctx));
        const hung = { ...bind(inner), load: () => new Promise(() => {}) };
        await expect(Runtime.open({ name: 'hang-load', store: hung, storeTimeout: 100 })).rejects.toMatchObject({
          code: 'ERR_STORE_TIMEOUT',
        });
        const b = await open('hang-load');
        await b.close();
      });
    });

    test('100 concurrent rt.commit() calls share a few writes (group commit), each acknowledged', async () => {
      const inner = await storeObject(adapter.store(ctx));
      let saves = 0;
      const counting = {
        ...bind(inner),
        save: (...args) => {
          saves++;
          return inner.save(...args);
        },
      };
      const a = await Runtime.open({ name: 'group', store: counting });
      const all = [];
      for (let i = 1; i <= 100; i++) {
        a.load(`tasks.state.v = ${i}`);
        all.push(a.commit());
      }
      await Promise.all(all);
      expect(saves).toBeLessThanOrEqual(3);
      await a.close();
      const b = await open('group');
      expect(b.load('return tasks.state.v')).toEqual([100]);
      await b.close();
    });

    for (const fault of adapter.faults || []) {
      test(`a save failing at ${fault.label}: ERR_COMMIT_FAILED, the runtime goes on, nothing left behind`, async () => {
        const a = await open('fault');
        a.load('tasks.state.v = 1');
        await a.commit();
        const undo = await fault.inject(ctx);
        let err;
        try {
          a.load('tasks.state.v = 2');
          err = await a.commit().then(
            () => null,
            (e) => e,
          );
        } finally {
          await undo();
        }
        expect(err).toMatchObject({ code: 'ERR_COMMIT_FAILED' });
        expect(await adapter.leftovers(ctx, 'fault')).toEqual([]);
        await a.commit(); // usable: the next one lands
        await a.close();
        const b = await open('fault');
        expect(b.load('return tasks.state.v')).toEqual([2]);
        await b.close();
      });
    }

    for (const outage of adapter.outages || []) {
      test(`${outage.label}: no crash, a durable task's COMMITs wait and land, an ephemeral COMMIT fails clearly, the runtime goes on`, async () => {
        const a = await open('outage');
        a.load(`function work(n)
            for i = 1, n do
              tasks.step(function() tasks.store.set("k" .. i, i) end)
              coroutine.yield("COMMIT")
            end
            return n
          end`);
        const health = [];
        a.on('storehealth', (e) => health.push(e.ok));
        // The writes wait from before the task's first: the outage meets
        // one in flight however fast the task would have been.
        const first = await outage.hold(ctx);
        const durable = a.spawn('work', { durable: true, args: [30] }).result;
        const ended = await first.end();
        expect(ended).toBeGreaterThan(0);
        expect(await durable).toBe(30);
        // The outage was told, then its end.
        expect(health).toEqual([false, true]);
        // An ephemeral COMMIT meets the next outage: it fails, and says so.
        const next = await outage.hold(ctx);
        const ephemeral = a.spawn('work', { args: [30] }).result.then(
          () => null,
          (e) => e,
        );
        await next.end();
        const err = await ephemeral;
        expect(err).toMatchObject({ code: 'ERR_COMMIT_FAILED' });
        await a.commit(); // usable: the next one lands
        await a.close();
        const b = await open('outage');
        expect(b.load('local n = 0; for i = 1, 30 do n = n + (tasks.store.get("k" .. i) or 0) end; return n')).toEqual([
          465,
        ]);
        await b.close();
      });
    }

    if (adapter.serverRestart) {
      test("a server restart, then a crash of the server, during durable COMMITs: no crash, every durable task's COMMITs wait and land once", async () => {
        const server = await adapter.serverRestart.setup();
        try {
          const a = await Runtime.open({ name: 'restart', store: server.store });
          let effects = 0;
          let atEffect = () => {};
          a.set('effect', () => {
            effects++;
            atEffect();
          });
          a.load(`function work(id, n)
              for i = 1, n do
                tasks.step(function() effect(); tasks.store.set(id .. "/" .. i, i) end)
                coroutine.yield("COMMIT")
              end
              return n
            end`);
          const health = [];
          a.on('storehealth', (e) => health.push(e.ok));
          let hold = await server.hold();
          const ids = ['a', 'b', 'c'];
          const results = ids.map((id) => a.spawn('work', { durable: true, args: [id, 200] }).result);
          const finished = Promise.all(results);
          // Each while a COMMIT is in flight: the second once some COMMITs
          // landed after the first. The writes are made to wait from the
          // step that saw 20 more effects (no loop turn after it), so the
          // tasks, with hundreds of steps to go, are still committing.
          for (const mode of ['fast', 'immediate']) {
            hold ??= await server.hold();
            const at = effects + 20;
            const locked = new Promise((resolve) => {
              atEffect = () => {
                if (effects < at) return;
                atEffect = () => {};
                resolve(hold.lock());
              };
            });
            await Promise.race([locked, finished]);
            expect(effects).toBeLessThan(600);
            await hold.restart(mode);
            hold = null;
          }
          expect(await Promise.all(results)).toEqual([200, 200, 200]);
          expect(effects).toBe(600); // each step once: no task failed and ran again
          // Each outage was told, and its end.
          expect(health.filter((ok) => !ok).length).toBeGreaterThanOrEqual(2);
          expect(health[health.length - 1]).toBe(true);
          await a.close();
          const b = await Runtime.open({ name: 'restart', store: server.store });
          expect(
            b.load(
              'local n = 0; for _, id in ipairs({ "a", "b", "c" }) do n = n + #tasks.store.keys(id .. "/") end; return n',
            ),
          ).toEqual([600]);
          await b.close();
        } finally {
          await server.teardown();
        }
      }, 120000);
    }

    test('code changed under durable tasks between a SIGKILL and a reopen: swapped steps and swapped JS calls fail the replay with ERR_NONDETERMINISM, the code they started with replays them', async () => {
      const { ORIGINAL, SWAPPED, TASKS } = require('../fixtures/replay-identity-lua');
      const child = await startChild(adapter, ctx, 'replay', 'durable-wait');
      try {
        for (const end = Date.now() + 30000; !child.lines.includes('ready');) {
          if (Date.now() > end) throw new Error(`the child never had its tasks waiting: ${child.stderr()}`);
          await sleep(10);
        }
      } finally {
        child.p.kill('SIGKILL');
        await child.exited;
      }
      const ids = new Map(child.lines.filter((l) => l.startsWith('waiting ')).map((l) => l.split(' ').slice(1)));
      const effects = child.lines.filter((l) => l.startsWith('effect ')).sort();
      // Each step and call ran once, before the wait.
      expect(effects).toEqual(TASKS.flatMap(([, , k]) => [`effect gold ${k}`, `effect mail ${k}`]).sort());
      let called = 0;
      const reopen = (source, errors) =>
        open('replay', {
          durableRestore: 'all', // every task replays at open, where a divergence shows
          setup: (rt) => {
            rt.set('gold', (k) => (called++, `gold ${k}`));
            rt.set('mail', (k) => (called++, `mail ${k}`));
            rt.on('taskerror', (t, e) => errors.push([t.id, e.code]));
            rt.load(source);
          },
        });

      // The swapped code: every task diverges at its first record, nothing runs again.
      const diverged = [];
      const swapped = await reopen(SWAPPED, diverged);
      await until(() => diverged.length >= TASKS.length, 'the replays to fail');
      await swapped.close();
      expect(diverged.sort()).toEqual(TASKS.map(([, key]) => [ids.get(key), 'ERR_NONDETERMINISM']).sort());
      expect(called).toBe(0);

      // The code they started with: each replays to its wait (its journal was
      // kept), finishes with the values recorded, and nothing runs again.
      const errors = [];
      const original = await reopen(ORIGINAL, errors);
      try {
        const results = [];
        for (const [entry, key, k] of TASKS) {
          const t = original.spawn(entry, { durable: true, key, args: [k] });
          expect(t.id).toBe(ids.get(key));
          await until(() => original.task(t.id)?.waiting?.instruction === 'INDEFINITELY', `${key} to wait again`);
          expect(original.resume(t.id, 'now')).toBe(true);
          results.push(await t.result);
        }
        expect(results).toEqual(TASKS.map(([, , k]) => `gold ${k},mail ${k},now`));
        expect(errors).toEqual([]);
        expect(called).toBe(0);
      } finally {
        await original.close();
      }
    }, 60000);

    test('SIGKILL at random moments: no acknowledged COMMIT lost, no snapshot torn, records and snapshot agree, nothing left behind', async () => {
      const kills = Number(process.env.LUA_TASKS_CRASH_KILLS || adapter.kills || 200);
      const probe = await storeObject(adapter.store(ctx));
      const keyed = typeof probe.write === 'function' && typeof probe.reader === 'function';
      let acked = 0;
      for (let i = 0; i < kills; i++) {
        const child = await startChild(adapter, ctx, 'crash', 'commit-loop');
        await sleep(Math.random() * 25);
        // The last kill comes after an acknowledgement if none came yet (a
        // slow machine, a sanitizer build), so the check below is never empty.
        if (i === kills - 1 && acked === 0) {
          const deadline = Date.now() + 30000;
          while (!child.lines.some((l) => l.startsWith('ack ')) && Date.now() < deadline) await sleep(5);
        }
        child.p.kill('SIGKILL');
        await child.exited;
        for (const line of child.lines) {
          const m = /^ack (\d+)$/.exec(line);
          if (m) acked = Math.max(acked, Number(m[1]));
        }
        const rt = await open('crash');
        const [n, count, lastN, selfOk] = rt.load(`local s = tasks.state
          if not s.n then return 0, 0, 0, true end
          return s.n, #s.items, s.last.n, rawequal(s.last.self, s)`);
        if (keyed) {
          // The records went in the same batches as the snapshot: they agree.
          const [last, records] = rt.load(`return tasks.store.get("last") or 0,
            #tasks.store.keys("item/", nil, 100000)`);
          expect(last).toBe(n);
          expect(records).toBe(n);
        }
        await rt.close();
        expect(count).toBe(n); // whole: every item of that snapshot is there
        expect(lastN).toBe(n);
        expect(selfOk).toBe(true);
        expect(n).toBeGreaterThanOrEqual(acked); // nothing acknowledged is lost
        expect(await adapter.leftovers(ctx, 'crash')).toEqual([]);
      }
      expect(acked).toBeGreaterThan(0);
    }, 300000);
  });
}

// Resolves when pred() holds; fails naming what it waited for.
async function until(pred, what, ms = 20000) {
  for (const end = Date.now() + ms; !pred();) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

// The store option as an object (a directory path becomes its DirectoryStore).
async function storeObject(option) {
  if (typeof option !== 'string') return option;
  const { DirectoryStore } = require('../../..');
  return new DirectoryStore(option);
}

// The store's own methods, bound, so a wrapper can replace one and keep the rest.
function bind(store) {
  const out = {};
  for (const key of ['load', 'save', 'acquire', 'file', 'locate']) {
    if (typeof store[key] === 'function') out[key] = store[key].bind(store);
  }
  return out;
}

function hangingSave(store) {
  return { ...bind(store), save: () => new Promise(() => {}) };
}

module.exports = { describeStore };
