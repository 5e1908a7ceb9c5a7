// SPDX-License-Identifier: MIT
// Lua can always be stopped: worker.terminate() and process.exit() end a
// runtime spinning in Lua, with or without limits (docs/security.md).
'use strict';
const { Worker } = require('node:worker_threads');
const { root, makeRuntime, runNode, spinningWorker, terminateWhileSpinning } = require('../helpers');

const spinners = [
  ['a call from JS looping', "rt.load('while true do end');"],
  [
    'a call from JS looping with a pcall around each step',
    "rt.load('while true do pcall(function() while true do end end) end');",
  ],
  ['a task started from JS', "rt.load('function spin() while true do end end'); rt.start('spin');"],
  [
    'a task woken by a timer',
    'rt.load(\'function spin() coroutine.yield("FOR", 1, "MILLISECONDS") while true do end end\'); rt.start(\'spin\');',
    {},
    true, // rt.start returns; the task spins from the timer
  ],
  ['a coroutine resumed by Lua', "rt.load('coroutine.resume(coroutine.create(function() while true do end end))');"],
  ['a coroutine.wrap function', "rt.load('coroutine.wrap(function() while true do end end)()');"],
  [
    'a coroutine that swallows the stop and resumes another',
    "rt.load('while true do coroutine.resume(coroutine.create(function() while true do end end)) end');",
  ],
  [
    'a deep recursion of pcalls',
    "rt.load('local function f(n) if n > 0 then pcall(f, n - 1) end while true do end end f(50)');",
  ],
  ['an error handler that loops', 'rt.load(\'xpcall(function() error("x") end, function() while true do end end)\');'],
  ['a string.gsub callback that loops', 'rt.load(\'string.gsub("abc", ".", function() while true do end end)\');'],
  ['a table.sort comparator that loops', "rt.load('table.sort({3, 2, 1}, function() while true do end end)');"],
  [
    'a __index metamethod that loops',
    "rt.load('local t = setmetatable({}, {__index = function() while true do end end}) return t.x');",
  ],
  [
    'a call from JS in a runtime with a timeSlice (calls are not preempted)',
    "rt.load('while true do end');",
    { timeSlice: 5 },
  ],
  [
    'a task whose <close> handler loops when the worker ends',
    "rt.load('function spin() local x <close> = setmetatable({}, {__close = function() while true do end end}) coroutine.yield(\"INDEFINITELY\") end'); rt.start('spin'); rt.load('while true do end');",
  ],
];

describe('worker.terminate() stops running Lua', () => {
  for (const [name, setup, options, returns] of spinners) {
    test(`${name}`, async () => {
      const ms = await terminateWhileSpinning(spinningWorker(setup, options), { delay: 150, returns });
      expect(ms).toBeLessThan(3000); // the contract: within about 1 s
    });
  }

  test('a Worker that ends on its own with a <close> handler looping in a waiting task still exits', async () => {
    const code = `
      const { Runtime } = require(${JSON.stringify(root)});
      const rt = new Runtime();
      rt.load('function spin() local x <close> = setmetatable({}, {__close = function() while true do end end}) coroutine.yield("INDEFINITELY") end');
      rt.start('spin');
    `;
    const w = new Worker(code, { eval: true });
    const exit = await new Promise((resolve) => w.on('exit', resolve));
    expect(exit).toBe(0);
  });
});

describe('process.exit() stops Workers running Lua', () => {
  test('the process exits while a Worker spins in Lua without limits', async () => {
    const script = `
      const { Worker } = require('node:worker_threads');
      const w = new Worker(\`
        const { Runtime } = require(${JSON.stringify(root)});
        require('node:worker_threads').parentPort.postMessage('go');
        new Runtime().load('while true do end');
      \`, { eval: true });
      w.on('message', () => setTimeout(() => process.exit(7), 100));
    `;
    const r = await runNode(['-e', script], { timeout: 10000 });
    expect(r.signal).toBeNull();
    expect(r.code).toBe(7);
  });
});

describe('the check costs nothing when nothing is stuck', () => {
  test('a runtime that runs Lua in short bursts is not stopped by the watch', async () => {
    const rt = makeRuntime();
    const until = Date.now() + 400; // spans several watch periods of busy Lua
    let n = 0;
    while (Date.now() < until) {
      rt.load('local s = 0 for i = 1, 20000 do s = s + i end return s');
      n += 1;
    }
    expect(n).toBeGreaterThan(0);
    expect(rt.load('local s = 0 for i = 1, 3e6 do s = s + 1 end return s')).toEqual([3e6]);
  });
});
