-- SPDX-License-Identifier: MIT
-- The "mod.fn" resolver: rt.start("a.b.fn") finds fn in module a.b or a, requiring it (lua_api_resolve.cpp).
-- Chunk arguments: a table; the resolver is stored at [1].
local RESOLVE = ...
local error, type = error, type

-- rt.start("a.b.fn"): globals first, then modules, requiring them if needed
-- (longest module name first). Needs the string library to split the path.
-- A module that exists but fails to load raises its error (the first such),
-- which says more than "not a Lua function".
local gmatch, sfind = string and string.gmatch, string and string.find
local function resolve(path)
  if not gmatch then return nil end
  local parts = {}
  for part in gmatch(path, "[^.]+") do parts[#parts + 1] = part end
  local failed
  for i = #parts - 1, 1, -1 do
    local name = parts[1]
    for j = 2, i do name = name .. "." .. parts[j] end
    local ok, m = pcall(require, name)
    if not ok and failed == nil and not (type(m) == "string" and sfind(m, "module '" .. name .. "' not found", 1, true)) then
      failed = m
    end
    if ok and type(m) == "table" then
      local v = m
      for j = i + 1, #parts do
        if type(v) ~= "table" then v = nil break end
        v = rawget(v, parts[j])
      end
      if type(v) == "function" then return v end
    end
  end
  if failed ~= nil then error(failed, 0) end
  return nil
end
RESOLVE[1] = resolve
