// SPDX-License-Identifier: MIT
// COMMIT and settled promises give the loop back: fair lock handover, continuations through the loop (issue 19, items 4 and 5).
'use strict';
const { Runtime } = require('../../..');
const { fixture, makeRuntime, runNode } = require('../helpers');

jest.setTimeout(60000);

// A store kept in memory whose save resolves at once (a fast store), or
// after a timer of `delayMs`.
function memoryStore(delayMs) {
  return {
    load: async () => null,
    save: delayMs === undefined ? async () => {} : () => new Promise((resolve) => setTimeout(resolve, delayMs)),
  };
}

// A runtime with `now()`: milliseconds since it was opened, read from JS, so
// the loops below stop by themselves even where the loop never turns.
async function open(store) {
  const rt = await Runtime.open({ name: 'fairness', store });
  const t0 = Date.now();
  rt.set('now', () => Date.now() - t0);
  return rt;
}

const COMMIT_LOOP = `
  function committer(key, ms)
    local s = tasks.state
    s[key] = 0
    while now() < ms do
      s[key] = s[key] + 1
      coroutine.yield("COMMIT")
    end
    return s[key]
  end`;

// Issue 19, item 4: the committer continued at once and locked again, so a
// second committing loop made no COMMIT at all while the first ran.
test.each([
  ['resolves at once', undefined],
  ['resolves after 5 ms', 5],
])('two committing loops both make progress (save %s)', async (_, delayMs) => {
  const rt = await open(memoryStore(delayMs));
  rt.load(COMMIT_LOOP);
  const [a, b] = await Promise.all([rt.call('committer', 'a', 300), rt.call('committer', 'b', 300)]);
  expect(a).toBeGreaterThan(0);
  expect(b).toBeGreaterThan(0);
  // They take turns: neither gets far ahead of the other.
  expect(Math.min(a, b)).toBeGreaterThanOrEqual(Math.max(a, b) / 4);
  await rt.close();
});

// Issue 19, item 4: a FOR 10 ms sleeper woke only once the committing loop
// stopped.
test('a sleeper beside a committing loop wakes again and again, late by about one write', async () => {
  const SAVE_MS = 5;
  const rt = await open(memoryStore(SAVE_MS));
  rt.load(`${COMMIT_LOOP}
    function sleeper(ms)
      local wakes, worst = 0, 0
      while now() < ms do
        local t = now()
        tasks.sleep(0.01)
        wakes = wakes + 1
        worst = math.max(worst, now() - t - 10)
      end
      return { wakes = wakes, worst = worst }
    end`);
  const c = rt.start('committer', 'n', 300);
  const s = await rt.call('sleeper', 300);
  const commits = await c.result;
  expect(commits).toBeGreaterThan(5);
  // Ideally about 20 wakes of 10 ms, each up to one 5 ms write late; a loaded
  // machine may do fewer, but never none.
  expect(s.wakes).toBeGreaterThanOrEqual(5);
  expect(s.worst).toBeLessThan(20 * SAVE_MS); // generous: about one write (plus timer granularity) expected
  await rt.close();
});

// Calls loop(n), a Lua task that raises the global count to n; expects a
// setTimeout(0) set just before to fire while the task still loops.
async function expectTimerFiresWhileLooping(rt, n) {
  let seen;
  setTimeout(() => {
    seen = rt.get('count');
  }, 0);
  expect(await rt.call('loop', n)).toBe(n);
  expect(seen).toBeDefined(); // the timer fired before the task ended...
  expect(seen).toBeLessThan(n); // ...while it was still looping
}

// Issue 19, item 5: with a store whose save resolves at once, the COMMIT loop
// ran as one chain of microtasks and the loop did not turn until it ended.
test('a setTimeout(0) fires while a task makes 100,000 instant COMMITs', async () => {
  const N = 100000;
  const rt = await open(memoryStore());
  rt.load('count = 0 function loop(n) for i = 1, n do count = i coroutine.yield("COMMIT") end return count end');
  await expectTimerFiresWhileLooping(rt, N);
  await rt.close();
});

test.each([
  ['tasks.await of a resolved promise', 'for i = 1, n do tasks.await(p) count = i end'],
  ['a JS function returning a resolved promise', 'for i = 1, n do resolved(i) count = i end'],
])('a setTimeout(0) fires while a task awaits %s 1,000,000 times', async (_, body) => {
  const N = 1000000;
  const rt = makeRuntime();
  rt.set('p', Promise.resolve(1));
  rt.set('resolved', (i) => Promise.resolve(i));
  rt.load(`count = 0 function loop(n) ${body} return count end`);
  await expectTimerFiresWhileLooping(rt, N);
});

// Before, the loop never turned: the timer that cancels it never fired and
// the process hung.
test.each(['commit', 'await'])('an endless instant %s loop is cancelled from a timer and Node exits', async (mode) => {
  const { code, signal, stdout, stderr } = await runNode([fixture('commit-endless.js'), mode], { timeout: 15000 });
  expect({ code, signal, stdout, stderr }).toEqual({
    code: 0,
    signal: null,
    stdout: 'ERR_TASK_CANCELLED\nlooped true\n',
    stderr: '',
  });
});
