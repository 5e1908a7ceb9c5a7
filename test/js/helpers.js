// SPDX-License-Identifier: MIT
// Shared test helpers: runtimes closed after each test, Lua fixtures and checks, loop timing, child processes, Workers spinning in Lua.
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const os = require('node:os');
const { spawn } = require('node:child_process');
const { Worker } = require('node:worker_threads');
const { performance } = require('node:perf_hooks');
const { Runtime } = require('../..');

// The package root, for code that runs in a child process or a Worker.
const root = path.resolve(__dirname, '..', '..');

// A file of test/js/fixtures.
const fixture = (name) => path.join(__dirname, 'fixtures', name);

// ---- runtimes ---------------------------------------------------------------

// Runtimes to close when the current test ends. The hook is registered when a
// test file requires this module, so it runs after every test of that file.
const openRuntimes = new Set();
afterEach(() => {
  for (const rt of openRuntimes) rt.closeSync(); // closing twice is a no-op
  openRuntimes.clear();
  if (global.gc) global.gc(); // under --expose-gc: finalizers run between tests, not inside the next one
});

// Registers rt (e.g. from Runtime.open) to be closed when the current test
// ends, pass or fail; returns it.
function closeAfterTest(rt) {
  openRuntimes.add(rt);
  return rt;
}

// A new Runtime closed when the current test ends, pass or fail. The usual
// fixture is `let rt; beforeEach(() => { rt = makeRuntime(options); });`.
// (Call it in a test or a beforeEach, not a beforeAll: it lasts one test.)
function makeRuntime(options) {
  return closeAfterTest(new Runtime(options));
}

// makeRuntime whose print collects the lines Lua prints: returns { rt, lines }.
// The usual fixture is `beforeEach(() => ({ rt, lines } = makeRuntimeWithLines()));`.
function makeRuntimeWithLines(options = {}) {
  const lines = [];
  const rt = makeRuntime({ print: (l) => lines.push(l), ...options });
  return { rt, lines };
}

// Lua task functions that several files start: forever waits INDEFINITELY;
// echo returns what it is resumed with; count returns how many arguments it
// got; guarded(tag) waits INDEFINITELY and prints "closed <tag>" from a
// <close> variable when it ends.
const TASK_FUNCTIONS = `
    function forever() coroutine.yield("INDEFINITELY") end
    function echo() return coroutine.yield("INDEFINITELY") end
    function count(...) return select("#", ...) end
    function guarded(tag)
      local c <close> = setmetatable({}, { __close = function() print("closed " .. tag) end })
      coroutine.yield("INDEFINITELY")
    end`;

// What fn() threw; fails the test if it threw nothing.
function thrownBy(fn) {
  try {
    fn();
  } catch (e) {
    return e;
  }
  throw new Error('expected a throw');
}

// Checks for the security tests' escape attempts, on the runtime current()
// returns (the file's fixture) unless another is given:
//  - usable(r): r still runs code;
//  - attempt(body, r): runs `body` (Lua statements ending in a return) under
//    pcall and returns [ok, result or tostring(err)];
//  - refused(body, pattern, r): the attempt raised (matching `pattern`, if
//    given), never returned `canary`, and r is still usable.
function escapeChecks(current, canary) {
  const usable = (r = current()) => {
    expect(r.load('return 1 + 1')).toEqual([2]);
  };
  const attempt = (body, r = current()) =>
    r.load(`local ok, v = pcall(function() ${body} end) if ok then return true, v end return false, tostring(v)`);
  const refused = (body, pattern, r = current()) => {
    const [ok, v] = attempt(body, r);
    expect(ok).toBe(false);
    expect(v).not.toBe(canary);
    if (pattern) expect(v).toMatch(pattern);
    usable(r);
  };
  return { usable, attempt, refused };
}

// ---- timing -----------------------------------------------------------------

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// One turn of the event loop (after pending I/O and timers of this turn).
const turn = () => new Promise((r) => setImmediate(r));

// Loop turns until pred() holds: for what follows loop work of unknown length
// (a sanitizer build is several times slower than any fixed sleep allows).
async function until(pred) {
  while (!pred()) await turn();
}

// Upper slack for timing bounds: a loaded machine is late, never early.
const LATE_MS = 500;

// Expects `ms` to be about `target`: at least target - early (timers do not
// fire early, but clocks round), and less than target + LATE_MS.
function expectOnTime(ms, target, early = 1) {
  expect(ms).toBeGreaterThanOrEqual(target - early);
  expect(ms).toBeLessThan(target + LATE_MS);
}

// Watches how long the loop is held: a timer every `period` ms notes the
// longest gap between two of its runs. stop() ends the watch and returns that
// gap in ms.
function watchLoop(period = 5) {
  let last = performance.now();
  let maxGap = 0;
  const iv = setInterval(() => {
    const now = performance.now();
    maxGap = Math.max(maxGap, now - last);
    last = now;
  }, period);
  return {
    stop() {
      clearInterval(iv);
      return maxGap;
    },
  };
}

// ---- child processes --------------------------------------------------------

// Runs `node ...args` (a script and its arguments, or ['-e', code]) and
// resolves with { code, signal, stdout, stderr, lines, ms }: lines are the
// non-empty lines of stdout. A child still running after `timeout` ms is
// killed and shows up as signal SIGTERM (code null).
function runNode(args, { timeout = 15000, env, cwd } = {}) {
  const t0 = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { env, cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (s) => {
      stdout += s;
    });
    child.stderr.setEncoding('utf8').on('data', (s) => {
      stderr += s;
    });
    const timer = setTimeout(() => child.kill('SIGTERM'), timeout);
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr, lines: stdout.split('\n').filter(Boolean), ms: Date.now() - t0 });
    });
  });
}

// Expects a child run by runNode to have exited on its own, cleanly: status
// 0, no signal, nothing on stderr.
function expectCleanExit(r) {
  expect({ code: r.code, signal: r.signal, stderr: r.stderr }).toEqual({ code: 0, signal: null, stderr: '' });
}

// ---- Workers spinning in Lua ------------------------------------------------

// Starts a Worker that makes a runtime with `options`, runs `setup` (JS, with
// `rt` and `Runtime` in scope) and posts 'go' just before Lua starts, then
// 'returned' if the setup returns.
function spinningWorker(setup, options = {}) {
  const code = `
    const { Runtime } = require(${JSON.stringify(root)});
    const { parentPort } = require('node:worker_threads');
    const rt = new Runtime(${JSON.stringify(options)});
    parentPort.postMessage('go');
    ${setup}
    parentPort.postMessage('returned');
  `;
  return new Worker(code, { eval: true });
}

// Terminates the worker `delay` ms after it says 'go'; resolves with how long
// terminate() took. Rejects if terminate() takes 8 s, if the worker fails, or
// (unless `returns`: the setup starts Lua that spins later, from the loop) if
// the setup returned before the terminate, i.e. Lua was not spinning.
function terminateWhileSpinning(worker, { delay, returns = false }) {
  return new Promise((resolve, reject) => {
    const guard = setTimeout(() => reject(new Error('terminate() did not finish within 8 s')), 8000);
    worker.on('error', (e) => {
      clearTimeout(guard);
      reject(e);
    });
    let asked = false;
    worker.on('message', (m) => {
      if (m === 'returned' && !asked && !returns) reject(new Error('the Lua code returned instead of spinning'));
      if (m !== 'go') return;
      setTimeout(() => {
        asked = true;
        const t0 = Date.now();
        worker.terminate().then(() => {
          clearTimeout(guard);
          resolve(Date.now() - t0);
        }, reject);
      }, delay);
    });
  });
}

/**
 * Runs `script` in a child Node with `args`; with `killAfterMs`, SIGKILLs it
 * that long after it first appends to `logFile` (its "run" line, written
 * before Runtime.open: Node's own start-up, 60 ms or 600 ms as the machine
 * is loaded, is no part of what a kill test's kills are for).
 * @returns {Promise<{ code: number|null, signal: string|null, stderr: string, ranMs: number|null }>} ranMs: from
 *   its first log line to its exit (null if it logged nothing while a kill was due)
 */
function runKillable(script, args, logFile, killAfterMs) {
  return new Promise((resolve, reject) => {
    const logged = fs.statSync(logFile).size;
    let began = null;
    const child = spawn(process.execPath, [script, ...args.map(String)], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (s) => (stderr += s));
    let timer = null;
    let watch = null;
    if (killAfterMs !== undefined) {
      watch = setInterval(() => {
        if (fs.statSync(logFile).size === logged) return;
        clearInterval(watch);
        watch = null;
        began = Date.now();
        timer = setTimeout(() => child.kill('SIGKILL'), killAfterMs);
      }, 2);
    }
    child.on('error', reject);
    child.on('close', (code, signal) => {
      if (watch) clearInterval(watch);
      if (timer) clearTimeout(timer);
      resolve({ code, signal, stderr, ranMs: began === null ? null : Date.now() - began });
    });
  });
}

/**
 * Where a kill test kills a run: at a random instant within `ms` of its first
 * log line, and within the longest run that ended unkilled once one has
 * (`saw`): a run faster than `ms` (a quicker machine or Node) would otherwise
 * escape most kills, and the test would run out of rounds before its kills.
 * @param {number} ms
 * @returns {{ next(): number, saw(r: { signal: string|null, ranMs: number|null }): void }}
 */
function killWindow(ms) {
  let longest = 0;
  return {
    next: () => Math.floor(Math.random() * (longest > 0 ? Math.min(ms, Math.max(1, longest * 0.9)) : ms)),
    saw(r) {
      if (r.signal !== 'SIGKILL' && r.ranMs !== null) longest = Math.max(longest, r.ranMs);
    },
  };
}

/**
 * A maker of temporary directories, each removed after the file's tests
 * (afterAll). `const tmpdir = tempDirs('lua-tasks-x-')`; `tmpdir()` makes one.
 * @param {string} prefix
 * @returns {() => string}
 */
function tempDirs(prefix) {
  const made = [];
  afterAll(() => {
    for (const d of made) fs.rmSync(d, { recursive: true, force: true });
  });
  return () => {
    const d = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
    made.push(d);
    return d;
  };
}

/**
 * The SIGKILL test's rounds: runs `script` with `args(store, logFile)` again
 * and again, each killed at a random instant within `killWithinMs` of its
 * first log line, until `kills` kills landed mid-run, then once to its end.
 * A run that finishes first (its log says "finished ") is checked and the
 * rounds go on in a fresh store; a run that is not killed must exit 0 and
 * quietly; a log line "error ..." fails at once.
 * @param {{ script: string, args: (store: string, logFile: string) => unknown[], kills: number,
 *   killWithinMs: number, fresh?: (store: string) => Promise<void>, check: (store: string) => Promise<void> }} o
 * @returns {Promise<{ kills: number, rounds: number }>}
 */
async function killRounds({ script, args, kills: want, killWithinMs, fresh = async () => {}, check }) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lua-tasks-kills-'));
  const logFile = path.join(dir, 'runs.log');
  fs.writeFileSync(logFile, '');
  try {
    let kills = 0;
    let finished = false;
    let attempt = 0;
    let store = path.join(dir, `s${attempt}`);
    await fresh(store);
    let round = 0;
    const when = killWindow(killWithinMs);
    for (; round < want * 6 && !(finished && kills >= want); round++) {
      const killAfter = kills < want ? when.next() : undefined;
      const r = await runKillable(script, args(store, logFile), logFile, killAfter);
      when.saw(r);
      if (r.signal === 'SIGKILL') kills++;
      else expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
      const log = fs.readFileSync(logFile, 'utf8');
      expect(log).not.toMatch(/^error/m);
      finished = log.includes('finished ');
      if (finished && kills < want) {
        await check(store);
        store = path.join(dir, `s${++attempt}`);
        await fresh(store);
        fs.writeFileSync(logFile, '');
        finished = false;
      }
    }
    expect(finished).toBe(true);
    await check(store);
    expect(kills).toBe(want);
    return { kills, rounds: round };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * A store that hands every call to `inner` (a DirectoryStore, say), with the
 * members of `over` in place of its own: a test's hook on write().
 */
function delegatingStore(inner, over) {
  return {
    acquire: (name) => inner.acquire(name),
    load: (name) => inner.load(name),
    save: (name, bytes, info) => inner.save(name, bytes, info),
    reader: (name) => inner.reader(name),
    spaces: inner.spaces,
    write: (batch) => inner.write(batch),
    close: () => inner.close(),
    ...over,
  };
}

module.exports = {
  delegatingStore,
  tempDirs,
  killRounds,
  root,
  fixture,
  makeRuntime,
  makeRuntimeWithLines,
  closeAfterTest,
  TASK_FUNCTIONS,
  thrownBy,
  escapeChecks,
  sleep,
  turn,
  until,
  LATE_MS,
  expectOnTime,
  watchLoop,
  runNode,
  runKillable,
  killWindow,
  expectCleanExit,
  spinningWorker,
  terminateWhileSpinning,
};
