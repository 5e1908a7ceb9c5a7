-- SPDX-License-Identifier: MIT
-- util.async's ready() and waits in nested coroutines, for plain lua5.4: lua5.4 test/lua/async_nested_test.lua
--
-- Each test restores the module hooks it changes.

-- The harness sits beside this file (inside a runtime, modulePaths finds it).
if package and arg and arg[0] then package.path = (arg[0]:match("^(.*[/\\])") or "") .. "?.lua;" .. package.path end
local h = require "async_harness"
local test, eq, truthy, same, raises, recorder = h.test, h.eq, h.truthy, h.same, h.raises, h.recorder

local async = require "util.async"

--------------------------------------------------------------------------
-- ready() and nested coroutines
--------------------------------------------------------------------------

test("ready is true only inside a runner's function", function()
  local inside, in_watcher
  local r = async.runner(function() inside = async.ready() end, {
    error = function() end,
    ready = function() in_watcher = async.ready() end,
    waiting = function() in_watcher = async.ready() end,
  })
  r:run(1)
  eq(async.ready(), false, "main")
  eq(coroutine.wrap(async.ready)(), false, "a plain coroutine")
  eq(inside, true, "runner function")
  local w
  r.func = function() local wait; wait, w = async.waiter(); wait() end
  r:run(2)
  eq(in_watcher, false, "waiting watcher")
  w()
  eq(in_watcher, false, "ready watcher")
end)

test("a wait inside a nested coroutine raises by default, and the runner goes on", function()
  local watchers, _, names = recorder()
  local ready_nested, err, after
  local r = async.runner(function()
    local co = coroutine.wrap(function()
      ready_nested = async.ready()
      local wait = async.waiter()
      wait()
    end)
    err = select(2, pcall(co))
    after = async.ready()
  end, watchers)
  r:run(1)
  eq(ready_nested, false, "ready in the nested coroutine")
  truthy(tostring(err):find("cannot wait inside a nested coroutine", 1, true), "message: " .. tostring(err))
  eq(after, true, "back in the runner")
  eq(r.state, "ready", "state")
  same(names(), {}, "watcher calls")
end)

test("regression: the done of a refused nested wait does not wake a later wait", function()
  local refused_done, real_done
  local r = async.runner(function()
    coroutine.wrap(function()
      local wait
      wait, refused_done = async.waiter()
      pcall(wait)
    end)()
    local wait
    wait, real_done = async.waiter()
    wait()
  end)
  r:run(1)
  eq(r.state, "waiting", "waiting on the second waiter")
  refused_done()
  eq(r.state, "waiting", "still waiting after the refused waiter's done")
  real_done()
  eq(r.state, "ready", "ready after the real done")
end)

test("a waiter made in a nested coroutine that is done before wait does not suspend", function()
  local result
  local r = async.runner(function()
    result = coroutine.wrap(function()
      local wait, done = async.waiter()
      done()
      wait()
      return "passed"
    end)()
  end)
  r:run(1)
  eq(result, "passed", "result")
end)

-- A host-like _suspend: from a nested coroutine it yields PASS up to a
-- pass-through resumer (pwrap below), which re-suspends one level further
-- up, until the runner's own thread yields the token.
local PASS = {}
local default_suspend = async._suspend
local function passthrough_suspend(thread, token)
  if coroutine.running() == thread then return default_suspend(thread, token) end
  return coroutine.yield(PASS, thread, token)
end
local function pwrap(f)
  local co = coroutine.create(f)
  return function(...)
    local res = table.pack(coroutine.resume(co, ...))
    while res[1] and res[2] == PASS do
      local back = table.pack(async._suspend(res[3], res[4]))
      res = table.pack(coroutine.resume(co, table.unpack(back, 1, back.n)))
    end
    if not res[1] then error(res[2], 0) end
    return table.unpack(res, 2, res.n)
  end
end

test("a replaced _suspend lets a wait pass up through nested coroutines", function()
  async._suspend = passthrough_suspend
  local timers = {}
  async.set_schedule_function(function(s, f) timers[#timers + 1] = f end)
  local ok, err = pcall(function()
    local watchers, _, names = recorder()
    local result, ready_nested
    local r = async.runner(function()
      result = pwrap(function()
        return pwrap(function()
          ready_nested = async.ready()
          async.sleep(1)
          return "from two levels down"
        end)()
      end)()
    end, watchers)
    r:run(1)
    eq(ready_nested, true, "ready in the nested coroutine")
    eq(r.state, "waiting", "the runner waits")
    eq(result, nil, "not finished")
    timers[1]()
    eq(result, "from two levels down", "result")
    eq(r.state, "ready", "state")
    same(names(), { "waiting", "ready" }, "watcher calls")
  end)
  async._suspend = default_suspend
  async.set_schedule_function(nil)
  if not ok then error(err, 0) end
end)

-- A host also makes its own task waits pass up through every coroutine,
-- the runner's included, so a whole task can stop while one of its runners
-- is being resumed. Simulated here with a second copy of the module whose
-- coroutine.resume forwards TASK_WAIT yields up the chain.
test("a runner of a task suspended mid-resume is not the runner of other code", function()
  local path = package and package.searchpath and package.searchpath("util.async", package.path)
  if not path or not loadfile then return end -- inside a runtime: not needed there
  local TASK_WAIT = {}
  local co = setmetatable({}, { __index = coroutine })
  function co.resume(thread, ...)
    local res = table.pack(coroutine.resume(thread, ...))
    while res[1] and res[2] == TASK_WAIT do
      local back = table.pack(coroutine.yield(TASK_WAIT))
      res = table.pack(coroutine.resume(thread, table.unpack(back, 1, back.n)))
    end
    return table.unpack(res, 1, res.n)
  end
  local env = setmetatable({ coroutine = co }, { __index = _G })
  local async2 = assert(loadfile(path, "t", env))()

  local r = async2.runner(function() coroutine.yield(TASK_WAIT) end)
  local task = coroutine.create(function() r:run(1) end)
  local ok, token = coroutine.resume(task)
  eq(ok, true, "task started"); eq(token, TASK_WAIT, "the task wait passed up")
  eq(r.state, "running", "the runner is mid-item")

  local other_ready, other_err
  local other = coroutine.create(function()
    other_ready = async2.ready()
    other_err = select(2, pcall(async2.waiter))
  end)
  coroutine.resume(other)
  eq(async2.ready(), false, "main")
  eq(other_ready, false, "another coroutine")
  truthy(tostring(other_err):find("outside a runner", 1, true), "waiter elsewhere: " .. tostring(other_err))

  coroutine.resume(task)
  eq(coroutine.status(task), "dead", "task finished")
  eq(r.state, "ready", "runner finished the item")
end)

return h.run()
