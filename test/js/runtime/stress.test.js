// SPDX-License-Identifier: MIT
// Stress: Workers terminated at random moments, 100,000 tasks under random operations, a dropped
// runtime full of waiting tasks. Assertions are about behaviour, never about time.
//
// Every random choice comes from one seeded PRNG: STRESS_SEED=<n> npx jest stress repeats a run
// (as far as the loop's timing allows); a failure names its seed.
'use strict';
const path = require('node:path');
const { Worker } = require('node:worker_threads');
const { Runtime } = require('../../..');
const { fixture, makeRuntime, runNode, expectCleanExit, sleep, turn } = require('../helpers');

const SEED = Number(process.env.STRESS_SEED) || (Date.now() % 2 ** 31) + 1;

// mulberry32: small, fast, good enough to pick operations.
function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

// Runs body(rng) and, if it fails, puts the seed in the failure.
function seeded(salt, body) {
  return async () => {
    const seed = (SEED + salt) >>> 0;
    try {
      await body(prng(seed));
    } catch (e) {
      console.error(`stress: failed with STRESS_SEED=${SEED}`);
      if (e && typeof e.message === 'string') e.message = `STRESS_SEED=${SEED}: ${e.message}`;
      throw e;
    }
  };
}

const entry = path.join(__dirname, '..', '..', '..');

describe('8 Workers with 1,000 tasks each, terminated at random moments', () => {
  // Sleepers loop on FOR, waiters on INDEFINITELY (resumed from the Worker's
  // JS), spinners on IMMEDIATE: the Worker's loop is never idle when it dies.
  const WORKER = `'use strict';
    const { Runtime } = require(${JSON.stringify(entry)});
    const { parentPort, workerData } = require('node:worker_threads');
    let seed = workerData;
    const rnd = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const rt = new Runtime({ print: () => {} });
    rt.load(\`
      function sleeper(ms) while true do coroutine.yield("FOR", ms, "MILLISECONDS") end end
      function waiter() local n = 0 while true do n = n + coroutine.yield("INDEFINITELY") end end
      function spinner() while true do coroutine.yield() end end
    \`);
    const waiters = [];
    for (let i = 0; i < 1000; i++) {
      if (i % 3 === 0) rt.start('sleeper', 1 + (i % 5));
      else if (i % 3 === 1) waiters.push(rt.start('waiter').id);
      else rt.start('spinner');
    }
    setInterval(() => {
      for (let k = 0; k < 20; k++) rt.resume(waiters[(rnd() * waiters.length) | 0], 1);
    }, 1);
    parentPort.postMessage(rt.stats().tasks);
  `;

  // Stops a Worker at one of four kinds of moment, at a random delay within it.
  function spawn(rng, moment) {
    const w = new Worker(WORKER, { eval: true, workerData: (rng() * 2 ** 31) | 0 });
    const seen = { errors: [], messages: [] };
    w.on('error', (e) => seen.errors.push(e));
    w.on('message', (m) => seen.messages.push(m));
    const exit = new Promise((resolve) => w.once('exit', resolve));
    let terminated;
    if (moment === 0) {
      terminated = w.terminate(); // before its thread began
    } else if (moment === 1) {
      terminated = new Promise((resolve) => w.once('online', () => resolve(w.terminate())));
    } else if (moment === 2) {
      const ms = rng() * 60; // anywhere from loading the addon to running the tasks
      terminated = new Promise((resolve) => setTimeout(() => resolve(w.terminate()), ms));
    } else {
      const ms = rng() * 30; // while its 1,000 tasks run
      terminated = new Promise((resolve) => w.once('message', () => setTimeout(() => resolve(w.terminate()), ms)));
    }
    return { exit, terminated, seen };
  }

  test(
    'no crash, every Worker exits, and a fresh Worker and the main thread still work',
    seeded(1, async (rng) => {
      for (let round = 0; round < 3; round++) {
        const workers = Array.from({ length: 8 }, (_, i) => spawn(rng, i % 4));
        const codes = await Promise.all(workers.map((w) => w.terminated));
        const exits = await Promise.all(workers.map((w) => w.exit));
        // terminate() resolves with the exit code: 1 for a Worker it stopped,
        // 0 for one stopped before its script began (Node's own behaviour).
        expect(codes).toEqual(exits);
        workers.forEach((w, i) => {
          expect(w.seen.errors).toEqual([]);
          expect([0, 1]).toContain(exits[i]);
          // One that got far enough to report had all its tasks, and was stopped.
          if (w.seen.messages.length > 0) {
            expect(w.seen.messages).toEqual([1000]);
            expect(exits[i]).toBe(1);
          }
        });
      }

      const fresh = new Worker(
        `
      const { Runtime } = require(${JSON.stringify(entry)});
      const { parentPort } = require('node:worker_threads');
      const rt = new Runtime();
      rt.set('twice', (x) => x * 2);
      rt.load('function f(n) coroutine.yield("FOR", 2, "MILLISECONDS") coroutine.yield() return twice(n) end');
      rt.call('f', 21).then((v) => { parentPort.postMessage(v); rt.closeSync(); });
    `,
        { eval: true },
      );
      const [msg, code] = await Promise.all([
        new Promise((resolve, reject) => {
          fresh.once('message', resolve);
          fresh.once('error', reject);
        }),
        new Promise((resolve) => fresh.once('exit', resolve)),
      ]);
      expect([msg, code]).toEqual([42, 0]);

      const rt = makeRuntime();
      rt.load('function f() coroutine.yield("FOR", 1, "MILLISECONDS") return "main ok" end');
      expect(await rt.call('f')).toBe('main ok');
    }),
    120000,
  );
});

describe('100,000 tasks under random operations', () => {
  const TOTAL = Number(process.env.STRESS_TASKS) || 100000;
  const LIVE = 2000; // JS-started tasks alive at once

  // A task follows its plan, one step per letter:
  //   i IMMEDIATE        f FOR 0-3 ms        w INDEFINITELY     s tasks.sleep
  //   a await a JS promise that resolves     p ... that rejects, under pcall
  //   r ... that rejects, unprotected: the task fails with that Error
  //   e error(): the task fails              n tasks.sleep inside a coroutine.wrap iterator
  //   c start a child that sleeps, join it   d start a child that waits, resume it, join it
  //   R tasks.resume another task            C tasks.cancel another task
  // A <close> variable reports the end of every task body, whatever ends it.
  const LUA = `
    local guard_mt = { __close = function(g) closed(g.key) end }
    children = { started = 0, ended = 0 }
    local child_mt = { __close = function() children.ended = children.ended + 1 end }

    local function sleepy_child(n)
      local guard <close> = setmetatable({}, child_mt)
      coroutine.yield("FOR", n % 3, "MILLISECONDS")
      return n * 2
    end
    local function waiting_child()
      local guard <close> = setmetatable({}, child_mt)
      local v = coroutine.yield("INDEFINITELY")
      coroutine.yield()
      return v
    end

    function job(key, plan)
      local guard <close> = setmetatable({ key = key }, guard_mt)
      local me = tasks.current_id()
      for i = 1, #plan do
        local step = plan:sub(i, i)
        if step == "i" then coroutine.yield()
        elseif step == "f" then coroutine.yield("FOR", i % 4, "MILLISECONDS")
        elseif step == "w" then coroutine.yield("INDEFINITELY")
        elseif step == "s" then tasks.sleep(0.001)
        elseif step == "a" then assert(later(true, key) == key)
        elseif step == "p" then
          local ok, err = pcall(later, false, key)
          assert(not ok and err.message == "rejected " .. key)  -- an error value reads its strings only
        elseif step == "r" then later(false, key)
        elseif step == "e" then error("planned failure " .. key)
        elseif step == "n" then
          local gen = coroutine.wrap(function() for j = 1, 2 do tasks.sleep(0) coroutine.yield(j) end end)
          assert(gen() == 1 and gen() == 2)
        elseif step == "c" then
          children.started = children.started + 1
          local child = tasks.start(sleepy_child, i)
          assert(tasks.wait(child) == i * 2)
        elseif step == "d" then
          children.started = children.started + 1
          local child = tasks.start(waiting_child)
          assert(tasks.resume(child, key))
          assert(tasks.wait(child) == key)
        elseif step == "R" then
          local other = pick(me)
          if other then tasks.resume(other, "from lua") end
        elseif step == "C" then
          local other = pick(me)
          if other and tasks.cancel(other) then cancelled_by_lua(other) end
        end
      end
      return "done " .. key
    end`;
  const STEPS = 'iiiffwwwsaaprennccdRC';

  test(
    'every result settles exactly once, as its plan and the operations say, and no task is left',
    seeded(2, async (rng) => {
      const rt = new Runtime({ print: () => {} });
      const records = new Map(); // key -> record
      const byId = new Map(); // task id -> record
      const live = []; // keys of JS-started tasks not yet settled
      const liveAt = new Map(); // key -> its index in live
      const closedCount = new Map();
      let settledCount = 0;

      const settleSoon = [(f) => queueMicrotask(f), (f) => setImmediate(f), (f) => setTimeout(f, (rng() * 3) | 0)];
      rt.set(
        'later',
        (ok, key) =>
          new Promise((resolve, reject) => {
            settleSoon[(rng() * settleSoon.length) | 0](() => {
              if (ok) resolve(key);
              else reject(Object.assign(new Error(`rejected ${key}`), { key }));
            });
          }),
      );
      // (A block body: returning the Map would convert it into Lua on every call.)
      rt.set('closed', (key) => {
        closedCount.set(key, (closedCount.get(key) || 0) + 1);
      });
      // Only waiting tasks: a cancel of a running one (on the C stack below the
      // caller) is deferred to its next yield, and is lost if it returns first.
      rt.set('pick', (me) => {
        for (let tries = 0; tries < 4 && live.length > 0; tries++) {
          const r = records.get(live[(rng() * live.length) | 0]);
          if (r.task.id === me) continue;
          const snap = rt.task(r.task.id);
          if (snap && snap.status === 'waiting') return r.task.id;
        }
        return undefined;
      });
      rt.set('cancelled_by_lua', (id) => {
        byId.get(id).cancelled = 'lua';
      });
      rt.load(LUA, { name: 'stress.lua' });

      function start(key) {
        let plan = '';
        for (let n = (rng() * 5) | 0; n > 0; n--) plan += STEPS[(rng() * STEPS.length) | 0];
        const ac = rng() < 0.05 ? new AbortController() : null;
        const args = ac ? [key, plan, ac.signal] : [key, plan];
        const r = { key, plan, ac, cancelled: null, settled: 0, outcome: null, task: null };
        records.set(key, r);
        r.task = rt.start('job', ...args);
        byId.set(r.task.id, r);
        liveAt.set(key, live.length);
        live.push(key);
        r.task.result
          .then(
            (v) => {
              r.settled++;
              r.outcome = ['done', v];
            },
            (e) => {
              r.settled++;
              r.outcome = ['error', e];
            },
          )
          .then(() => {
            settledCount++;
            const i = liveAt.get(key);
            const last = live.pop();
            if (last !== key) {
              live[i] = last;
              liveAt.set(last, i);
            }
            liveAt.delete(key);
          });
      }

      const resumable = new Set(['IMMEDIATE', 'FOR', 'UNTIL_TIME', 'INDEFINITELY']);
      function operate() {
        const r = records.get(live[(rng() * live.length) | 0]);
        const snap = rt.task(r.task.id);
        const waiting = Boolean(snap) && snap.status === 'waiting';
        const x = rng();
        if (x < 0.75) {
          // Resume applies exactly to a task waiting on a yield instruction.
          const expected = waiting && resumable.has(snap.waiting.instruction);
          expect(rt.resume(r.task.id, 'from js', r.key)).toBe(expected);
        } else if (x < 0.92 || !r.ac) {
          const ok = rt.cancel(r.task.id, `random ${r.key}`);
          expect(ok).toBe(waiting);
          if (ok) r.cancelled = 'js';
        } else {
          r.ac.abort(`aborted ${r.key}`);
          if (waiting) r.cancelled = 'abort';
        }
      }

      let next = 0;
      while (next < TOTAL) {
        for (let k = 0; k < 400 && next < TOTAL && live.length < LIVE; k++) start(next++);
        for (let k = 0; k < 150 && live.length > 0; k++) operate();
        await turn();
      }
      // Drain: what still waits INDEFINITELY is resumed; everything else ends by itself.
      for (let rounds = 0; live.length > 0; rounds++) {
        if (rounds > 20000) {
          throw new Error(
            `tasks never settled: ${JSON.stringify(live.slice(0, 5).map((k) => rt.task(records.get(k).task.id)))}`,
          );
        }
        for (const key of [...live]) {
          const snap = rt.task(records.get(key).task.id);
          if (snap && snap.waiting && snap.waiting.instruction === 'INDEFINITELY') rt.resume(snap.id);
        }
        await (rounds % 10 === 9 ? sleep(1) : turn());
      }
      for (let i = 0; i < 5; i++) await turn(); // late settlements would show now
      // A child whose parent was cancelled while joining it outlives the
      // parent by its sleep (up to 2 ms): let those end before counting.
      for (let i = 0; i < 100 && rt.stats().tasks > 0; i++) await sleep(2);

      expect(settledCount).toBe(TOTAL);
      const tally = { done: 0, failed: 0, cancelled: 0 };
      const wrong = [];
      for (const r of records.values()) {
        const [kind, value] = r.outcome;
        const firstFailure = r.plan.search(/[re]/);
        let ok;
        if (r.cancelled) {
          const reason = { js: `random ${r.key}`, abort: `aborted ${r.key}`, lua: undefined }[r.cancelled];
          ok =
            kind === 'error' &&
            (r.cancelled === 'abort'
              ? value.code === 'ABORT_ERR' && value.cause === reason
              : value.code === 'ERR_TASK_CANCELLED' && value.reason === reason);
          tally.cancelled++;
        } else if (kind === 'error' && (value.code === 'ERR_TASK_CANCELLED' || value.code === 'ABORT_ERR')) {
          ok = false; // cancelled, but nobody cancelled it
        } else if (firstFailure >= 0) {
          ok =
            kind === 'error' &&
            (r.plan[firstFailure] === 'r'
              ? value instanceof Error && value.key === r.key
              : value.code === 'ERR_LUA_RUNTIME' && value.message.includes(`planned failure ${r.key}`));
          tally.failed++;
        } else {
          ok = kind === 'done' && value === `done ${r.key}`;
          tally.done++;
        }
        if (!ok || r.settled !== 1 || closedCount.get(r.key) !== 1) {
          wrong.push({
            key: r.key,
            plan: r.plan,
            cancelled: r.cancelled,
            settled: r.settled,
            closed: closedCount.get(r.key),
            kind,
            value: String(value && (value.code || value.message || value)),
          });
        }
      }
      expect(wrong.slice(0, 5)).toEqual([]);
      // Every kind of ending happened many times.
      expect(tally.done).toBeGreaterThan(TOTAL / 10);
      expect(tally.failed).toBeGreaterThan(TOTAL / 20);
      expect(tally.cancelled).toBeGreaterThan(TOTAL / 100);
      const children = rt.get('children');
      expect(children.ended).toBe(children.started);
      expect(children.started).toBeGreaterThan(TOTAL / 10);
      expect(rt.stats().tasks).toBe(0);
      expect(rt.tasks()).toEqual([]);
      await rt.close();
    }),
    120000,
  );
});

test('a runtime dropped without close() with thousands of INDEFINITELY tasks is collected', async () => {
  // Forcing a GC needs --expose-gc: the measurement runs in a child process.
  const r = await runNode(['--expose-gc', fixture('stress-gc.js')], { timeout: 120000 });
  expectCleanExit(r);
  const out = JSON.parse(r.stdout);
  expect(out.tasks).toBe(out.runtimes * 5000);
  expect(out.finalized).toBe(out.runtimes);
  // Each task's own JS argument is freed: the Lua states themselves are
  // gone, not just the Runtime objects.
  expect(out.tokensFreed).toBe(out.tokens);
}, 120000);
