// SPDX-License-Identifier: MIT
// util.async inside a runtime: its Lua unit tests, loop-backed hooks, JS Promises, the examples.
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { makeRuntime, sleep } = require('../helpers');

const root = path.join(__dirname, '..', '..', '..');

// util.async's Lua unit tests (test/lua/), which CI also runs under plain lua5.4.
const LUA_TESTS = ['async_test.lua', 'async_waiting_test.lua', 'async_nested_test.lua'];

test("util.async's own Lua unit tests pass inside a runtime, run in a task", async () => {
  const dir = path.join(root, 'test', 'lua');
  for (const file of LUA_TESTS) {
    const lines = [];
    // A runtime per file; modulePaths finds the harness the files require.
    const rt = makeRuntime({ print: (l) => lines.push(String(l)), modulePaths: [dir] });
    // The unit tests expect Prosody's default hooks (a synchronous next tick, no
    // scheduler); the runtime installs loop-backed ones, which the next test
    // covers. In a task, run() and done() work where they are called, as the
    // unit tests expect (from JS they would start tasks of their own).
    const reset = 'local a = require "util.async" a.set_nexttick(nil) a.set_schedule_function(nil) ';
    const src = reset + fs.readFileSync(path.join(dir, file), 'utf8');
    const [suite] = rt.load(`return function() ${src}\nend`, { name: file });
    const result = await rt.call(suite);
    rt.closeSync();
    expect(lines[lines.length - 1]).toMatch(/^\d+ passed, 0 failed$/);
    expect(result).toEqual(expect.objectContaining({ failed: 0 }));
  }
});

test('sleep and next ticks run on the loop, and wait_for takes a JS Promise', async () => {
  const rt = makeRuntime();
  rt.set('later', (ms, v, fail) => ({
    p: new Promise((r, j) => setTimeout(() => (fail ? j(new Error('no')) : r(v)), ms)),
  }));
  rt.load(`
    local async = require "util.async"
    out = {}
    runner = async.runner(function(item)
      local v, err = async.wait_for(later(5, item * 2, item == 3).p)
      out[#out + 1] = tostring(v or err.message)
      async.sleep(0.005)
      out[#out + 1] = "slept"
    end)
    runner:run(1) runner:run(2) runner:run(3)
  `);
  expect(rt.get('out')).toEqual({}); // nothing ran synchronously past the first wait
  // Until the runner is idle again, however long the waits took (no fixed sleep).
  while (rt.load('return runner.state')[0] !== 'ready') await sleep(5);
  expect(rt.get('out')).toEqual(['2', 'slept', '4', 'slept', 'no', 'slept']);
});

test('a runner, next tick and schedule function may be callable tables, as in Prosody', async () => {
  const rt = makeRuntime();
  rt.load(`
    local async = require "util.async"
    out = {}
    local function callable(f) return setmetatable({}, { __call = function(_, ...) return f(...) end }) end
    -- Loop-backed hooks, passed as callables.
    async.set_nexttick(callable(function(f) tasks.start(function() coroutine.yield() f() end) end))
    async.set_schedule_function(callable(function(s, f) tasks.start(function() tasks.sleep(s) f() end) end))
    runner = async.runner(callable(function(item)
      async.sleep(0.002)
      out[#out + 1] = item
    end))
    runner:run("a") runner:run("b")
  `);
  expect(rt.get('out')).toEqual({});
  while (rt.load('return runner.state')[0] !== 'ready') await sleep(5);
  expect(rt.get('out')).toEqual(['a', 'b']);
  // A JS object is not callable from Lua: refused at once, not at the first item.
  rt.set('obj', new Date(0));
  expect(() => rt.load('require("util.async").runner(obj)')).toThrow(
    /bad argument #1 to 'runner' \(callable expected, got userdata\)/,
  );
});

test('after wait_for(a JS Promise) the item goes on inside a task, so it can wait on the task', async () => {
  const rt = makeRuntime();
  rt.set('later', (v) => ({ p: new Promise((r) => setTimeout(() => r(v), 2)) }));
  rt.load(`
    local async = require "util.async"
    out = {}
    runner = async.runner(function(item)
      local v = async.wait_for(later(item).p)
      out[#out + 1] = v .. " in task: " .. tostring(tasks.current_id() ~= nil)
      tasks.sleep(0.001)
      out[#out + 1] = "slept"
    end)
    runner:run("a")
  `);
  while (rt.load('return runner.state')[0] !== 'ready') await sleep(5);
  expect(rt.get('out')).toEqual(['a in task: true', 'slept']);
});

test("a task cancelled while its runner's item sleeps on the task closes the item and leaves the runner ready", async () => {
  const lines = [];
  const rt = makeRuntime({ print: (l) => lines.push(String(l)) });
  rt.load(`
    local async = require "util.async"
    runner = async.runner(function(item)
      local c <close> = setmetatable({}, { __close = function() print("closed " .. item) end })
      if item == "slow" then tasks.sleep(60) end
      print("done " .. item)
    end)
    function feed(item) runner:run(item) end
  `);
  const task = rt.start('feed', 'slow');
  expect(task.status).toBe('waiting');
  expect(rt.load('return runner.state')[0]).toBe('running');
  rt.cancel(task.id);
  await expect(task.result).rejects.toMatchObject({ code: 'ERR_TASK_CANCELLED' });
  expect(lines).toEqual(['closed slow']);
  expect(rt.load('return runner.state')[0]).toBe('ready');
  await rt.call('feed', 'next');
  expect(lines).toEqual(['closed slow', 'done next', 'closed next']);
});

// A runtime whose runner reports to JS: report(kind, value) for each item
// done ("done") and each error its watcher gets ("error"); `waitFor(kind,
// value)` resolves once such a report came. Host errors are collected too.
function reportingRuntime(options) {
  const rt = makeRuntime(options);
  const reports = [];
  const waiters = [];
  const taskErrors = [];
  rt.on('taskerror', (task, err) => taskErrors.push({ id: task.id, code: err.code }));
  rt.set('report', (kind, value) => {
    reports.push([kind, value]);
    for (const w of waiters.splice(0)) w();
  });
  rt.set('set_timeout', (ms, cb) => {
    setTimeout(cb, ms);
  });
  rt.set('later', (ms) => ({ p: new Promise((resolve) => setTimeout(() => resolve(ms), ms)) }));
  const waitFor = async (kind, match) => {
    const found = () => reports.find(([k, v]) => k === kind && (match === undefined || String(v).match(match)));
    while (!found()) await new Promise((resolve) => waiters.push(resolve));
    return found()[1];
  };
  return { rt, reports, taskErrors, waitFor };
}

// How an item waits before it goes wrong, and how it is fed: from a task
// (rt.call) or from JS (rt.load).
const WAITS = [
  ['util.async sleep', 'async.sleep(0.001)'],
  ['wait_for of a JS Promise', 'async.wait_for(later(1).p)'],
  ['a waiter whose done() a JS timer callback calls', 'local w, d = async.waiter() set_timeout(1, d) w()'],
  ['tasks.sleep (the task running the item waits)', 'tasks.sleep(0.001)'],
];
const RUNNER = (waitCode, badCode) => `
  local async = require "util.async"
  runner = async.runner(function(item)
    if item ~= "next" then ${waitCode} end
    if item == "bad" then ${badCode} end
    report("done", item .. " in task " .. tostring(tasks.current_id() ~= nil))
  end, { error = function(r, err) report("error", tostring(err)) end })
  -- Queues every item, then runs the queue: an item that suspends the task
  -- (tasks.sleep) keeps the items after it queued, not yet to be fed.
  function feed(...) for _, item in ipairs({...}) do runner:enqueue(item) end return runner:run() end
`;

// The kills' CPU budget: taskTimeout is wall time while Lua runs, so a
// budget of a few ms was spent by a plain load() on a loaded machine.
const KILL_MS = 250;

describe('an item killed or failing after a wait reaches the error watcher, and the runner takes its next item', () => {
  const LIMITS = [
    ['killed by taskTimeout', { taskTimeout: KILL_MS }, 'while true do end', /CPU budget exceeded/],
    ['past memoryLimit', { memoryLimit: 16 << 20 }, 'local s = ("x"):rep(64 << 20)', /not enough memory/],
    ['raising', {}, 'error("boom")', /boom/],
  ];
  const CASES = LIMITS.flatMap(([what, options, bad, message]) =>
    WAITS.flatMap(([how, wait]) => ['task', 'JS'].map((from) => [what, how, from, options, wait, bad, message])),
  );
  test.each(CASES)('%s after %s, fed from %s', async (what, how, from, options, wait, bad, message) => {
    const { rt, taskErrors, waitFor } = reportingRuntime(options);
    rt.load(RUNNER(wait, bad));
    // "next" is queued behind "bad" and runs only once the runner is free.
    if (from === 'task') {
      const fed = rt.call('feed', 'bad', 'next');
      if (how.startsWith('tasks.sleep') && what === 'killed by taskTimeout') {
        // The task that called run() is the one killed: it is told too.
        await expect(fed).rejects.toMatchObject({ code: 'ERR_TASK_TIMEOUT' });
      } else {
        await fed;
      }
    } else {
      rt.load('feed("bad", "next")');
    }
    expect(await waitFor('error')).toMatch(message);
    expect(await waitFor('done', /^next/)).toBe('next in task true');
    expect(taskErrors.filter((e) => e.id === null)).toEqual([]);
    expect(rt.load('return runner.state')).toEqual(['ready']);
    // Usable afterwards, from a task and from JS.
    await rt.call('feed', 'again');
    expect(await waitFor('done', /^again/)).toBe('again in task true');
  });
});

test('an item killed in run() itself: the caller gets the kill, the watcher the error, the runner goes on', async () => {
  const { rt, reports, taskErrors, waitFor } = reportingRuntime({ taskTimeout: KILL_MS });
  rt.load(RUNNER('', 'while true do end'));
  await expect(rt.call('feed', 'bad')).rejects.toMatchObject({ code: 'ERR_TASK_TIMEOUT' });
  expect(await waitFor('error')).toMatch(/CPU budget exceeded/);
  // From JS: the call is killed; run() at once after it takes the runner back.
  expect(() => rt.load('feed("bad")')).toThrow(expect.objectContaining({ code: 'ERR_TASK_TIMEOUT' }));
  expect(rt.load('local _, state = runner:run("next") return state')).toEqual(['ready']);
  expect(await waitFor('done', /^next/)).toBe('next in task true');
  expect(reports.filter(([k]) => k === 'error')).toHaveLength(2);
  await sleep(50); // the warden of the killed call's task comes later: nothing more to tell
  expect(reports.filter(([k]) => k === 'error')).toHaveLength(2);
  expect(rt.load('return runner.state')).toEqual(['ready']);
  expect(taskErrors.filter((e) => e.id === null)).toEqual([]);
});

test('the watcher hears of each killed item once', async () => {
  const { rt, reports, waitFor } = reportingRuntime({ taskTimeout: KILL_MS });
  rt.load(RUNNER('async.sleep(0.001)', 'while true do end'));
  rt.load('feed("bad", "bad", "next")');
  await waitFor('done', /^next/);
  await sleep(50);
  expect(reports.filter(([k]) => k === 'error')).toHaveLength(2);
});

test('run() from JS processes the queue in a task: the item can wait on it, has an id and its budget', async () => {
  const { rt, taskErrors, waitFor } = reportingRuntime({ taskTimeout: KILL_MS });
  rt.load(RUNNER('', 'while true do end'));
  rt.load(`
    local async = require "util.async"
    sleeper = async.runner(function(item)
      local id = tasks.current_id()
      tasks.sleep(0.001)
      report("done", item .. " " .. tostring(id ~= nil and id == tasks.current_id()))
    end)
  `);
  // Items that do not wait are done when run() returns, as in Prosody.
  expect(rt.load('return runner:run("quick")')).toEqual([true, 'ready', 0]);
  expect(await waitFor('done', /^quick/)).toBe('quick in task true');
  // An item that waits on the task: run() returns while it waits.
  expect(rt.load('return sleeper:run("slow")')).toEqual([true, 'running', 0]);
  expect(await waitFor('done', /^slow/)).toBe('slow true');
  // A Lua function JS calls, and a method called through a handle.
  // A Lua function JS calls through its handle.
  rt.load('function feed_sleeper(item) return sleeper:run(item) end');
  expect(rt.get('feed_sleeper')('by handle')).toBe(true);
  expect(await waitFor('done', /^by handle/)).toBe('by handle true');
  // The item's error raised by the default watcher reaches run()'s caller.
  rt.load('plain = require("util.async").runner(function(item) error("plain " .. item, 0) end)');
  expect(() => rt.load('plain:run("x")')).toThrow(/plain x/);
  expect(taskErrors).toEqual([]);
});

test('done() from JS resumes the item in a task of its own, on a later turn of the loop', async () => {
  const { rt, waitFor } = reportingRuntime();
  rt.load(`
    local async = require "util.async"
    runner = async.runner(function(item)
      local wait
      wait, wake = async.waiter()
      wait()
      report("done", item .. " in task " .. tostring(tasks.current_id() ~= nil))
    end)
    runner:run("a")
  `);
  expect(rt.load('wake() return runner.state')).toEqual(['waiting']); // not inside this call
  expect(await waitFor('done')).toBe('a in task true');
  // Ready again once the next tick picked the queue up.
  while (rt.load('return runner.state')[0] !== 'ready') await sleep(5);
});

test.each([
  ['examples/async-dns.js', /localhost A: 127\.0\.0\.1/],
  [
    'examples/async-sequence.js',
    /callbacks: 127\.0\.0\.1 -> hello from \/path\nwaiters: 127\.0\.0\.1 -> hello from \/path|waiters: 127\.0\.0\.1 -> hello from \/path\ncallbacks: 127\.0\.0\.1 -> hello from \/path/,
  ],
])('%s runs', (file, expected) => {
  const out = execFileSync(process.execPath, [file], { cwd: root, encoding: 'utf8', timeout: 20000 });
  expect(out).toMatch(expected);
});
