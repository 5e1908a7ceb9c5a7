-- SPDX-License-Identifier: MIT
-- util.async unit tests, for plain lua5.4: lua5.4 test/lua/async_test.lua
--
-- Self-contained (no test framework) so it also runs inside a runtime, where
-- package, arg and os.exit may be missing. Fake schedulers and next-ticks
-- stand in for the event loop; nothing sleeps. Each test restores the module
-- hooks it changes, and a GC runs between tests to expose lifetime bugs.

if package and package.path then
  -- Find lib/lua from the script's own location, so any cwd works.
  local dir = (arg and arg[0] and arg[0]:match("^(.*)[/\\][^/\\]*$")) or "."
  package.path = dir .. "/../../lib/lua/?.lua;lib/lua/?.lua;" .. package.path
end

-- Globals before the module loads, to check it sets none.
local globals_before = {}
for k in pairs(_G) do globals_before[k] = true end

local async = require "util.async"

--------------------------------------------------------------------------
-- Tiny harness
--------------------------------------------------------------------------

local tests = {}
local function test(name, fn) tests[#tests + 1] = { name = name, fn = fn } end

local function show(v)
  if type(v) == "string" then return ("%q"):format(v) end
  return tostring(v)
end

local function eq(got, want, what)
  if got ~= want then
    error(("%s: expected %s, got %s"):format(what or "value", show(want), show(got)), 2)
  end
end

local function truthy(v, what)
  if not v then error((what or "condition") .. " is false", 2) end
end

-- Compares two lists of plain values element by element.
local function same(got, want, what)
  local g = table.concat(got, ",")
  local w = table.concat(want, ",")
  if #got ~= #want or g ~= w then
    error(("%s: expected {%s}, got {%s}"):format(what or "list", w, g), 2)
  end
end

-- Calls fn and checks that it raises an error whose text contains `plain`.
-- Returns the error value.
local function raises(fn, plain, what)
  local ok, err = pcall(fn)
  if ok then error((what or "call") .. " did not raise", 2) end
  if plain and not tostring(err):find(plain, 1, true) then
    error(("%s raised %s, want text %s"):format(what or "call", show(err), show(plain)), 2)
  end
  return err
end

-- Watchers that log every call: { name, number of arguments, args... }.
local function recorder()
  local log, watchers = {}, {}
  for _, name in ipairs({ "ready", "waiting", "error" }) do
    watchers[name] = function(...)
      log[#log + 1] = { name, select("#", ...), ... }
    end
  end
  local function names()
    local out = {}
    for i, e in ipairs(log) do out[i] = e[1] end
    return out
  end
  return watchers, log, names
end

-- A fake event loop: set_nexttick / set_schedule_function push here, and
-- the test decides when the callbacks run.
local function fake_queue()
  local q = { calls = 0 }
  function q.push(f) q.calls = q.calls + 1; q[#q + 1] = f end
  function q.flush()
    while #q > 0 do table.remove(q, 1)() end
  end
  return q
end

-- A promise stand-in with :next(on_ok, on_err) only (no :finally), resolved
-- or rejected by the test, synchronously or later.
local function fake_promise()
  local p = { handlers = {} }
  function p:next(ok, err)
    if self.state == "ok" then ok(self.value)
    elseif self.state == "err" then err(self.value)
    else self.handlers[#self.handlers + 1] = { ok, err } end
    return self
  end
  local function settle(state, v)
    p.state, p.value = state, v
    for _, h in ipairs(p.handlers) do
      if state == "ok" then h[1](v) else h[2](v) end
    end
  end
  function p.resolve(v) settle("ok", v) end
  function p.reject(e) settle("err", e) end
  return p
end

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

-- A spy, as Prosody's own tests pass: a table with __call that records calls.
local function spy(f)
  local s = { calls = {} }
  return setmetatable(s, { __call = function(self, ...)
    self.calls[#self.calls + 1] = { ... }
    if f then return f(...) end
  end })
end

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
-- Waiters
--------------------------------------------------------------------------

test("a waiter of n waits for n calls of done", function()
  local watchers, _, names = recorder()
  local processed, done
  local r = async.runner(function(item)
    local wait
    wait, done = async.waiter(4)
    wait()
    processed = item
  end, watchers)
  r:run("test")
  for i = 1, 3 do
    done()
    eq(r.state, "waiting", "after done " .. i)
    eq(processed, nil, "not yet processed " .. i)
  end
  done()
  eq(r.state, "ready", "after the 4th done")
  eq(processed, "test", "processed")
  same(names(), { "waiting", "ready" }, "watcher calls")
end)

test("done before wait lets wait return at once, with no watcher calls", function()
  local watchers, _, names = recorder()
  local processed
  local r = async.runner(function(item)
    local wait, done = async.waiter()
    done()
    wait()
    processed = item
  end, watchers)
  r:run("test")
  eq(processed, "test", "processed")
  eq(r.state, "ready", "state")
  same(names(), {}, "watcher calls")
end)

test("waiter(0) does not wait", function()
  local processed
  local r = async.runner(function(item)
    local wait = async.waiter(0)
    wait()
    processed = item
  end)
  r:run("x")
  eq(processed, "x", "processed")
end)

test("done called too many times raises", function()
  local watchers, _, names = recorder()
  local done, processed
  local r = async.runner(function(item)
    local wait
    wait, done = async.waiter(2)
    wait()
    processed = item
  end, watchers)
  r:run("test")
  done(); done()
  eq(processed, "test", "processed")
  raises(done, "done() called too many times", "third done")
  eq(r.state, "ready", "state")
  same(names(), { "waiting", "ready" }, "no error watcher call")
end)

test("done called too many times before wait raises inside the runner", function()
  local err
  local r = async.runner(function()
    local wait, done = async.waiter()
    done()
    err = select(2, pcall(done))
    wait()
  end)
  r:run(1)
  truthy(tostring(err):find("done() called too many times", 1, true), "message: " .. tostring(err))
end)

test("allow_many ignores extra done calls, before or after wait", function()
  local rows = {
    -- name, done calls before wait, done calls after wait
    { "after wait", 0, 3 },
    { "before wait", 3, 0 },
  }
  for _, row in ipairs(rows) do
    local done, processed
    local r = async.runner(function(item)
      local wait
      wait, done = async.waiter(1, true)
      for _ = 1, row[2] do done() end
      wait()
      processed = item
    end)
    r:run(row[1])
    for _ = 1, row[3] do done() end
    eq(processed, row[1], row[1] .. ": processed")
    eq(r.state, "ready", row[1] .. ": state")
  end
end)

test("waiter outside a runner and with a bad count raises", function()
  raises(function() async.waiter() end, "waiter() called outside a runner", "main")
  local co = coroutine.wrap(function() return pcall(async.waiter) end)
  local ok, err = co()
  eq(ok, false, "in a plain coroutine")
  truthy(err:find("outside a runner", 1, true), "message")
  local errs = {}
  local r = async.runner(function(n) errs[#errs + 1] = select(2, pcall(async.waiter, n)) end)
  for _, n in ipairs({ -1, 1.5, "2" }) do r:run(n) end
  local want = "bad argument #1 to 'waiter' (non-negative integer expected, got -1)"
  truthy(errs[1]:find(want, 1, true), errs[1])
  truthy(errs[2]:find("got 1.5", 1, true), errs[2])
  truthy(errs[3]:find("got string", 1, true), errs[3])
end)

test("wait called outside its runner raises", function()
  local wait
  local r = async.runner(function() wait = async.waiter() end)
  r:run(1)
  raises(wait, "wait() called outside the runner it belongs to", "wait from main")
end)

--------------------------------------------------------------------------
-- wait_for
--------------------------------------------------------------------------

local wait_for_rows = {
  -- name, settle before the runner waits?, how, value, want results
  { "resolved at once", true, "resolve", 42, { 42 } },
  { "resolved later", false, "resolve", "later", { "later" } },
  { "rejected at once", true, "reject", "nope", { nil, "nope" } },
  { "rejected later", false, "reject", "late nope", { nil, "late nope" } },
  { "resolved with false", false, "resolve", false, { false } },
}
for _, row in ipairs(wait_for_rows) do
  local name, early, how, value, want = row[1], row[2], row[3], row[4], row[5]
  test("wait_for a promise " .. name, function()
    local watchers, _, names = recorder()
    local p = fake_promise()
    if early then p[how](value) end
    local got
    local r = async.runner(function() got = table.pack(async.wait_for(p)) end, watchers)
    r:run(1)
    if early then
      eq(r.state, "ready", "no wait")
      same(names(), {}, "watcher calls")
    else
      eq(r.state, "waiting", "waiting")
      p[how](value)
      eq(r.state, "ready", "ready after settling")
      same(names(), { "waiting", "ready" }, "watcher calls")
    end
    eq(got.n, #want == 1 and 1 or 2, "result count")
    eq(got[1], want[1], "first result")
    eq(got[2], want[2], "second result")
  end)
end

test("wait_for ignores a second settlement", function()
  local p = { next = function(_, ok, err) ok("first"); err("second") end }
  local got
  local r = async.runner(function() got = { async.wait_for(p) } end)
  r:run(1)
  eq(got[1], "first", "value")
end)

test("wait_for checks its argument and is also called wait", function()
  local err
  local r = async.runner(function() err = select(2, pcall(async.wait_for, 5)) end)
  r:run(1)
  truthy(err:find("bad argument #1 to 'wait_for' (promise expected, got number)", 1, true), err)
  eq(async.wait, async.wait_for, "alias")
end)

--------------------------------------------------------------------------
-- sleep and the configurable functions
--------------------------------------------------------------------------

test("sleep without a schedule function raises a clear error", function()
  local watchers, log, names = recorder()
  local r = async.runner(function() async.sleep(5) end, watchers)
  r:run(true)
  same(names(), { "error" }, "watcher calls")
  truthy(log[1][4]:find("sleep() needs a schedule function", 1, true), "message")
  raises(function() async.sleep(1) end, "sleep() needs a schedule function", "outside a runner")
end)

test("sleep waits through the schedule function", function()
  local timers = {}
  async.set_schedule_function(function(s, f) timers[#timers + 1] = { s, f } end)
  local watchers, _, names = recorder()
  local processed
  local r = async.runner(function(item)
    async.sleep(5)
    processed = item
  end, watchers)
  r:run("test")
  eq(processed, nil, "still sleeping")
  eq(r.state, "waiting", "state")
  eq(#timers, 1, "one timer")
  eq(timers[1][1], 5, "seconds")
  eq(type(timers[1][2]), "function", "callback")
  same(names(), { "waiting" }, "watcher calls")
  timers[1][2]() -- the timer fires
  eq(processed, "test", "processed")
  eq(r.state, "ready", "state")
  same(names(), { "waiting", "ready" }, "watcher calls")
  async.set_schedule_function(nil)
end)

test("sleep with a schedule function that fires at once does not wait", function()
  async.set_schedule_function(function(_, f) f() end)
  local r = async.runner(function() async.sleep(0) end)
  r:run(1)
  eq(r.state, "ready", "state")
  async.set_schedule_function(nil)
end)

test("set_schedule_function(nil) restores the default, which has no scheduler", function()
  async.set_schedule_function(function() end)
  async.set_schedule_function(nil)
  raises(function() async.sleep(1) end, "needs a schedule function")
end)

test("sleep checks its argument", function()
  raises(function() async.sleep("1") end, "bad argument #1 to 'sleep' (number expected, got string)")
end)

test("set_nexttick defers picking the queue up after done", function()
  local tick = fake_queue()
  async.set_nexttick(tick.push)
  local watchers, _, names = recorder()
  local seen, done = {}, nil
  local r = async.runner(function(item)
    if item == "w" then
      local wait
      wait, done = async.waiter()
      wait()
    end
    seen[#seen + 1] = item
  end, watchers)
  r:run("w")
  eq(tick.calls, 0, "run does not use next tick")
  eq(r.state, "waiting", "state")
  done()
  eq(tick.calls, 1, "done schedules one tick")
  same(seen, { "w" }, "the waiting item finished in done")
  eq(r.state, "waiting", "still waiting until the tick")
  local ok, state, n = r:run("next")
  eq(state, "waiting", "run before the tick only queues"); eq(n, 1, "n")
  same(names(), { "waiting" }, "watcher calls before the tick")
  tick.flush()
  same(seen, { "w", "next" }, "the tick ran the queue")
  eq(r.state, "ready", "state after the tick")
  same(names(), { "waiting", "ready" }, "watcher calls")
  async.set_nexttick(nil)
end)

test("set_nexttick(nil) restores the synchronous default", function()
  local tick = fake_queue()
  async.set_nexttick(tick.push)
  async.set_nexttick(nil)
  local done
  local r = async.runner(function()
    local wait
    wait, done = async.waiter()
    wait()
  end)
  r:run(1)
  done()
  eq(tick.calls, 0, "the replaced next tick is not used")
  eq(r.state, "ready", "state")
end)

test("set_nexttick and set_schedule_function check their arguments", function()
  raises(function() async.set_nexttick(1) end,
    "bad argument #1 to 'set_nexttick' (callable or nil expected, got number)")
  raises(function() async.set_nexttick({}) end,
    "bad argument #1 to 'set_nexttick' (callable or nil expected, got table)")
  raises(function() async.set_schedule_function("x") end,
    "bad argument #1 to 'set_schedule_function' (callable or nil expected, got string)")
end)

test("set_nexttick and set_schedule_function take callable tables", function()
  local queued = {}
  local tick = spy(function(f) queued[#queued + 1] = f end)
  local timers = {}
  local schedule = spy(function(s, f) timers[#timers + 1] = { s, f } end)
  async.set_nexttick(tick)
  async.set_schedule_function(schedule)
  local _ <close> = setmetatable({}, { __close = function()
    async.set_nexttick(nil)
    async.set_schedule_function(nil)
  end })
  local slept, done
  local r = async.runner(function()
    async.sleep(5)
    slept = true
    local wait
    wait, done = async.waiter()
    wait()
  end)
  r:run(1)
  eq(#schedule.calls, 1, "schedule calls")
  eq(timers[1][1], 5, "seconds")
  timers[1][2]()
  while #queued > 0 do table.remove(queued, 1)() end
  eq(slept, true, "woke after the schedule function's callback")
  done()
  truthy(#tick.calls >= 1, "the callable next tick was used")
  while #queued > 0 do table.remove(queued, 1)() end
  eq(r.state, "ready", "state")
end)

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

--------------------------------------------------------------------------
-- guarder
--------------------------------------------------------------------------

test("a guard lets one runner in at a time, in arrival order", function()
  local guard = async.guarder()
  local log, exits = {}, {}
  local function make(name)
    return async.runner(function()
      local exit = guard("db")
      log[#log + 1] = name .. " in"
      exits[name] = exit
    end)
  end
  local a, b, c = make("a"), make("b"), make("c")
  a:run(1); b:run(1); c:run(1)
  same(log, { "a in" }, "only a is in")
  eq(b.state, "waiting", "b waits"); eq(c.state, "waiting", "c waits")
  exits.a()
  same(log, { "a in", "b in" }, "b is in")
  exits.b()
  exits.c()
  same(log, { "a in", "b in", "c in" }, "all in")
  eq(c.state, "ready", "c")
end)

test("a guard with a function releases it even when the function raises", function()
  local guard = async.guarder()
  local hold_done
  local order = {}
  local a = async.runner(function()
    guard(nil, function()
      local wait
      wait, hold_done = async.waiter()
      wait()
      error("inside guard")
    end)
  end, { error = function(_, e) order[#order + 1] = "a error" end })
  local b = async.runner(function()
    guard(nil, function() order[#order + 1] = "b in" end)
  end)
  a:run(1); b:run(1)
  eq(b.state, "waiting", "b waits for the guard")
  hold_done()
  same(order, { "b in", "a error" }, "b got the guard; a's error was reported")
  eq(b.state, "ready", "b")
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

--------------------------------------------------------------------------
-- Run
--------------------------------------------------------------------------

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
  if collectgarbage then collectgarbage() end
end
print(("%d passed, %d failed"):format(passed, failed))
if failed > 0 then
  if os and os.exit then os.exit(1) end
  error(("%d util.async tests failed"):format(failed), 0)
end
return { passed = passed, failed = failed }
