// SPDX-License-Identifier: MIT
// A coroutine that reaches an API wait under coroutine.resume goes on as a detached part of its task: the seed's fan-out runs its waits side by side.
'use strict';
const { makeRuntime, makeRuntimeWithLines, until } = require('../helpers');

// The seed's update_resources idiom (elements-coroutines.txt), with `call`
// standing in for resource.invoke: a counter, one coroutine.create +
// coroutine.resume per item, then a plain coroutine.yield() until the counter
// is back to zero.
const FAN_OUT = `
  function fan_out(n)
    local active_tasks, results = 0, {}
    for i = 1, n do
      local co = coroutine.create(function()
        active_tasks = active_tasks + 1
        results[i] = call(i)
        active_tasks = active_tasks - 1
      end)
      coroutine.resume(co)
    end
    while active_tasks > 0 do coroutine.yield() end
    return results
  end`;

// A JS function that answers after `ms`, logging when each call starts and ends.
function slowCall(log, ms) {
  return (i) =>
    new Promise((resolve) => {
      log.push(`start ${i}`);
      setTimeout(() => {
        log.push(`end ${i}`);
        resolve(i * 10);
      }, ms);
    });
}

const starts = (log) => log.slice(0, 5).every((e) => e.startsWith('start'));

describe("the seed's fan-out runs its waits side by side", () => {
  test('five JS promises of 100 ms all start before any of them ends', async () => {
    const rt = makeRuntime();
    const log = [];
    rt.set('call', slowCall(log, 100));
    rt.load(FAN_OUT);
    const task = rt.start('fan_out', 5);
    expect(log).toEqual(['start 1', 'start 2', 'start 3', 'start 4', 'start 5']);
    expect(await task.result).toEqual([10, 20, 30, 40, 50]);
    expect(log).toHaveLength(10);
    expect(starts(log)).toBe(true);
    expect(rt.tasks()).toEqual([]);
  });

  test('five tasks.sleep calls all start before any of them ends', async () => {
    const rt = makeRuntime();
    rt.load(`log = {}
      function call(i)
        log[#log + 1] = "start " .. i
        tasks.sleep(0.05)
        log[#log + 1] = "end " .. i
        return i
      end
      ${FAN_OUT}`);
    expect(await rt.call('fan_out', 5)).toEqual([1, 2, 3, 4, 5]);
    const log = rt.get('log');
    expect(log).toHaveLength(10);
    expect(starts(log)).toBe(true);
  });

  test('a mix of promises, sleeps, joins and receives waits side by side', async () => {
    const rt = makeRuntime();
    const log = [];
    const slow = slowCall(log, 30);
    rt.set('js', (i) => slow(i));
    rt.load(`function call(i)
        if i == 1 then return js(1) end
        if i == 2 then tasks.sleep(0.03) return 20 end
        if i == 3 then return tasks.wait(tasks.start(function() tasks.sleep(0.03) return 30 end)) end
        if i == 4 then return (tasks.receive()) end
        return tasks.await(js(5))
      end
      ${FAN_OUT}`);
    const task = rt.start('fan_out', 5);
    expect(log).toEqual(['start 1', 'start 5']);
    expect(rt.send(task.id, 40)).toBe(true);
    expect(await task.result).toEqual([10, 20, 30, 40, 50]);
  });

  test('the task is the only one listed, and its own wait is what it shows', async () => {
    const rt = makeRuntime();
    rt.set('call', slowCall([], 20));
    rt.load(FAN_OUT);
    const task = rt.start('fan_out', 3);
    expect(rt.tasks().map((t) => t.id)).toEqual([task.id]);
    expect(task.waiting).toEqual({ instruction: 'IMMEDIATE' });
    expect(rt.stats().tasks).toBe(1);
    await task.result;
    expect(rt.stats().tasks).toBe(0);
  });
});

describe('what a detached coroutine is', () => {
  test('resume returns true at once; the coroutine is "normal" while it waits and cannot be resumed or closed', async () => {
    const rt = makeRuntime();
    rt.load(`function t()
      local co = coroutine.create(function(x) tasks.sleep(0.01) coroutine.yield(x + 1, "done") return "end" end)
      local out = { { coroutine.resume(co, 1) }, coroutine.status(co), { coroutine.resume(co) } }
      out[#out + 1] = select(2, pcall(coroutine.close, co))
      while coroutine.status(co) ~= "suspended" do coroutine.yield() end
      out[#out + 1] = { coroutine.resume(co, "ignored") }
      out[#out + 1] = coroutine.status(co)
      out[#out + 1] = { coroutine.resume(co) }
      out[#out + 1] = coroutine.status(co)
      return out
    end`);
    expect(await rt.call('t')).toEqual([
      [true],
      'normal',
      [false, 'cannot resume non-suspended coroutine'],
      expect.stringMatching(/cannot close a coroutine that runs as a detached part of its task/),
      [true, 2, 'done'],
      'suspended',
      [true, 'end'],
      'dead',
    ]);
  });

  test('inside it, the task id, isyieldable and running keep their meaning', async () => {
    const rt = makeRuntime();
    rt.load(`function t()
      local seen
      local co
      co = coroutine.create(function()
        tasks.sleep(0)
        local running, main = coroutine.running()
        seen = { tasks.current_id(), coroutine.isyieldable(), running == co, main }
      end)
      coroutine.resume(co)
      while not seen do coroutine.yield() end
      return seen
    end`);
    const task = rt.start('t');
    expect(await task.result).toEqual([task.id, true, true, false]);
  });

  test('tasks.resume_inline and coroutine.wrap keep a waiting coroutine in line: the whole task waits', async () => {
    const rt = makeRuntime();
    const log = [];
    rt.set('call', slowCall(log, 20));
    rt.load(`function t()
      local co = coroutine.create(function(i) return call(i) end)
      local a = select(2, tasks.resume_inline(co, 1))
      local b = coroutine.wrap(function(i) return call(i) end)(2)
      return a + b
    end`);
    expect(await rt.call('t')).toBe(30);
    expect(log).toEqual(['start 1', 'end 1', 'start 2', 'end 2']);
  });
});

describe('errors, cancels and limits reach the whole task', () => {
  const CLOSER = `local function closer(name)
      return setmetatable({}, { __close = function() print(name .. " closed") end })
    end`;

  test('an error in a detached coroutine fails the task with its message and line; the others are closed', async () => {
    const { rt, lines } = makeRuntimeWithLines();
    rt.load(
      `${CLOSER}
      function t()
        local main <close> = closer("task")
        coroutine.resume(coroutine.create(function() local c <close> = closer("slow") tasks.sleep(60) end))
        coroutine.resume(coroutine.create(function()
          tasks.sleep(0.01)
          error("part failed")
        end))
        coroutine.yield("INDEFINITELY")
      end`,
      { name: 'parts.lua' },
    );
    const task = rt.start('t');
    await expect(task.result).rejects.toMatchObject({
      code: 'ERR_LUA_RUNTIME',
      message: expect.stringMatching(/^parts\.lua:9: part failed/),
      line: 9,
    });
    expect(lines).toEqual(['task closed', 'slow closed']);
    expect(rt.tasks()).toEqual([]);
  });

  test('cancelling the task while its parts wait closes them; their promises settle into nothing', async () => {
    const { rt, lines } = makeRuntimeWithLines();
    const log = [];
    rt.set('call', slowCall(log, 30));
    rt.load(`${CLOSER}
      function t()
        for i = 1, 3 do
          coroutine.resume(coroutine.create(function() local c <close> = closer("part " .. i) call(i) print("never") end))
        end
        coroutine.yield("INDEFINITELY")
      end`);
    const task = rt.start('t');
    expect(rt.cancel(task.id)).toBe(true);
    await expect(task.result).rejects.toMatchObject({ code: 'ERR_TASK_CANCELLED' });
    expect(lines.sort()).toEqual(['part 1 closed', 'part 2 closed', 'part 3 closed']);
    await until(() => log.length === 6); // the promises settle after the cancel: nothing runs
    expect(lines).toHaveLength(3);
    expect(rt.tasks()).toEqual([]);
  });

  test("the task's end closes parts still waiting", async () => {
    const { rt, lines } = makeRuntimeWithLines();
    rt.load(`${CLOSER}
      function t()
        coroutine.resume(coroutine.create(function() local c <close> = closer("part") tasks.sleep(60) end))
        return "ended"
      end`);
    expect(await rt.call('t')).toBe('ended');
    expect(lines).toEqual(['part closed']);
  });

  test('close() closes every task and the parts that wait in it', async () => {
    const { rt, lines } = makeRuntimeWithLines();
    const log = [];
    rt.set('call', slowCall(log, 20));
    rt.load(`${CLOSER}
      function t(name)
        coroutine.resume(coroutine.create(function() local c <close> = closer(name .. " sleeping") tasks.sleep(60) end))
        coroutine.resume(coroutine.create(function() local c <close> = closer(name .. " awaiting") call(1) end))
        coroutine.yield("INDEFINITELY")
      end`);
    const tasks = [rt.start('t', 'a'), rt.start('t', 'b')];
    await rt.close();
    for (const task of tasks) await expect(task.result).rejects.toMatchObject({ code: 'ERR_TASK_CANCELLED' });
    expect(lines.sort()).toEqual(['a awaiting closed', 'a sleeping closed', 'b awaiting closed', 'b sleeping closed']);
    await until(() => log.length === 4); // the promises settle after the close: nothing runs
    expect(lines).toHaveLength(4);
  });

  test('taskTimeout counts the parts: one that spins after its wait kills the task', async () => {
    const rt = makeRuntime({ taskTimeout: 100 });
    rt.load(`function t()
      coroutine.resume(coroutine.create(function() tasks.sleep(0.01) while true do end end))
      coroutine.yield("INDEFINITELY")
    end`);
    await expect(rt.start('t').result).rejects.toMatchObject({ code: 'ERR_TASK_TIMEOUT' });
    expect(rt.tasks()).toEqual([]);
  });

  test('memoryLimit holds in a part: its allocation fails the task with ERR_MEMORY_LIMIT', async () => {
    const rt = makeRuntime({ memoryLimit: 8 << 20 });
    rt.load(`function t()
      coroutine.resume(coroutine.create(function()
        tasks.sleep(0.01)
        local t = {}
        for i = 1, 1e7 do t[i] = string.rep("x", 64) .. i end
      end))
      coroutine.yield("INDEFINITELY")
    end`);
    await expect(rt.start('t').result).rejects.toMatchObject({ code: 'ERR_MEMORY_LIMIT' });
    expect(rt.load('return 1 + 1')).toEqual([2]);
  });
});
