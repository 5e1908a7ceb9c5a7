-- SPDX-License-Identifier: MIT
-- coroutine.resume, wrap, close and status for tasks, and tasks.resume_inline (lua_api_coroutine.cpp).
-- Chunk arguments: the sentinel an API wait yields, is_task(co), is_killed(co), is_part(co), the C resume that
-- detaches and the one that does not, the C status, the main thread, the tasks table.
local SENTINEL, is_task, is_killed, is_part, detaching_resume, raw_resume, raw_status, MAIN, tasks = ...
local co = coroutine
local create, yield, close, isyieldable = co.create, co.yield, co.close, co.isyieldable
local resume, status = raw_resume, raw_status
local error, type, select, setmetatable = error, type, select, setmetatable

-- A coroutine the CPU budget killed runs no hooks any more: its <close>
-- handlers are not run (nothing could stop one that loops), as for a task.
local function close_unless_killed(c)
  if is_killed(c) then return false, "killed: CPU budget exceeded (its <close> handlers are not run)" end
  return close(c)
end

-- Cancelling a task unwinds the task's own coroutine, not the nested ones
-- suspended inside its wait. This guard, pending in the frame that passed
-- the wait up, closes the nested coroutine then, so its <close> variables
-- run too. A normal resume disarms it.
local guard_mt = {__close = function(g)
  local c = g[1]
  if c then
    g[1] = nil
    close_unless_killed(c)
  end
end}
local function disarm(g, ...)
  g[1] = nil
  return ...
end
local function relay(c, ...)
  local g <close> = setmetatable({c}, guard_mt)
  return disarm(g, resume(c, yield(...)))
end

-- A sentinel yield from a nested coroutine is an API wait of the task:
-- pass it up, and hand what the task is resumed with back down.
local function pass(c, ok, ...)
  if ok and select("#", ...) > 0 and (...) == SENTINEL then
    if not isyieldable() then
      error("cannot suspend the task here (inside a metamethod, a C function or a call from JS)", 0)
    end
    return pass(c, relay(c, ...))
  end
  return ok, ...
end

-- resume (l_co_resume) refuses a task's coroutine and the main thread; so
-- does close: a task's coroutine is cancelled through the task, and closing
-- the main thread would empty its stack (the traceback handler with it).
-- coroutine.resume is the C function itself: an API wait detaches the
-- coroutine there. tasks.resume_inline passes it up, as wrap does.
co.resume = detaching_resume
co.status = status
if tasks then
  tasks.resume_inline = function(c, ...)
    return pass(c, resume(c, ...))
  end
end

co.close = function(c)
  if is_task(c) then error("cannot close a task's coroutine (cancel the task: tasks.cancel(id))", 2) end
  if c == MAIN then error("cannot close the runtime's main thread (it runs the calls from JS; it is no coroutine)", 2) end
  if is_part(c) then
    error("cannot close a coroutine that runs as a detached part of its task (it ends with the task)", 2)
  end
  return close_unless_killed(c)
end

co.wrap = function(f)
  local c = create(f)
  local function finish(ok, ...)
    if ok then return ... end
    local err = ...
    if status(c) == "dead" then close_unless_killed(c) end
    if type(err) == "string" then error(err, 2) end
    error(err, 0)
  end
  return function(...)
    return finish(pass(c, resume(c, ...)))
  end
end
