-- SPDX-License-Identifier: MIT
-- util.async's module and its runners (queue, state, errors, lifetime), for plain lua5.4: lua5.4 test/lua/async_test.lua
--
-- The waiters, wait_for, sleep and the guard are tested by async_waiting_test.lua,
-- ready() and nested coroutines by async_nested_test.lua; async_harness.lua is
-- their harness. Each test restores the module hooks it changes.

-- The harness sits beside this file (inside a runtime, modulePaths finds it).
if package and arg and arg[0] then package.path = (arg[0]:match("^(.*[/\\])") or "") .. "?.lua;" .. package.path end
local h = require "async_harness"
local test, eq, truthy, same, raises, recorder, spy = h.test, h.eq, h.truthy, h.same, h.raises, h.recorder, h.spy

-- Globals before the module loads, to check it sets none.
local globals_before = {}
for k in pairs(_G) do globals_before[k] = true end

local async = require "util.async"

--------------------------------------------------------------------------
-- Module
--------------------------------------------------------------------------

test("the module is a table and sets no globals", function()
  eq(type(async), "table", "type")
  for k in pairs(_G) do
    truthy(globals_before[k], "no new global " .. tostring(k))
  end
  for _, name in ipairs({ "runner", "waiter", "ready", "wait_for", "wait", "sleep", "guarder",
    "set_nexttick", "set_schedule_function", "_suspend" }) do
    eq(type(async[name]), "function", "async." .. name)
  end
end)

--------------------------------------------------------------------------
-- Runner: queue and state
--------------------------------------------------------------------------

test("a new runner keeps func, watchers and data as passed and is ready", function()
  local func, watchers, data = function() end, {}, { "data" }
  local r = async.runner(func, watchers, data)
  eq(r.func, func, "func")
  eq(r.watchers, watchers, "watchers")
  eq(r.data, data, "data")
  eq(r.state, "ready", "state")
  eq(r.notified_state, "ready", "notified_state")
end)

test("a runner with no arguments calls each item and has an error watcher", function()
  local r = async.runner()
  local called = 0
  r:run(function() called = called + 1 end)
  eq(called, 1, "calls")
  eq(type(r.watchers.error), "function", "watchers.error")
end)

test("run with an empty queue does nothing", function()
  local calls = 0
  local r = async.runner(function() calls = calls + 1 end)
  local ok, state, n = r:run()
  eq(ok, true, "ok"); eq(state, "ready", "state"); eq(n, 0, "n")
  eq(calls, 0, "calls")
end)

test("items run in queue order, and enqueue does not start the runner", function()
  local seen = {}
  local r = async.runner(function(item) seen[#seen + 1] = item end)
  eq(r:enqueue("a"), r, "enqueue returns the runner")
  r:enqueue("b"):enqueue("c")
  same(seen, {}, "nothing ran yet")
  eq(r.state, "ready", "state")
  r:run("d")
  same(seen, { "a", "b", "c", "d" }, "order")
end)

test("all simple values can be queued", function()
  local seen = {}
  local r = async.runner(function(item) seen[#seen + 1] = item end)
  local t = {}
  for _, v in ipairs({ t, 123, "hello", true, false, 1.5 }) do r:enqueue(v) end
  r:run()
  eq(#seen, 6, "count")
  eq(seen[1], t, "table identity")
  eq(seen[5], false, "false is an item")
end)

test("run returns true, state and the number of items still queued", function()
  local wait, done
  local r = async.runner(function(item)
    if item == "w" then wait, done = async.waiter(); wait() end
  end)
  local rows = {
    -- input, state, n
    { 1, "ready", 0 },
    { "w", "waiting", 0 },
    { 2, "waiting", 1 },
    { 3, "waiting", 2 },
  }
  for i, row in ipairs(rows) do
    local ok, state, n = r:run(row[1])
    eq(ok, true, "row " .. i .. " ok")
    eq(state, row[2], "row " .. i .. " state")
    eq(n, row[3], "row " .. i .. " n")
  end
  done()
  eq(r.state, "ready", "after done")
  eq(#r.queue, 0, "queue drained")
end)

test("state goes ready, running, waiting, ready and the watchers see waiting then ready", function()
  local watchers, log, names = recorder()
  local r
  local seen = {}
  local wait, done
  r = async.runner(function()
    seen[#seen + 1] = r.state
    wait, done = async.waiter()
    wait()
    seen[#seen + 1] = r.state -- still "waiting" until the next tick picks the queue up
  end, watchers)
  seen[#seen + 1] = r.state
  r:run("x")
  seen[#seen + 1] = r.state
  seen[#seen + 1] = r.notified_state
  done()
  seen[#seen + 1] = r.state
  seen[#seen + 1] = r.notified_state
  same(seen, { "ready", "running", "waiting", "waiting", "waiting", "ready", "ready" }, "states")
  same(names(), { "waiting", "ready" }, "watcher calls")
  for _, e in ipairs(log) do
    eq(e[2], 1, e[1] .. " argument count")
    eq(e[3], r, e[1] .. " gets the runner")
  end
end)

test("a run from inside the runner's function only queues", function()
  local seen, r = {}, nil
  local results
  r = async.runner(function(item)
    seen[#seen + 1] = item
    if item == 1 then results = { r:run(2) } end
  end)
  r:run(1)
  same(seen, { 1, 2 }, "items")
  eq(results[1], true, "ok"); eq(results[2], "running", "state"); eq(results[3], 1, "n")
end)

test("runners in parallel wait and resume independently", function()
  local dones = {}
  local function make(name)
    return async.runner(function(item)
      if item == "w" then
        local wait, done = async.waiter()
        dones[name] = done
        wait()
      end
    end)
  end
  local r1, r2 = make("r1"), make("r2")
  r1:run("w"); r2:run("w")
  eq(r1.state, "waiting", "r1"); eq(r2.state, "waiting", "r2")
  dones.r2()
  eq(r1.state, "waiting", "r1 after r2 done"); eq(r2.state, "ready", "r2 after done")
  dones.r1()
  eq(r1.state, "ready", "r1 after done")
end)

test("a waiter made in an inner runner belongs to the inner runner", function()
  local inner_done
  local inner = async.runner(function()
    local wait, done = async.waiter()
    inner_done = done
    wait()
  end)
  local outer_after
  local outer = async.runner(function()
    inner:run("x")
    outer_after = async.ready()
  end)
  outer:run("go")
  eq(outer.state, "ready", "outer finished")
  eq(inner.state, "waiting", "inner waits")
  eq(outer_after, true, "outer can still wait after the inner runner waits")
  inner_done()
  eq(inner.state, "ready", "inner")
end)

test("onready, onwaiting and onerror set the watchers and return the runner", function()
  local r = async.runner(function() end, {})
  local f1, f2, f3 = function() end, function() end, function() end
  eq(r:onready(f1), r, "onready"); eq(r:onwaiting(f2), r, "onwaiting"); eq(r:onerror(f3), r, "onerror")
  eq(r.watchers.ready, f1, "ready"); eq(r.watchers.waiting, f2, "waiting"); eq(r.watchers.error, f3, "error")
end)

test("runner checks its arguments", function()
  raises(function() async.runner(42) end, "bad argument #1 to 'runner' (callable expected, got number)")
  raises(function() async.runner({}) end, "bad argument #1 to 'runner' (callable expected, got table)")
  raises(function() async.runner(nil, "w") end, "bad argument #2 to 'runner' (table expected, got string)")
end)

test("runner takes any callable: a table with __call runs each item", function()
  local func = spy()
  local r = async.runner(func)
  r:run("a")
  r:run("b")
  eq(#func.calls, 2, "calls")
  eq(func.calls[1][1], "a", "first item"); eq(func.calls[2][1], "b", "second item")
  eq(r.state, "ready", "state")
end)

test("a callable runner function can wait", function()
  local done
  local r = async.runner(spy(function()
    local wait
    wait, done = async.waiter()
    wait()
  end))
  r:run(1)
  eq(r.state, "waiting", "state after run")
  done()
  eq(r.state, "ready", "state after done")
end)

--------------------------------------------------------------------------
-- Runner: errors
--------------------------------------------------------------------------

test("the default error watcher re-raises out of run, and the runner recovers", function()
  local seen = {}
  local r = async.runner(function(item)
    if item == "bad" then error("boom") end
    seen[#seen + 1] = item
  end)
  r:enqueue("a"):enqueue("bad"):enqueue("b")
  raises(function() r:run() end, "boom", "run")
  eq(r.state, "ready", "state after error")
  same(seen, { "a" }, "items before the error")
  eq(#r.queue, 1, "the item after the error stays queued")
  r:run()
  same(seen, { "a", "b" }, "the next run processes it")
end)

test("errors propagate out of run when the watchers have no error watcher", function()
  local watchers = { ready = function() end }
  local r = async.runner(function() error("no watcher") end, watchers)
  local err = raises(function() r:run(1) end, "no watcher", "run")
  truthy(tostring(err):find("async_test.lua:%d+: no watcher"), "keeps its position: " .. tostring(err))
  eq(watchers.error, nil, "the watchers table is not changed")
end)

local TABLE_ERROR = setmetatable({ code = 7 }, { __tostring = function() return "table error 7" end })
local error_rows = {
  { name = "a table error", raise = function() error(TABLE_ERROR) end, table = true },
  { name = "a string error", raise = function() error("plain") end, text = "plain" },
  { name = "an error with no position", raise = function() error("bare", 0) end, exact = "bare" },
  { name = "a runtime error", raise = function() local x = nil; return x.y end, text = "attempt to index" },
}
for _, row in ipairs(error_rows) do
  test("the error watcher gets " .. row.name .. " unchanged, and later items still run", function()
    local watchers, log, names = recorder()
    local seen, thrown = {}, nil
    local r
    r = async.runner(function(item)
      if item == "bad" then
        local ok, e = pcall(row.raise)
        thrown = e
        row.raise()
      end
      seen[#seen + 1] = item
    end, watchers)
    r:enqueue(1):enqueue("bad"):enqueue(2)
    local ok, state, n = r:run()
    eq(ok, true, "ok"); eq(state, "ready", "state"); eq(n, 0, "n")
    same(seen, { 1, 2 }, "items")
    same(names(), { "error" }, "watcher calls")
    eq(log[1][2], 2, "error watcher argument count")
    eq(log[1][3], r, "error watcher gets the runner")
    local err = log[1][4]
    if row.table then eq(err, TABLE_ERROR, "the table itself") end
    if row.exact then eq(err, row.exact, "error") end
    if row.text then truthy(tostring(err):find(row.text, 1, true), "text: " .. tostring(err)) end
    eq(err, thrown, "the same value pcall sees")
    eq(r.notified_state, "ready", "an error does not change notified_state")
  end)
end

test("an error after a wait goes to the error watcher and the queue continues", function()
  local watchers, log, names = recorder()
  local seen, done = {}, nil
  local r = async.runner(function(item)
    if item == "wait-error" then
      local wait
      wait, done = async.waiter()
      wait()
      error({ e = "post wait" })
    end
    seen[#seen + 1] = item
  end, watchers)
  r:enqueue("one"):enqueue("wait-error"):enqueue("two")
  r:run()
  eq(r.state, "waiting", "state")
  same(seen, { "one" }, "items before done")
  done()
  eq(r.state, "ready", "state after done")
  same(seen, { "one", "two" }, "items after done")
  same(names(), { "waiting", "error", "ready" }, "watcher calls")
  eq(log[2][4].e, "post wait", "the table error")
  r:run("three")
  same(seen, { "one", "two", "three" }, "the runner still works")
end)

test("with the default watcher an error after a wait is raised out of done after the queue runs", function()
  local seen, done = {}, nil
  local r = async.runner(function(item)
    if item == "wait-error" then
      local wait
      wait, done = async.waiter()
      wait()
      error("late boom")
    end
    seen[#seen + 1] = item
  end)
  r:enqueue("wait-error"):enqueue("after")
  r:run()
  raises(done, "late boom", "done")
  same(seen, { "after" }, "the queue ran before the error was raised")
  eq(r.state, "ready", "state")
end)

test("a failed item closes its coroutine, running its <close> variables", function()
  local closed = 0
  local r = async.runner(function()
    local guard <close> = setmetatable({}, { __close = function() closed = closed + 1 end })
    error("with close")
  end, { error = function() end })
  r:run(1)
  eq(closed, 1, "closed")
  r:run(2)
  eq(closed, 2, "closed again in a fresh coroutine")
end)

test("a runner function that yields by itself is reported as an error", function()
  local watchers, log, names = recorder()
  local seen = {}
  local r = async.runner(function(item)
    if item == "y" then coroutine.yield("stray") end
    seen[#seen + 1] = item
  end, watchers)
  r:enqueue("y"):enqueue("z")
  r:run()
  same(names(), { "error" }, "watcher calls")
  truthy(log[1][4]:find("yielded outside a wait", 1, true), "message")
  same(seen, { "z" }, "the next item runs")
end)

test("an error raised by the error watcher leaves the runner ready", function()
  local r = async.runner(function() error("first") end, {
    error = function(_, e) error({ wrapped = e }) end,
  })
  local err = raises(function() r:run(1) end, nil, "run")
  eq(type(err), "table", "the watcher's own error")
  eq(r.state, "ready", "state")
end)

--------------------------------------------------------------------------
-- Lifetime
--------------------------------------------------------------------------

test("a runner whose holder died is taken back by the next run(), which tells its watcher", function()
  -- As a CPU-budget kill does, the coroutine running run() dies with the
  -- runner busy (here: the hold hook raises once).
  local errors, log = {}, {}
  local r = async.runner(function(item) log[#log + 1] = item end, {
    error = function(_, err) errors[#errors + 1] = err end,
  })
  local hold = async._hold
  async._hold = function()
    async._hold = hold
    error("died", 0)
  end
  local co = coroutine.create(function() r:run("a") end)
  local ok = coroutine.resume(co)
  async._hold = hold
  eq(ok, false, "the holder died")
  eq(r.state, "running", "busy with a dead holder")
  local _, state = r:run("b")
  eq(state, "ready", "taken back")
  eq(#errors, 1, "the watcher was told once")
  truthy(errors[1]:find("died", 1, true), "of what the holder died of: " .. errors[1])
  same(log, { "a", "b" }, "the queue went on")
end)

test("a waiting runner that is dropped can be collected", function()
  if not collectgarbage then return end -- a sandbox may not offer it
  local refs = setmetatable({}, { __mode = "v" })
  do
    local r = async.runner(function() local wait = async.waiter(); wait() end)
    r:run(1)
    refs[1] = r
  end
  collectgarbage(); collectgarbage()
  eq(refs[1], nil, "collected")
end)

return h.run()
