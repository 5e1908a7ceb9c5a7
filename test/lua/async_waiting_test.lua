-- SPDX-License-Identifier: MIT
-- util.async's waits (waiters, wait_for, sleep, the guard) and its hooks, for plain lua5.4: lua5.4 test/lua/async_waiting_test.lua
--
-- Fake schedulers and next-ticks stand in for the event loop; nothing sleeps.
-- Each test restores the module hooks it changes.

-- The harness sits beside this file (inside a runtime, modulePaths finds it).
if package and arg and arg[0] then package.path = (arg[0]:match("^(.*[/\\])") or "") .. "?.lua;" .. package.path end
local h = require "async_harness"
local test, eq, truthy, same, raises, recorder, spy = h.test, h.eq, h.truthy, h.same, h.raises, h.recorder, h.spy

local async = require "util.async"

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

return h.run()
