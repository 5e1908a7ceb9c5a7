// SPDX-License-Identifier: MIT
// Dormant tasks activated (docs/durable.md#restore-at-open): named from Lua,
// from a JS callback and from another activation's replay, during a COMMIT's
// snapshot, and by their idempotency keys. Fixtures: test/js/fixtures/durable-lazy.js.
'use strict';
const { Runtime, tmpdir, open, child, MAKE_TWO, SOURCE, until } = require('../fixtures/durable-lazy');

// ---------------------------------------------------------------------------
// Named from Lua, from a JS callback, nested activations.

test('dormant tasks named from another task\u2019s Lua: resume, send, cancel, wait', async () => {
  const dir = tmpdir();
  const [ids] = await child(
    dir,
    `const rt = await open();
     const a = rt.spawn('forever', { durable: true, args: ['a'] });
     const b = rt.spawn('inbox', { durable: true });
     const c = rt.spawn('forever', { durable: true, args: ['c'] });
     const d = rt.spawn('forever', { durable: true, args: ['d'] });
     await rt.commit();
     await rt.close();
     log([a.id, b.id, c.id, d.id]);`,
  );
  const [a, b, c, d] = ids;
  const rt = await open(dir);
  expect(rt.stats().dormantTasks).toBe(4);
  const done = new Map();
  rt.on('taskdone', (t, v) => done.set(t.id, v));
  const errors = [];
  rt.on('taskerror', (t, e) => errors.push([t.id, e.code, e.message]));
  // From durable tasks (their calls are journaled) and from ephemeral ones.
  await expect(rt.spawn('poke', { durable: true, args: [a, 'la'] }).result).resolves.toBe(true);
  await expect(rt.spawn('mail', { args: [b, 'lb'] }).result).resolves.toBe(true);
  await expect(rt.spawn('kill', { args: [c] }).result).resolves.toBe(true);
  const j = rt.spawn('joiner', { durable: true, args: [d] });
  await until(() => rt.task(j.id)?.waiting?.instruction === 'JOIN');
  rt.resume(d, 'ld');
  await expect(j.result).resolves.toBe('d:ld');
  await until(() => done.has(b));
  expect([done.get(a), done.get(b), rt.task(c)?.status]).toEqual(['a:la', 'lb', 'cancelled']);
  expect(errors).toEqual([]);
  await rt.close();
});

test('a dormant task named from a JS callback called by Lua (rt.resume inside a task)', async () => {
  const dir = tmpdir();
  const [[a]] = await child(
    dir,
    `const rt = await open(); const a = rt.spawn('forever', { durable: true, args: ['a'] }); await rt.commit(); await rt.close(); log([a.id]);`,
  );
  const self = {};
  const rt = await open(dir, {}, (r) => r.set('jsResume', (id, v) => self.rt.resume(id, v)));
  self.rt = rt;
  const errors = [];
  rt.on('taskerror', (t, e) => errors.push([t.id, e.code, e.message]));
  const done = new Map();
  rt.on('taskdone', (t, v) => done.set(t.id, v));
  const viaTask = rt.spawn('viaJs', { args: [a, 'js'] });
  await expect(viaTask.result).resolves.toBe(true);
  await until(() => done.has(a));
  expect(done.get(a)).toBe('a:js');
  // And from rt.call on the main thread (not in a task).
  expect(errors).toEqual([]);
  await rt.close();
});

test('nested activation: an activated task\u2019s replay names another dormant task; each gets its value once', async () => {
  const dir = tmpdir();
  const [[relay, target]] = await child(
    dir,
    `const rt = await open();
     const target = rt.spawn('twice', { durable: true, args: ['t'] });
     const relay = rt.spawn('relay', { durable: true, args: [target.id] });
     await rt.commit();
     rt.resume(relay.id, 'v1'); // relay resumes target with v1 (target's first wait)
     await rt.commit();
     await rt.close();
     log([relay.id, target.id]);`,
  );
  const rt = await open(dir);
  expect(rt.stats().dormantTasks).toBe(2);
  const errors = [];
  rt.on('taskerror', (t, e) => errors.push([t.id, e.code, e.message]));
  const done = new Map();
  rt.on('taskdone', (t, v) => done.set(t.id, v));
  // Activate relay: its replay meets tasks.resume(target, 'v1') (journaled: not resumed again).
  expect(rt.resume(relay, 'end')).toBe(true);
  expect(rt.task(target)).toMatchObject({ status: 'waiting', waiting: { instruction: 'INDEFINITELY' } });
  expect(rt.resume(target, 'v2')).toBe(true);
  await until(() => done.has(target));
  expect(done.get(target)).toBe('t:v1,v2');
  expect(errors).toEqual([]);
  await rt.close();
});

// ---------------------------------------------------------------------------
// A dormant task named during a COMMIT's snapshot.

test('rt.resume, rt.send, rt.cancel of dormant tasks while many tasks COMMIT', async () => {
  const dir = tmpdir();
  const [ids] = await child(
    dir,
    `const rt = await open();
     const ids = [];
     for (let i = 0; i < 30; i++) ids.push(rt.spawn(i % 3 === 1 ? 'inbox' : 'forever', { durable: true, args: ['f' + i] }).id);
     await rt.commit(); await rt.close(); log(ids);`,
  );
  const rt = await open(dir);
  expect(rt.stats().dormantTasks).toBe(30);
  const done = new Map();
  rt.on('taskdone', (t, v) => done.set(t.id, v));
  const errors = [];
  rt.on('taskerror', (t, e) => errors.push([t.id, e.code, e.message]));
  const writers = [];
  for (let i = 0; i < 20; i++) writers.push(rt.spawn('writer', { args: [i] }).result);
  const answers = [];
  let i = 0;
  // Name one dormant task each turn while the writers commit.
  while (i < ids.length) {
    const id = ids[i];
    if (i % 3 === 0) answers.push(['resume', rt.resume(id, `v${i}`)]);
    else if (i % 3 === 1) answers.push(['send', rt.send(id, `m${i}`)]);
    else answers.push(['cancel', rt.cancel(id)]);
    i++;
    await new Promise((r) => setImmediate(r));
  }
  await Promise.all(writers);
  await rt.commit();
  expect(answers.filter(([, ok]) => ok !== true)).toEqual([]);
  await until(() => ids.every((id, k) => k % 3 === 2 || done.has(id)), 15000);
  for (let k = 0; k < ids.length; k++) {
    if (k % 3 === 0) expect(done.get(ids[k])).toBe(`f${k}:v${k}`);
    if (k % 3 === 1) expect(done.get(ids[k])).toBe(`m${k}`);
    if (k % 3 === 2) expect(rt.task(ids[k])?.status).toBe('cancelled');
  }
  expect(errors).toEqual([]);
  await rt.close();
}, 30000);

test('Lua tasks.resume of a dormant task during a COMMIT snapshot', async () => {
  const dir = tmpdir();
  const [ids] = await child(
    dir,
    `const rt = await open();
     const ids = [];
     for (let i = 0; i < 20; i++) ids.push(rt.spawn('forever', { durable: true, args: ['f' + i] }).id);
     await rt.commit(); await rt.close(); log(ids);`,
  );
  const rt = await open(dir);
  const done = new Map();
  rt.on('taskdone', (t, v) => done.set(t.id, v));
  const writers = [];
  for (let i = 0; i < 10; i++) writers.push(rt.spawn('writer', { args: [i] }).result);
  const pokes = ids.map((id, k) => rt.spawn('poke', { args: [id, `p${k}`] }).result);
  const answers = await Promise.all(pokes);
  await Promise.all(writers);
  expect(answers).toEqual(ids.map(() => true));
  await until(() => done.size >= ids.length + 10 + ids.length);
  ids.forEach((id, k) => expect(done.get(id)).toBe(`f${k}:p${k}`));
  await rt.close();
}, 30000);

// ---------------------------------------------------------------------------
// Idempotency keys of dormant tasks.

test('continue_as_new: a dormant task keeps its key across its restarts', async () => {
  const dir = tmpdir();
  const [[id]] = await child(
    dir,
    `const rt = await open();
     const t = rt.spawn('again', { durable: true, key: 'ag', args: [2] });
     await rt.commit();
     rt.resume(t.id, 'one');       // continue_as_new(1): a new run waits again
     await rt.commit();
     await rt.close();
     log([t.id]);`,
  );
  let rt = await open(dir);
  expect(rt.stats().dormantTasks).toBe(1);
  const t = rt.spawn('again', { durable: true, key: 'ag', args: [9] });
  expect(t.id).toBe(id);
  rt.resume(id, 'two'); // continue_as_new(0)
  await rt.commit();
  await rt.close();
  rt = await open(dir);
  expect(rt.stats().dormantTasks).toBe(1);
  const t2 = rt.spawn('again', { durable: true, key: 'ag', args: [9] });
  expect(t2.id).toBe(id);
  rt.resume(id, 'three');
  await expect(t2.result).resolves.toBe('three');
  await rt.close();
  rt = await open(dir);
  const t3 = rt.spawn('again', { durable: true, key: 'ag', args: [9] });
  expect(t3.id).toBe(id); // retained
  await expect(t3.result).resolves.toBe('three');
  await rt.close();
});

test('a key of a dormant task whose activation fails: no second task, loud', async () => {
  const dir = tmpdir();
  const [[w]] = await child(dir, MAKE_TWO);
  const errors = [];
  const rt = await Runtime.open({
    name: 'game',
    store: dir,
    setup: (r) => {
      r.on('taskerror', (t, e) => errors.push([t.id, e.code]));
      r.load(SOURCE);
      r.load(`function forever(tag) tasks.sleep(0); return coroutine.yield("INDEFINITELY") end`);
    },
  });
  // The first spawn by the key activates it; its replay fails (ERR_NONDETERMINISM).
  const outcome = (fn) => {
    try {
      const t = fn();
      return { id: t.id === w ? 'w' : 'other', status: rt.task(t.id)?.status };
    } catch (e) {
      return { threw: e.code };
    }
  };
  const first = outcome(() => rt.spawn('forever', { durable: true, key: 'w', args: ['w'] }));
  await new Promise((r) => setImmediate(r));
  const second = outcome(() => rt.spawn('forever', { durable: true, key: 'w', args: ['w'] }));
  await rt.close();
  expect(errors).toEqual([[w, 'ERR_NONDETERMINISM']]);
  // Neither may be a second task for the key while w's records are kept: it
  // throws, or gives w (failed, retained).
  const ok = (o) => o.threw === 'ERR_STORE_CORRUPT' || o.id === 'w';
  expect({ first: ok(first), second: ok(second), got: [first, second] }).toMatchObject({ first: true, second: true });
});

for (const mode of ['lazy', 'all']) {
  test(`durableRetention 0 (${mode}): a key whose task failed its replay must not start a second task`, async () => {
    const dir = tmpdir();
    const [[w]] = await child(dir, MAKE_TWO);
    const errors = [];
    const rt = await Runtime.open({
      name: 'game',
      store: dir,
      durableRetention: 0,
      durableRestore: mode,
      setup: (r) => {
        r.on('taskerror', (t, e) => errors.push([t.id, e.code]));
        r.load(SOURCE);
        r.load(`function forever(tag) tasks.sleep(0); return coroutine.yield("INDEFINITELY") end`);
      },
    });
    let first;
    try {
      first = rt.spawn('forever', { durable: true, key: 'w', args: ['w'] }).id;
    } catch (e) {
      first = e.code;
    }
    await new Promise((r) => setTimeout(r, 0));
    await rt.commit();
    let second;
    try {
      second = rt.spawn('forever', { durable: true, key: 'w', args: ['w'] }).id;
    } catch (e) {
      second = e.code;
    }
    await rt.close();
    expect(errors).toEqual([[w, 'ERR_NONDETERMINISM']]);
    const fresh = (x) => x !== w && !String(x).startsWith('ERR_');
    expect({ firstIsNew: fresh(first), secondIsNew: fresh(second) }).toEqual({ firstIsNew: false, secondIsNew: false });
  });
}

test('retained ended tasks: within durableRetention the key gives it; past it the key is free', async () => {
  const dir = tmpdir();
  const [[, e]] = await child(dir, MAKE_TWO);
  let rt = await open(dir);
  expect(rt.spawn('forever', { durable: true, key: 'e', args: ['x'] }).id).toBe(e);
  await rt.close();
  // The clock set forward past the retention (7 days): the key is free, its record goes.
  rt = await open(dir, { clockOffsetMs: 8 * 24 * 3600 * 1000 });
  const fresh = rt.spawn('forever', { durable: true, key: 'e', args: ['x'] });
  expect(fresh.id).not.toBe(e);
  rt.resume(fresh.id, 'y');
  await rt.close();
});
