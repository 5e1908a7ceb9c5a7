// SPDX-License-Identifier: MIT
// Durable timed waits and the runtime's wall clock (docs/durable.md#deadlines-and-clocks):
// a FOR or UNTIL_TIME ends when the runtime's clock reaches its journaled
// deadline, whether the task is live, dormant or replayed when the clock
// moves; a wake at the deadline then a SIGKILL runs again at reopen.
// Fixtures: test/js/fixtures/durable-lazy.js.
'use strict';
const { tmpdir, open, runs, killable, waitingIn, until } = require('../fixtures/durable-lazy');

const BACK = 1000; // ms the clock is set back mid-wait
const HOUR = 3600000;

// The task `entry` waits (FOR, or UNTIL_TIME ahead), written an hour long,
// in the state `how`; the runtime's clock is set forward so that its
// deadline is `ms` away, then back BACK ms mid-wait. Answers how far before
// its deadline (ms, on the runtime's clock) it ended: <= 0 when not early,
// and whether it was dormant when the clock moved. (The hour keeps it
// waiting, and dormant, however long the child and the open take; the
// clock then places the deadline.)
async function setBackMidWait(entry, how, ms) {
  const dir = tmpdir();
  let rt;
  let id;
  let deadline;
  if (how === 'live') {
    rt = await open(dir);
    const arg = entry === 'at' ? Date.now() + HOUR : HOUR;
    id = rt.spawn(entry, { durable: true, args: [arg, 'x'] }).id;
    await until(() => ['FOR', 'UNTIL_TIME'].includes(rt.task(id)?.waiting?.instruction));
    deadline = rt.task(id).waiting.until.getTime();
  } else {
    [id, deadline] = await waitingIn(dir, entry, HOUR);
    rt = await open(dir, how === 'replayed' ? { durableRestore: 'all' } : {});
  }
  let offset = deadline - Date.now() - ms;
  let endedAt;
  rt.on('taskdone', () => (endedAt = Date.now() + offset));
  rt.setClockOffset(offset);
  if (how === 'activated') await until(() => rt.stats().dormantTasks === 0);
  const dormant = rt.stats().dormantTasks === 1;
  offset -= BACK;
  rt.setClockOffset(offset);
  await until(() => endedAt !== undefined);
  await rt.close();
  return { early: deadline - 5 > endedAt ? deadline - endedAt : 0, dormant };
}

// Each state in its own store, all at once (so the file costs one wait a row).
test.each([
  ['FOR', 'soon'],
  ['UNTIL_TIME', 'at'],
])(
  'a durable %s ends at its deadline on the runtime\u2019s clock, set back mid-wait: live, dormant, activated, replayed',
  async (_, entry) => {
    const [live, dormant, activated, replayed] = await Promise.all([
      setBackMidWait(entry, 'live', 1500),
      setBackMidWait(entry, 'dormant', 4000),
      setBackMidWait(entry, 'activated', 4000),
      setBackMidWait(entry, 'replayed', 1500),
    ]);
    expect({ live, dormant, activated, replayed }).toEqual({
      live: { early: 0, dormant: false },
      dormant: { early: 0, dormant: true },
      activated: { early: 0, dormant: false },
      replayed: { early: 0, dormant: false },
    });
  },
  30000,
);

test('clock set forward while dormant: wakes when the runtime clock reaches its deadline, not later', async () => {
  const dir = tmpdir();
  const [id, deadline] = await waitingIn(dir, 'soon', 3600000);
  const rt = await open(dir);
  expect(rt.stats().dormantTasks).toBe(1);
  const done = [];
  rt.on('taskdone', (t, v) => done.push([t.id, v, Date.now() + offset]));
  // Set so that the deadline is 1.5 s away on the runtime's clock.
  const offset = deadline - Date.now() - 1500;
  rt.setClockOffset(offset);
  await until(() => done.length === 1, 15000);
  expect(done[0].slice(0, 2)).toEqual([id, 'on time']);
  expect(done[0][2]).toBeGreaterThanOrEqual(deadline - 5);
  await rt.close();
}, 30000);

// A task woken at its deadline writes no index entry (durable.md: "a wake at
// the deadline needs none"); it goes on running (here: awaiting a promise).
// Killed then, it must run again at open, whatever the wall clock says.
test('SIGKILL right after a wake at the deadline, before the next write: runs at reopen', async () => {
  const dir = tmpdir();
  const k = killable(
    dir,
    `const rt = await open();
     const t = rt.spawn('soonThenHold', { durable: true, args: [1500] });
     await rt.commit();
     log(t.id);
     while (rt.task(t.id).waiting?.instruction !== 'PROMISE' && rt.task(t.id).waiting?.instruction !== 'AWAIT') {
       if (rt.task(t.id).status === 'waiting' && rt.task(t.id).waiting?.instruction !== 'FOR') break;
       await new Promise((r) => setTimeout(r, 10));
     }
     await rt.commit();
     log(rt.task(t.id));
     log('woke');
     setInterval(() => {}, 1000);`,
  );
  await until(() => k.has('"woke"'), 15000);
  await k.kill();
  const [id] = k.lines();
  const rt = await open(dir);
  // Its journal says it woke: it is running (awaiting hold again), not dormant.
  expect(rt.stats().dormantTasks).toBe(0);
  expect(runs(rt, 'sth')).toBe(1);
  expect(rt.task(id)).toMatchObject({ status: 'waiting' });
  expect(rt.task(id).waiting?.instruction).not.toBe('FOR');
  await rt.close();
}, 30000);

test('the same, reopened with the wall clock set back an hour: the running task is not left dormant', async () => {
  const dir = tmpdir();
  const k = killable(
    dir,
    `const rt = await open();
     const t = rt.spawn('soonThenHold', { durable: true, args: [1500] });
     await rt.commit();
     log(t.id);
     while (rt.task(t.id).waiting?.instruction === 'FOR' || rt.task(t.id).status !== 'waiting') await new Promise((r) => setTimeout(r, 10));
     await rt.commit();
     log('woke');
     setInterval(() => {}, 1000);`,
  );
  await until(() => k.has('"woke"'), 15000);
  await k.kill();
  const [id] = k.lines();
  const rt = await open(dir, { clockOffsetMs: -3600000 });
  const snapshot = rt.task(id);
  const dormant = rt.stats().dormantTasks;
  const ran = runs(rt, 'sth');
  await rt.close();
  // With durableRestore: 'all' it replays past its wait and awaits hold again at once.
  const all = await open(dir, { clockOffsetMs: -3600000, durableRestore: 'all' });
  expect(all.task(id).waiting?.instruction).not.toBe('FOR');
  await all.close();
  expect({ dormant, ran, snapshot }).toMatchObject({ dormant: 0, ran: 1 });
}, 30000);
