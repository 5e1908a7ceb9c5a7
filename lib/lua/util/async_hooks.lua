-- SPDX-License-Identifier: MIT
-- util.async inside a lua-tasks runtime: items run in tasks, next ticks and sleeps on the loop, JS Promises awaited
--
-- Not a module: lib/runtime/modules.js runs this chunk on util.async's table
-- when a runtime preloads the module, as part of the module's own chunk
-- (named "util.async"), and the module returns what it returns. Plain lua5.4
-- never runs it; test/lua/async_hooks_test.lua runs it with a stand-in tasks
-- module.
--
-- Items run in tasks. run() and done() called in a task work in that task,
-- as in Prosody. Called outside any (from JS: rt.load, a Lua function JS
-- calls, a callback Lua handed to JS), they work in a task of their own, so
-- that an item can wait on the task (tasks.sleep, a JS Promise), has a task
-- id and the task's CPU budget: run() starts it at once (it processes the
-- queue before returning, as Prosody's does); done() starts it on the next
-- loop turn, since run at once it would be part of the JS call (a callback
-- from a timer, say), and a kill would end that call instead of reaching
-- the runner's error watcher.
--
-- Wardens. A task that holds a runner can be killed (taskTimeout) with the
-- runner busy, and nothing of it runs after the kill. So the first time a
-- task holds a runner, a warden task starts and waits for it to end
-- (tasks.wait); if the task died holding runners, the warden hands each
-- back to util.async (_reclaim), which tells its error watcher and runs its
-- queue. One warden per task, whatever the number of runners it holds.
--
-- Next ticks and sleeps run on the loop as tasks, and wait_for also takes JS
-- Promises (which have no :next in Lua): a task awaits the promise with
-- tasks.await and then wakes the waiter, so the item goes on inside a task
-- (task waits such as tasks.sleep or another Promise work after it), as a
-- next tick would. Only what any script has is used here: no internal module
-- exists for user code to require.

local async = ...
local tasks, pcall, type, error, pairs = require "tasks", pcall, type, error, pairs
local setmetatable, pack, unpack = setmetatable, table.pack, table.unpack
local start, await, join, current_id = tasks.start, tasks.await, tasks.wait, tasks.current_id
local running, yield = coroutine.running, coroutine.yield

-- True in a task's own code (its coroutine or one nested in it); false on
-- the main thread: a call from JS, even one made from inside a task.
local function in_task()
  local _, main = running()
  return not main and current_id() ~= nil
end

async._start = function(f, r)
  if in_task() then return f(r) end
  -- Its results come back here if it ends before start returns; an error
  -- after that (it waited on the task) is the task's own.
  local here, results = true, nil
  start(function()
    local res = pack(pcall(f, r))
    if here then
      results = res
    elseif not res[1] then
      error(res[2], 0)
    end
  end)
  here = false
  if results == nil then return end -- it waits, or waits its turn (a COMMIT holds the runtime)
  if not results[1] then error(results[2], 0) end
  return unpack(results, 2, results.n)
end

async._continue = function(f, r)
  if in_task() then return f(r) end
  start(function()
    yield() -- the next loop turn: out of the JS call, under a budget of its own
    f(r)
  end)
end

-- task id -> { runner = owner } for each runner the task held (weak keys: a
-- runner nobody else keeps is not kept for its warden). Set while the task
-- runs; its warden removes it.
local held = {}
local WEAK_KEYS = { __mode = "k" }

local function warden(id, runners)
  local ok, err = pcall(join, id)
  held[id] = nil
  -- Each runner is handed back, even if an earlier watcher raised: the
  -- first such error is this task's.
  local first_err
  for r, owner in pairs(runners) do
    local rok, rerr = pcall(async._reclaim, r, owner, (not ok) and err or nil)
    if not rok and first_err == nil then first_err = rerr end
  end
  if first_err ~= nil then error(first_err, 0) end
end

async._hold = function(r)
  local id = current_id()
  if id == nil then return end -- not in a task (never, with the hooks above)
  local runners = held[id]
  if runners == nil then
    runners = setmetatable({}, WEAK_KEYS)
    held[id] = runners
    start(warden, id, runners)
  end
  runners[r] = r.owner
end

-- An item that waits on the task (tasks.sleep, a JS Promise) suspends the
-- task with it, as in Prosody: coroutine.resume would detach the runner's
-- thread at that wait (docs/api.md, Coroutines in tasks).
async._resume = tasks.resume_inline or async._resume

async.set_nexttick(function(f)
  start(function() yield() f() end)
end)
async.set_schedule_function(function(seconds, f)
  start(function() tasks.sleep(seconds) f() end)
end)
local lua_wait_for = async.wait_for
local function wait_for(p)
  if type(p) ~= "userdata" then return lua_wait_for(p) end
  local wait, done = async.waiter()
  local ok, value
  start(function()
    ok, value = pcall(await, p)
    done()
  end)
  wait()
  if ok then return value end
  return nil, value
end
async.wait_for = wait_for
async.wait = wait_for
return async
