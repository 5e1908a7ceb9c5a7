// SPDX-License-Identifier: MIT
// Liveness and teardown in child processes: what holds the process, close(), exit, Worker terminate.
'use strict';
const { fixture, runNode, expectCleanExit } = require('../helpers');

// Runs the fixture in `mode`. A hang is killed after 15 s and shows up as
// signal SIGTERM. "Exits early" is judged by behaviour, not by a time bound (a
// sanitizer build starts Node slowly): a process held by a wait would print
// that wait's line, or never exit.
const run = (mode) => runNode([fixture('liveness.js'), mode], { timeout: 15000 });

test.each([
  ['a FOR 200 ms task', 'for200'],
  ['an UNTIL_TIME 200 ms ahead task', 'until200'],
  ['a task started after unref() then ref()', 'unrefRef'],
  ['a task of a keepAlive: false runtime after ref()', 'keepAliveFalseThenRef'],
  ['a tasks.receive(200 ms) task', 'receive200'],
])('%s keeps the process alive until it is done', async (_, mode) => {
  const r = await run(mode);
  expectCleanExit(r);
  expect(r.lines).toHaveLength(1);
  const [word, ms] = r.lines[0].split(' ');
  expect(word).toBe('done');
  expect(Number(ms)).toBeGreaterThanOrEqual(190);
  expect(r.ms).toBeGreaterThanOrEqual(190);
});

test.each([
  ['keepAlive: false', 'keepAliveFalse'],
  ['rt.unref()', 'unref'],
])('with %s a FOR 5 s task lets the process exit early', async (_, mode) => {
  const r = await run(mode);
  expectCleanExit(r);
  expect(r.lines).toEqual(['started']);
});

test('a task waiting in tasks.receive() without a timeout does not hold the process', async () => {
  const r = await run('receive');
  expectCleanExit(r);
  expect(r.lines).toEqual(['waiting 1']);
});

test('an INDEFINITELY task does not hold the process', async () => {
  const r = await run('indefinitely');
  expectCleanExit(r);
  expect(r.lines).toEqual(['waiting 1']);
});

test('an INDEFINITELY task beside a FOR task: the process lives until the FOR is done, no longer', async () => {
  const r = await run('indefinitelyAndFor');
  expectCleanExit(r);
  expect(r.lines).toHaveLength(1);
  expect(Number(r.lines[0].split(' ')[1])).toBeGreaterThanOrEqual(140);
});

test('close() with waiting tasks cancels them all and lets the process exit at once', async () => {
  const r = await run('close');
  expectCleanExit(r);
  expect(r.lines.sort()).toEqual(['cancelled 100', 'closed']);
});

test.each([
  ['process.exit() with 10,000 waiting tasks', 'exit', ['tasks 10100']],
  ['process.exit() called from inside a task with 4,000 others waiting', 'exitInsideTask', ['tasks 4101']],
])('%s neither crashes nor hangs', async (_, mode, lines) => {
  const r = await run(mode);
  expectCleanExit(r);
  expect(r.lines).toEqual(lines);
});

test('a Worker terminated with 10,000 waiting tasks neither crashes nor hangs', async () => {
  const r = await run('worker');
  expectCleanExit(r);
  expect(r.lines).toEqual(['worker tasks 10100', 'terminated 1']);
});

test('four Workers terminated while their tasks keep waking neither crash nor hang', async () => {
  const r = await run('workers');
  expectCleanExit(r);
  expect(r.lines).toEqual(['all terminated']);
});
