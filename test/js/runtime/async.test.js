// SPDX-License-Identifier: MIT
// util.async inside a runtime: its Lua unit tests, loop-backed hooks, JS Promises, the examples.
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { Runtime } = require('../../..');
const { makeRuntime, sleep } = require('../helpers');

const root = path.join(__dirname, '..', '..', '..');

test("util.async's own Lua unit tests pass inside a runtime", () => {
  const lines = [];
  const rt = new Runtime({ print: (l) => lines.push(String(l)) });
  // The unit tests expect Prosody's default hooks (a synchronous next tick, no
  // scheduler); the runtime installs loop-backed ones, which the next test covers.
  const reset = 'local a = require "util.async" a.set_nexttick(nil) a.set_schedule_function(nil) ';
  const src = reset + fs.readFileSync(path.join(root, 'test', 'lua', 'async_test.lua'), 'utf8');
  const [result] = rt.load(src, { name: 'async_test.lua' });
  rt.closeSync();
  expect(lines[lines.length - 1]).toMatch(/^\d+ passed, 0 failed$/);
  expect(result).toEqual(expect.objectContaining({ failed: 0 }));
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

test('a runner whose item is killed by taskTimeout, in run() or after a wait, takes the next item', async () => {
  const rt = makeRuntime({ taskTimeout: 20 });
  rt.load(`
    local async = require "util.async"
    out = {}
    runner = async.runner(function(item)
      if item == "spin" then while true do end end
      if item == "later" then async.sleep(0.001) while true do end end
      out[#out + 1] = item
    end, { error = function() end })
    function feed(item) runner:run(item) return runner.state end
  `);
  await expect(rt.call('feed', 'spin')).rejects.toMatchObject({ code: 'ERR_TASK_TIMEOUT' });
  expect(await rt.call('feed', 'a')).toBe('ready');
  // Driven from JS (the main thread, which never dies), with a watcher long
  // enough for the kill to land in run() itself, outside the item.
  rt.load('runner:onerror(function() for i = 1, 1e5 do end end)');
  expect(() => rt.load('feed("spin")')).toThrow(expect.objectContaining({ code: 'ERR_TASK_TIMEOUT' }));
  expect(rt.load('return feed("a2")')).toEqual(['ready']);
  rt.load('runner:onerror(function() end)');
  expect(await rt.call('feed', 'later')).toBe('waiting');
  // The continuation runs in a task of its own, which the budget kills.
  const killed = new Promise((resolve) => rt.on('taskerror', (task, err) => resolve(err.code)));
  expect(await killed).toBe('ERR_TASK_TIMEOUT');
  // The killed continuation held the runner, and nothing of it runs after
  // the kill (not even the next tick it would start: issue 18, a task
  // started by code being killed would outlive the kill), so the runner
  // still says "waiting"; its holder is dead, so the next run() takes it back.
  expect(rt.load('return runner.state')).toEqual(['waiting']);
  expect(await rt.call('feed', 'b')).toBe('ready');
  expect(rt.get('out')).toEqual(['a', 'a2', 'b']);
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
