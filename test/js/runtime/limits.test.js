// SPDX-License-Identifier: MIT
// CPU limits: timeSlice preemption keeps the loop responsive; taskTimeout kills past pcall.
'use strict';
const { Runtime } = require('../../..');
const { makeRuntime } = require('../helpers');

test.each([
  ['timeSlice', 0],
  ['timeSlice', -1],
  ['taskTimeout', Infinity],
])('option %s = %p is refused with ERR_OUT_OF_RANGE', (key, value) => {
  expect(() => new Runtime({ [key]: value })).toThrow(expect.objectContaining({ code: 'ERR_OUT_OF_RANGE' }));
});

test('an option of the wrong type is ERR_INVALID_ARG_TYPE, one of the right type outside its range ERR_OUT_OF_RANGE, for every number option', () => {
  const numbers = ['memoryLimit', 'conversionLimit', 'timeSlice', 'taskTimeout', 'mailboxLimit', 'clockOffsetMs'];
  for (const key of [...numbers, 'maxValueBytes', 'maxPendingBytes', 'maxJournalBytes']) {
    expect(() => new Runtime({ [key]: '5' })).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_ARG_TYPE', name: 'TypeError' }),
    );
    expect(() => new Runtime({ [key]: -(2 ** 60) })).toThrow(
      expect.objectContaining({
        code: 'ERR_OUT_OF_RANGE',
        name: 'RangeError',
        message: expect.stringMatching(
          new RegExp(`"options.${key}" option must be .* from|more than .*Received number`),
        ),
      }),
    );
  }
});

test('spinning tasks are preempted, so a setInterval keeps firing, and taskTimeout kills them', async () => {
  const rt = makeRuntime({ timeSlice: 5, taskTimeout: 250 });
  rt.load(`function spin() while true do end end
           function pspin() while true do pcall(function() while true do end end) end end`);
  let ticks = 0;
  const interval = setInterval(() => ticks++, 10);
  const tasks = [rt.start('spin'), rt.start('spin'), rt.start('pspin'), rt.start('pspin')];
  const results = await Promise.allSettled(tasks.map((t) => t.result));
  clearInterval(interval);
  for (const r of results) {
    expect(r.status).toBe('rejected');
    expect(r.reason.code).toBe('ERR_TASK_TIMEOUT');
  }
  // Without preemption the loop turns only when a spinner is killed (4
  // times in the ~1 s of spinning); with it, between every 5 ms slice.
  expect(ticks).toBeGreaterThan(10);
  expect(rt.stats().preemptions).toBeGreaterThan(10);
});

test('a call from JS that spins is stopped with ERR_TASK_TIMEOUT and the runtime stays usable', () => {
  const rt = makeRuntime({ taskTimeout: 50 });
  expect(() => rt.load('while true do pcall(function() while true do end end) end')).toThrow(
    expect.objectContaining({ code: 'ERR_TASK_TIMEOUT' }),
  );
  expect(rt.load('local s = 0 for i = 1, 1000 do s = s + i end return s')).toEqual([500500]);
});

test('other tasks go on while one is killed', async () => {
  const rt = makeRuntime({ taskTimeout: 100 });
  rt.load(`function spin() while true do end end
           function nap() coroutine.yield("FOR", 20, "MILLISECONDS") return "rested" end`);
  const spinner = rt.start('spin');
  const napper = rt.start('nap');
  await expect(spinner.result).rejects.toMatchObject({ code: 'ERR_TASK_TIMEOUT' });
  await expect(napper.result).resolves.toBe('rested');
});

test('a taskTimeout under a nanosecond still kills (it became 0 ns, which means no limit)', async () => {
  const rt = makeRuntime({ taskTimeout: 1e-7 });
  rt.load('function spin() while true do end end');
  await expect(rt.call('spin')).rejects.toMatchObject({ code: 'ERR_TASK_TIMEOUT' });
});

describe('memoryLimit holds for values coming from JS into Lua code', () => {
  // A JS function's result, a field of a JS object and a promise's value were
  // pushed unchecked: the state went to 16 MB under a 4 MB limit, and every
  // later call was refused because the total stayed past the limit.
  const big = () => new Array(1e6).fill('zz');
  test("a call's result, a field and an awaited value are refused as Lua errors, and the runtime goes on", async () => {
    const rt = makeRuntime({ memoryLimit: 4 << 20 });
    class Box {
      constructor() {
        this.big = big();
      }
    }
    rt.set('get', big);
    rt.set('box', new Box());
    let resolve;
    rt.set(
      'later',
      () =>
        new Promise((r) => {
          resolve = r;
        }),
    );
    const tooMuch = /not enough memory: the JS value would take the Lua state to \d+ bytes, past memoryLimit 4194304/;
    expect(() => rt.load('KEEP = get()')).toThrow(tooMuch);
    const [ok, err] = rt.load('return pcall(function() return box.big end)');
    expect(ok).toBe(false);
    expect(err).toMatch(tooMuch);
    const task = rt.start(rt.load('return function() local ok, e = pcall(later) return {ok, e} end')[0]);
    resolve(big());
    const [aok, aerr] = await task.result;
    expect(aok).toBe(false);
    expect(aerr).toMatch(tooMuch);
    expect(rt.stats().memoryUsed).toBeLessThan(4 << 20);
    expect(rt.load('return 1 + 1')).toEqual([2]);
  });

  test("a module value past the limit fails the runtime's creation", () => {
    expect(() => new Runtime({ memoryLimit: 4 << 20, modules: { big: big() } })).toThrow(
      expect.objectContaining({ code: 'ERR_MEMORY_LIMIT' }),
    );
  });
});

test('a call from JS whose Lua code swallowed the kill in coroutine.resume still fails with ERR_TASK_TIMEOUT', async () => {
  const rt = makeRuntime({ taskTimeout: 30 });
  rt.load(`function spin() while true do end end
    function swallow() local co = coroutine.create(spin) coroutine.resume(co) return "survived" end`);
  expect(() => rt.get('swallow')()).toThrow(expect.objectContaining({ code: 'ERR_TASK_TIMEOUT' }));
  expect(() => rt.load('return swallow()')).toThrow(expect.objectContaining({ code: 'ERR_TASK_TIMEOUT' }));
  expect(rt.load('return 1 + 1')).toEqual([2]);
  // An earlier kill is not held against a later call made from inside a task.
  rt.set('inner', () => rt.load('return 41 + 1')[0]);
  expect(await rt.call(rt.load('return function() return inner() end')[0])).toBe(42);
});

test('an xpcall message handler cannot hold a killed task past taskTimeout, and xpcall still works', async () => {
  const rt = makeRuntime({ taskTimeout: 30 });
  // The handler runs inside the hook that raised the kill, where Lua runs no
  // hooks: one that looped hung the process.
  rt.load(`function stuck() xpcall(function() while true do end end, function(e) while true do end end) end
    function normal()
      local ok, e = xpcall(function() error("x", 0) end, function(e) return "handled " .. e end)
      local ok2, v = xpcall(function() coroutine.yield("FOR", 1, "MILLISECONDS") return 5 end, print)
      return {ok, e, ok2, v}
    end`);
  await expect(rt.call('stuck')).rejects.toMatchObject({ code: 'ERR_TASK_TIMEOUT' });
  expect(await rt.call('normal')).toEqual([false, 'handled x', true, 5]);
  expect(() => rt.load('xpcall(print, 42)')).toThrow(
    /^\[string "xpcall\(print, 42\)"\]:1: bad argument #2 to 'xpcall' \(function expected, got number\)/,
  );
  expect(() => rt.load('xpcall(print)')).toThrow(/bad argument #2 to 'xpcall' \(function expected, got no value\)/);
});

describe('taskTimeout stops pattern matching that backtracks for minutes', () => {
  // Lua's own matcher runs a whole string.find in one C call, where the count
  // hook never fires: each of these held the process for minutes or more.
  const setup = `s, p = ("a"):rep(40000), ("a-"):rep(30) .. "b"`;
  const calls = [
    'string.find(s, p)',
    'string.match(s, p)',
    'for _ in string.gmatch(s, p) do end',
    'string.gsub(s, p, "")',
    's:find(p)',
    '("x"):rep(1e5):match(".-.-.-.-.-y")',
    // Few steps, each scanning megabytes: a huge set, a huge template.
    'string.find(s, "[" .. ("b"):rep(4e6) .. "a]*c")',
    'string.gsub(s:sub(1, 1000), "a", ("%0"):rep(1e6))',
  ];
  test.each(calls)('%s in a task ends with ERR_TASK_TIMEOUT, through pcall, and the runtime goes on', async (call) => {
    const rt = makeRuntime({ taskTimeout: 50 });
    rt.load(setup);
    const fn = rt.load(`return function() local ok = pcall(function() ${call} end) return "survived" end`)[0];
    await expect(rt.call(fn)).rejects.toMatchObject({ code: 'ERR_TASK_TIMEOUT' });
    expect(rt.load('return ("key=value"):match("(%w+)=(%w+)")')).toEqual(['key', 'value']);
  });

  test('a call from JS is stopped the same way', () => {
    const rt = makeRuntime({ taskTimeout: 50 });
    rt.load(setup);
    expect(() => rt.load('return string.gsub(s, p, function() end)')).toThrow(
      expect.objectContaining({ code: 'ERR_TASK_TIMEOUT' }),
    );
    expect(rt.load('return string.gsub("a b", "%s", "_")')).toEqual(['a_b', 1]);
  });
});
