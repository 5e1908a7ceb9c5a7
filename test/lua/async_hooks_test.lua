-- SPDX-License-Identifier: MIT
-- util.async's runtime hooks under plain lua5.4: lua5.4 test/lua/async_hooks_test.lua
--
-- lib/lua/util/async_hooks.lua runs on util.async's table inside a runtime
-- (lib/runtime/modules.js). Here a stand-in tasks module takes the place of the
-- runtime's: tasks.start runs a coroutine until its first yield, as the real
-- one does, and the test wakes each waiting task by hand, so nothing sleeps.
-- Inside a runtime, test/js/runtime/async.test.js checks the same hooks for real.

local dir = (arg and arg[0] and arg[0]:match("^(.*)[/\\][^/\\]*$")) or "."
package.path = dir .. "/../../lib/lua/?.lua;lib/lua/?.lua;" .. package.path
local HOOKS = dir .. "/../../lib/lua/util/async_hooks.lua"

local tests = {}
local function test(name, fn) tests[#tests + 1] = { name = name, fn = fn } end

local function eq(got, want, what)
  if got ~= want then
    error(("%s: expected %s, got %s"):format(what or "value", tostring(want), tostring(got)), 2)
  end
end

local function truthy(v, what)
  if not v then error((what or "condition") .. " is false", 2) end
end

-- A stand-in for the runtime's tasks module. Each task is a coroutine with
-- an id; what it yields says what it waits for: nothing (a next tick),
-- "sleep" and its seconds, "await" and its promise, or "wait" and the id of
-- the task it joins. wake(kind, arg, ...) resumes the tasks waiting so, with
-- `...` as what the wait returns. A task's end wakes its joiners.
local function stand_in()
  local t = { waiting = {}, started = 0 }
  local current
  local run
  local function ended(id, ok, err)
    t.wake("wait", id, ok, err)
    if not ok then error(err, 0) end
  end
  function run(id, co, ...)
    local outer = current
    current = id
    local ok, kind, arg = coroutine.resume(co, ...)
    current = outer
    if ok and coroutine.status(co) == "suspended" then
      t.waiting[#t.waiting + 1] = { id = id, co = co, kind = kind or "tick", arg = arg }
    else
      ended(id, ok, kind)
    end
  end
  function t.start(f, ...)
    t.started = t.started + 1
    local id = "task" .. t.started
    run(id, coroutine.create(f), ...)
    return id
  end
  function t.current_id() return current end
  function t.sleep(seconds) coroutine.yield("sleep", seconds) end
  function t.await(p)
    local ok, v = coroutine.yield("await", p)
    if not ok then error(v, 0) end
    return v
  end
  function t.wait(id)
    local ok, err = coroutine.yield("wait", id)
    if not ok then error(err, 0) end
  end
  function t.wake(kind, arg, ...)
    local due = {}
    for i, w in ipairs(t.waiting) do
      if w.kind == kind and (arg == nil or w.arg == arg) then due[#due + 1] = i end
    end
    for i = #due, 1, -1 do due[i] = table.remove(t.waiting, due[i]) end
    for _, w in ipairs(due) do run(w.id, w.co, ...) end
    return #due
  end
  -- How many tasks wait so (kind, and arg if given).
  function t.count(kind, arg)
    local n = 0
    for _, w in ipairs(t.waiting) do
      if w.kind == kind and (arg == nil or w.arg == arg) then n = n + 1 end
    end
    return n
  end
  return t
end

-- A fresh util.async with the hooks installed over a fresh stand-in.
local function hooked()
  package.loaded["util.async"] = nil
  local async = require "util.async"
  local tasks = stand_in()
  package.loaded.tasks = tasks
  local returned = assert(loadfile(HOOKS))(async)
  package.loaded.tasks = nil
  return async, tasks, returned
end

test("the hooks return util.async's own table, set no globals, and replace wait_for and wait", function()
  local before = {}
  for k in pairs(_G) do before[k] = true end
  package.loaded["util.async"] = nil
  local plain = require("util.async").wait_for
  local async, _, returned = hooked()
  eq(returned, async, "returned table")
  for k in pairs(_G) do eq(before[k], true, "no new global " .. tostring(k)) end
  eq(async.wait, async.wait_for, "wait is wait_for")
  eq(async.wait_for ~= plain, true, "wait_for replaced")
end)

test("sleep waits in a task for its seconds; the queue goes on in a next-tick task", function()
  local async, tasks = hooked()
  local log = {}
  local r = async.runner(function(item)
    log[#log + 1] = "start " .. item
    async.sleep(2)
    log[#log + 1] = "end " .. item
  end)
  r:run("a")
  r:enqueue("b")
  eq(table.concat(log, ","), "start a", "before the sleep ends")
  eq(tasks.waiting[1].arg, 2, "the task sleeps the seconds given")
  eq(tasks.wake("sleep"), 1, "tasks woken")
  eq(table.concat(log, ","), "start a,end a", "after the sleep")
  eq(r.state, "waiting", "state until the next tick")
  eq(tasks.wake("tick"), 1, "next ticks run")
  eq(table.concat(log, ","), "start a,end a,start b", "the next item ran in the tick")
end)

test("wait_for a userdata (a JS Promise) awaits it in a task: its value, or nil and the error", function()
  local async, tasks = hooked()
  local ok_promise, bad_promise = io.stdout, io.stderr -- any userdata stands for a Promise
  local got = {}
  local r = async.runner(function(p)
    got[#got + 1] = { async.wait_for(p) }
  end)
  r:run(ok_promise)
  eq(#got, 0, "waits")
  eq(tasks.wake("await", ok_promise, true, 42), 1, "awaiting tasks")
  eq(got[1][1], 42, "value")
  tasks.wake("tick")
  r:run(bad_promise)
  tasks.wake("await", bad_promise, false, "rejected")
  eq(got[2][1], nil, "no value")
  eq(got[2][2], "rejected", "reason")
end)

test("wait_for a table with :next is util.async's own: no task is started", function()
  local async, tasks = hooked()
  local p = { next = function(self, on_ok) on_ok("now") return self end }
  local value
  async.runner(function() value = async.wait_for(p) end):run(1)
  eq(value, "now", "value")
  eq(#tasks.waiting, 0, "no task waits")
end)

test("run() outside a task processes the queue at once in a task of its own", function()
  local async, tasks = hooked()
  local log = {}
  local r = async.runner(function(item) log[#log + 1] = item .. " in " .. tostring(tasks.current_id()) end)
  local ok, state, n = r:run("a")
  eq(ok, true, "ok")
  eq(state, "ready", "state")
  eq(n, 0, "queued")
  eq(log[1], "a in task1", "the item ran in a task")
end)

test("an error run() raises in its task reaches run()'s caller", function()
  local async = hooked()
  local r = async.runner(function(item) error("bad " .. item, 0) end)
  local ok, err = pcall(r.run, r, "x")
  eq(ok, false, "raised")
  eq(err, "bad x", "the item's error, through the default watcher")
  eq(r.state, "ready", "state")
end)

test("done() outside a task resumes the item in a task of its own, on a next tick", function()
  local async, tasks = hooked()
  local log, wake = {}, nil
  local r = async.runner(function(item)
    local wait
    wait, wake = async.waiter()
    wait()
    log[#log + 1] = item .. " in " .. tostring(tasks.current_id())
  end)
  r:run("a")
  eq(r.state, "waiting", "waits")
  wake()
  eq(#log, 0, "not inside done()")
  eq(tasks.wake("tick"), 1, "one task waits for the tick")
  truthy(log[1] and log[1]:match("^a in task%d+$"), "the item went on in a task: " .. tostring(log[1]))
end)

test("done() inside a task resumes the item there and then", function()
  local async, tasks = hooked()
  local log, wake = {}, nil
  local r = async.runner(function(item)
    local wait
    wait, wake = async.waiter()
    wait()
    log[#log + 1] = item .. " in " .. tostring(tasks.current_id())
  end)
  r:run("a")
  local id = tasks.start(function() wake() end)
  eq(log[1], "a in " .. id, "went on in the task that called done()")
end)

test("each task that holds a runner has one warden, waiting for the task to end", function()
  local async, tasks = hooked()
  local r1 = async.runner(function() end)
  local r2 = async.runner(function() end)
  local id = tasks.start(function()
    r1:run(1)
    r2:run(2)
    r1:run(3)
    tasks.sleep(1)
  end)
  eq(tasks.count("wait", id), 1, "wardens of the task")
  tasks.wake("sleep")
  eq(tasks.count("wait"), 0, "the warden ended with the task")
end)

test("a warden hands back each runner its task died holding, and the watcher is told", function()
  local async, tasks = hooked()
  local errors, log = {}, {}
  local watchers = { error = function(_, err) errors[#errors + 1] = err end }
  local r = async.runner(function(item) log[#log + 1] = item end, watchers)
  -- A task dies holding r: the stand-in cannot kill, so the hold hook
  -- raises, which leaves r "running" with a dead owner as a kill does.
  local hold = async._hold
  async._hold = function(runner)
    hold(runner)
    async._hold = hold
    error("killed", 0)
  end
  r:enqueue("next")
  pcall(tasks.start, function() r:run() end)
  eq(#errors, 1, "the watcher was told")
  truthy(errors[1]:find("killed", 1, true), "of what the task died of: " .. errors[1])
  eq(table.concat(log, ","), "next", "the queue went on")
  eq(r.state, "ready", "state")
end)

local passed, failed = 0, 0
for _, t in ipairs(tests) do
  local ok, err = pcall(t.fn)
  if ok then
    passed = passed + 1
    print("ok - " .. t.name)
  else
    failed = failed + 1
    print("FAIL - " .. t.name .. ": " .. tostring(err))
  end
  collectgarbage()
end
print(("%d passed, %d failed"):format(passed, failed))
if failed > 0 then os.exit(1) end
