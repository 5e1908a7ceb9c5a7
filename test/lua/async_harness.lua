-- SPDX-License-Identifier: MIT
-- The harness of util.async's Lua unit tests (async_test.lua, async_waiting_test.lua, async_nested_test.lua).
--
-- Self-contained (no test framework) so the tests also run inside a runtime,
-- where package, arg and os.exit may be missing. A GC runs between tests to
-- expose lifetime bugs.

if package and package.path then
  -- Find lib/lua from the script's own location, so any cwd works.
  local dir = (arg and arg[0] and arg[0]:match("^(.*)[/\\][^/\\]*$")) or "."
  package.path = dir .. "/../../lib/lua/?.lua;lib/lua/?.lua;" .. package.path
end

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

-- A spy, as Prosody's own tests pass: a table with __call that records calls.
local function spy(f)
  local s = { calls = {} }
  return setmetatable(s, { __call = function(self, ...)
    self.calls[#self.calls + 1] = { ... }
    if f then return f(...) end
  end })
end

--------------------------------------------------------------------------
-- Run
--------------------------------------------------------------------------

-- Runs the tests registered so far, then forgets them (a runtime that
-- required this once may run another file), and prints a line each and a total.
local function run()
  local list = tests
  tests = {}
  local passed, failed = 0, 0
  for _, t in ipairs(list) do
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
end

return { test = test, eq = eq, truthy = truthy, same = same, raises = raises, recorder = recorder, spy = spy, run = run }
