// SPDX-License-Identifier: MIT
// The capability boundary (docs/security.md) against escape: no internal module, host value or JS global is reachable from Lua.
//
// One test per attempt. Each asserts the safe outcome and that the runtime is
// still usable afterwards; the canary is boundary-fixture.js's.
'use strict';
const { makeRuntime, escapeChecks, sleep, thrownBy } = require('../helpers');
const { LIMITS, CANARY } = require('./boundary-fixture');

let rt;
beforeEach(() => {
  rt = makeRuntime(LIMITS);
});

// refused(body): the attempt raised, and never returned the canary (a Lua value that failed to be a handle).
const { usable, refused } = escapeChecks(() => rt, CANARY);

describe('What was found, item 1: escape to the host (reproductions)', () => {
  test('require("lua-tasks.host") is not found: no internal module is reachable', () => {
    refused('return require("lua-tasks.host")["then"]', /module 'lua-tasks.host' not found/);
  });

  test("the issue's full chain with no host function fails at its first step", () => {
    refused(
      `
      local f = require("lua-tasks.host")["then"]
      local ok, box = pcall(f, { [{}] = 1 })
      return box.constructor.constructor("return ${CANARY}")()`,
      /not found/,
    );
  });

  test('a ConversionError thrown at Lua is an error value, not a handle to its constructor', () => {
    rt.set('f', () => 1);
    const [code, ctor, ctype] = rt.load(`
      local ok, e = pcall(f, { [{}] = 1 })
      return e.code, e.constructor, type(e)`);
    expect([code, ctor, ctype]).toEqual(['ERR_CONVERSION', null, 'userdata']);
    refused(
      `local ok, e = pcall(f, { [{}] = 1 }) return e.constructor.constructor("return ${CANARY}")()`,
      /attempt to index a nil value/,
    );
  });

  test('a ConversionError from a JS result that cannot cross is an error value too', () => {
    rt.set('sym', () => Symbol('s'));
    expect(rt.load('local ok, e = pcall(sym) return ok, e.code, e.constructor, e.__proto__')).toEqual([
      false,
      'ERR_CONVERSION',
      null,
      null,
    ]);
    usable();
  });

  test('error(jsFunction) inside a callback of an embedder function comes back as an error value, not the function', () => {
    rt.set('each', (a, fn) => a.forEach(fn));
    expect(
      rt.load(`
      local ok, e = pcall(each, { 1 }, function() error(each) end)
      return ok, type(e), e.constructor, pcall(e)`),
    ).toEqual([false, 'userdata', null, false, expect.stringMatching(/attempt to call a JS error value/)]);
    refused(`local ok, e = pcall(each, { 1 }, function() error(each) end) return e.constructor("return ${CANARY}")()`);
  });

  test('error(jsFunction) reaching JS is a LuaError carrying the function as value, not the bare function', () => {
    const each = (a, fn) => a.forEach(fn);
    rt.set('each', each);
    const err = thrownBy(() => rt.load('each({ 1 }, function() error(each) end)'));
    expect(typeof err).toBe('object');
    expect(err.code).toBe('ERR_LUA_RUNTIME');
    expect(err.value).toBe(each);
    usable();
  });

  test('indexing a JS object with a table key is refused before any toString can run Lua inside V8', () => {
    rt.set(
      'obj',
      new (class {
        constructor() {
          this.x = 1;
        }
      })(),
    );
    rt.set('fn', () => 1);
    rt.load('ran = false');
    refused(
      `return obj[setmetatable({}, { __tostring = function() ran = true error(fn) end })]`,
      /cannot index a JS object with a table key \(keys must be strings or numbers\)/,
    );
    refused('return obj[{ toString = function() ran = true error(fn) end }]', /table key/);
    expect(rt.load('return ran')).toEqual([false]);
  });

  test('a promise rejected with a function reaches Lua as an error value, and JS gets the function back', async () => {
    const fn = () => 'secret';
    rt.set('rej', () => Promise.reject(fn));
    rt.load(`function t()
      local ok, e = pcall(rej)
      assert(not ok and type(e) == "userdata")
      assert(e.constructor == nil and e.call == nil and not pcall(e))
      error(e)
    end`);
    await expect(rt.call('t')).rejects.toBe(fn);
    usable();
  });

  test('a sloppy-mode JS function called from Lua never gets globalThis as this', () => {
    let seen;
    // eslint-disable-next-line no-new-func
    const sloppy = new Function('return this');
    rt.set('sloppy', function probe() {
      seen = sloppy.call(this);
      return seen === globalThis || this === globalThis;
    });
    rt.set('raw', sloppy);
    expect(rt.load('return sloppy()')).toEqual([false]);
    expect(Object.getPrototypeOf(seen)).toBeNull();
    expect(Object.isFrozen(seen)).toBe(true);
    expect(Object.getOwnPropertyNames(seen)).toEqual([]);
    // What Lua gets back from `return this`: an empty table, nothing of the host.
    expect(rt.load('local t = raw() return type(t), next(t)')).toEqual(['table', null]);
    usable();
  });
});

describe('no internal module or host value is reachable', () => {
  test('require finds no internal module by any likely name', () => {
    for (const name of [
      'lua-tasks.host',
      'lua-tasks',
      'lua-tasks.preload',
      'lua-tasks.resolve',
      'host',
      'package',
      'debug',
      'io',
      'ffi',
      'jit',
    ]) {
      refused(`return require(${JSON.stringify(name)})`, /not found/);
    }
    expect(rt.load('return type(require("util.async")), type(require("tasks"))')).toEqual(['table', 'table']);
  });

  test('util.async holds no JS value: every field is a Lua value', () => {
    expect(
      rt.load(`local a = require "util.async"
      for k, v in pairs(a) do if type(v) == "userdata" then return k end end
      return "none"`),
    ).toEqual(['none']);
  });

  test('the tasks table holds exactly its documented Lua API', () => {
    expect(
      rt.load('local t = {} for k in pairs(tasks) do t[#t + 1] = k end table.sort(t) return table.concat(t, " ")'),
    ).toEqual([
      'await cancel continue_as_new current_id durable instruction patched reason receive resume resume_inline send sleep start start_durable state status step store unit wait',
    ]);
  });

  test('util.async wait_for on a rejected promise gives nil and an error value, without a host module', async () => {
    const fn = () => CANARY;
    rt.set('rejWith', (v) => ({ p: Promise.reject(v === 'fn' ? fn : new Error('no')) }));
    rt.load(`
      local async = require "util.async"
      out = {}
      runner = async.runner(function(kind)
        local v, err = async.wait_for(rejWith(kind).p)
        out[#out + 1] = tostring(v) .. " " .. type(err) .. " " .. tostring(err) .. " " .. tostring(pcall(err))
      end)
      runner:run("error") runner:run("fn")
    `);
    while (rt.load('return runner.state')[0] !== 'ready') await sleep(5);
    expect(rt.get('out')).toEqual([
      'nil userdata Error: no false',
      'nil userdata (error object is a JS function) false',
    ]);
  });

  test('getting process, require, Function or globalThis by name finds nothing', () => {
    for (const name of [
      'process',
      'Function',
      'globalThis',
      'global',
      'module',
      'exports',
      '__dirname',
      'Buffer',
      'eval',
    ]) {
      expect(rt.load(`return ${name}`)).toEqual([null]);
    }
    refused('return require("process")', /not found/);
    refused('return require("child_process")', /not found/);
  });

  test('print hands JS only strings: printing JS objects and error values runs none of their code', () => {
    const lines = [];
    const r = makeRuntime({ ...LIMITS, print: (l) => lines.push(l) });
    let ran = 0;
    const o = new (class {
      toString() {
        ran++;
        return 'x';
      }
    })();
    r.set('o', o);
    r.set('t', () => {
      throw o;
    });
    r.load('local ok, e = pcall(t) print(o, e)');
    expect(lines).toHaveLength(1);
    expect(typeof lines[0]).toBe('string');
    expect(lines[0]).toMatch(/^JS object: \S+\t\(error object is a JS object\)$/);
    expect(ran).toBe(0);
    usable(r);
  });

  test('util.async wait_for of a thenable JS object does not call its then', async () => {
    let ran = 0;
    const thenable = new (class {
      then() {
        ran++;
      }
    })();
    rt.set('thenable', thenable);
    rt.load(`
      local async = require "util.async"
      runner = async.runner(function() got = async.wait_for(thenable) == thenable end)
      runner:run(1)
    `);
    while (rt.load('return runner.state')[0] !== 'ready') await sleep(5);
    expect(rt.load('return got')).toEqual([true]);
    expect(ran).toBe(0);
  });

  test('a getter of a plain object runs once, when the object is copied, never when Lua reads the copy', () => {
    let ran = 0;
    rt.set('cfg', {
      get v() {
        ran++;
        return 'copied';
      },
    });
    expect(rt.load('return cfg.v, cfg.v, rawget(cfg, "v")')).toEqual(['copied', 'copied', 'copied']);
    expect(ran).toBe(1);
  });

  test('the print function Lua calls gets the frozen receiver, not globalThis', () => {
    let receiver;
    const r = makeRuntime({
      print: function p() {
        receiver = this;
      },
    });
    r.load('print("x")');
    expect(receiver).not.toBe(globalThis);
    expect(Object.getPrototypeOf(receiver)).toBeNull();
    usable(r);
  });
});
