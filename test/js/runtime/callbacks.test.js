// SPDX-License-Identifier: MIT
// Lua functions handed to JS as callbacks: where their errors go, and after close().
'use strict';
const { EventEmitter } = require('node:events');
const { makeRuntime } = require('../helpers');

let rt;
beforeEach(() => {
  rt = makeRuntime();
});

function nextTaskError(runtime) {
  return new Promise((resolve) => runtime.once('taskerror', (task, err) => resolve([task, err])));
}

// process.emitWarning, watched (Jest's process object does not emit 'warning').
function nextWarning() {
  return new Promise((resolve) => {
    const spy = jest.spyOn(process, 'emitWarning').mockImplementation((message, options) => {
      spy.mockRestore();
      resolve({ message, code: options && options.code });
    });
  });
}

test('a callback that raises when a timer calls it goes to taskerror and Node keeps running', async () => {
  rt.set('setTimeout', setTimeout);
  const heard = nextTaskError(rt);
  rt.load('setTimeout(function() error("boom in a timer") end, 5)');
  const [task, err] = await heard;
  expect(task).toEqual({ id: null, callback: true });
  expect(err).toMatchObject({ code: 'ERR_LUA_RUNTIME', name: 'LuaError' });
  expect(err.message).toMatch(/boom in a timer$/);
  expect(err.luaStack).toMatch(/stack traceback/);
  expect(rt.load('return 1 + 1')).toEqual([2]);
});

test('with no taskerror listener the failure is a process warning, never dropped', async () => {
  rt.set('setTimeout', setTimeout);
  const warned = nextWarning();
  rt.load('setTimeout(function() error("nobody listens") end, 1)');
  const w = await warned;
  expect(w.code).toBe('LUA_TASK_FAILED');
  expect(w.message).toMatch(/a Lua callback failed: .*nobody listens/);
});

test('a JS error thrown through a callback reaches taskerror as the same object', async () => {
  const thrown = new TypeError('from JS');
  rt.set('fail', () => {
    throw thrown;
  });
  rt.set('later', (fn) => setTimeout(fn, 1));
  const heard = nextTaskError(rt);
  rt.load('later(function() fail() end)');
  const [, err] = await heard;
  expect(err).toBe(thrown);
});

test('an emitter listener from Lua that raises is reported; emit returns and later listeners still run', () => {
  const em = new EventEmitter();
  rt.set('listen', (name, fn) => em.on(name, fn));
  const errors = [];
  rt.on('taskerror', (task, err) => errors.push([task, err.message]));
  rt.load(`
    got = {}
    listen("tick", function(n) error("bad tick " .. n) end)
    listen("tick", function(n) got[#got + 1] = n end)`);
  let after = 0;
  em.on('tick', () => {
    after += 1;
  });
  expect(em.emit('tick', 7)).toBe(true);
  expect(errors).toHaveLength(1);
  expect(errors[0][0]).toEqual({ id: null, callback: true });
  expect(errors[0][1]).toMatch(/bad tick 7$/);
  expect(rt.get('got')).toEqual([7]);
  expect(after).toBe(1);
});

test('a callback that returns normally gives its first result to the JS caller', () => {
  let callback;
  rt.set('keep', (fn) => {
    callback = fn;
  });
  rt.load('keep(function(a, b) return a + b, "ignored" end)');
  expect(callback(2, 3)).toBe(5);
});

test('a failing callback returns undefined to its JS caller', () => {
  let callback;
  rt.set('keep', (fn) => {
    callback = fn;
  });
  rt.on('taskerror', () => {});
  rt.load('keep(function() error("x") end)');
  expect(callback()).toBeUndefined();
});

test('a callback called while Lua runs raises back into the Lua caller, where pcall sees it', () => {
  rt.set('each', (list, fn) => list.forEach((x) => fn(x)));
  rt.on('taskerror', () => {
    throw new Error('must not be reported');
  });
  const [ok, msg] = rt.load('return pcall(each, {1, 2}, function(x) error("in each " .. x) end)');
  expect(ok).toBe(false);
  expect(String(msg)).toMatch(/in each 1$/);
});

test('a callback failing inside a task raises in that task', async () => {
  rt.set('each', (list, fn) => list.forEach((x) => fn(x)));
  rt.load('function t() each({1}, function() error("cb in task") end) end');
  await expect(rt.call('t')).rejects.toThrow(/cb in task$/);
});

test('a Lua function that JS took with get() still throws to its JS caller', () => {
  rt.load('function f() error("taken") end');
  const f = rt.get('f');
  rt.on('taskerror', () => {
    throw new Error('must not be reported');
  });
  expect(() => f()).toThrow(/taken$/);
});

test('a callback called after close() does not run and is reported; a taken function throws', async () => {
  let callback;
  rt.set('keep', (fn) => {
    callback = fn;
  });
  rt.load('ran = 0 keep(function() ran = ran + 1 return 1 end) function g() return 2 end');
  const g = rt.get('g');
  expect(callback()).toBe(1);
  rt.closeSync();
  const warned = nextWarning();
  expect(callback()).toBeUndefined();
  const w = await warned;
  expect(w.message).toMatch(/after its runtime was closed/);
  expect(() => g()).toThrow(expect.objectContaining({ code: 'ERR_RUNTIME_CLOSED' }));
});

test('a timer Lua set up that fires after close() does not end the process', async () => {
  rt.set('later', (fn, ms) => {
    setTimeout(fn, ms);
  });
  rt.load('later(function() error("never runs") end, 5)');
  const warned = nextWarning();
  rt.closeSync();
  const w = await warned;
  expect(w.message).toMatch(/after its runtime was closed/);
});

test('a callback that closes its runtime and then fails is reported as a warning', async () => {
  let callback;
  rt.set('keep', (fn) => {
    callback = fn;
  });
  rt.set('closeMe', () => rt.closeSync());
  rt.on('taskerror', () => {
    throw new Error('the closed runtime must not emit');
  });
  rt.load('keep(function() closeMe() error("after close") end)');
  const warned = nextWarning();
  expect(callback()).toBeUndefined();
  const w = await warned;
  expect(w.message).toMatch(/a Lua callback failed: .*after close$/);
});
