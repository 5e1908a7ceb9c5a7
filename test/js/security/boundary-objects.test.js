// SPDX-License-Identifier: MIT
// The capability boundary (docs/security.md) for JS functions and objects: callable only, own data properties only, no trap run.
//
// One test per attempt. Each asserts the safe outcome and that the runtime is
// still usable afterwards; the canary is boundary-fixture.js's.
'use strict';
const { Runtime } = require('../../..');
const { makeRuntime, escapeChecks, thrownBy } = require('../helpers');
const { LIMITS, CANARY } = require('./boundary-fixture');

let rt;
beforeEach(() => {
  rt = makeRuntime(LIMITS);
});

// refused(body): the attempt raised, and never returned the canary (a Lua value that failed to be a handle).
const { usable, refused } = escapeChecks(() => rt, CANARY);

// Counts every trap a Proxy runs.
function countingProxy(target) {
  const calls = { n: 0 };
  const handler = new Proxy(
    {},
    {
      get(_, trap) {
        return (...args) => {
          calls.n++;
          return Reflect[trap](...args);
        };
      },
    },
  );
  return { proxy: new Proxy(target, handler), calls };
}

describe('a JS function is callable and nothing more', () => {
  test.each(['constructor', 'call', 'apply', 'bind', 'prototype', 'name', 'toString', '__proto__'])(
    'jsFunction.%s cannot be read',
    (key) => {
      rt.set('f', function f() {});
      refused(`return f.${key}`, /attempt to index a function value/);
    },
  );

  test('a JS function read from an own data property of an object is callable only', () => {
    rt.set(
      'o',
      new (class {
        constructor() {
          this.f = (x) => x * 2;
        }
      })(),
    );
    expect(rt.load('return o.f(21)')).toEqual([42]);
    refused(`return o.f.constructor("return ${CANARY}")()`, /attempt to index a function value/);
  });

  test('string.dump, getmetatable and setmetatable give nothing of a JS function', () => {
    rt.set('f', () => 1);
    refused('return string.dump(f)', /unable to dump/);
    expect(rt.load('return getmetatable(f)')).toEqual([null]);
    refused('return setmetatable(f, {})', /table expected/);
  });

  test('load() with a JS function as reader reads its strings and nothing else', () => {
    const parts = ['return ', '40 + 2'];
    rt.set('reader', () => parts.shift());
    expect(rt.load('return load(reader)()')).toEqual([42]);
    rt.set('badReader', () => ({ not: 'a string' }));
    expect(rt.load('local f, err = load(badReader) return f, err')).toEqual([
      null,
      expect.stringMatching(/reader function must return a string/),
    ]);
    usable();
  });

  test('a promise resolved with a function gives Lua a callable function only', async () => {
    rt.set('later', () => Promise.resolve(() => 7));
    rt.load('function t() local f = later() return f(), pcall(function() return f.constructor end) end');
    await expect(rt.call('t')).resolves.toBe(7);
    expect(rt.load('return (function() return 1 end)()')).toEqual([1]);
  });

  test('tasks.start(jsFunction) runs the JS function as a task, with the frozen receiver', async () => {
    let receiver;
    rt.set('js', function js() {
      receiver = this;
      return 5;
    });
    await expect(rt.call(rt.get('js'))).resolves.toBe(5);
    expect(receiver).not.toBe(globalThis);
    expect(Object.isFrozen(receiver)).toBe(true);
    usable();
  });
});

describe('by-reference objects: own data properties only', () => {
  class Counted {
    constructor() {
      this.own = 'data';
      this.calls = 0;
    }
    get viaProto() {
      Counted.getterRuns++;
      return 'ran';
    }
    method() {
      return 'method';
    }
  }

  beforeEach(() => {
    Counted.getterRuns = 0;
  });

  test('no getter runs, on the prototype or on the instance, and the count proves it', () => {
    const o = new Counted();
    Object.defineProperty(o, 'ownGetter', {
      get() {
        Counted.getterRuns++;
        return 'ran';
      },
      enumerable: true,
    });
    rt.set('o', o);
    expect(rt.load('return o.own, o.viaProto, o.ownGetter, tostring(o.viaProto)')).toEqual(['data', null, null, 'nil']);
    expect(Counted.getterRuns).toBe(0);
    usable();
  });

  test.each([
    'constructor',
    '__proto__',
    'toString',
    'valueOf',
    'hasOwnProperty',
    'method',
    'isPrototypeOf',
    '__defineGetter__',
  ])('obj.%s reads nil: nothing of the prototype chain is reachable', (key) => {
    rt.set('o', new Counted());
    expect(rt.load(`return o.${key}`)).toEqual([null]);
    refused(`return o.${key}.constructor("return ${CANARY}")()`);
  });

  test.each([
    ['a boolean', 'true'],
    ['a table', '{}'],
    ['a function', 'print'],
    ['a coroutine', 'coroutine.create(print)'],
    ['another JS object', 'o'],
  ])('a %s key is refused with a clear Lua error', (_, key) => {
    rt.set('o', new Counted());
    refused(`return o[${key}]`, /cannot index a JS object with a \w+ key \(keys must be strings or numbers\)/);
  });

  test('string and number keys read own data properties, including typed array elements', () => {
    rt.set('ta', new Int32Array([5, 6]));
    rt.set('o', Object.assign(new Counted(), { 3: 'three' }));
    expect(rt.load('return ta[0], ta[1], ta.length, o[3], o["3"], o[3.5]')).toEqual([
      5,
      6,
      null,
      'three',
      'three',
      null,
    ]);
  });

  test('an own data property named __proto__ or constructor is data, and its value obeys the same rules', () => {
    const o = new Counted();
    Object.defineProperty(o, 'constructor', { value: Function, enumerable: false });
    rt.set('o', o);
    // It is own data, so it reads, but as a JS function: callable only.
    refused(`return o.constructor.constructor("return ${CANARY}")()`, /attempt to index a function value/);
  });

  test('a Symbol-keyed property is unreachable, and a Symbol value is refused as ERR_CONVERSION', () => {
    const o = new Counted();
    o[Symbol('hidden')] = 'secret';
    o.sym = Symbol('v');
    rt.set('o', o);
    expect(rt.load('local ok, e = pcall(function() return o.sym end) return ok, e.code')).toEqual([
      false,
      'ERR_CONVERSION',
    ]);
    expect(rt.load('return o["Symbol(hidden)"]')).toEqual([null]);
  });

  test('rawget, rawset, rawlen, next and pairs refuse a JS object', () => {
    rt.set('o', new Counted());
    refused('return rawget(o, "own")', /table expected/);
    refused('return rawset(o, "own", 1)', /table expected/);
    refused('return rawlen(o)', /table or string expected/);
    refused('return next(o)', /table expected/);
    refused('for k in pairs(o) do end', /table expected/);
    refused('o.own = 1', /attempt to index a JS object value/);
  });

  test('getmetatable answers false and setmetatable is refused for a JS object', () => {
    rt.set('o', new Counted());
    expect(rt.load('return getmetatable(o)')).toEqual([false]);
    refused('return setmetatable(o, {})', /table expected/);
  });

  test('tostring of a JS object runs none of its code', () => {
    const o = new Counted();
    let ran = 0;
    o.toString = () => {
      ran++;
      return 'mine';
    };
    Object.defineProperty(o, Symbol.toPrimitive, {
      value: () => {
        ran++;
        return 'prim';
      },
    });
    rt.set('o', o);
    const [s] = rt.load('return tostring(o)');
    expect(s).toMatch(/^JS object: /);
    expect(rt.load('return string.format("%s", o)')[0]).toMatch(/^JS object: /);
    expect(ran).toBe(0);
  });

  test('an object whose Symbol.toStringTag is a getter crosses without running it', () => {
    let ran = 0;
    const o = new Counted();
    Object.defineProperty(o, Symbol.toStringTag, {
      get() {
        ran++;
        return 'Map';
      },
    });
    rt.set('o', o);
    expect(rt.load('return type(o), o.own')).toEqual(['userdata', 'data']);
    expect(ran).toBe(0);
  });

  test('an object whose prototype is a Proxy crosses by reference without a trap running', () => {
    const { proxy, calls } = countingProxy({});
    // defineProperty, not `o.own = 1`: an assignment would ask the prototype (a set trap).
    const o = Object.defineProperty(Object.create(proxy), 'own', { value: 1, enumerable: true });
    rt.set('o', o);
    expect(rt.load('return type(o), o.own, o.missing')).toEqual(['userdata', 1, null]);
    expect(calls.n).toBe(0);
    expect(rt.get('o')).toBe(o);
  });

  test('a by-reference object passed back to a JS function is the same object', () => {
    const o = new Counted();
    let got;
    rt.set('o', o);
    rt.set('take', (x) => {
      got = x;
    });
    rt.load('take(o)');
    expect(got).toBe(o);
  });

  test('a thenable that is not a Promise is an object, never awaited: its then does not run', async () => {
    let ran = 0;
    const thenable = new (class {
      then() {
        ran++;
      }
    })();
    rt.set('get', () => thenable);
    rt.load('function t() local v = get() return type(v), v["then"], tasks.await(v) == v end');
    await expect(rt.call('t')).resolves.toBe('userdata');
    expect(ran).toBe(0);
  });

  test('an embedder module value and its class instances obey the same rules', () => {
    let ran = 0;
    const inst = new (class {
      get secret() {
        ran++;
        return 'x';
      }
    })();
    const r = makeRuntime({ ...LIMITS, modules: { host: { inst, fn: () => 3 } } });
    expect(
      r.load('local m = require("host") return m.fn(), m.inst.secret, (pcall(function() return m.fn.constructor end))'),
    ).toEqual([3, null, false]);
    expect(ran).toBe(0);
    usable(r);
  });

  test('a class instance given to a Lua callback by JS has no getter run', () => {
    let ran = 0;
    const inst = new (class {
      constructor() {
        this.v = 1;
      }
      get g() {
        ran++;
        return 2;
      }
    })();
    rt.set('callMe', (fn) => fn(inst));
    expect(rt.load('local out callMe(function(o) out = { o.v, o.g } end) return out[1], out[2]')).toEqual([1, null]);
    expect(ran).toBe(0);
  });

  test('a class instance resumed into a task has no getter run', () => {
    let ran = 0;
    const inst = new (class {
      constructor() {
        this.v = 9;
      }
      get g() {
        ran++;
        return 2;
      }
    })();
    rt.load('function w() local o = coroutine.yield(tasks.instruction.INDEFINITELY) got = { o.v, o.g } end');
    const task = rt.start('w');
    expect(rt.resume(task.id, inst)).toBe(true);
    expect(rt.load('return got[1], got[2]')).toEqual([9, null]);
    expect(ran).toBe(0);
  });

  test('a huge own string property read past memoryLimit is refused with a Lua memory error', () => {
    const r = makeRuntime({ memoryLimit: 4 * 1024 * 1024 });
    r.set(
      'o',
      new (class {
        constructor() {
          this.big = 'x'.repeat(8 * 1024 * 1024);
        }
      })(),
    );
    expect(r.load('local ok, e = pcall(function() return o.big end) return ok, e')).toEqual([
      false,
      expect.stringMatching(/not enough memory/),
    ]);
    usable(r);
  });
});

describe('Proxies: no trap runs', () => {
  test('a Proxy crosses by reference with nothing readable, and no trap runs on the way in, on reads or back', () => {
    const { proxy, calls } = countingProxy({ a: 1 });
    rt.set('p', proxy);
    expect(rt.load('return type(p), p.a, p.constructor')).toEqual(['userdata', null, null]);
    expect(rt.load('return tostring(p)')[0]).toMatch(/^JS object: /);
    expect(rt.get('p')).toBe(proxy);
    expect(calls.n).toBe(0);
    usable();
  });

  test('a Proxy of an array or of an Error is not walked or classified through its traps', () => {
    const a = countingProxy([1, 2, 3]);
    const e = countingProxy(new Error('x'));
    rt.set('a', a.proxy);
    rt.set('e', e.proxy);
    expect(rt.load('return type(a), a[0], type(e), e.message')).toEqual(['userdata', null, 'userdata', null]);
    expect(a.calls.n + e.calls.n).toBe(0);
  });

  test('a thrown Proxy is an error value and none of its traps run', () => {
    const { proxy, calls } = countingProxy(new Error('inner'));
    rt.set('t', () => {
      throw proxy;
    });
    expect(rt.load('local ok, e = pcall(t) return ok, e.message, e.name, tostring(e), "" .. e')).toEqual([
      false,
      null,
      null,
      '(error object is a JS Proxy)',
      '(error object is a JS Proxy)',
    ]);
    expect(calls.n).toBe(0);
    // Rethrown to JS it is the same Proxy. (There node-addon-api, throwing it,
    // asks it once whether it has its wrapper key: docs/security.md.)
    expect(thrownBy(() => rt.load('t()'))).toBe(proxy);
  });

  test('a callable Proxy is a JS function: calling it runs its apply trap, nothing else does', () => {
    let applies = 0;
    let others = 0;
    const fp = new Proxy(() => 1, {
      apply: () => {
        applies++;
        return 2;
      },
      get: () => {
        others++;
        return undefined;
      },
      getPrototypeOf: () => {
        others++;
        return null;
      },
    });
    rt.set('fp', fp);
    expect(rt.load('return fp(), (pcall(function() return fp.x end))')).toEqual([2, false]);
    expect([applies, others]).toEqual([1, 0]);
  });
  test('a revoked Proxy crosses, is read, thrown and printed without an error from its revocation', () => {
    const { proxy, revoke } = Proxy.revocable({ a: 1 }, {});
    revoke();
    rt.set('p', proxy);
    rt.set('t', () => {
      throw proxy;
    });
    expect(rt.load('local ok, e = pcall(t) return type(p), p.a, tostring(e), e.message')).toEqual([
      'userdata',
      null,
      '(error object is a JS Proxy)',
      null,
    ]);
    expect(rt.get('p')).toBe(proxy);
    usable();
  });
});

describe('trustedObjects', () => {
  test('a non-boolean trustedObjects is refused with ERR_INVALID_ARG_TYPE', () => {
    for (const v of ['yes', 1, null]) {
      expect(() => new Runtime({ trustedObjects: v })).toThrow(
        expect.objectContaining({ code: 'ERR_INVALID_ARG_TYPE' }),
      );
    }
  });

  test('with trustedObjects, getters run but keys are still strings or numbers, errors are still error values and functions callable only', () => {
    const r = makeRuntime({ ...LIMITS, trustedObjects: true });
    let ran = 0;
    r.set(
      'o',
      new (class {
        get g() {
          ran++;
          return 'g';
        }
      })(),
    );
    r.set('t', () => {
      throw new Error('e');
    });
    r.set('f', () => 1);
    expect(r.load('return o.g')).toEqual(['g']);
    expect(ran).toBe(1);
    refused('return o[{}]', /table key/, r);
    expect(r.load('local ok, e = pcall(t) return e.constructor, e.message')).toEqual([null, 'e']);
    refused('return f.constructor', /attempt to index a function value/, r);
  });
});
