-- SPDX-License-Identifier: MIT
-- util.async inside a lua-tasks runtime: next ticks, sleeps and JS Promises run as tasks
--
-- Not a module: lib/modules.js runs this chunk on util.async's table when a
-- runtime preloads the module, as part of the module's own chunk (named
-- "util.async"), and the module returns what it returns. Plain lua5.4 never
-- runs it; test/lua/async_hooks_test.lua runs it with a stand-in tasks module.
--
-- Next ticks and sleeps run on the loop as tasks, and wait_for also takes JS
-- Promises (which have no :next in Lua): a task awaits the promise with
-- tasks.await and then wakes the waiter, so the item goes on inside a task
-- (task waits such as tasks.sleep or another Promise work after it), as a
-- next tick would. Only what any script has is used here: no internal module
-- exists for user code to require.

local async = ...
local tasks, pcall, type = require "tasks", pcall, type
local start, await = tasks.start, tasks.await
async.set_nexttick(function(f)
  start(function() coroutine.yield() f() end)
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
