-- SPDX-License-Identifier: MIT
-- util.async: runners, waiters and waits (Prosody 0.12-compatible)
--
-- HOW AND WHY
--
-- A runner owns one coroutine (its "thread") that calls runner.func once per
-- queued item. A wait makes that thread yield the private WAIT token; run()
-- (or the done() that resumed it) sees the token, marks the runner "waiting"
-- and returns to its caller. done() later resumes the thread. When an item
-- finishes, the thread yields READY and the runner picks up the next item.
-- Items are processed one at a time, in the order they were queued.
--
-- Finding the runner. Every resume of a runner's thread goes through step(),
-- which records the runner in `active` (a weak-keyed set: runner -> entry
-- number) for the duration of the resume. The runner a wait belongs to is
-- the one with the highest entry number whose thread is "running" (we are on
-- it) or "normal" (it resumed the coroutine we are on, directly or not).
-- Only coroutines on the current resume chain can be "running" or "normal",
-- so a runner left in `active` by a host that suspended the whole chain is
-- skipped until it is resumed again, and the weak keys drop runners that are
-- gone. We do not use the debug library (Prosody's runner_from_thread reads
-- the thread's first local with debug.getlocal): the sandbox has no debug.
--
-- Waiting from a nested coroutine. When func creates its own coroutine (or a
-- coroutine.wrap iterator) and a wait happens inside it, a plain
-- coroutine.yield would stop at that coroutine, which would see our token as
-- an ordinary yielded value. So every wait goes through one hook,
-- async._suspend(thread, token) (default: suspend below). The default yields
-- the token only when the caller is on the runner's own thread and raises
-- otherwise. The host replaces the hook to let the suspension pass up
-- through the nested coroutines to `thread` and come back down on resume.
-- ready() is true in a nested coroutine only once the hook is replaced.
--
-- Where an item runs. run() and done() hand the work on the runner's thread
-- to a host hook (_start, _continue), so a host can run it where a wait on
-- the host works and a limit can stop it (lua-tasks: inside a task). Code
-- that holds a runner can die without returning: a CPU-budget kill unwinds
-- it, pcall or not. Holding a runner is told to the host (_hold), which calls
-- _reclaim if the coroutine holding it dies; the next run() also takes back a
-- runner whose holder is dead. Either way the error watcher is told.
--
-- Hooks the host installs at start-up (plain lua5.4 keeps the defaults):
--   async.set_nexttick(fn)            fn(f): call f later, e.g. next loop turn
--   async.set_schedule_function(fn)   fn(seconds, f): call f after seconds
--   async._suspend = fn               fn(thread, token), contract at suspend()
--   async._start = fn                 fn(f, r), contract at the runners' hooks
--   async._continue = fn              fn(f, r), same place
--   async._hold = fn                  fn(r), same place
--   async._resume = fn                fn(thread, ...): resumes the runner's thread (default
--                                     coroutine.resume); a host whose coroutine.resume lets a
--                                     waiting coroutine go on by itself gives one that does not

local coroutine_close = coroutine.close
local create = coroutine.create
local getmetatable = getmetatable
local resume = coroutine.resume
local running = coroutine.running
local status = coroutine.status
local yield = coroutine.yield

local async = {}

-- Tokens the runner's thread yields to the code that resumed it. Private
-- tables, so no value a user's function yields can be mistaken for them.
local WAIT = setmetatable({}, { __name = "util.async.WAIT" })
local READY = setmetatable({}, { __name = "util.async.READY" })

-- Configurable functions (see the hooks above).
local function sync_nexttick(f) f() end
local next_tick = sync_nexttick -- next_tick(f)
local schedule = nil -- schedule(seconds, f); sleep() raises without it

local function argerror(n, fname, expected, got)
  error(("bad argument #%d to '%s' (%s expected, got %s)"):format(n, fname, expected, got), 3)
end

-- Anything Lua can call, as Prosody takes it (its tests pass spies, which are
-- tables with __call). Without the debug library a metatable hidden behind
-- __metatable cannot be read; such a value counts as not callable, since in
-- a runtime those are JS objects (their metatable answers false), which Lua
-- cannot call: refusing them here beats failing at the first item.
local function callable(v)
  if type(v) == "function" then return true end
  local mt = getmetatable and getmetatable(v)
  return type(mt) == "table" and mt.__call ~= nil
end

--------------------------------------------------------------------------
-- Which runner are we in?
--------------------------------------------------------------------------

-- runner -> entry number, set while step() resumes the runner's thread.
-- Weak keys: a runner that is never resumed again must not be kept alive.
local active = setmetatable({}, { __mode = "k" })
local entries = 0

-- Returns the innermost runner whose thread is on the current resume chain,
-- and whether we are running directly on that thread (not nested); nil when
-- we are in no runner.
local function find_runner()
  local me = running()
  local found, found_entry
  for r, entry in pairs(active) do
    local thread = r.thread
    if thread and (found_entry == nil or entry > found_entry) then
      local st = status(thread)
      if st == "running" or st == "normal" then
        found, found_entry = r, entry
      end
    end
  end
  return found, found ~= nil and found.thread == me
end

local NESTED = "util.async: cannot wait inside a nested coroutine (its yield would stop there, "
  .. "not at the runner); wait in the runner's function, or call done() before wait()"

-- Hook contract: called by every wait with the waiting runner's thread and
-- the token that thread must yield. It must make the pending resume of
-- `thread` inside util.async return (true, token), and return to its caller
-- once util.async resumes `thread` (it resumes with no values). The default
-- can do that only from the thread itself; a host that passes suspensions up
-- through nested coroutines replaces async._suspend (a field, read at each
-- wait, so replacing it takes effect at once). Keep this the only place a
-- wait yields.
local function suspend(thread, token)
  if running() ~= thread then
    error(NESTED, 3)
  end
  return yield(token)
end
async._suspend = suspend

-- Raises (at the caller of the function that calls this) unless the code
-- running now can wait for runner r. Checked before any waiter or guard
-- state changes, so a refused wait leaves nothing half-done.
local function check_can_wait(r, what)
  local cur, direct = find_runner()
  if cur ~= r then
    error(("util.async: %s called outside the runner it belongs to"):format(what), 3)
  end
  if not direct and async._suspend == suspend then error(NESTED, 3) end
end

--------------------------------------------------------------------------
-- Runners
--------------------------------------------------------------------------

local Runner = {}
Runner.__index = Runner

local function default_error_watcher(_, err)
  error(err, 0) -- err already carries its position; keep the value unchanged
end

local function default_func(f) f() end

-- Why the fallback: Prosody drops an error when watchers has no `error`
-- field; we never drop one, so a missing error watcher means re-raise.
local function error_watcher(r)
  return r.watchers.error or default_error_watcher
end

-- Calls the ready/waiting watcher when the observable state changes.
-- "running" is never notified, and an error does not change notified_state.
local function notify(r, state)
  if r.notified_state == state then return end
  r.notified_state = state
  local watcher = r.watchers[state]
  if watcher then watcher(r) end
end

local function new_thread(r)
  return create(function(item)
    while true do
      -- r.func read per item, so a replaced func applies to the next item.
      r.func(item)
      item = yield(READY)
    end
  end)
end

-- A host wait inside func (lua-tasks: tasks.sleep) suspends the whole task
-- with step() pending. If that task is cancelled, Lua unwinds step() without
-- it returning (the host closes the runner's thread first, running its
-- <close> variables): this guard then drops the thread and leaves the runner
-- "ready", its queue kept for the next run(), rather than "running" for ever.
local unwound = { __close = function(guard)
  if not guard.armed then return end
  guard.armed = false
  local r = guard.runner
  active[r] = nil
  r.thread = nil
  r.state = "ready"
  r.owner = false
end }

-- A CPU-budget kill (lua-tasks' taskTimeout) unwinds run() or continue()
-- with no <close> run at all, which would leave the runner busy for ever. So
-- each records the coroutine it runs on while it holds the runner ("owner"),
-- and a busy runner whose owner has died is taken back (by the next run(),
-- or the host's _reclaim: the runners' hooks below). On the main thread,
-- which never dies, they run in a coroutine of their own (on_own_thread).
local function abandoned(r)
  return r.owner and status(r.owner) == "dead"
end
-- Takes back a runner whose owner died; returns the error for its watcher:
-- `err` (what the owner's task died of, when the host knows it), else what
-- closing the dead owner reports (lua-tasks: "killed: CPU budget exceeded").
local function take_back(r, err)
  local owner = r.owner
  active[r] = nil
  r.guard.armed = false
  r.thread = nil -- killed or stuck mid-item: the next item gets a fresh one
  r.state = "ready"
  r.owner = false
  if err == nil then
    local ok, closed, close_err = pcall(coroutine_close, owner)
    err = ok and closed == false and close_err or "it ended"
  end
  return "util.async: the coroutine running the runner's item died before the item ended: " .. tostring(err)
end

local function own_thread_result(c, ok, ...)
  if not ok then error((...), 0) end
  if status(c) ~= "dead" then
    -- A watcher yielded: on the main thread that was an error, so it stays one.
    coroutine_close(c)
    error("attempt to yield from outside a coroutine", 0)
  end
  return ...
end
local function on_own_thread(f, ...)
  local _, main = running()
  if not main then return f(...) end
  local c = create(f)
  return own_thread_result(c, resume(c, ...))
end

-- The runners' hooks. Contract:
--   _start(f, r): run() calls it to process r's queue; f(r) must run where
--     an item may run, and _start returns what f returns, or nothing when f
--     goes on later (run() then returns true, state, queued).
--   _continue(f, r): done() calls it to resume r's waiting item; f(r) must
--     run where an item may run, now or later. Returns nothing.
--   _hold(r): r.owner, the coroutine running now, holds r until run() or
--     continue returns. If that coroutine can die without returning (a kill),
--     the host calls async._reclaim(r, owner, err) once it has.
-- The defaults run f on the calling coroutine (plain lua5.4 has no kills).
async._start = on_own_thread
async._continue = on_own_thread
async._hold = function() end
async._resume = resume

-- Resumes the runner's thread once, recording the runner as active meanwhile.
-- Outcomes:
--   "wait"          the item is waiting (the thread is suspended at a wait)
--   "done"          the item finished (the thread is suspended at READY)
--   "error", err    the item raised err, or yielded outside a wait; the
--                   thread has been closed (running its <close> variables)
--                   and dropped, so the next item starts a fresh one
local function step(r, ...)
  local thread = r.thread
  entries = entries + 1
  active[r] = entries
  local guard <close> = r.guard
  guard.armed = true
  local ok, res = async._resume(thread, ...)
  guard.armed = false
  active[r] = nil
  if ok and res == WAIT then return "wait" end
  if ok and res == READY then return "done" end
  local err = res
  if ok then
    err = "util.async: the runner function yielded outside a wait (use a waiter, "
      .. "sleep or wait_for to pause a runner)"
  end
  -- An errored coroutine does not unwind its stack by itself (Lua 5.4 manual
  -- §3.3.8); close() runs its <close> variables, and reports the error that
  -- won if one of them raised.
  local closed_ok, close_err = coroutine_close(thread)
  if not closed_ok then err = close_err end
  r.thread = nil
  return "error", err
end

-- Processes queued items until the queue is empty or an item waits.
-- Returns true, state, n (items still queued). With the default error
-- watcher an item's error propagates out of run at once; the items after it
-- stay queued for the next run(). A runner whose owner died is taken back
-- first, its watcher told (with `lost`, the owner's error, if known).
local function run(self, lost)
  local q = self.queue
  local lost_err
  if self.state ~= "ready" then
    -- Busy (running or waiting): the item waits its turn in the queue.
    if not abandoned(self) then return true, self.state, #q end
    lost_err = take_back(self, lost)
  end
  self.state = "running"
  self.owner = running()
  async._hold(self)
  if lost_err ~= nil then
    local ok, werr = pcall(error_watcher(self), self, lost_err)
    if not ok then
      self.state = "ready"
      self.owner = false
      error(werr, 0)
    end
  end
  while #q > 0 do
    local item = table.remove(q, 1)
    if not self.thread then self.thread = new_thread(self) end
    local outcome, err = step(self, item)
    if outcome == "wait" then
      self.state = "waiting"
      self.owner = false
      notify(self, "waiting")
      return true, "waiting", #q
    elseif outcome == "error" then
      -- State stays "running" while the watcher runs, so a run() from inside
      -- it only queues, and this loop picks the item up.
      local ok, werr = pcall(error_watcher(self), self, err)
      if not ok then
        self.state = "ready"
        self.owner = false
        error(werr, 0)
      end
    end
  end
  self.state = "ready"
  self.owner = false
  notify(self, "ready")
  return true, "ready", 0
end
local function run_result(r, ok, ...)
  if ok == nil then return true, r.state, #r.queue end
  return ok, ...
end
function Runner:run(input)
  if input ~= nil then self.queue[#self.queue + 1] = input end
  return run_result(self, async._start(run, self))
end

-- Host side of _hold: the coroutine `owner` that held r has died (err: what
-- it died of, or nil). If it still held r, r is taken back, its watcher told
-- and its queue run, as run() does. Returns nothing.
function async._reclaim(r, owner, err)
  if r.owner ~= owner or not abandoned(r) then return end
  run(r, err)
end

-- Adds an item without starting the runner, even if it is idle.
function Runner:enqueue(input)
  if input ~= nil then self.queue[#self.queue + 1] = input end
  return self
end

function Runner:onready(f) self.watchers.ready = f; return self end
function Runner:onwaiting(f) self.watchers.waiting = f; return self end
function Runner:onerror(f) self.watchers.error = f; return self end

-- Picks the queue up again after a continuation finished its item. Runs in
-- next_tick, so until then the runner still reports "waiting" and run()
-- only queues.
local function restart(r)
  if r.state ~= "waiting" then return end
  r.state = "ready"
  r:run()
end

-- Resumes a waiting runner (from done()). Outcomes: false when the runner is
-- not suspended at a wait (nothing done); true otherwise. If the item fails,
-- the error watcher is told at once; the queue restarts in next_tick either
-- way; a watcher error (the default re-raises) is raised after that, so the
-- queue is never left stuck. When both the watcher and a synchronous restart
-- raise, the watcher's error, the earlier one, wins.
local function continue_on(r)
  local thread = r.thread
  if r.state ~= "waiting" or not thread or status(thread) ~= "suspended" then
    return false
  end
  r.owner = running()
  async._hold(r)
  local outcome, err = step(r)
  if outcome == "wait" then
    r.owner = false
    return true
  end
  local watcher_ok, watcher_err = true, nil
  if outcome == "error" then
    watcher_ok, watcher_err = pcall(error_watcher(r), r, err)
  end
  r.owner = false
  local tick_ok, tick_err = pcall(next_tick, function() restart(r) end)
  if not watcher_ok then error(watcher_err, 0) end
  if not tick_ok then error(tick_err, 0) end
  return true
end
local function continue(r)
  async._continue(continue_on, r)
end

-- runner(func, watchers, data): func(item) is called once per queued item;
-- watchers and data are stored as given (watchers defaults to a table with
-- the re-raising error watcher, as Prosody's does).
function async.runner(func, watchers, data)
  if func ~= nil and not callable(func) then argerror(1, "runner", "callable", type(func)) end
  if watchers ~= nil and type(watchers) ~= "table" then argerror(2, "runner", "table", type(watchers)) end
  local r = setmetatable({
    func = func or default_func,
    watchers = watchers or { error = default_error_watcher },
    data = data,
    queue = {},
    thread = false, -- created on the first item; dropped after an error
    state = "ready", -- "ready" | "running" | "waiting"
    notified_state = "ready", -- last state told to a ready/waiting watcher
    owner = false, -- the coroutine run() or continue() runs on while busy
  }, Runner)
  r.guard = setmetatable({ runner = r, armed = false }, unwound)
  return r
end

--------------------------------------------------------------------------
-- Waits
--------------------------------------------------------------------------

-- waiter(n, allow_many) -> wait, done: wait() suspends the runner until
-- done() has been called n times (default 1). done() may come first, in
-- which case wait() returns at once. A done() past n raises unless
-- allow_many is true.
function async.waiter(n, allow_many)
  if n == nil then
    n = 1
  elseif type(n) ~= "number" or n < 0 or n ~= math.floor(n) then
    argerror(1, "waiter", "non-negative integer", type(n) == "number" and tostring(n) or type(n))
  end
  local r = find_runner()
  if not r then
    error("util.async: waiter() called outside a runner (waits only work inside a runner's function)", 2)
  end
  local waiting = false
  local function wait()
    -- n < 0 is possible with allow_many: already done, so do not suspend.
    if n <= 0 then return end
    check_can_wait(r, "wait()")
    waiting = true
    async._suspend(r.thread, WAIT)
  end
  local function done()
    n = n - 1
    if n == 0 and waiting then
      waiting = false
      continue(r)
    elseif n < 0 and not allow_many then
      error("done() called too many times", 2)
    end
  end
  return wait, done
end

-- True when called where a wait can suspend: inside a runner's function,
-- or in a coroutine nested in one once the host has replaced _suspend.
function async.ready()
  local r, direct = find_runner()
  return r ~= nil and (direct or async._suspend ~= suspend)
end

-- Waits for an object with :next(on_ok, on_err) (a promise). Returns the
-- value it was fulfilled with, or nil and the rejection reason. A promise
-- that settles at once (inside :next) does not suspend the runner; a second
-- settlement is ignored.
function async.wait_for(promise)
  local t = type(promise)
  if t ~= "table" and t ~= "userdata" then argerror(1, "wait_for", "promise", t) end
  local wait, done = async.waiter()
  local settled, value, reason = false, nil, nil
  promise:next(function(v)
    if settled then return end
    settled, value = "ok", v
    done()
  end, function(e)
    if settled then return end
    settled, reason = "err", e
    done()
  end)
  wait()
  if settled == "ok" then return value end
  return nil, reason
end

-- Suspends the runner for s seconds, through the schedule function.
function async.sleep(s)
  if type(s) ~= "number" then argerror(1, "sleep", "number", type(s)) end
  if not schedule then
    error("util.async: sleep() needs a schedule function (install one with set_schedule_function)", 2)
  end
  local wait, done = async.waiter()
  schedule(s, done)
  wait()
end

-- guarder() -> guard(id, func): at most one runner at a time inside a guard
-- per id. A runner that finds the guard taken waits its turn (first come,
-- first served). With func, guard runs it and releases the guard, even if
-- func raises; without it, guard returns the release function.
function async.guarder()
  local guards = {} -- id -> list of runners waiting for it
  local default_id = {}
  return function(id, func)
    id = id == nil and default_id or id
    local r = find_runner()
    if not r then
      error("util.async: guard called outside a runner (waits only work inside a runner's function)", 2)
    end
    local line = guards[id]
    if not line then
      guards[id] = {}
    else
      check_can_wait(r, "guard")
      line[#line + 1] = r
      async._suspend(r.thread, WAIT)
    end
    local function exit()
      local list = guards[id]
      local next_runner = list and table.remove(list, 1)
      if next_runner then
        continue(next_runner)
      else
        guards[id] = nil
      end
    end
    if func then
      local ok, err = pcall(func)
      exit()
      if not ok then error(err, 0) end
      return
    end
    return exit
  end
end

function async.set_nexttick(fn)
  if fn ~= nil and not callable(fn) then argerror(1, "set_nexttick", "callable or nil", type(fn)) end
  next_tick = fn or sync_nexttick
end

function async.set_schedule_function(fn)
  if fn ~= nil and not callable(fn) then
    argerror(1, "set_schedule_function", "callable or nil", type(fn))
  end
  schedule = fn
end

-- COMPAT: Prosody keeps wait as the pre-0.12 name of wait_for.
async.wait = async.wait_for

return async
