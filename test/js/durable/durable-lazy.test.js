'use strict';
// Lazy restore (docs/durable.md#restore-at-open): on the directory store a
// durable task waiting on a far deadline, INDEFINITELY or in tasks.receive
// stays in the store at Runtime.open, is listed from the index, and runs
// again (its journal replayed) when its deadline nears or anything names it;
// and across a SIGKILL.
const path = require('node:path');
const { spawn, execFileSync } = require('node:child_process');
const { Runtime } = require('../../..');
const { until, runNode, expectCleanExit, tempDirs } = require('../helpers');

const tmpdir = tempDirs('lua-tasks-lazy-');

// Each entry counts its runs (a replay runs it again) in runs[entry].
const SOURCE = `
runs = {}
local function ran(name) runs[name] = (runs[name] or 0) + 1 end
function hour(n) ran("hour"); coroutine.yield("FOR", 1, "HOURS"); return n * 2 end
function forever() ran("forever"); return coroutine.yield("INDEFINITELY") end
function inbox() ran("inbox"); return tasks.receive() end
function soon(ms) ran("soon"); coroutine.yield("FOR", ms, "MILLISECONDS"); return os.time() end
function poke(id, ...) return tasks.resume(id, ...) end
function joiner(id) ran("joiner"); return tasks.wait(id) end
function busy() ran("busy"); while true do coroutine.yield() end end
function soonThenBusy(ms) ran("stb"); coroutine.yield("FOR", ms, "MILLISECONDS"); woke = true; busy() end
`;

async function open(dir, extra = {}) {
  return Runtime.open({ name: 'game', store: dir, ...extra, setup: (r) => r.load(SOURCE) });
}
const runs = (rt, entry) => rt.load(`return runs.${entry} or 0`)[0];
// Once its wait is written (a durable wait is reported once it is durable).
const waitsOn = (rt, id, instruction) => until(() => rt.task(id).waiting?.instruction === instruction);

test('a waiting task stays in the store at open: listed, inspected and counted, not replayed', async () => {
  const dir = tmpdir();
  let rt = await open(dir);
  const hour = rt.spawn('hour', { durable: true, args: [21] });
  const forever = rt.spawn('forever', { durable: true, key: 'f' });
  const inbox = rt.spawn('inbox', { durable: true });
  const busy = rt.spawn('busy', { durable: true });
  await rt.close();

  rt = await open(dir);
  // The running one runs again at once; the waiting ones do not.
  expect(runs(rt, 'busy')).toBe(1);
  for (const entry of ['hour', 'forever', 'inbox']) expect(runs(rt, entry)).toBe(0);
  expect(rt.stats()).toMatchObject({ tasks: 1, dormantTasks: 3 });
  const listed = new Map(rt.tasks().map((t) => [t.id, t]));
  expect([...listed.keys()].sort()).toEqual([hour.id, forever.id, inbox.id, busy.id].sort());
  expect(listed.get(hour.id)).toMatchObject({ status: 'waiting', waiting: { instruction: 'FOR' } });
  expect(listed.get(hour.id).waiting.until.getTime()).toBeGreaterThan(Date.now() + 3500000);
  expect(listed.get(forever.id)).toEqual({
    id: forever.id,
    status: 'waiting',
    waiting: { instruction: 'INDEFINITELY' },
  });
  expect(listed.get(inbox.id)).toMatchObject({ status: 'waiting', waiting: { instruction: 'RECEIVE' } });
  expect(rt.task(forever.id)).toEqual(listed.get(forever.id));
  expect(rt.load(`return tasks.status("${inbox.id}")`)).toEqual(['waiting']);
  expect(rt.stats().dormantTasks).toBe(3); // looking activated nothing
  expect(runs(rt, 'hour') + runs(rt, 'forever') + runs(rt, 'inbox')).toBe(0);
  rt.cancel(busy.id);
  await rt.close();
});

test('a dormant task runs again when named: resume, message, cancel, its key, and from Lua resume and wait', async () => {
  const dir = tmpdir();
  let rt = await open(dir);
  const ids = {};
  for (const name of ['a', 'b', 'c', 'd', 'e']) ids[name] = rt.spawn('forever', { durable: true, key: name }).id;
  ids.inbox = rt.spawn('inbox', { durable: true }).id;
  await rt.close();

  rt = await open(dir);
  const done = new Map();
  rt.on('taskdone', (t, v) => done.set(t.id, v));
  expect(rt.stats().dormantTasks).toBe(6);

  expect(rt.resume(ids.a, 'from js')).toBe(true);
  expect(done.get(ids.a)).toBe('from js');

  await expect(rt.sendDurable(ids.inbox, 'hello')).resolves.toBe(true);
  await until(() => done.has(ids.inbox));
  expect(done.get(ids.inbox)).toBe('hello');

  expect(rt.cancel(ids.b)).toBe(true);
  expect(rt.task(ids.b)).toMatchObject({ status: 'cancelled' });

  const c = rt.spawn('forever', { durable: true, key: 'c' }); // the key finds it: no second task
  expect(c.id).toBe(ids.c);
  expect(c.waiting).toEqual({ instruction: 'INDEFINITELY' });

  await expect(rt.call('poke', ids.d, 'from lua')).resolves.toBe(true);
  expect(done.get(ids.d)).toBe('from lua');

  const joiner = rt.spawn('joiner', { args: [ids.e] });
  expect(joiner.waiting).toEqual({ instruction: 'JOIN' });
  rt.resume(ids.e, 'joined');
  await expect(joiner.result).resolves.toBe('joined');

  expect(rt.stats().dormantTasks).toBe(0);
  expect(runs(rt, 'forever')).toBe(5); // each replayed once, when named
  // An unknown id is still unknown: no store read makes it up.
  expect(rt.resume(`${ids.a.slice(0, -1)}z`)).toBe(false);
  rt.resume(ids.c, 'end');
  await rt.close();
});

test('a dormant task wakes by its deadline, on time: activated a second before it', async () => {
  const dir = tmpdir();
  let rt = await open(dir);
  const t = rt.spawn('soon', { durable: true, args: [2500] });
  await waitsOn(rt, t.id, 'FOR');
  const deadline = rt.task(t.id).waiting.until.getTime();
  await rt.close();

  rt = await open(dir);
  const done = new Map();
  rt.on('taskdone', (task, v) => done.set(task.id, [v, Date.now()]));
  if (Date.now() < deadline - 1100) expect(rt.stats().dormantTasks).toBe(1); // else it was due at open
  await until(() => done.has(t.id));
  expect(done.get(t.id)[1]).toBeGreaterThanOrEqual(deadline - 5); // never early (the timer's ms rounding aside)
  expect(runs(rt, 'soon')).toBe(1);
  await rt.close();
});

test('a task that ran on past its wait runs again at open even with the clock set back an hour', async () => {
  const dir = tmpdir();
  let rt = await open(dir);
  const t = rt.spawn('soonThenBusy', { durable: true, args: [200] });
  await until(() => rt.load('return woke')[0] === true);
  await rt.commit();
  await rt.close();
  // Its wait's deadline is an hour ahead on this clock: the index must still say it runs.
  rt = await open(dir, { clockOffsetMs: -3600000 });
  expect(rt.stats().dormantTasks).toBe(0);
  expect(runs(rt, 'stb')).toBe(1);
  expect(rt.task(t.id).status).not.toBe('done');
  rt.cancel(t.id);
  await rt.close();
});

test("durableRestore: 'all' replays every task at open; a bad value says what it takes", async () => {
  const dir = tmpdir();
  let rt = await open(dir);
  const t = rt.spawn('forever', { durable: true });
  await rt.close();
  rt = await open(dir, { durableRestore: 'all' });
  expect(rt.stats().dormantTasks).toBe(0);
  expect(runs(rt, 'forever')).toBe(1);
  expect(rt.task(t.id)).toMatchObject({ waiting: { instruction: 'INDEFINITELY' } });
  await rt.close();
  await expect(open(dir, { durableRestore: 'some' })).rejects.toMatchObject({
    code: 'ERR_INVALID_ARG_VALUE',
    message: expect.stringMatching(/"options.durableRestore" option must be 'lazy' .* or 'all' .*Received .*some/),
  });
});

test('a dormant task whose code changed fails when it is activated, loudly, and its records stay', async () => {
  const dir = tmpdir();
  let rt = await open(dir);
  const t = rt.spawn('forever', { durable: true });
  await rt.close();
  const errors = [];
  rt = await Runtime.open({
    name: 'game',
    store: dir,
    setup: (r) => {
      r.on('taskerror', (task, e) => errors.push([task.id, e.code]));
      r.load(`function forever() tasks.sleep(0); return coroutine.yield("INDEFINITELY") end`);
    },
  });
  expect(errors).toEqual([]);
  expect(rt.resume(t.id)).toBe(false);
  expect(errors).toEqual([[t.id, 'ERR_NONDETERMINISM']]);
  expect(rt.stats().restoreFailures).toBe(1);
  await rt.close();
  rt = await open(dir);
  expect(rt.task(t.id)).toMatchObject({ status: 'waiting', waiting: { instruction: 'INDEFINITELY' } });
  rt.resume(t.id, 'x');
  await rt.close();
});

test('a finished task is retained in the index and forgotten past its retention', async () => {
  const dir = tmpdir();
  let rt = await open(dir);
  const t = rt.spawn('forever', { durable: true, key: 'k' });
  await waitsOn(rt, t.id, 'INDEFINITELY');
  rt.resume(t.id, 'result');
  await expect(t.result).resolves.toBe('result');
  await rt.close();
  rt = await open(dir);
  expect(rt.task(t.id)).toEqual({ id: t.id, status: 'done' });
  const again = rt.spawn('forever', { durable: true, key: 'k' });
  expect(again.id).toBe(t.id);
  await expect(again.result).resolves.toBe('result');
  await rt.close();
  rt = await open(dir, { durableRetention: 1 });
  expect(rt.task(t.id)).toBeUndefined();
  await rt.close();
  rt = await open(dir);
  expect(rt.task(t.id)).toBeUndefined(); // its end record went
  await rt.close();
});

// Writes a store in a child process (this one keeps its stores open, and
// the test then edits the database under it): a task waiting INDEFINITELY
// (key 'w') and one ended (key 'e', result 'kept'); prints their ids.
const WRITER = `
const { Runtime } = require(${JSON.stringify(path.join(__dirname, '..', '..', '..'))});
(async () => {
  const rt = await Runtime.open({ name: 'game', store: process.argv[1], setup: (r) => r.load(process.argv[2]) });
  const w = rt.spawn('forever', { durable: true, key: 'w' });
  const e = rt.spawn('forever', { durable: true, key: 'e' });
  while (rt.task(e.id).waiting?.instruction !== 'INDEFINITELY') await new Promise((r) => setTimeout(r, 5));
  rt.resume(e.id, 'kept');
  await e.result;
  await rt.close();
  process.stdout.write(JSON.stringify([w.id, e.id]));
})();
`;

test('a store written before the index opens replaying every task once, then lazily', async () => {
  const dir = tmpdir();
  const r = await runNode(['-e', WRITER, dir, SOURCE]);
  expectCleanExit(r);
  const [waiting, ended] = JSON.parse(r.stdout);
  // As format 2 wrote it: no index, the end record as record 0 (sqlite3, the CLI).
  execFileSync('sqlite3', [
    path.join(dir, 'lua-tasks.sqlite'),
    `INSERT INTO kv(name, space, key, value, sum) SELECT name, 2, key || '/0000000000', value, NULL FROM kv WHERE space = 4 AND key = '${ended}';` +
      'DELETE FROM kv WHERE space = 4; PRAGMA user_version = 2;',
  ]);

  let rt = await open(dir);
  expect(runs(rt, 'forever')).toBe(1); // replayed: there was no index
  expect(rt.stats().dormantTasks).toBe(0);
  await expect(rt.spawn('forever', { durable: true, key: 'e' }).result).resolves.toBe('kept');
  await rt.close();
  rt = await open(dir);
  expect(runs(rt, 'forever')).toBe(0);
  expect(rt.stats().dormantTasks).toBe(1);
  expect(rt.task(ended)).toEqual({ id: ended, status: 'done' });
  expect(rt.resume(waiting, 'ok')).toBe(true);
  await rt.close();
});

test("damage to the index: a journal it lacks is reported when the task is needed; 'all' finds a task it lost and writes its entry again", async () => {
  const dir = tmpdir();
  const r = await runNode(['-e', WRITER, dir, SOURCE]);
  expectCleanExit(r);
  const [waiting] = JSON.parse(r.stdout);
  const db = path.join(dir, 'lua-tasks.sqlite');
  // Its index entry gone: a lazy open does not know the task...
  execFileSync('sqlite3', [db, `DELETE FROM kv WHERE space = 4 AND key = '${waiting}'`]);
  let rt = await open(dir);
  expect(rt.task(waiting)).toBeUndefined();
  await rt.close();
  // ...an open with 'all' reads every journal, finds it, and indexes it again.
  rt = await open(dir, { durableRestore: 'all' });
  expect(rt.task(waiting)).toMatchObject({ status: 'waiting', waiting: { instruction: 'INDEFINITELY' } });
  await rt.commit();
  await rt.close();
  rt = await open(dir);
  expect(rt.stats().dormantTasks).toBe(1);
  await rt.close();

  // Its journal gone, its entry kept: named, it is reported, never silently lost.
  execFileSync('sqlite3', [db, `DELETE FROM kv WHERE space = 2 AND key LIKE '${waiting}/%'`]);
  const errors = [];
  rt = await Runtime.open({
    name: 'game',
    store: dir,
    setup: (x) => {
      x.on('taskerror', (t, e) => errors.push([t.id, e.code, e.message]));
      x.load(SOURCE);
    },
  });
  expect(rt.resume(waiting, 'x')).toBe(false);
  expect(errors).toEqual([
    [waiting, 'ERR_STORE_CORRUPT', expect.stringContaining('a journal the store does not hold')],
  ]);
  await rt.close();
});

// A child process starts tasks that wait (a deadline 3 s away, INDEFINITELY,
// receive), says "ready" once their waits are written, and is SIGKILLed.
const CHILD = `
const { Runtime } = require(${JSON.stringify(path.join(__dirname, '..', '..', '..'))});
(async () => {
  const rt = await Runtime.open({ name: 'game', store: process.argv[1], setup: (r) => r.load(process.argv[2]) });
  const ids = ['soon', 'forever', 'inbox'].map((e) => rt.spawn(e, { durable: true, args: e === 'soon' ? [3000] : [] }).id);
  await rt.commit();
  process.stdout.write(JSON.stringify(ids) + '\\nready\\n');
  setInterval(() => {}, 1000);
})();
`;

test('after a SIGKILL, lazily restored tasks wake by their deadline, a message and a resume', async () => {
  const dir = tmpdir();
  const child = spawn(process.execPath, ['-e', CHILD, dir, SOURCE], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (s) => (out += s));
  const exited = new Promise((resolve) => child.on('close', resolve));
  await until(() => out.includes('ready\n'));
  child.kill('SIGKILL');
  await exited;
  const [soon, forever, inbox] = JSON.parse(out.split('\n')[0]);

  const rt = await open(dir);
  const done = new Map();
  rt.on('taskdone', (t, v) => done.set(t.id, v));
  expect(runs(rt, 'forever') + runs(rt, 'inbox')).toBe(0);
  expect(
    rt
      .tasks()
      .map((t) => t.id)
      .sort(),
  ).toEqual([soon, forever, inbox].sort());
  expect(rt.resume(forever, 'resumed')).toBe(true);
  await rt.sendDurable(inbox, 'message');
  await until(() => done.size === 3);
  expect(done.get(forever)).toBe('resumed');
  expect(done.get(inbox)).toBe('message');
  expect(typeof done.get(soon)).toBe('number');
  expect(runs(rt, 'soon') + runs(rt, 'forever') + runs(rt, 'inbox')).toBe(3); // each ran once again, no more
  await rt.close();
  const after = await open(dir);
  expect(after.tasks()).toEqual([]);
  await after.close();
}, 30000);
