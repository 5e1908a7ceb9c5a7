'use strict';
// Replay identity (docs/durable.md#changing-code): a JS call's record keeps
// the function's name and a named step's record its name, so a replay that
// meets swapped calls, swapped steps or another function fails with
// ERR_NONDETERMINISM instead of handing back the wrong values; unchanged
// code, tasks.patched and journals written without identities still replay.
const { Runtime, DirectoryStore } = require('../../..');
const { closeAfterTest, sleep, until: loopUntil, tempDirs } = require('../helpers');

const tmpdir = tempDirs('lua-tasks-identity-');

// Opens `dir` with `source` loaded: JS functions grantGold, grantXp and
// sendMail (globals set by rt.set), api.gold and api.mail (fields: known by
// their own names), fetchA and fetchB (async). `calls` counts each by name;
// `errors` gathers taskerror's [id, error].
async function open(dir, source, calls = new Map(), errors = []) {
  const count = (name, value) => {
    calls.set(name, (calls.get(name) || 0) + 1);
    return value;
  };
  const rt = await Runtime.open({
    name: 'game',
    store: dir,
    durableRestore: 'all', // every task replays at open, where a divergence shows
    setup: (r) => {
      r.set('grantGold', (n) => count('grantGold', `gold ${n}`));
      r.set('grantXp', (n) => count('grantXp', `xp ${n}`));
      r.set('sendMail', (n) => count('sendMail', `mail ${n}`));
      r.set('api', { gold: (n) => count('gold', `gold ${n}`), mail: (n) => count('mail', `mail ${n}`) });
      r.set('fetchA', async () => {
        await sleep(1);
        return count('fetchA', 'a');
      });
      r.set('fetchB', async () => {
        await sleep(1);
        return count('fetchB', 'b');
      });
      r.on('taskerror', (t, e) => errors.push([t.id, e]));
      r.load(source);
    },
  });
  return closeAfterTest(rt); // closed however the test ends
}

// Runs `first` until the task waits INDEFINITELY, then reopens with `second`.
// Returns { task, rt, errors, calls } of the second life.
async function replayWith(first, second) {
  const dir = tmpdir();
  const calls = new Map();
  let rt = await open(dir, first, calls);
  const task = rt.spawn('q', { durable: true, key: 'k' });
  await loopUntil(() => rt.task(task.id) && rt.task(task.id).waiting?.instruction === 'INDEFINITELY');
  await rt.close();
  const made = new Map(calls);
  calls.clear();
  const errors = [];
  rt = await open(dir, second, calls, errors);
  return { task, rt, errors, calls, made, dir };
}

function expectDiverged(errors, id, recorded, now) {
  expect(errors).toHaveLength(1);
  const [tid, err] = errors[0];
  expect(tid).toBe(id);
  expect(err.code).toBe('ERR_NONDETERMINISM');
  expect(err.message).toContain(id);
  expect(err.message).toContain(`the journal holds ${recorded}, the code now made ${now}`);
}

test('swapped JS calls fail the replay with ERR_NONDETERMINISM naming both functions', async () => {
  const { task, rt, errors, calls } = await replayWith(
    `function q() grantGold(1); sendMail(2); coroutine.yield("INDEFINITELY") end`,
    `function q() sendMail(2); grantGold(1); coroutine.yield("INDEFINITELY") end`,
  );
  expectDiverged(errors, task.id, 'a JS call to grantGold', 'a JS call to sendMail');
  expect(errors[0][1].message).toContain('record 1');
  expect(calls.size).toBe(0); // nothing called again
  await rt.close();
});

test("a call of another JS function in a recorded call's place fails the replay", async () => {
  const { task, rt, errors, calls } = await replayWith(
    `function q() grantGold(1); coroutine.yield("INDEFINITELY") end`,
    `function q() grantXp(1); coroutine.yield("INDEFINITELY") end`,
  );
  expectDiverged(errors, task.id, 'a JS call to grantGold', 'a JS call to grantXp');
  expect(calls.size).toBe(0);
  await rt.close();
});

test('a JS function reached as a field is known by its own name', async () => {
  const { task, rt, errors } = await replayWith(
    `function q() api.gold(1); api.mail(2); coroutine.yield("INDEFINITELY") end`,
    `function q() api.mail(2); api.gold(1); coroutine.yield("INDEFINITELY") end`,
  );
  expectDiverged(errors, task.id, 'a JS call to gold', 'a JS call to mail');
  await rt.close();
});

test('swapped JS calls that return promises fail the replay too', async () => {
  const { task, rt, errors, calls } = await replayWith(
    `function q() local a = fetchA(); local b = fetchB(); coroutine.yield("INDEFINITELY") end`,
    `function q() local b = fetchB(); local a = fetchA(); coroutine.yield("INDEFINITELY") end`,
  );
  expectDiverged(errors, task.id, 'a JS call to fetchA', 'a JS call to fetchB');
  expect(calls.size).toBe(0);
  await rt.close();
});

test('swapped named steps fail the replay with ERR_NONDETERMINISM naming both', async () => {
  const { task, rt, errors, calls } = await replayWith(
    `function q()
       tasks.step("gold", function() return grantGold(1) end)
       tasks.step("mail", function() return sendMail(2) end)
       coroutine.yield("INDEFINITELY")
     end`,
    `function q()
       tasks.step("mail", function() return sendMail(2) end)
       tasks.step("gold", function() return grantGold(1) end)
       coroutine.yield("INDEFINITELY")
     end`,
  );
  expectDiverged(errors, task.id, 'tasks.step "gold"', 'tasks.step "mail"');
  expect(calls.size).toBe(0);
  await rt.close();
});

const UNCHANGED = `
  function q()
    local g = grantGold(1)
    local f = fetchA()
    local m = tasks.step("mail", function() return sendMail(2) end)
    local x = api.gold(3)
    local u = tasks.step(function() return grantXp(4) end)
    local got = coroutine.yield("INDEFINITELY")
    return table.concat({ g, f, m, x, u, got }, ",")
  end`;

test('an unchanged task replays its named calls and steps without calling JS again', async () => {
  const { task, rt, errors, calls, made } = await replayWith(UNCHANGED, UNCHANGED);
  expect(errors).toEqual([]);
  expect([...made.values()]).toEqual([1, 1, 1, 1, 1]);
  const t = rt.spawn('q', { durable: true, key: 'k' });
  expect(t.id).toBe(task.id);
  expect(rt.resume(task.id, 'now')).toBe(true);
  expect(await t.result).toBe('gold 1,a,mail 2,gold 3,xp 4,now');
  expect(calls.size).toBe(0);
  await rt.close();
});

test('tasks.patched still meets tasks older code started, whose calls and steps moved lines', async () => {
  const v1 = `function q()
    local a = tasks.step("gold", function() return grantGold(10) end)
    local m = sendMail(1)
    coroutine.yield("INDEFINITELY")
    return a .. "/" .. m .. "/" .. grantXp(5)
  end`;
  const v2 = `function q()
    local bonus = ""
    if tasks.patched("bonus") then
      bonus = grantXp(100)
    end
    local a = tasks.step("gold", function() return grantGold(10) end)
    local m = sendMail(1)
    coroutine.yield("INDEFINITELY")
    return a .. "/" .. m .. "/" .. grantXp(5) .. bonus
  end`;
  const { task, rt, errors, calls } = await replayWith(v1, v2);
  expect(errors).toEqual([]);
  const old = rt.spawn('q', { durable: true, key: 'k' });
  expect(old.id).toBe(task.id);
  const young = rt.spawn('q', { durable: true, key: 'young' });
  await loopUntil(() => rt.task(young.id)?.waiting?.instruction === 'INDEFINITELY');
  rt.resume(old.id);
  rt.resume(young.id);
  expect(await old.result).toBe('gold 10/mail 1/xp 5'); // the old path
  expect(await young.result).toBe('gold 10/mail 1/xp 5xp 100'); // the new one
  expect(calls.get('grantGold')).toBe(1); // the young task's only: the old one's replayed
  await rt.close();
});

// CRC-32C (Castagnoli), as a journal record's seal (native/core/base/crc32c.cpp).
const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0x82f63b78 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
function crc32c(bytes) {
  let c = 0xffffffff;
  for (const b of bytes) c = CRC_TABLE[(c ^ b) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

// Rewrites the task's call and step records of `dir` as a version without
// identities wrote them: kind, values, CRC. Returns how many it rewrote.
async function stripIdentities(dir, id) {
  const store = new DirectoryStore(dir);
  const lease = await store.acquire('game');
  const reader = store.reader('game');
  const writes = [];
  for (const key of reader.keys(`${id}/`, '', -1, 2)) {
    const r = reader.get(key, 2);
    const kind = String.fromCharCode(r[0]);
    if ((kind !== 'C' && kind !== 'S') || r[1] !== 2) continue;
    const body = Buffer.concat([r.subarray(0, 1), r.subarray(3 + r[2], r.length - 4)]);
    const crc = Buffer.alloc(4);
    crc.writeUInt32LE(crc32c(body));
    writes.push({ space: 2, key, value: Buffer.concat([body, crc]) });
  }
  await store.write({ name: 'game', token: lease.token, writes });
  await lease.release();
  await store.close();
  return writes.length;
}

test('a journal written without identities (by an older version) still replays, unchecked', async () => {
  const dir = tmpdir();
  const calls = new Map();
  let rt = await open(dir, UNCHANGED, calls);
  const task = rt.spawn('q', { durable: true, key: 'k' });
  await loopUntil(() => rt.task(task.id)?.waiting?.instruction === 'INDEFINITELY');
  await rt.close();
  expect(await stripIdentities(dir, task.id)).toBe(4); // grantGold, fetchA, api.gold and the named step
  calls.clear();
  const errors = [];
  rt = await open(dir, UNCHANGED, calls, errors);
  expect(errors).toEqual([]);
  const t = rt.spawn('q', { durable: true, key: 'k' });
  rt.resume(task.id, 'now');
  expect(await t.result).toBe('gold 1,a,mail 2,gold 3,xp 4,now');
  expect(calls.size).toBe(0);
  await rt.close();
});

// A deploy that breaks a waiting task must not lose it silently: the replay
// fails inside Runtime.open, before the caller could listen.
describe('a task that fails while Runtime.open restores it is never silent', () => {
  const FIRST = `function q() grantGold(1) coroutine.yield("INDEFINITELY") end`;
  const SECOND = `function q() grantXp(1) coroutine.yield("INDEFINITELY") end`;
  async function reopened(source, dir) {
    return closeAfterTest(
      await Runtime.open({
        name: 'game',
        store: dir,
        durableRestore: 'all',
        setup: (r) => {
          r.set('grantGold', () => 'gold');
          r.set('grantXp', () => 'xp');
          r.load(source);
        },
      }),
    );
  }
  async function brokenDeploy() {
    const dir = tmpdir();
    let rt = await reopened(FIRST, dir);
    const task = rt.spawn('q', { durable: true });
    await loopUntil(() => rt.task(task.id).waiting?.instruction === 'INDEFINITELY');
    await rt.close();
    rt = await reopened(SECOND, dir);
    return { rt, id: task.id, dir };
  }

  test('a taskerror listener added just after the open hears it; stats() counts it', async () => {
    const { rt, id } = await brokenDeploy();
    const heard = [];
    rt.on('taskerror', (t, e) => heard.push([t.id, e.code]));
    expect(rt.stats().restoreFailures).toBe(1);
    await loopUntil(() => heard.length > 0);
    expect(heard).toEqual([[id, 'ERR_NONDETERMINISM']]);
  });

  test('without a listener it is a process warning naming the task and the change', async () => {
    const warn = jest.spyOn(process, 'emitWarning').mockImplementation(() => {});
    try {
      const { id } = await brokenDeploy();
      const ofTask = () => warn.mock.calls.find(([m]) => String(m).includes(id));
      await loopUntil(() => ofTask() !== undefined);
      const [message, options] = ofTask();
      expect(options.code).toBe('LUA_TASK_FAILED');
      expect(message).toContain('grantGold'); // what the journal holds
      expect(message).toContain('grantXp'); // what the code now made
    } finally {
      warn.mockRestore();
    }
  });

  test('a task that cannot be restored at all (its entry is gone) is reported the same way, and its records kept', async () => {
    const { dir, id } = await brokenDeploy().then(async ({ rt, id, dir }) => {
      await rt.close();
      return { dir, id };
    });
    const rt = await reopened('-- q is gone', dir);
    const heard = [];
    rt.on('taskerror', (t, e) => heard.push([t.id, t.restored, e.code, e.message]));
    await loopUntil(() => heard.length > 0);
    expect(heard[0][0]).toBe(id);
    expect(heard[0][1]).toBe(false);
    expect(heard[0][3]).toContain('could not be restored');
    expect(heard[0][3]).toContain('Its records are kept');
    await rt.close();
    const store = new DirectoryStore(dir);
    expect((await store.scan('game', 2, '', 10)).keys.length).toBeGreaterThan(0);
    await store.close();
  });
});

test('a store whose scan() fails fails Runtime.open saying so, and leaves the name free', async () => {
  const dir = tmpdir();
  const real = new DirectoryStore(dir);
  let rt = await Runtime.open({
    name: 'game',
    store: real,
    setup: (r) => r.load('function q() coroutine.yield("INDEFINITELY") end'),
  });
  rt.spawn('q', { durable: true });
  await rt.close();
  // The store as a user's own over the same files, its journals read by scan() only.
  let fail = true;
  const store = {
    spaces: real.spaces,
    acquire: (n) => real.acquire(n),
    load: (n) => real.load(n),
    save: (n, b, i) => real.save(n, b, i),
    write: (b) => real.write(b),
    reader: (n) => {
      const r = real.reader(n);
      return { get: r.get, keys: r.keys };
    },
    scan: (...args) =>
      fail
        ? Promise.reject(Object.assign(new Error('Connection terminated unexpectedly'), { code: 'ECONNRESET' }))
        : real.scan(...args),
  };
  const setup = (r) => r.load('function q() coroutine.yield("INDEFINITELY") end');
  await expect(Runtime.open({ name: 'game', store, setup })).rejects.toMatchObject({
    code: 'ERR_COMMIT_FAILED',
    message: expect.stringMatching(/durable tasks' records of runtime "game".*Connection terminated unexpectedly/),
  });
  fail = false; // the store is back: the name was released, the task is there
  rt = await Runtime.open({ name: 'game', store, setup });
  expect(rt.tasks().map((t) => t.waiting && t.waiting.instruction)).toEqual(['INDEFINITELY']);
  await rt.close();
  await real.close();
});
