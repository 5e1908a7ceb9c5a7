// SPDX-License-Identifier: MIT
// Faults against lazy restore (docs/durable.md#restore-at-open): SIGKILLs
// while dormant tasks are activated, damaged and missing index entries, a
// Worker terminated. Fixtures: test/js/fixtures/durable-lazy.js.
'use strict';
const path = require('node:path');
const { Worker } = require('node:worker_threads');
const {
  Runtime,
  SOURCE,
  tmpdir,
  open,
  sql,
  child,
  killable,
  N,
  drive,
  MAKE_KEYED,
  MAKE_TWO,
  openReport,
  until,
} = require('../fixtures/durable-lazy');

const ROOT = path.join(__dirname, '..', '..', '..');

// ---------------------------------------------------------------------------
// SIGKILL while dormant tasks are activated (by resume, by deadline).

for (const seed of [1, 2, 3, 4, 5, 6]) {
  test(`SIGKILL at a random instant while dormant tasks are activated by resume (seed ${seed})`, async () => {
    const dir = tmpdir();
    const [ids] = await child(dir, MAKE_KEYED);
    // The child activates each by a resume (their first wait) and by a second one, with no pause; killed at random.
    const k = killable(
      dir,
      `const rt = await open();
       log('open');
       const ids = ${JSON.stringify(ids)};
       for (let round = 0; round < 2; round++) {
         for (let i = 0; i < ids.length; i++) {
           rt.resume(ids[i], 'r');
           await new Promise((r) => setImmediate(r));
         }
       }
       await rt.commit();
       log('all');
       setInterval(() => {}, 1000);`,
    );
    await until(() => k.has('"open"'));
    await new Promise((r) => setTimeout(r, (seed * 37) % 60));
    await k.kill();

    const rt = await open(dir);
    const errors = [];
    rt.on('taskerror', (t, e) => errors.push([t.id, e.code, e.message]));
    // Drive every task to its end: resume whatever waits, with the values the child used.
    const results = [];
    for (let i = 0; i < N; i++) {
      const t = rt.spawn('twice', { durable: true, key: `k${i}`, args: [`t${i}`] });
      expect(t.id).toBe(ids[i]); // the key finds it (live, dormant or retained)
      results.push(await drive(rt, t));
    }
    // A task whose first wait was resumed in the child takes r0 then r1 here: its value is
    // "t:r0,r1" either way (the child used the same values).
    for (let i = 0; i < N; i++) expect(results[i]).toBe(`t${i}:r,r`);
    expect(errors).toEqual([]);
    expect(rt.stats().dormantTasks).toBe(0);
    await rt.close();
    const again = await open(dir);
    expect(again.tasks()).toEqual([]);
    expect(again.stats().dormantTasks).toBe(0);
    await again.close();
  }, 30000);
}

test('SIGKILL while dormant tasks are activated by their deadlines', async () => {
  const dir = tmpdir();
  const [ids] = await child(
    dir,
    `const rt = await open();
     const ids = [];
     for (let i = 0; i < 8; i++) ids.push(rt.spawn('soon', { durable: true, key: 's' + i, args: [2500 + i * 150, 's' + i] }).id);
     await rt.commit();
     await rt.close();
     log(ids);`,
  );
  const k = killable(
    dir,
    `const rt = await open();
     log('open');
     rt.on('taskdone', (t) => log(['done', t.id]));
     setInterval(() => {}, 1000);`,
  );
  await until(() => k.lines().filter((l) => l[0] === 'done').length >= 3);
  await k.kill();
  const rt = await open(dir);
  const values = await Promise.all(
    ids.map((_, i) => rt.spawn('soon', { durable: true, key: `s${i}`, args: [0, 'x'] }).result),
  );
  expect(values).toEqual(ids.map((_, i) => `s${i}`));
  expect(rt.stats().dormantTasks).toBe(0);
  await rt.close();
}, 30000);

// A task woken at its deadline writes no index entry (durable.md: "a wake at
// the deadline needs none"); it goes on running (here: awaiting a promise).

// ---------------------------------------------------------------------------
// Damaged and missing index entries: loud (a report naming the task and
// what was wrong), the other tasks unharmed.

test('a flipped byte in a waiting task\u2019s index entry (its row checksum kept): the open is loud', async () => {
  const dir = tmpdir();
  const [[w]] = await child(dir, MAKE_TWO);
  sql(
    dir,
    `UPDATE kv SET value = CAST(substr(value,1,5) || char((unicode(substr(value,6,1)) + 1) % 256) || substr(value,7) AS BLOB) WHERE space = 4 AND key = '${w}';`,
  );
  const r = await openReport(dir);
  if (r.rt) {
    const st = r.state;
    await r.rt.close();
    // Not thrown: then the task must be there, or a taskerror must name it.
    expect(st.tasks.map((x) => x[0]).includes(w) || st.errors.some((x) => x[0] === w)).toBe(true);
  } else {
    expect(r.threw).toBe('ERR_STORE_CORRUPT');
  }
});

test('a flipped byte in a waiting task\u2019s index entry, row checksum cleared (format 1 row): loud, or the task is kept', async () => {
  const dir = tmpdir();
  const [[w]] = await child(dir, MAKE_TWO);
  sql(
    dir,
    `UPDATE kv SET sum = NULL, value = CAST(substr(value,1,5) || char((unicode(substr(value,6,1)) + 1) % 256) || substr(value,7) AS BLOB) WHERE space = 4 AND key = '${w}';`,
  );
  const r = await openReport(dir);
  if (r.rt) {
    const st = r.state;
    await r.rt.close();
    expect(st.tasks.map((x) => x[0]).includes(w) || st.errors.some((x) => x[0] === w)).toBe(true);
  } else {
    expect(r.threw).toBe('ERR_STORE_CORRUPT');
  }
});

// Its end record (its result and key) lived only in that entry: the report
// says it is lost, and after it the key is free (docs/durable.md#restore-at-open).
test('a retained task\u2019s end record replaced by a valid record of another kind: reported, naming it and the loss; the other task unharmed', async () => {
  const dir = tmpdir();
  const [[w, e]] = await child(dir, MAKE_TWO);
  // A sealed record that reads (its CRC is right) but is not an end record: w's start record.
  sql(
    dir,
    `UPDATE kv SET sum = NULL, value = (SELECT value FROM kv WHERE space = 2 AND key = '${w}/0000000000') WHERE space = 4 AND key = '${e}';`,
  );
  const messages = [];
  const { rt, state } = await openReport(dir, {}, (r) => r.on('taskerror', (t, err) => messages.push(err.message)));
  const t = rt.spawn('forever', { durable: true, key: 'w', args: ['w'] });
  const other = { id: t.id === w, resumed: rt.resume(w, 'x') };
  const again = rt.spawn('forever', { durable: true, key: 'e', args: ['e2'] });
  await rt.close();
  expect(state).toMatchObject({ dormant: 1, errors: [[e, 'ERR_STORE_CORRUPT']] });
  expect(messages[0]).toContain(`The durable task ${e} of "game" could not be restored`);
  expect(messages[0]).toContain('its index entry is a start record, not an index entry');
  expect(messages[0]).toContain('an idempotency key) is lost');
  expect(other).toEqual({ id: true, resumed: true });
  expect(again.id).not.toBe(e);
});

// A lazy open reads no journal: an entry deleted hides its task until an
// open with durableRestore: 'all' (docs/durable.md#restore-at-open).
test('a missing index entry for a waiting task whose journal exists: hidden from a lazy open; durableRestore all brings it and its entry back', async () => {
  const dir = tmpdir();
  const [[w, e]] = await child(dir, MAKE_TWO);
  expect(sql(dir, `SELECT count(*) FROM kv WHERE space = 2 AND key LIKE '${w}/%';`).trim()).not.toBe('0');
  sql(dir, `DELETE FROM kv WHERE space = 4 AND key = '${w}';`);
  const errors = [];
  const listen = (r) => r.on('taskerror', (t, err) => errors.push([t.id, err.code]));
  let rt = await open(dir, {}, listen);
  const lazy = { known: rt.task(w) !== undefined, dormant: rt.stats().dormantTasks, e: rt.task(e)?.status };
  await rt.close();
  expect(lazy).toEqual({ known: false, dormant: 0, e: 'done' });

  rt = await open(dir, { durableRestore: 'all' }, listen);
  const all = { w: rt.task(w)?.status, key: rt.spawn('forever', { durable: true, key: 'w', args: ['w2'] }).id === w };
  await rt.close();
  expect(all).toEqual({ w: 'waiting', key: true });

  rt = await open(dir, {}, listen);
  expect(rt.stats().dormantTasks).toBe(1);
  const t = rt.spawn('forever', { durable: true, key: 'w', args: ['w2'] });
  expect(t.id).toBe(w);
  expect(rt.resume(w, 'x')).toBe(true);
  await expect(t.result).resolves.toBe('w:x');
  await rt.close();
  expect(errors).toEqual([]);
});

test('a format 2 store whose task fails its replay at the first (whole) open: the next open still has it', async () => {
  const dir = tmpdir();
  const [[w]] = await child(dir, MAKE_TWO);
  sql(dir, `DELETE FROM kv WHERE space = 4; PRAGMA user_version = 2;`);
  // First open as format 2 (every journal replayed) with code that breaks w's replay.
  const errors = [];
  let rt = await Runtime.open({
    name: 'game',
    store: dir,
    setup: (r) => {
      r.on('taskerror', (t, e) => errors.push([t.id, e.code]));
      r.load(SOURCE);
      r.load(`function forever(tag) tasks.sleep(0); return coroutine.yield("INDEFINITELY") end`);
    },
  });
  expect(errors).toEqual([[w, 'ERR_NONDETERMINISM']]);
  await rt.commit();
  await rt.close();
  // Fixed code: w must be back (its records were kept).
  rt = await open(dir);
  const known = rt.task(w);
  const resumed = rt.resume(w, 'back');
  await rt.close();
  expect(known).toMatchObject({ status: 'waiting' });
  expect(resumed).toBe(true);
});

// ---------------------------------------------------------------------------
// A Worker holding dormant tasks, terminated.

test('a Worker with dormant tasks (some being activated) is terminated; the store opens after', async () => {
  const dir = tmpdir();
  const [ids] = await child(dir, MAKE_KEYED);
  const w = new Worker(
    `const { parentPort, workerData } = require('node:worker_threads');
     const { Runtime } = require(${JSON.stringify(ROOT)});
     (async () => {
       const rt = await Runtime.open({ name: 'game', store: workerData.dir, setup: (r) => r.load(workerData.src) });
       parentPort.postMessage(['open', rt.stats().dormantTasks]);
       let i = 0;
       const step = () => { if (i < workerData.ids.length) { rt.resume(workerData.ids[i++], 'r'); setImmediate(step); } };
       step();
       setInterval(() => {}, 1000);
     })();`,
    { eval: true, workerData: { dir, src: SOURCE, ids } },
  );
  const opened = await new Promise((resolve, reject) => {
    w.on('message', resolve);
    w.on('error', reject);
  });
  expect(opened).toEqual(['open', N]);
  await w.terminate();
  // The lease is let go at a Worker's end? Open again here.
  const rt = await open(dir, { storeTimeout: 10000 });
  const results = [];
  for (let i = 0; i < N; i++) {
    const t = rt.spawn('twice', { durable: true, key: `k${i}`, args: [`t${i}`] });
    expect(t.id).toBe(ids[i]);
    results.push(await drive(rt, t));
  }
  expect(results).toEqual(ids.map((_, i) => `t${i}:r,r`));
  await rt.close();
}, 30000);
