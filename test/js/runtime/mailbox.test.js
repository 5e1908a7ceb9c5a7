// SPDX-License-Identifier: MIT
// A mailbox per task: rt.send / tasks.send queue messages whatever the task is doing; tasks.receive takes them.
'use strict';
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const { Runtime } = require('../../..');
const { makeRuntime, sleep } = require('../helpers');

let rt;
beforeEach(() => {
  rt = makeRuntime();
});

describe("the issue's scenario: a quest task that COMMITs after each event", () => {
  let dir;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lua-tasks-mailbox-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  const quest = `function quest()
    tasks.state.events = {}
    while true do
      local ev = tasks.receive()
      if ev == "stop" then return tasks.state.events end
      local events = tasks.state.events
      events[#events + 1] = ev.n
      coroutine.yield("COMMIT")
    end
  end`;

  test('20 concurrent POST /event/:id are all processed, in the order they were sent', async () => {
    const game = await Runtime.open({ name: 'quests', store: dir });
    try {
      game.load(quest);
      const task = game.start('quest');
      const arrived = []; // the order the server sent them in
      const server = http.createServer((req, res) => {
        const m = /^\/event\/([^/]+)\/(\d+)$/.exec(req.url);
        const accepted = req.method === 'POST' && m !== null && game.send(m[1], { n: Number(m[2]) });
        if (accepted) arrived.push(Number(m[2]));
        res.writeHead(accepted ? 202 : 404).end();
      });
      await new Promise((r) => server.listen(0, '127.0.0.1', r));
      const { port } = server.address();
      const post = (n) =>
        new Promise((resolve, reject) => {
          http
            .request(
              { port, host: '127.0.0.1', method: 'POST', path: `/event/${task.id}/${n}`, agent: false },
              (res) => {
                res.resume();
                resolve(res.statusCode);
              },
            )
            .on('error', reject)
            .end();
        });
      const statuses = await Promise.all(Array.from({ length: 20 }, (_, n) => post(n)));
      server.close();
      expect(statuses).toEqual(Array(20).fill(202));
      expect(game.send(task.id, 'stop')).toBe(true);
      const events = await task.result;
      expect(events).toEqual(arrived);
      expect(events.slice().sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, n) => n));
    } finally {
      await game.close();
    }
    const again = await Runtime.open({ name: 'quests', store: dir });
    try {
      expect(again.load('return #tasks.state.events')).toEqual([20]); // each event was committed
    } finally {
      await again.close();
    }
  });

  test('20 sends in a burst while the task commits arrive in send order (rt.resume would lose 19)', async () => {
    const game = await Runtime.open({ name: 'burst', store: dir });
    try {
      game.load(quest);
      const task = game.start('quest');
      expect(game.send(task.id, { n: 0 })).toBe(true);
      await sleep(0);
      // The task receives, commits or is about to continue: never waiting on
      // a yield instruction, so every resume answers false (the 19 lost
      // events of the issue), while every send queues.
      for (let i = 0; i < 19; i++) expect(game.resume(task.id, { n: 100 + i })).toBe(false);
      for (let n = 1; n < 20; n++) expect(game.send(task.id, { n })).toBe(true);
      expect(game.send(task.id, 'stop')).toBe(true);
      const events = await task.result;
      expect(events).toEqual(Array.from({ length: 20 }, (_, n) => n));
    } finally {
      await game.close();
    }
  });
});

describe('rt.send', () => {
  test('queues for a running task, one awaiting a promise, and one waiting on a timer', async () => {
    let settle;
    rt.set('selfSend', (id) => rt.send(id, 'from JS while running'));
    rt.set(
      'later',
      () =>
        new Promise((r) => {
          settle = r;
        }),
    );
    rt.load(`function t()
      local got = {}
      assert(selfSend(tasks.current_id()))
      later()
      coroutine.yield("FOR", 5, "MILLISECONDS")
      for i = 1, 3 do got[i] = tasks.receive() end
      return got
    end`);
    const task = rt.start('t');
    expect(rt.task(task.id).waiting.instruction).toBe('PROMISE');
    expect(rt.send(task.id, 'while awaiting')).toBe(true);
    settle();
    await sleep(0);
    expect(rt.send(task.id, 'while sleeping')).toBe(true);
    expect(await task.result).toEqual(['from JS while running', 'while awaiting', 'while sleeping']);
  });

  test('a message keeps all its values, nil among them, and is converted at send time', async () => {
    rt.load(`function t() return table.pack(tasks.receive()) end`);
    const task = rt.start('t');
    const obj = { a: 1 };
    expect(rt.send(task.id, obj, null, [1, 2], 'x')).toBe(true);
    obj.a = 2; // after the send: the message holds a copy
    expect(await task.result).toEqual({ 1: { a: 1 }, 3: [1, 2], 4: 'x', n: 4 });
  });

  test('answers false for an unknown or ended task, and after a cancel', async () => {
    rt.load('function t() coroutine.yield("INDEFINITELY") end');
    expect(rt.send('no such id', 1)).toBe(false);
    const task = rt.start('t');
    expect(rt.send(task.id, 1)).toBe(true);
    rt.cancel(task.id);
    await task.result.catch(() => {});
    expect(rt.send(task.id, 1)).toBe(false);
    const done = rt.start(() => 1);
    expect(rt.send(done.id, 1)).toBe(false);
  });

  test("a cancelled task's messages are freed", async () => {
    rt.load('function t() coroutine.yield("INDEFINITELY") end');
    const base = rt.stats().memoryUsed;
    const task = rt.start('t');
    const big = 'x'.repeat(1 << 20);
    for (let i = 0; i < 8; i++) rt.send(task.id, `${i}${big}`);
    expect(rt.stats().memoryUsed - base).toBeGreaterThan(8 << 20);
    rt.cancel(task.id);
    await task.result.catch(() => {});
    rt.load('collectgarbage() collectgarbage()');
    expect(rt.stats().memoryUsed - base).toBeLessThan(1 << 20);
  });

  test('refuses a message without a first value, and a bad id', () => {
    const task = rt.start(() => {});
    expect(() => rt.send(task.id)).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_ARG_VALUE', name: 'TypeError' }),
    );
    expect(() => rt.send(task.id, null, 1)).toThrow(/first value must not be null or undefined/);
    expect(() => rt.send(task.id, undefined)).toThrow(/Received undefined/);
    expect(() => rt.send(42, 1)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_TYPE' }));
  });

  test('a value that cannot be converted throws ERR_CONVERSION and queues nothing', async () => {
    const small = makeRuntime({ conversionLimit: 1000 });
    small.load('function t() return tasks.receive(0) end');
    small.load('function w() coroutine.yield("FOR", 10, "MILLISECONDS") return tasks.receive(0) end');
    const task = small.start('w');
    expect(() => small.send(task.id, 'x'.repeat(5000))).toThrow(expect.objectContaining({ code: 'ERR_CONVERSION' }));
    expect(await task.result).toBe(undefined); // nil, "timeout": the first value is nil
  });

  test('queued messages count against memoryLimit: a send past it throws ERR_MEMORY_LIMIT', async () => {
    const small = makeRuntime({ memoryLimit: 4 << 20 });
    small.load('function t() coroutine.yield("INDEFINITELY") end');
    const task = small.start('t');
    const mb = 'x'.repeat(1 << 20);
    let sent = 0;
    let err;
    try {
      for (; sent < 10; sent++) small.send(task.id, `${sent}${mb}`);
    } catch (e) {
      err = e;
    }
    expect(err).toMatchObject({ code: 'ERR_MEMORY_LIMIT' });
    expect(sent).toBeGreaterThan(0);
    expect(sent).toBeLessThan(4);
    small.cancel(task.id);
    await task.result.catch(() => {});
    small.load('collectgarbage()');
    expect(small.send(small.start('t').id, mb)).toBe(true); // freed with the task: room again
  });

  test('a full mailbox throws ERR_MAILBOX_FULL until the task takes a message', async () => {
    const small = makeRuntime({ mailboxLimit: 2 });
    small.load(
      `function t() coroutine.yield("INDEFINITELY") local a = tasks.receive() coroutine.yield("INDEFINITELY") return a end`,
    );
    const task = small.start('t');
    expect(small.send(task.id, 'a')).toBe(true);
    expect(small.send(task.id, 'b')).toBe(true);
    let err;
    try {
      small.send(task.id, 'c');
    } catch (e) {
      err = e;
    }
    expect(err).toMatchObject({ code: 'ERR_MAILBOX_FULL', name: 'LuaTasksError' });
    expect(err.message).toMatch(/mailbox is full \(2 messages, the mailboxLimit option\)/);
    expect(small.resume(task.id)).toBe(true);
    expect(small.send(task.id, 'c')).toBe(true);
    expect(small.resume(task.id)).toBe(true);
    expect(await task.result).toBe('a');
  });

  test.each([0, -1, 1.5, 2 ** 32])('mailboxLimit %p is refused', (v) => {
    expect(() => new Runtime({ mailboxLimit: v })).toThrow(expect.objectContaining({ code: 'ERR_OUT_OF_RANGE' }));
  });

  test('mailboxLimit "10" is refused as a wrong type', () => {
    expect(() => new Runtime({ mailboxLimit: '10' })).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_ARG_TYPE' }),
    );
  });
});

describe('tasks.receive', () => {
  test('a waiting receiver shows RECEIVE, and rt.resume does not reach it', async () => {
    rt.load('function t() return tasks.receive() end');
    const task = rt.start('t');
    expect(rt.task(task.id).waiting).toEqual({ instruction: 'RECEIVE' });
    expect(rt.resume(task.id, 'x')).toBe(false);
    expect(rt.send(task.id, 'y')).toBe(true);
    expect(await task.result).toBe('y');
  });

  test('a receiver with a timeout shows when it ends (waiting.until), one without shows none', async () => {
    rt.load('function t(s) if s then return tasks.receive(s, "SECONDS") end return tasks.receive() end');
    const before = Date.now();
    const timed = rt.start('t', 60);
    const { instruction, until } = rt.task(timed.id).waiting;
    expect(instruction).toBe('RECEIVE');
    expect(until).toBeInstanceOf(Date);
    expect(until.getTime()).toBeGreaterThanOrEqual(before + 59000);
    expect(until.getTime()).toBeLessThanOrEqual(Date.now() + 60000 + 1);
    expect(rt.tasks().find((t) => t.id === timed.id).waiting.until).toBeInstanceOf(Date);
    rt.send(timed.id, 'done');
    expect(await timed.result).toBe('done');
    const untimed = rt.start('t');
    expect(rt.task(untimed.id).waiting).toEqual({ instruction: 'RECEIVE' });
    rt.send(untimed.id, 'done');
    await untimed.result;
  });

  test('returns nil, "timeout" after its timeout, in the unit given', async () => {
    rt.load(`function t()
      local t0 = os.clock()
      local v, why = tasks.receive(30, "MILLISECONDS")
      return { v == nil, why }
    end`);
    const start = Date.now();
    expect(await rt.call('t')).toEqual([true, 'timeout']);
    const took = Date.now() - start;
    expect(took).toBeGreaterThanOrEqual(25);
    expect(took).toBeLessThan(2000);
  });

  test('a message that comes before the timeout is returned', async () => {
    rt.load('function t() return tasks.receive(10) end');
    const task = rt.start('t');
    setTimeout(() => rt.send(task.id, 'soon'), 5);
    expect(await task.result).toBe('soon');
  });

  test('tasks.send from Lua, task to task; nil, message for an unknown id; misuse raises', async () => {
    rt.load(`function consumer() local sum = 0
        for _ = 1, 3 do sum = sum + tasks.receive() end
        return sum end
      function producer(to)
        for i = 1, 3 do assert(tasks.send(to, i)) end
        local ok, msg = tasks.send("t-no-such-task", 1)
        local bad = pcall(tasks.send, to, nil)
        return { ok == nil, msg, bad }
      end`);
    const c = rt.start('consumer');
    expect(await rt.call('producer', c.id)).toEqual([true, 'no such task (unknown or finished)', false]);
    expect(await c.result).toBe(6);
  });

  test('outside a task it raises', () => {
    expect(() => rt.load('tasks.receive()')).toThrow(/tasks.receive: not inside a task/);
  });
});

test('task.send(...) is rt.send(task.id, ...)', async () => {
  rt.load('function echo() local a, b = tasks.receive() return a .. b end');
  const task = rt.start('echo');
  expect(task.send('x', 'y')).toBe(true);
  expect(await task.result).toBe('xy');
  expect(task.send('late')).toBe(false);
});
