// SPDX-License-Identifier: MIT
// The capability boundary (docs/security.md) for JS errors: whatever JS throws reaches Lua as an error value, and goes back as itself.
//
// One test per attempt. Each asserts the safe outcome and that the runtime is
// still usable afterwards; the canary is boundary-fixture.js's.
'use strict';
const { makeRuntime, escapeChecks, thrownBy } = require('../helpers');
const { LIMITS, CANARY } = require('./boundary-fixture');

let rt;
beforeEach(() => {
  rt = makeRuntime(LIMITS);
});

// refused(body): the attempt raised, and never returned the canary (a Lua value that failed to be a handle).
const { usable, refused } = escapeChecks(() => rt, CANARY);

describe('JS errors reach Lua as error values', () => {
  function throwing(value) {
    rt.set('t', () => {
      throw value;
    });
  }

  test('message, name, code and stack read as strings; nothing else reads', () => {
    const err = Object.assign(new RangeError('too far'), { code: 'E_FAR', extra: { deep: 1 } });
    throwing(err);
    const [m, n, c, s, x, ctor] = rt.load(`local ok, e = pcall(t)
      return e.message, e.name, e.code, type(e.stack), e.extra, e.constructor`);
    expect([m, n, c, s, x, ctor]).toEqual(['too far', 'RangeError', 'E_FAR', 'string', null, null]);
    expect(rt.load('local ok, e = pcall(t) return e.stack')[0]).toMatch(/too far/);
  });

  test.each(['constructor', '__proto__', 'toString', 'valueOf', 'hasOwnProperty', 'cause', 'errors', 'value'])(
    'err.%s reads nil',
    (key) => {
      throwing(new AggregateError([new Error('a')], 'agg', { cause: 'c' }));
      expect(rt.load(`local ok, e = pcall(t) return e.${key}`)).toEqual([null]);
      refused(`local ok, e = pcall(t) return e.${key}.constructor("return ${CANARY}")()`);
    },
  );

  test('an AggregateError reads its message and name, not its errors', () => {
    throwing(new AggregateError([new Error('a')], 'many'));
    expect(rt.load('local ok, e = pcall(t) return tostring(e), e.errors')).toEqual(['AggregateError: many', null]);
  });

  test('an error value cannot be called, assigned to, or given a metatable', () => {
    throwing(new Error('x'));
    refused('local ok, e = pcall(t) return e()', /attempt to call a JS error value/);
    refused('local ok, e = pcall(t) e.message = "y"', /attempt to index a JS error value/);
    refused('local ok, e = pcall(t) return setmetatable(e, {})', /table expected/);
    expect(rt.load('local ok, e = pcall(t) return getmetatable(e)')).toEqual([false]);
  });

  test('rawget, rawset, rawlen, next and pairs refuse an error value', () => {
    throwing(new Error('x'));
    for (const op of [
      'rawget(e, "message")',
      'rawset(e, "message", 1)',
      'rawlen(e)',
      'next(e)',
      '(function() for k in pairs(e) do end end)()',
    ]) {
      refused(`local ok, e = pcall(t) return ${op}`);
    }
  });

  test('an error value indexed with a table key is refused, and no JS runs', () => {
    throwing(new Error('x'));
    refused('local ok, e = pcall(t) return e[{}]', /cannot index a JS error with a table key/);
  });

  test('a getter message on the instance or its class is never run', () => {
    let ran = 0;
    class Sneaky extends Error {
      get message() {
        ran++;
        return 'from getter';
      }
    }
    const own = new Error('x');
    Object.defineProperty(own, 'message', {
      get() {
        ran++;
        return 'own getter';
      },
    });
    for (const v of [new Sneaky(), own]) {
      throwing(v);
      expect(rt.load('local ok, e = pcall(t) return e.message, tostring(e), "x" .. e')).toEqual([
        null,
        expect.any(String),
        expect.any(String),
      ]);
    }
    expect(ran).toBe(0);
  });

  test('a message that is not a string is read only when it is a number or boolean, never by calling toString', () => {
    let ran = 0;
    throwing({
      message: {
        toString() {
          ran++;
          return 'called';
        },
      },
      name: 7,
    });
    expect(rt.load('local ok, e = pcall(t) return e.message, e.name, tostring(e)')).toEqual([null, '7', '7']);
    throwing({ message: 42, code: 5n });
    expect(rt.load('local ok, e = pcall(t) return e.message, e.code')).toEqual(['42', '5']);
    expect(ran).toBe(0);
  });

  test.each([
    ['null', null, 'null'],
    ['undefined', undefined, 'undefined'],
    ['a number', 42, '42'],
    ['a string', 'plain words', 'plain words'],
    ['false', false, 'false'],
    ['a BigInt', 10n, '10'],
  ])('a thrown %s is an error value whose message is its text, and rethrows as itself', (_, value, text) => {
    throwing(value);
    expect(rt.load('local ok, e = pcall(t) return ok, type(e), e.message, tostring(e), e.name')).toEqual([
      false,
      'userdata',
      text,
      text,
      null,
    ]);
    expect(thrownBy(() => rt.load('local ok, e = pcall(t) error(e)'))).toBe(value);
    usable();
  });

  test('a thrown Symbol is an error value, and rethrows as the same Symbol', () => {
    const s = Symbol('thrown');
    throwing(s);
    expect(rt.load('local ok, e = pcall(t) return e.message')).toEqual(['Symbol(thrown)']);
    expect(thrownBy(() => rt.load('local ok, e = pcall(t) error(e)'))).toBe(s);
  });

  test('a thrown plain object reads only its message, name, code and stack data', () => {
    const obj = { message: 'm', code: 'C', secret: 's', fn: () => 1 };
    throwing(obj);
    expect(rt.load('local ok, e = pcall(t) return e.message, e.code, e.secret, e.fn, tostring(e)')).toEqual([
      'm',
      'C',
      null,
      null,
      'Error: m',
    ]);
    expect(thrownBy(() => rt.load('local ok, e = pcall(t) error(e)'))).toBe(obj);
  });

  test('a thrown function is an error value: not callable, nothing readable, and the same function back in JS', () => {
    const fn = function secretName() {
      return CANARY;
    };
    throwing(fn);
    expect(rt.load('local ok, e = pcall(t) return type(e), e.name, e.message, tostring(e), pcall(e)')).toEqual([
      'userdata',
      null,
      null,
      '(error object is a JS function)',
      false,
      expect.stringMatching(/attempt to call/),
    ]);
    expect(thrownBy(() => rt.load('local ok, e = pcall(t) error(e)'))).toBe(fn);
  });

  test('a thrown class instance keeps its data hidden and runs none of its accessors', () => {
    let ran = 0;
    class Thing {
      constructor() {
        this.token = 'secret';
      }
      get message() {
        ran++;
        return 'x';
      }
    }
    const inst = new Thing();
    throwing(inst);
    expect(rt.load('local ok, e = pcall(t) return e.token, e.message, tostring(e)')).toEqual([
      null,
      null,
      '(error object is a JS object)',
    ]);
    expect(ran).toBe(0);
    expect(thrownBy(() => rt.load('local ok, e = pcall(t) error(e)'))).toBe(inst);
  });

  test('an Error subclass reads its class name and code, not its custom fields', () => {
    class HttpError extends Error {
      constructor() {
        super('not found');
        this.status = 404;
        this.code = 'E404';
        this.headers = { secret: 1 };
      }
    }
    HttpError.prototype.name = 'HttpError';
    throwing(new HttpError());
    expect(rt.load('local ok, e = pcall(t) return tostring(e), e.code, e.status, e.headers')).toEqual([
      'HttpError: not found',
      'E404',
      null,
      null,
    ]);
  });

  test('an error with a stack accessor reads nil stack without running it', () => {
    let ran = 0;
    const err = new Error('s');
    Object.defineProperty(err, 'stack', {
      get() {
        ran++;
        return 'x';
      },
    });
    throwing(err);
    expect(rt.load('local ok, e = pcall(t) return e.stack, e.message')).toEqual([null, 's']);
    expect(ran).toBe(0);
  });

  test('a JS Error returned (not thrown) is an error value as well, and the same Error back in JS', () => {
    const err = new TypeError('as value');
    rt.set('give', () => err);
    expect(rt.load('local e = give() return type(e), tostring(e), e.constructor')).toEqual([
      'userdata',
      'TypeError: as value',
      null,
    ]);
    expect(rt.load('return give()')[0]).toBe(err);
  });

  test('identity is kept on every way out: uncaught, pcall then error, a task, a call from JS, nested calls', async () => {
    const err = new Error('same');
    throwing(err);
    expect(thrownBy(() => rt.load('t()'))).toBe(err);
    expect(thrownBy(() => rt.load('local ok, e = pcall(t) error(e, 2)'))).toBe(err);
    rt.load('function f() local ok, e = pcall(t) error(e) end function task() t() end');
    expect(thrownBy(() => rt.get('f')())).toBe(err);
    await expect(rt.call('task')).rejects.toBe(err);
    rt.set('middle', () => rt.get('f')());
    expect(thrownBy(() => rt.load('middle()'))).toBe(err);
    usable();
  });

  test('tostring, string.format("%s") and .. read the same text; comparisons and table keys work by identity', () => {
    throwing(new TypeError('boom'));
    expect(
      rt.load(`local ok, e = pcall(t)
      local k = {} k[e] = "keyed"
      local ok2, e2 = pcall(t)
      return tostring(e), string.format("%s", e), "x: " .. e, e .. 1, k[e], e == e, e == e2, pcall(function() return e < e end)`),
    ).toEqual([
      'TypeError: boom',
      'TypeError: boom',
      'x: TypeError: boom',
      'TypeError: boom1',
      'keyed',
      true,
      false,
      false,
      expect.stringMatching(/attempt to compare/),
    ]);
  });

  test('concatenating an error value with a table is refused like any bad concatenation', () => {
    throwing(new Error('x'));
    refused('local ok, e = pcall(t) return e .. {}', /attempt to concatenate a table value/);
  });

  test('an error value passed back to a JS function arrives as the original thrown value', () => {
    const err = new Error('orig');
    throwing(err);
    let got;
    rt.set('take', (x) => {
      got = x;
    });
    rt.load('local ok, e = pcall(t) take(e) take({ e })');
    expect(got[0]).toBe(err);
    usable();
  });

  test('a huge message read past memoryLimit is refused with a Lua memory error, the runtime stays usable', () => {
    const r = makeRuntime({ memoryLimit: 4 * 1024 * 1024 });
    const big = new Error('x'.repeat(8 * 1024 * 1024));
    r.set('t', () => {
      throw big;
    });
    expect(
      r.load('local ok, e = pcall(t) local ok2, m = pcall(function() return e.message end) return ok2, m'),
    ).toEqual([false, expect.stringMatching(/not enough memory/)]);
    // tostring never raises (message handlers call it): it says why instead.
    expect(r.load('local ok, e = pcall(t) return tostring(e)')).toEqual([expect.stringMatching(/not enough memory/)]);
    expect(thrownBy(() => r.load('t()'))).toBe(big);
    usable(r);
  });

  test('a Lua error coming back through JS is an error value: its Lua value is not readable', () => {
    rt.load('function inner() error({ secret = "s" }) end');
    rt.set('viaJs', () => rt.get('inner')());
    expect(rt.load('local ok, e = pcall(viaJs) return type(e), e.value, e.code, e.name')).toEqual([
      'userdata',
      null,
      'ERR_LUA_RUNTIME',
      'LuaError',
    ]);
  });

  test('a promise returned outside a task gives an ERR_NOT_IN_TASK error value, not a handle', () => {
    rt.set('p', () => Promise.resolve(1));
    expect(rt.load('local ok, e = pcall(p) return ok, e.code, e.constructor')).toEqual([
      false,
      'ERR_NOT_IN_TASK',
      null,
    ]);
  });

  test('tasks.await of an error value returns it unchanged: a thrown promise is never awaited', async () => {
    let settled = 0;
    const thrownPromise = new Promise((res) => {
      setTimeout(() => {
        settled++;
        res(CANARY);
      }, 1);
    });
    throwing(thrownPromise);
    rt.load('function t2() local ok, e = pcall(t) local v = tasks.await(e) return v == e, type(v) end');
    await expect(rt.call('t2')).resolves.toBe(true);
    await thrownPromise;
    expect(settled).toBe(1);
  });

  test('a rejection awaited in a task is an error value, and the same value once it leaves the task', async () => {
    const err = Object.assign(new Error('rejected'), { code: 'E_REJ', token: 'secret' });
    rt.set('rej', () => Promise.reject(err));
    rt.load('function t() local ok, e = pcall(rej) assert(e.token == nil and e.code == "E_REJ") error(e) end');
    await expect(rt.call('t')).rejects.toBe(err);
  });
  test('coroutine.wrap and xpcall pass an error value on unchanged, and it rethrows as the same Error', () => {
    const err = new Error('wrapped');
    rt.set('t', () => {
      throw err;
    });
    expect(
      rt.load(`local w = coroutine.wrap(function() t() end)
      local ok, e = pcall(w)
      local ok2, e2 = xpcall(t, function(m) return m end)
      return type(e), e.message, type(e2), e2.constructor`),
    ).toEqual(['userdata', 'wrapped', 'userdata', null]);
    expect(thrownBy(() => rt.load('coroutine.wrap(function() t() end)()'))).toBe(err);
  });

  test('an error value is not a function to start: tasks.start refuses it', () => {
    rt.set('t', () => {
      throw new Error('x');
    });
    refused('local ok, e = pcall(t) return tasks.start(e)');
  });
});
