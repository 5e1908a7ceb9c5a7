-- SPDX-License-Identifier: MIT
-- The Lua the C++ embeds (native/*/lua/*.lua), run under plain lua5.4 with stand-ins for its C arguments.
--
-- Run from the repository root: lua5.4 test/lua/embedded_lua_test.lua (ctest
-- does). Each chunk is loaded with an environment of its own, so the globals
-- it sets land in a table the test reads; its chunk arguments are the
-- stand-ins for what the C++ passes. The runtime's own behaviour (task
-- waits, the CPU budget) is tested through the runtime, in test/cpp and
-- test/js; this file checks what each chunk does on its own.

local tests = {}
local function test(name, fn) tests[#tests + 1] = { name = name, fn = fn } end

local function eq(got, want, what)
  if got ~= want then
    error(("%s: expected %q, got %q"):format(what or "value", tostring(want), tostring(got)), 2)
  end
end

local function raises(fn, pattern, what)
  local ok, err = pcall(fn)
  if ok then error((what or "call") .. " did not raise", 2) end
  if not tostring(err):find(pattern, 1, true) then
    error(("%s: error %q does not contain %q"):format(what or "call", tostring(err), pattern), 2)
  end
end

-- Loads native/<path> with `env` (plus the standard globals it reads) and
-- calls it with the chunk arguments.
local function run(path, env, ...)
  setmetatable(env, { __index = _G })
  local chunk = assert(loadfile("native/" .. path, "t", env))
  return chunk(...)
end

--------------------------------------------------------------------------
-- resolve.lua: the "mod.fn" resolver
--------------------------------------------------------------------------

local function resolver(modules)
  local loaded = {}
  local env = {
    require = function(name)
      if loaded[name] ~= nil then return loaded[name] end
      local m = modules[name]
      if m == nil then error("module '" .. name .. "' not found (test)", 2) end
      if type(m) == "function" then m = m() end
      loaded[name] = m
      return m
    end,
  }
  local RESOLVE = {}
  run("core/lua/resolve.lua", env, RESOLVE)
  return RESOLVE[1]
end

test("resolve finds fn in the longest module name first", function()
  local inner, outer = function() end, function() end
  local resolve = resolver({ ["a.b"] = { fn = inner }, a = { b = { fn = outer } } })
  eq(resolve("a.b.fn"), inner, "a.b.fn")
end)

test("resolve falls back to a shorter module and walks its tables", function()
  local fn = function() end
  local resolve = resolver({ a = { b = { fn = fn } } })
  eq(resolve("a.b.fn"), fn, "a.b.fn")
  eq(resolve("a.b.nope"), nil, "a.b.nope")
  eq(resolve("a.b"), nil, "a.b (a table, not a function)")
end)

test("resolve answers nil for a path no module has", function()
  eq(resolver({})("x.y.z"), nil, "x.y.z")
end)

test("resolve raises the error of a module that exists but fails to load", function()
  local resolve = resolver({ broken = function() error("broken: boom", 0) end })
  raises(function() resolve("broken.fn") end, "broken: boom", "broken.fn")
end)

--------------------------------------------------------------------------
-- tasks.lua: tasks.wait over join, and the modules it registers
--------------------------------------------------------------------------

local function tasks_with(join_answers)
  local tasks = { current_id = function() end, start = function() end, resume = function() end }
  local LOADED = {}
  run("core/lua/tasks.lua", {}, tasks, function(id) return table.unpack(join_answers[id]) end, LOADED)
  return tasks, LOADED
end

test("tasks.wait returns a finished task's results, raises its error, passes nil, message on", function()
  local tasks = tasks_with({
    done = { true, 1, 2 },
    failed = { false, "it failed" },
    gone = { nil, "no such task" },
  })
  local a, b = tasks.wait("done")
  eq(a, 1, "first result") eq(b, 2, "second result")
  raises(function() tasks.wait("failed") end, "it failed", "wait(failed)")
  local none, message = tasks.wait("gone")
  eq(none, nil, "unknown task") eq(message, "no such task", "its message")
end)

test("tasks.lua registers tasks and namazu.coroutine as modules", function()
  local tasks, LOADED = tasks_with({})
  eq(LOADED.tasks, tasks, "LOADED.tasks")
  eq(LOADED["namazu.coroutine"].current_task_id, tasks.current_id, "namazu current_task_id")
  eq(LOADED["namazu.coroutine"].start, tasks.start, "namazu start")
  eq(LOADED["namazu.coroutine"].resume, tasks.resume, "namazu resume")
end)

--------------------------------------------------------------------------
-- require.lua: require without the package library
--------------------------------------------------------------------------

local function require_outside_tasks(preload)
  -- No package library: the chunk sees no require and installs its own.
  local env = setmetatable({}, { __index = function(_, k) if k ~= "require" then return _G[k] end end })
  local tasks = { current_id = function() return nil end, status = function() end, sleep = function() end }
  local LOADED = {}
  local chunk = assert(loadfile("native/core/lua/require.lua", "t", env))
  chunk(tasks, LOADED, preload)
  return env.require, LOADED
end

test("require runs a module's loader once and keeps what it returns", function()
  local runs = 0
  local require, LOADED = require_outside_tasks({ m = function(name) runs = runs + 1 return { name = name } end })
  local m = require("m")
  eq(m.name, "m", "loader argument")
  eq(require("m"), m, "second require")
  eq(runs, 1, "loader runs")
  eq(LOADED.m, m, "package.loaded")
end)

test("require stores true for a module that returns nothing", function()
  local require = require_outside_tasks({ quiet = function() end })
  eq(require("quiet"), true, "require('quiet')")
end)

test("require names an unknown module and a bad argument", function()
  local require = require_outside_tasks({})
  raises(function() require("nope") end, "module 'nope' not found (modules come from the Runtime's modules", "nope")
  raises(function() require(42) end, "bad argument #1 to 'require' (string expected, got number)", "require(42)")
end)

--------------------------------------------------------------------------
-- guarded_xpcall.lua
--------------------------------------------------------------------------

local function guarded(killing)
  local G = {}
  run("core/lua/guarded_xpcall.lua", { _G = G }, xpcall, killing, type, select, error)
  return G.xpcall
end

test("xpcall runs its handler unless Lua is being stopped", function()
  local stopping = false
  local x = guarded(function() return stopping end)
  local handler = function(e) return "handled: " .. e end
  local ok, err = x(function() error("e", 0) end, handler)
  eq(ok, false, "ok") eq(err, "handled: e", "handled")
  stopping = true
  ok, err = x(function() error("killed", 0) end, handler)
  eq(ok, false, "ok while stopping") eq(err, "killed", "passed over")
end)

test("xpcall passes its extra arguments and checks its handler", function()
  local x = guarded(function() return false end)
  local ok, a, b = x(function(...) return ... end, print, 1, 2)
  eq(ok, true, "ok") eq(a, 1, "a") eq(b, 2, "b")
  raises(function() x(print) end, "bad argument #2 to 'xpcall' (function expected, got no value)", "no handler")
  raises(function() x(print, 5) end, "bad argument #2 to 'xpcall' (function expected, got number)", "number handler")
end)

--------------------------------------------------------------------------
-- text_only.lua
--------------------------------------------------------------------------

test("load takes text only and passes an explicit env", function()
  local G = {}
  run("core/lua/text_only.lua", { _G = G }, load, nil, select, error)
  raises(function() G.load("return 1", "c", "b") end, "binary chunks are not allowed (mode b given", "mode b")
  eq(G.load("return x", "c", "t", { x = 7 })(), 7, "env table")
  eq(G.load("return 1")(), 1, "plain")
  eq(G.loadfile, nil, "no loadfile when files are off")
end)

--------------------------------------------------------------------------
-- coroutine.lua: API waits pass through nested coroutines
--------------------------------------------------------------------------

test("a sentinel yield passes up through wrap and tasks.resume_inline, and the resume values come back", function()
  local SENTINEL = {}
  local co, tasks = {}, {}
  for k, v in pairs(coroutine) do co[k] = v end
  local task = coroutine.create(function() end)
  local function detaching() end  -- the C resume that detaches: installed as coroutine.resume as it is
  run("core/lua/coroutine.lua", { coroutine = co }, SENTINEL,
      function(c) return c == task end, function() return false end, function() return false end,
      detaching, coroutine.resume, coroutine.status, nil, tasks)
  eq(co.resume, detaching, "coroutine.resume is the C function")
  -- The outer coroutine stands for the task; the inner ones are the user's.
  local outer = coroutine.create(function()
    local inner = co.wrap(function()
      local got = co.yield(SENTINEL, "wait")  -- as tasks.sleep does from a user's coroutine
      return "inner got " .. got
    end)
    local nested = coroutine.create(function(x)
      local got = co.yield(SENTINEL, "again")
      return x .. got
    end)
    local _, r = tasks.resume_inline(nested, "inline got ")
    return inner(), r
  end)
  local ok, sentinel, what = coroutine.resume(outer)
  eq(ok, true, "ok") eq(sentinel, SENTINEL, "passed up") eq(what, "again", "with its values")
  local ok1, sentinel1, what1 = coroutine.resume(outer, "woken")
  eq(ok1, true, "ok") eq(sentinel1, SENTINEL, "passed up") eq(what1, "wait", "with its values")
  local ok2, result, r = coroutine.resume(outer, "woken")
  eq(ok2, true, "ok after wake") eq(result, "inner got woken", "resume values passed down")
  eq(r, "inline got woken", "through tasks.resume_inline too")
  raises(function() co.close(task) end, "cannot close a task's coroutine", "close(task)")
end)

--------------------------------------------------------------------------
-- file_modules.lua (the addon's modulePaths)
--------------------------------------------------------------------------

test("modulePaths loads a missing module from the finder, and loadfile reads only through it", function()
  local PRELOAD, G = {}, {}
  local files = { ["m.lua"] = "return 'from file'" }
  run("addon/lua/file_modules.lua", {}, function(name)
    if name == "m" then return { "return ...", "=m" } end
  end, function(file) return files[file] end, load, error, PRELOAD, G, true)
  eq(PRELOAD.m("m"), "m", "loader from the finder")
  eq(PRELOAD.nope, nil, "unknown module")
  eq(G.loadfile("m.lua")(), "from file", "loadfile")
  local f, err = G.loadfile("elsewhere.lua")
  eq(f, nil, "outside modulePaths") eq(err, "cannot open elsewhere.lua (only files inside modulePaths can be loaded)", "message")
  eq(G.dofile("m.lua"), "from file", "dofile")
end)

--------------------------------------------------------------------------

local passed, failed = 0, 0
for _, t in ipairs(tests) do
  local ok, err = pcall(t.fn)
  if ok then
    passed = passed + 1
    print("ok - " .. t.name)
  else
    failed = failed + 1
    print("not ok - " .. t.name .. "\n  " .. tostring(err))
  end
  collectgarbage()
end
print(("%d passed, %d failed"):format(passed, failed))
if failed > 0 then os.exit(1) end
