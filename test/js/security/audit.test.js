// SPDX-License-Identifier: MIT
// An attacker's audit of the capability boundary and of stopping Lua from outside (issue 18).
//
// One test per attempt, with runtimes built as an embedder plausibly would
// (libs 'safe', ordinary functions, objects, Dates, Maps, Errors, promises).
// Each asserts the safe outcome and that the runtime is still usable. The
// canary for an escape: Lua code that reached Function would run
// Function("return 4242")() and get 4242.
'use strict';
const vm = require('node:vm');
const { makeRuntime, escapeChecks, spinningWorker, terminateWhileSpinning } = require('../helpers');
const LIMITS = { memoryLimit: 64 * 1024 * 1024, taskTimeout: 1000, timeSlice: 10 };
const CANARY = 4242;

// S(...) in Lua: its arguments as one string, each by tostring (nil reads "nil").
const S =
  'function S(...) local t = {} for i = 1, select("#", ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ",") end';

let rt;
beforeEach(() => {
  rt = makeRuntime(LIMITS);
  rt.load(S);
});

const { usable, refused } = escapeChecks(() => rt, CANARY);

class Account {
  constructor() {
    this.owner = 'ann';
    this.balance = 10;
    this.notify = (msg) => `sent ${msg}`;
  }

  get secret() {
    return 'getter ran';
  }

  deposit(n) {
    this.balance += n;
    return this.balance;
  }
}

describe('the boundary, with the values an embedder hands over', () => {
  test('an arrow function like (x) => x * 2 is callable and has no constructor, call, bind or prototype', () => {
    rt.set('double', (x) => x * 2);
    expect(rt.load('return double(21)')).toEqual([42]);
    for (const field of ['constructor', 'call', 'bind', 'apply', 'prototype', '__proto__']) {
      refused(`return double.${field}("return ${CANARY}")()`, /attempt to index a function value/);
    }
  });

  test('an async function resolving to a class instance gives own data only: no getter, no method, no constructor', async () => {
    rt.set('fetchAccount', async () => new Account());
    rt.load(`function t()
      local a = fetchAccount()
      return S(a.owner, a.balance, a.secret, a.deposit, a.constructor, a.__proto__, a.notify("hi"))
    end`);
    await expect(rt.call('t')).resolves.toBe('ann,10,nil,nil,nil,nil,sent hi');
    refused(`return fetchAccount().constructor.constructor("return ${CANARY}")()`);
    usable();
  });

  test('a method read from a class instance is nil, so a method cannot be called off its object', () => {
    rt.set('acct', new Account());
    refused('return acct.deposit(5)', /attempt to call a nil value/);
    expect(rt.load('return acct.balance')).toEqual([10]);
  });

  test('a function held in an own property is callable only, and its constructor is not reachable', () => {
    rt.set('acct', new Account());
    refused(`return acct.notify.constructor("return ${CANARY}")()`, /attempt to index a function value/);
  });

  test('a Date crosses by reference: no method, no prototype, and the same Date back in JS', () => {
    const d = new Date(0);
    rt.set('d', d);
    rt.set('same', (x) => x === d);
    expect(rt.load('return S(d.getTime, d.toISOString, d.constructor, same(d), type(d))')).toEqual([
      'nil,nil,nil,true,userdata',
    ]);
    expect(rt.load('return tostring(d)')[0]).toMatch(/^JS object: /);
    usable();
  });

  test('a Map is copied: its functions are callable only and its methods are not there', () => {
    rt.set(
      'm',
      new Map([
        ['f', (x) => x + 1],
        ['n', 1],
      ]),
    );
    expect(rt.load('return S(m.f(1), m.n, m.get, m.set, type(m))')).toEqual(['2,1,nil,nil,table']);
    refused(`return m.f.constructor("return ${CANARY}")()`, /attempt to index a function value/);
  });

  test('JSON.parse handed over: a __proto__ key is plain data and the result is a copy', () => {
    rt.set('parse', JSON.parse);
    expect(
      rt.load(
        'local t = parse(\'{"__proto__": {"x": 1}, "constructor": 5}\') return type(t), t.__proto__.x, t.constructor',
      ),
    ).toEqual(['table', 1, 5]);
    expect({}.x).toBeUndefined();
    usable();
  });

  test('JSON.parse with a Lua reviver gives the reviver keys and copied values, never the holder object', () => {
    rt.set('parse', JSON.parse);
    const [types] = rt.load(`
      local seen = {}
      parse('{"a": {"b": 1}}', function(...) seen[#seen + 1] = select("#", ...) .. ":" .. type(select(2, ...)) return select(2, ...) end)
      return table.concat(seen, ",")`);
    // (key, value) and on Node 21+ a context object: each a Lua value, never `this` (the holder)
    expect(types).toMatch(/^[23]:number,[23]:table,[23]:table$/);
    usable();
  });

  test('a Lua table with a __proto__ key reaches JS as an own property, and no prototype changes', () => {
    let got;
    rt.set('take', (o) => {
      got = o;
    });
    rt.load('take({ __proto__ = { polluted = true }, constructor = 1 })');
    // an Object.prototype (the addon's realm may not be Jest's): nothing was set as prototype
    expect(Object.getPrototypeOf(Object.getPrototypeOf(got))).toBe(null);
    expect(got.polluted).toBeUndefined();
    expect(Object.getOwnPropertyDescriptor(got, '__proto__').value).toEqual({ polluted: true });
    expect({}.polluted).toBeUndefined();
    usable();
  });

  test('an Error thrown by a callback hides its extra fields and its cause: message, name, code and stack only', () => {
    rt.set('fail', () => {
      const e = new Error('bad input', { cause: { fn: Function } });
      e.code = 'E_BAD';
      e.secret = 'token';
      e.fn = Function;
      throw e;
    });
    expect(
      rt.load(`local ok, e = pcall(fail)
      return S(e.message, e.code, e.name, type(e.stack), e.secret, e.fn, e.cause, e.constructor)`),
    ).toEqual(['bad input,E_BAD,Error,string,nil,nil,nil,nil']);
    refused(`local ok, e = pcall(fail) return e.fn("return ${CANARY}")()`);
  });

  test('a rejected promise with a plain object reaches a task as an error value, not a table', async () => {
    rt.set('fetchSomething', async () => {
      throw { status: 500, headers: { authorization: 'Bearer x' } }; // eslint-disable-line no-throw-literal
    });
    rt.load(`function t()
      local ok, e = pcall(fetchSomething)
      return S(ok, type(e), e.status, e.headers, tostring(e))
    end`);
    await expect(rt.call('t')).resolves.toBe('false,userdata,nil,nil,(error object is a JS object)');
    usable();
  });

  test('an Error laundered through an identity function comes back as an error value again', () => {
    rt.set('fail', () => {
      const e = new Error('x');
      e.secret = 'token';
      throw e;
    });
    rt.set('id', (x) => x);
    expect(
      rt.load('local ok, e = pcall(fail) local e2 = id(e) return S(type(e2), e2.message, e2.secret, e2 == e)'),
    ).toEqual(['userdata,x,nil,false']);
    usable();
  });

  test('a sloppy function returning this gives Lua an empty table, not globalThis', () => {
    // eslint-disable-next-line no-new-func
    rt.set('self', new Function('return this'));
    expect(rt.load('local g = self() return S(type(g), next(g), g.process, g.Function)')).toEqual([
      'table,nil,nil,nil',
    ]);
    usable();
  });

  test('a sloppy function returning its arguments object gives the arguments only, not callee', () => {
    // eslint-disable-next-line no-new-func
    rt.set('args', new Function('return arguments'));
    expect(rt.load('local a = args(1, 2) return S(a["0"], a["1"], a.callee, a.length)')).toEqual(['1,2,nil,nil']);
    usable();
  });

  test('a sloppy function stored in a Map value still gets the frozen receiver', () => {
    // eslint-disable-next-line no-new-func
    const isGlobal = new Function('return this === globalThis');
    rt.set('m', new Map([['probe', isGlobal]]));
    expect(rt.load('return m.probe()')).toEqual([false]);
  });

  test('an object method called through an own property does not see its object', () => {
    const obj = { secret: 'x' };
    obj.leak = function leak() {
      return this === obj ? 'object' : this === globalThis ? 'global' : 'other';
    };
    rt.set(
      'obj',
      new (class {
        constructor() {
          this.leak = obj.leak;
        }
      })(),
    );
    expect(rt.load('return obj.leak()')).toEqual(['other']);
  });

  test('a forEach-style callback receives the array as a table copy, never the JS array', () => {
    rt.set('each', (a, fn) => a.forEach(fn));
    expect(
      rt.load('local r each({ 7 }, function(v, i, arr) r = type(arr) .. ":" .. tostring(arr.map) end) return r'),
    ).toEqual(['table:nil']);
    usable();
  });

  test('a Lua valueOf run by JS coercion gets no arguments and no this', () => {
    rt.set('double', (x) => x * 2);
    expect(rt.load('local n return double({ valueOf = function(...) n = select("#", ...) return 4 end }), n')).toEqual([
      8, 0,
    ]);
    usable();
  });

  test('a thenable Lua table resolved by an async function gets only resolve and reject, which are callable only', async () => {
    rt.set('echo', async (x) => x);
    rt.load(`function t()
      local seen = {}
      local v = echo({ ["then"] = function(resolve, reject)
        seen[1] = type(resolve)
        seen[2] = pcall(function() return resolve.constructor end)
        resolve(5)
      end })
      return { v, seen[1], seen[2] }
    end`);
    await expect(rt.call('t')).resolves.toEqual([5, 'function', false]);
    usable();
  });

  test('a Console instance handed over shows its stream only as an opaque object: no method, no constructor', () => {
    // new Console(stream) keeps the stream in an own data property _stdout:
    // Lua can hold the stream (and pass it back), but reads nothing callable from it.
    const { Console } = require('node:console');
    const { PassThrough } = require('node:stream');
    rt.set('console', new Console(new PassThrough()));
    expect(
      rt.load(`return S(type(console.log), type(console._stdout), console._stdout.write, console._stdout.constructor,
      console.constructor)`),
    ).toEqual(['function,userdata,nil,nil,nil']);
    refused(`return console.log.constructor("return ${CANARY}")()`, /attempt to index a function value/);
  });

  test('an error value cannot be turned into a callable or an indexable value by Lua alone', () => {
    rt.set('fail', () => {
      throw new TypeError('t');
    });
    refused(`local ok, e = pcall(fail)
      local ok2, c = pcall(coroutine.wrap, e)
      return c("return ${CANARY}")`);
    refused('local ok, e = pcall(fail) return load(e)()');
    refused('local ok, e = pcall(fail) return string.dump(e)');
  });

  test('a number key on a by-reference object reads an own index, never a prototype method', () => {
    rt.set('arr', new Float64Array([1.5, 2.5]));
    expect(rt.load('return S(arr[0], arr[1], arr.length, arr.buffer, arr.map)')).toEqual(['1.5,2.5,nil,nil,nil']);
  });
});

// ---- stopping Lua from outside ------------------------------------------------

const LOOPING_CLOSE = 'setmetatable({}, {__close = function() while true do end end})';

const unstoppableBefore = [
  [
    "coroutine.close running a <close> handler that loops (it ran on the closed coroutine, out of the hook's reach)",
    `rt.load('local c = coroutine.create(function() local x <close> = ${LOOPING_CLOSE} coroutine.yield() end) coroutine.resume(c) coroutine.close(c)');`,
  ],
  [
    'coroutine.wrap of a body that fails with a <close> handler that loops',
    `rt.load('coroutine.wrap(function() local x <close> = ${LOOPING_CLOSE} error("x") end)()');`,
  ],
  [
    'a loop of pcall(jsFunction): once the thread stops, each call fails at once and Lua spends its time in host code',
    "rt.set('f', (x) => x * 2); rt.load('while true do pcall(f, 1) end');",
  ],
  ['a loop of pcall(print)', 'rt.load(\'while true do pcall(print, "x") end\');'],
  [
    'a loop of tostring(error value), which never raises',
    "rt.set('fail', () => { throw new Error('e'); }); rt.load('local ok, e = pcall(fail) while true do local s = tostring(e) end');",
  ],
  [
    'nested runtimes: A loops pcall(inner) where inner runs runtime B spinning',
    "const b = new Runtime(); rt.set('inner', () => b.load('while true do end')); rt.load('while true do pcall(inner) end');",
  ],
  [
    'a task that catches the stop and starts a spinning task again, for ever',
    "rt.load('function f() while true do pcall(tasks.start, function() while true do end end) end end'); rt.start('f');",
  ],
];

const stoppableAlready = [
  [
    'a __concat metamethod that loops',
    "rt.load('local t = setmetatable({}, {__concat = function() while true do end end}) return t .. t');",
  ],
  ['a load() reader function that loops', "rt.load('load(function() while true do end end)');"],
  [
    'coroutine.wrap inside pcall inside xpcall with a looping handler',
    "rt.load('xpcall(function() pcall(coroutine.wrap(function() while true do end end)) end, function() while true do end end)');",
  ],
  [
    'a coroutine detached at a wait (coroutine.resume in a task) that spins when it wakes',
    "rt.load('function f() coroutine.resume(coroutine.create(function() tasks.sleep(0) while true do end end)) coroutine.yield() end'); rt.start('f');",
    { returns: true }, // it spins from the loop, after the setup returned
  ],
  [
    "a detached coroutine's <close> handler that loops, run when its task ends",
    `rt.load('function f() coroutine.resume(coroutine.create(function() local x <close> = ${LOOPING_CLOSE} tasks.sleep(60) end)) tasks.sleep(0.01) end'); rt.start('f');`,
    { returns: true },
  ],
  [
    'a util.async runner spinning',
    'rt.load(\'local async = require("util.async") local r = async.runner(function() while true do end end) r:run(1)\');',
  ],
  [
    'a forEach callback from an embedder function that loops',
    "rt.set('each', (a, fn) => a.forEach(fn)); rt.load('each({ 1 }, function() while true do end end)');",
  ],
  [
    'a Lua toString run by JS coercion that loops',
    "rt.set('str', (x) => String(x)); rt.load('str({ toString = function() while true do end end })');",
  ],
];

describe('worker.terminate() stops Lua that it could not stop before the audit', () => {
  for (const [name, setup] of unstoppableBefore) {
    test(name, async () => {
      const ms = await terminateWhileSpinning(spinningWorker(setup), { delay: 200 });
      expect(ms).toBeLessThan(3000);
    });
  }
});

describe('worker.terminate() stops Lua in other corners', () => {
  for (const [name, setup, opts] of stoppableAlready) {
    test(name, async () => {
      const ms = await terminateWhileSpinning(spinningWorker(setup), { delay: 200, ...opts });
      expect(ms).toBeLessThan(3000);
    });
  }

  test('Workers spinning in Lua, started and terminated one after another, all stop', async () => {
    for (let i = 0; i < 6; i++) {
      const setup =
        i % 2 === 0 ? "rt.load('while true do end');" : "rt.set('f', () => 1); rt.load('while true do pcall(f) end');";
      const ms = await terminateWhileSpinning(spinningWorker(setup), { delay: 200 });
      expect(ms).toBeLessThan(3000);
    }
  });
});

describe('the stop is not taken when the thread is fine', () => {
  const SPIN = 'return function() local t = os.clock() while os.clock() - t < 0.35 do end return "done" end';

  test('Lua spinning past two watch periods inside an uncaughtException-style handler finishes and stays usable', () => {
    const r = makeRuntime();
    const [spin] = r.load(SPIN);
    let out;
    try {
      throw new Error('pending');
    } catch {
      out = spin();
    }
    expect(out).toBe('done');
    usable(r);
  });

  test('Lua spinning under a vm timeout that fires meanwhile is not marked as stopping for good', () => {
    const r = makeRuntime();
    const [spin] = r.load(SPIN);
    expect(() => vm.runInNewContext('spin()', { spin }, { timeout: 50 })).toThrow(/timed out/);
    usable(r);
    expect(r.load('return coroutine.wrap(function() return 3 end)()')).toEqual([3]);
  });

  test('Lua spinning near the JS stack limit is not stopped by a poll that cannot get stack', () => {
    const r = makeRuntime();
    const [quick] = r.load('return function() return "ok" end');
    const [deep] = r.load(`return function()
      local function f(n) if n > 0 then local ok, v = pcall(f, n - 1) return v end
        local t = os.clock() while os.clock() - t < 0.3 do end return "done" end
      return f(150) end`);
    let result;
    const rec = (d, target, fn) => {
      if (d >= target) {
        try {
          result = fn();
        } catch (e) {
          result = e;
        }
        return;
      }
      rec(d + 1, target, fn);
    };
    let lo = 0;
    let hi = 20000;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      result = undefined;
      try {
        rec(0, mid, quick);
      } catch {
        result = undefined;
      }
      if (result === 'ok') lo = mid;
      else hi = mid - 1;
    }
    result = undefined;
    rec(0, lo - 10, deep);
    expect(result).toBe('done');
    usable(r);
  });

  test('two runtimes nested A -> JS -> B, both spinning past the watch period, finish and stay usable', () => {
    const a = makeRuntime();
    const b = makeRuntime();
    a.set('inner', () => b.load('local t = os.clock() while os.clock() - t < 0.3 do end return 1')[0]);
    expect(a.load('local t = os.clock() while os.clock() - t < 0.3 do end return inner() + 1')).toEqual([2]);
    usable(a);
    usable(b);
  });

  test('a coroutine closed with a slow <close> handler on a healthy thread finishes normally', () => {
    const r = makeRuntime();
    expect(
      r.load(`local done = false
      local c = coroutine.create(function()
        local x <close> = setmetatable({}, {__close = function() local t = os.clock() while os.clock() - t < 0.3 do end done = true end})
        coroutine.yield()
      end)
      coroutine.resume(c)
      return coroutine.close(c), done`),
    ).toEqual([true, true]);
    expect(r.load('return pcall(coroutine.close, coroutine.running())')).toEqual([
      false,
      expect.stringMatching(/cannot close the runtime's main thread/),
    ]);
    usable(r);
  });
});
