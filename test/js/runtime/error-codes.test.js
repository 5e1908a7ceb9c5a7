// SPDX-License-Identifier: MIT
// Every documented err.code is produced where docs/api.md's "Errors" says, and says where a task died.
'use strict';
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const {
  Runtime,
  cron,
  LuaError,
  TaskError,
  CronSyntaxError,
  ConversionError,
  RuntimeClosedError,
  StoreError,
  AbortError,
} = require('../../..');
const { makeRuntime } = require('../helpers');

// What `fn` threw, or what the promise it returns rejected with.
async function failureOf(fn) {
  try {
    await fn();
  } catch (e) {
    return e;
  }
  throw new Error('expected a failure');
}

function memoryStore(extra) {
  const saved = new Map();
  return {
    load: async (name) => saved.get(name) || null,
    save: async (name, bytes) => {
      saved.set(name, Buffer.from(bytes));
    },
    ...extra,
  };
}

let dir;
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lua-tasks-codes-'));
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

let rt;
beforeEach(() => {
  rt = makeRuntime();
});

describe('each code where it is documented', () => {
  test('ERR_LUA_SYNTAX: Lua source that does not compile fails with a LuaError carrying source and line', async () => {
    const err = await failureOf(() => rt.load('x = 1\ny = = 2', { name: 'syn.lua' }));
    expect(err).toBeInstanceOf(LuaError);
    expect(err).toMatchObject({ code: 'ERR_LUA_SYNTAX', source: 'syn.lua', line: 2 });
  });

  test('ERR_LUA_RUNTIME: an error Lua code raises fails a call from JS and a task', async () => {
    const err = await failureOf(() => rt.load('\nerror("bad")', { name: 'run.lua' }));
    expect(err).toBeInstanceOf(LuaError);
    expect(err).toMatchObject({ code: 'ERR_LUA_RUNTIME', source: 'run.lua', line: 2 });
    rt.load('function t()\n  coroutine.yield()\n  error("late")\nend', { name: 'task.lua' });
    const late = await failureOf(() => rt.call('t'));
    expect(late).toMatchObject({ code: 'ERR_LUA_RUNTIME', source: 'task.lua', line: 3 });
    expect(late.luaStack).toMatch(/task\.lua:3:/);
  });

  test('ERR_TASK_CANCELLED: a task cancelled by rt.cancel rejects with a TaskError carrying the reason', async () => {
    rt.load('function t() coroutine.yield("INDEFINITELY") end');
    const task = rt.start('t');
    expect(rt.cancel(task.id, 'stop')).toBe(true);
    const err = await failureOf(() => task.result);
    expect(err).toBeInstanceOf(TaskError);
    expect(err).toMatchObject({ code: 'ERR_TASK_CANCELLED', reason: 'stop' });
  });

  test('ERR_TASK_TIMEOUT: a task past taskTimeout fails with a TaskError saying where it was', async () => {
    const slow = makeRuntime({ taskTimeout: 30 });
    slow.load('function spin()\n  local x = 0\n  while true do\n    x = x + 1\n  end\nend', { name: 'spin.lua' });
    const err = await failureOf(() => slow.call('spin'));
    expect(err).toBeInstanceOf(TaskError);
    expect(err.code).toBe('ERR_TASK_TIMEOUT');
    expect(err.source).toBe('spin.lua');
    expect([3, 4, 5]).toContain(err.line); // the loop's lines: where the kill found it
    expect(err.luaStack).toMatch(/^stack traceback:\n\tspin\.lua:[345]: in function 'spin'/);
  });

  test('ERR_TASK_TIMEOUT: a task killed inside a C function names the Lua line that called it', async () => {
    const slow = makeRuntime({ taskTimeout: 30 });
    slow.load(
      `function find()
  local s = string.rep("a", 30000)
  for _ = 1, 1e9 do
    string.find(s, ".-.-.-.-b")
  end
end`,
      { name: 'find.lua' },
    );
    const err = await failureOf(() => slow.call('find'));
    expect(err).toMatchObject({ code: 'ERR_TASK_TIMEOUT', source: 'find.lua' });
    expect([3, 4]).toContain(err.line);
    expect(err.luaStack).toMatch(/find\.lua:[34]: in function 'find'/);
  });

  test('ERR_TASK_TIMEOUT: a task that caught the kill in a coroutine and went on is killed where it went on', async () => {
    const slow = makeRuntime({ taskTimeout: 30 });
    slow.load(
      `function swallow()
  local spin = coroutine.wrap(function() while true do end end)
  pcall(spin)
  coroutine.yield()
end`,
      { name: 'sw.lua' },
    );
    const err = await failureOf(() => slow.call('swallow'));
    expect(err).toMatchObject({ code: 'ERR_TASK_TIMEOUT', source: 'sw.lua' });
    expect([3, 4]).toContain(err.line);
    expect(err.luaStack).toMatch(/sw\.lua:[34]: in function 'swallow'/);
  });

  test('ERR_MEMORY_LIMIT: a task past memoryLimit fails with a LuaError saying where it was', async () => {
    const small = makeRuntime({ memoryLimit: 1 << 20 });
    small.load('function grow()\n  local t = {}\n  for i = 1, 1e7 do\n    t[i] = i\n  end\nend', { name: 'grow.lua' });
    const err = await failureOf(() => small.call('grow'));
    expect(err).toBeInstanceOf(LuaError);
    expect(err.code).toBe('ERR_MEMORY_LIMIT');
    expect(err).toMatchObject({ source: 'grow.lua' });
    expect([3, 4]).toContain(err.line);
    expect(err.luaStack).toMatch(/grow\.lua:[34]: in function 'grow'/);
    // A call from JS says it too, without the task's fields.
    expect(await failureOf(() => small.load('local t = {} for i = 1, 1e7 do t[i] = i end'))).toMatchObject({
      code: 'ERR_MEMORY_LIMIT',
    });
  });

  test.each([
    ['an unknown instruction', '"SOON"', /unknown yield instruction "SOON"/],
    ['an unknown unit', '"FOR", 5, "FORTNIGHTS"', /unknown time unit "FORTNIGHTS" for FOR/],
    ['a negative duration', '"FOR", -1', /FOR duration must be >= 0/],
    ['a time out of range', '"UNTIL_TIME", -5', /UNTIL_TIME out of range/],
    ['a bad cron string', '"UNTIL_NEXT", "0 0 25 * * ?"', /hour out of range: 25/],
    ['an unknown zone', '"UNTIL_NEXT", "* * * * *", "Mars/Base"', /unknown time zone/],
  ])('ERR_BAD_YIELD: a task that does not catch %s fails with a LuaError at the yield', async (_, args, pattern) => {
    rt.load(`function t()\n  local x = 1\n  coroutine.yield(${args})\nend`, { name: 'y.lua' });
    const err = await failureOf(() => rt.call('t'));
    expect(err).toBeInstanceOf(LuaError);
    expect(err).toMatchObject({ code: 'ERR_BAD_YIELD', source: 'y.lua', line: 3 });
    expect(err.message).toMatch(/^y\.lua:3: /);
    expect(err.message).toMatch(pattern);
    expect(err.luaStack).toMatch(/y\.lua:3: in function 't'/);
  });

  test('ERR_BAD_YIELD: pcall gets an error value that reads as the message, with its code', async () => {
    rt.load(
      `function t()
  local ok, e = pcall(function() coroutine.yield("FOR", 1, "MS") end)
  return { ok = ok, type = type(e), text = tostring(e), message = e.message, code = e.code,
           joined = "failed: " .. e, other = e.other == nil, mt = getmetatable(e) }
end`,
      { name: 'p.lua' },
    );
    const { ok, type, text, message, code, joined, other, mt } = await rt.call('t');
    expect(ok).toBe(false);
    expect(type).toBe('userdata');
    expect(text).toBe(
      'p.lua:2: unknown time unit "MS" for FOR (expected NANOSECONDS, MICROSECONDS, MILLISECONDS, SECONDS, MINUTES, HOURS or DAYS)',
    );
    expect(message).toBe(text);
    expect(code).toBe('ERR_BAD_YIELD');
    expect(joined).toBe(`failed: ${text}`);
    expect(other).toBe(true);
    expect(mt).toBe(false);
  });

  test('ERR_BAD_YIELD: rethrown with error(e), it keeps its code; returned to JS, it is the LuaError', async () => {
    rt.load(
      `function rethrow()
  local ok, e = pcall(coroutine.yield, "SOON")
  error(e)
end
function give()
  local ok, e = pcall(coroutine.yield, "SOON")
  return e
end`,
      { name: 'r.lua' },
    );
    expect(await failureOf(() => rt.call('rethrow'))).toMatchObject({
      code: 'ERR_BAD_YIELD',
      message: expect.stringMatching(/unknown yield instruction "SOON"/),
    });
    const given = await rt.call('give');
    expect(given).toBeInstanceOf(LuaError);
    expect(given.code).toBe('ERR_BAD_YIELD');
  });

  test('tasks.sleep with a bad argument is a bad argument, ERR_LUA_RUNTIME, not a bad yield', async () => {
    rt.load('function t() tasks.sleep(-1) end');
    expect(await failureOf(() => rt.call('t'))).toMatchObject({ code: 'ERR_LUA_RUNTIME' });
  });

  test('ERR_CRON_SYNTAX: cron.next and cron.describe refuse a bad expression or zone', () => {
    const err = (() => {
      try {
        cron.next('0 0 25 * * ?');
      } catch (e) {
        return e;
      }
      return null;
    })();
    expect(err).toBeInstanceOf(CronSyntaxError);
    expect(err.code).toBe('ERR_CRON_SYNTAX');
    expect(() => cron.next('* * * * *', { tz: 'Mars/Base' })).toThrow(
      expect.objectContaining({ code: 'ERR_CRON_SYNTAX' }),
    );
    expect(() => cron.describe('* * *')).toThrow(expect.objectContaining({ code: 'ERR_CRON_SYNTAX' }));
  });

  test('ERR_CONVERSION: a value that cannot cross is refused with a ConversionError', async () => {
    const err = await failureOf(() => rt.load('return { [{}] = 1 }'));
    expect(err).toBeInstanceOf(ConversionError);
    expect(err.code).toBe('ERR_CONVERSION');
  });

  test('ERR_NOT_IN_TASK: a Promise returned to Lua code that runs in no task is refused', async () => {
    rt.set('fetch', () => Promise.resolve(1));
    const err = await failureOf(() => rt.load('return fetch()'));
    expect(err).toBeInstanceOf(LuaError);
    expect(err.code).toBe('ERR_NOT_IN_TASK');
  });

  test('ERR_RUNTIME_CLOSED: a call on a closed runtime is refused', async () => {
    const closed = new Runtime();
    closed.closeSync();
    const err = await failureOf(() => closed.load('return 1'));
    expect(err).toBeInstanceOf(RuntimeClosedError);
    expect(err.code).toBe('ERR_RUNTIME_CLOSED');
  });

  test('ERR_COMMIT_FAILED: rt.commit() without a store fails', async () => {
    const err = await failureOf(() => rt.commit());
    expect(err).toBeInstanceOf(TaskError);
    expect(err.code).toBe('ERR_COMMIT_FAILED');
  });

  test('ERR_COMMIT_FAILED: a task that does not catch its COMMIT without a store fails, saying where it was', async () => {
    rt.load('function t()\n  tasks.state.x = 1\n  coroutine.yield("COMMIT")\nend', { name: 'c.lua' });
    const err = await failureOf(() => rt.call('t'));
    expect(err).toBeInstanceOf(TaskError);
    expect(err).toMatchObject({ code: 'ERR_COMMIT_FAILED', source: 'c.lua', line: 3 });
    expect(err.message).toMatch(/^c\.lua:3: COMMIT failed: this runtime has no store/);
    expect(err.luaStack).toMatch(/c\.lua:3: in function 't'/);
  });

  test("ERR_COMMIT_FAILED: a task that does not catch a COMMIT the store failed fails, with the COMMIT's line", async () => {
    const cause = new Error('disk on fire');
    const stored = await Runtime.open({ name: 'fails', store: memoryStore({ save: () => Promise.reject(cause) }) });
    try {
      stored.load('function t()\n  tasks.state.x = 1\n  coroutine.yield("COMMIT")\nend', { name: 'c.lua' });
      const err = await failureOf(() => stored.call('t'));
      expect(err).toBeInstanceOf(TaskError);
      expect(err).toMatchObject({ code: 'ERR_COMMIT_FAILED', cause, source: 'c.lua', line: 3 });
    } finally {
      await stored.close();
    }
  });

  test('ERR_STORE_LOCKED: a second opener of the same name is refused with a StoreError', async () => {
    const first = await Runtime.open({ name: 'held', store: dir });
    try {
      const err = await failureOf(() => Runtime.open({ name: 'held', store: dir }));
      expect(err).toBeInstanceOf(StoreError);
      expect(err.code).toBe('ERR_STORE_LOCKED');
    } finally {
      await first.close();
    }
  });

  test('ERR_STORE_CORRUPT: a snapshot that does not read is refused with a StoreError', async () => {
    fs.writeFileSync(path.join(dir, 'junk.state'), 'not a snapshot');
    const err = await failureOf(() => Runtime.open({ name: 'junk', store: dir }));
    expect(err).toBeInstanceOf(StoreError);
    expect(err.code).toBe('ERR_STORE_CORRUPT');
  });

  test('ERR_STORE_TIMEOUT: a store that does not answer within storeTimeout fails the open with a StoreError', async () => {
    const err = await failureOf(() =>
      Runtime.open({ name: 'x', store: memoryStore({ acquire: () => new Promise(() => {}) }), storeTimeout: 30 }),
    );
    expect(err).toBeInstanceOf(StoreError);
    expect(err.code).toBe('ERR_STORE_TIMEOUT');
  });

  test('ERR_INVALID_ARG_TYPE: an argument of the wrong type is refused with a TypeError', async () => {
    const err = await failureOf(() => rt.load(42));
    expect(err).toBeInstanceOf(TypeError);
    expect(err.code).toBe('ERR_INVALID_ARG_TYPE');
  });

  test('ERR_INVALID_ARG_VALUE: an option of the right type with a value not allowed is refused', async () => {
    const err = await failureOf(() => new Runtime({ timeZone: 'Mars/Base' }));
    expect(err).toBeInstanceOf(TypeError);
    expect(err.code).toBe('ERR_INVALID_ARG_VALUE');
  });

  test('ERR_OUT_OF_RANGE: a number outside what is allowed is refused with a RangeError', async () => {
    const err = await failureOf(() => rt.set('big', 2n ** 64n));
    expect(err).toBeInstanceOf(RangeError);
    expect(err.code).toBe('ERR_OUT_OF_RANGE');
    expect(() => cron.next('* * * * *', { count: 0 })).toThrow(expect.objectContaining({ code: 'ERR_OUT_OF_RANGE' }));
  });
});

test('ABORT_ERR: a task stopped through its AbortSignal rejects with an AbortError', async () => {
  rt.load('function t() coroutine.yield("INDEFINITELY") end');
  const ac = new AbortController();
  const task = rt.spawn('t', { signal: ac.signal });
  ac.abort('enough');
  const err = await failureOf(() => task.result);
  expect(err).toBeInstanceOf(AbortError);
  expect(err).toMatchObject({ code: 'ABORT_ERR', name: 'AbortError', cause: 'enough' });
});

describe('a JS error that ends a task says where', () => {
  const src = 'function t(f)\n  local x = 1\n  local v = f()\n  return v\nend';

  test('a rejection the task awaited gets luaStack, source and line, on the very same object', async () => {
    rt.load(src, { name: 'aw.lua' });
    const reason = new Error('nope');
    const err = await failureOf(() => rt.call('t', () => Promise.reject(reason)));
    expect(err).toBe(reason);
    expect(err).toMatchObject({ source: 'aw.lua', line: 3 });
    expect(err.luaStack).toMatch(/aw\.lua:3: in function 't'/);
    // Not enumerable: the caller's object keeps its keys and its JSON.
    expect(Object.keys(err)).toEqual([]);
  });

  test('so does an error a JS function threw', async () => {
    rt.load(src, { name: 'th.lua' });
    const reason = new TypeError('bad');
    const err = await failureOf(() =>
      rt.call('t', () => {
        throw reason;
      }),
    );
    expect(err).toBe(reason);
    expect(err).toMatchObject({ source: 'th.lua', line: 3 });
  });

  test('a rejection with a plain object gets them too', async () => {
    rt.load(src, { name: 'ob.lua' });
    const reason = { status: 404 };
    const err = await failureOf(() => rt.call('t', () => Promise.reject(reason)));
    expect(err).toBe(reason);
    expect(err.line).toBe(3);
    expect(JSON.stringify(err)).toBe('{"status":404}');
  });

  test('properties it already has are kept, and a frozen object is left alone', async () => {
    rt.load(src, { name: 'kp.lua' });
    const own = Object.assign(new Error('own'), { line: 99, source: 'mine' });
    const kept = await failureOf(() => rt.call('t', () => Promise.reject(own)));
    expect(kept).toBe(own);
    expect(kept).toMatchObject({ line: 99, source: 'mine' });
    expect(kept.luaStack).toMatch(/kp\.lua:3:/);
    const frozen = Object.freeze(new Error('frozen'));
    const same = await failureOf(() => rt.call('t', () => Promise.reject(frozen)));
    expect(same).toBe(frozen);
    expect(Object.getOwnPropertyNames(same).sort()).toEqual(['message', 'stack']);
  });

  test('a Proxy is handed back untouched: none of its traps runs', async () => {
    rt.load(src, { name: 'px.lua' });
    const trapped = [];
    const traps = {};
    for (const trap of [
      'get',
      'has',
      'defineProperty',
      'getOwnPropertyDescriptor',
      'isExtensible',
      'set',
      'ownKeys',
      'getPrototypeOf',
    ]) {
      traps[trap] = (...args) => {
        trapped.push(trap);
        return Reflect[trap](...args);
      };
    }
    const proxy = new Proxy(new Error('proxied'), traps);
    let err;
    await rt
      .call('t', () => Promise.reject(proxy))
      .catch((e) => {
        err = e;
      });
    expect(trapped).toEqual([]);
    expect(err === proxy).toBe(true);
  });

  test('primitives stay as they are', async () => {
    rt.load(src, { name: 'pr.lua' });
    expect(await failureOf(() => rt.call('t', () => Promise.reject('just text')))).toBe('just text');
  });
});
