// SPDX-License-Identifier: MIT
// Runtimes inside worker_threads: calls both ways, several workers, terminate().
'use strict';
const path = require('node:path');
const { Worker } = require('node:worker_threads');
const { Runtime } = require('../../..');

const entry = path.join(__dirname, '..', '..', '..');

function worker(code, workerData) {
  return new Worker(
    `'use strict';
    const { Runtime } = require(${JSON.stringify(entry)});
    const { parentPort, workerData } = require('node:worker_threads');
    ${code}`,
    { eval: true, workerData },
  );
}

// Listen for 'exit' together with the message, never once it has arrived: when
// this thread is slow (a loaded machine), a Worker that posts and ends has both
// delivered in one turn, 'exit' right after the message with no await between.
const nextMessage = (w) =>
  new Promise((resolve, reject) => {
    w.once('message', resolve);
    w.once('error', reject);
    w.once('exit', (code) => reject(new Error(`the Worker exited (code ${code}) before it posted`)));
  });
const exited = (w) => new Promise((resolve) => w.once('exit', resolve));

test('a runtime in a Worker loads Lua, calls both ways and posts the results back', async () => {
  const w = worker(`
    const rt = new Runtime();
    rt.set('twice', (x) => x * 2);
    rt.load('function f(n) return twice(n) + 1, "second" end');
    const f = rt.get('f');
    parentPort.postMessage({
      load: rt.load('return 1, "two", { 3 }, nil'),
      jsCallsLua: f(20),
      luaCallsJs: rt.load('return twice(21)')[0],
      big: rt.load('return math.maxinteger')[0],
      bytes: rt.load('return "\\\\xff\\\\x00"')[0],
    });
    rt.closeSync();
  `);
  const [msg, code] = await Promise.all([nextMessage(w), exited(w)]);
  expect(msg.load).toEqual([1, 'two', [3], null]);
  expect(msg.jsCallsLua).toBe(41);
  expect(msg.luaCallsJs).toBe(42);
  expect(msg.big).toBe(9223372036854775807n);
  expect([...msg.bytes]).toEqual([0xff, 0x00]);
  expect(code).toBe(0);
});

test('a task in a Worker sleeps, calls JS and resolves its result', async () => {
  const w = worker(`
    const rt = new Runtime();
    rt.set('twice', (x) => x * 2);
    rt.load('function f(n) coroutine.yield("FOR", 5, "MILLISECONDS") return twice(n) end');
    rt.call('f', 21).then((v) => { parentPort.postMessage(v); rt.closeSync(); });
  `);
  const [msg, code] = await Promise.all([nextMessage(w), exited(w)]);
  expect(msg).toBe(42);
  expect(code).toBe(0);
});

test('errors inside a Worker keep their classes and codes', async () => {
  const w = worker(`
    const rt = new Runtime();
    const out = {};
    try { rt.load('x = = 1', { name: 'w.lua' }); } catch (e) { out.syntax = [e.name, e.code, e.source, e.line]; }
    const boom = new Error('in worker');
    rt.set('thrower', () => { throw boom; });
    try { rt.load('thrower()'); } catch (e) { out.same = e === boom; }
    rt.closeSync();
    try { rt.load('return 1'); } catch (e) { out.closed = e.code; }
    parentPort.postMessage(out);
  `);
  const [msg, code] = await Promise.all([nextMessage(w), exited(w)]);
  expect(msg).toEqual({ syntax: ['LuaError', 'ERR_LUA_SYNTAX', 'w.lua', 1], same: true, closed: 'ERR_RUNTIME_CLOSED' });
  expect(code).toBe(0);
});

// Old bug: the test above awaited the message and only then listened for
// 'exit', so it hung whenever both came in one turn of a busy main thread.
test('a Worker that posts and exits while the main thread is busy is seen to do both', async () => {
  const posted = new Int32Array(new SharedArrayBuffer(4));
  const w = worker(
    `
    const rt = new Runtime();
    const v = rt.load('return 6 * 7')[0];
    rt.closeSync();
    parentPort.postMessage(v);
    Atomics.store(workerData, 0, 1);
    Atomics.notify(workerData, 0);
  `,
    posted,
  );
  const both = Promise.all([nextMessage(w), exited(w)]);
  Atomics.wait(posted, 0, 0, 10000); // busy until the Worker has posted, then a while more
  Atomics.wait(posted, 0, 1, 300);
  expect(await both).toEqual([42, 0]);
});

test('a Worker that exits without closing its runtimes exits cleanly', async () => {
  const w = worker(`
    for (let i = 0; i < 20; i++) {
      const rt = new Runtime();
      rt.set('cb', (x) => x);
      rt.load('data = {} for i = 1, 1000 do data[i] = cb(i) end function f() return #data end');
    }
    parentPort.postMessage('done');
  `);
  const [msg, code] = await Promise.all([nextMessage(w), exited(w)]);
  expect(msg).toBe('done');
  expect(code).toBe(0);
});

test('process.exit() inside a Worker with a loaded runtime gives that exit code', async () => {
  const w = worker(`
    const rt = new Runtime();
    rt.load('function w() coroutine.yield("FOR", 60) end');
    rt.start('w');
    process.exit(7);
  `);
  expect(await exited(w)).toBe(7);
});

describe('terminate()', () => {
  // Node documents terminate() as resolving with the exit code, which is 1
  // for a Worker stopped this way.
  test('with functions, data and waiting tasks loaded: no crash, exit code 1', async () => {
    const w = worker(`
      const runtimes = [];
      for (let r = 0; r < 5; r++) {
        const rt = new Runtime();
        rt.set('cb', (x) => x + 1);
        rt.set('obj', { when: new Date(), list: [1, 2, 3] });
        rt.load('data = {} for i = 1, 10000 do data[i] = "v" .. i end');
        rt.load('function w() coroutine.yield("FOR", 60) end function i() coroutine.yield("INDEFINITELY") end');
        for (let k = 0; k < 1000; k++) { rt.start('w'); rt.start('i'); }
        runtimes.push(rt, rt.get('w'));
      }
      parentPort.postMessage(runtimes.filter((x) => x instanceof Runtime).reduce((n, rt) => n + rt.stats().tasks, 0));
      setInterval(() => {}, 1000);
    `);
    const exit = exited(w);
    expect(await nextMessage(w)).toBe(10000);
    const code = await w.terminate();
    expect(code).toBe(1);
    expect(await exit).toBe(1);
  });

  test('while a task awaits a JS promise: no crash, exit code 1', async () => {
    const w = worker(`
      const rt = new Runtime();
      rt.set('later', () => new Promise(() => {}));
      rt.load('function f() return later() end');
      rt.start('f');
      parentPort.postMessage(rt.stats().tasks);
      setInterval(() => {}, 1000);
    `);
    expect(await nextMessage(w)).toBe(1);
    expect(await w.terminate()).toBe(1);
  });

  // Node-API calls fail once termination begins: a Runtime being made then
  // must throw, not go on with values it never got.
  test('while it makes runtimes in a loop: no crash', async () => {
    for (let i = 0; i < 10; i++) {
      const w = worker(`
        parentPort.postMessage('go');
        for (;;) {
          const rt = new Runtime({ memoryLimit: 1 << 20 });
          rt.set('f', (x) => ({ x, s: 'v' + x }));
          rt.load('function t(n) local r = f(n) coroutine.yield("FOR", 1) return r end');
          rt.start('t', 1);
          rt.load('for i = 1, 100 do f(i) end');
          rt.closeSync();
        }
      `);
      await nextMessage(w);
      await new Promise((r) => setTimeout(r, 5 + 7 * i));
      expect(await w.terminate()).toBe(1);
    }
  });

  test('right after the Worker starts: no crash', async () => {
    const w = worker(`
      const rt = new Runtime();
      rt.load('data = {} for i = 1, 1e5 do data[i] = i end');
      setInterval(() => {}, 1000);
    `);
    await new Promise((r) => w.once('online', r));
    expect(await w.terminate()).toBe(1);
  });
});

test('several Workers run runtimes at once and the main thread keeps working', async () => {
  const main = new Runtime();
  main.load('function fib(n) if n < 2 then return n end return fib(n - 1) + fib(n - 2) end');
  const workers = Array.from({ length: 4 }, (_, i) =>
    worker(
      `
      const rt = new Runtime();
      rt.set('id', workerData);
      rt.load('function fib(n) if n < 2 then return n end return fib(n - 1) + fib(n - 2) end');
      rt.load('function t(n) local s = 0 for i = 1, n do s = s + fib(15) coroutine.yield("FOR", 1, "MILLISECONDS") end return s end');
      rt.call('t', 5).then((s) => { parentPort.postMessage({ id: rt.get('id'), s, g: rt.get('g') }); rt.closeSync(); });
    `,
      i,
    ),
  );
  const done = Promise.all(workers.map((w) => Promise.all([nextMessage(w), exited(w)])));
  // Meanwhile the main thread's own runtime works and sees none of the Workers' globals.
  main.set('g', 'main');
  const mainResults = [];
  for (let i = 0; i < 20; i++) mainResults.push(main.get('fib')(15));
  const results = await done;
  expect(mainResults).toEqual(Array(20).fill(610));
  expect(results.map(([m]) => m).sort((a, b) => a.id - b.id)).toEqual([0, 1, 2, 3].map((id) => ({ id, s: 3050 })));
  expect(results.map(([, code]) => code)).toEqual([0, 0, 0, 0]);
  expect(main.load('return g, fib(10)')).toEqual(['main', 55]);
  main.closeSync();
});

test('Workers started and terminated in a loop leave the main thread working', async () => {
  for (let i = 0; i < 5; i++) {
    const w = worker(`
      const rt = new Runtime();
      rt.load('function w() coroutine.yield("INDEFINITELY") end');
      for (let k = 0; k < 100; k++) rt.start('w');
      parentPort.postMessage('ready');
      setInterval(() => {}, 1000);
    `);
    await nextMessage(w);
    expect(await w.terminate()).toBe(1);
  }
  const rt = new Runtime();
  expect(rt.load('return "main ok"')).toEqual(['main ok']);
  rt.closeSync();
});
