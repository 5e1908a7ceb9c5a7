// SPDX-License-Identifier: MIT
// Garbage collection: unreachable runtimes are freed; handles keep their state alive.
'use strict';
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { Runtime } = require('../..');

test('unreachable runtimes are freed: memory stays bounded over many rounds', () => {
  const out = execFileSync(process.execPath, ['--expose-gc', path.join(__dirname, 'fixtures', 'gc-runtimes.js')], {
    encoding: 'utf8',
  });
  const { grownMiB, f } = JSON.parse(out);
  expect(f).toBe(30001); // a Lua function handle outlives its Runtime object
  expect(grownMiB).toBeLessThan(100); // 300 more runtimes of ~1.5 MB each would be ~450 MiB
});

test('a runtime with a pending timed task is kept alive until the task ends', async () => {
  const results = [];
  (() => {
    const rt = new Runtime();
    rt.load('function t() coroutine.yield("FOR", 30, "MILLISECONDS") return "finished" end');
    rt.on('taskdone', (task, v) => results.push(v));
    rt.start('t');
  })();
  if (global.gc) global.gc();
  await new Promise((r) => setTimeout(r, 80));
  expect(results).toEqual(['finished']);
});
