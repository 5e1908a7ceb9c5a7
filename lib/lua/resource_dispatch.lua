-- SPDX-License-Identifier: MIT
-- Runs one method of a resource's module, as the body of a task in the resource (lib/resources/dispatch.js).
-- Chunk result: a function(reset, id, module, method, ...) answering { "ok", result }, { "missing" },
-- { "notfunction", type } or { "gone" }.
-- reset (a create): the slot's tasks.state and tasks.store are emptied first (what a destroyed resource
-- left), the resource's id is kept in its tasks.store (ID_KEY), then `init` runs if the module has
-- one, and all of it is COMMITted before the answer. Otherwise a slot that holds another resource
-- than `id` (its slot reused by a create since the caller read the id) answers "gone".
local require, type, error, pairs, ipairs, yield = require, type, error, pairs, ipairs, coroutine.yield
local store = tasks.store
local ID_KEY = "lua-tasks.resource"

local function empty()
  for k in pairs(tasks.state) do tasks.state[k] = nil end
  local after
  repeat
    local keys = store.keys("", after, 1000)
    for _, k in ipairs(keys) do store.delete(k) end
    after = keys[#keys]
  until #keys < 1000
end

return function(reset, id, module, method, ...)
  if not reset then
    local held = store.get(ID_KEY)
    if held ~= nil and held ~= id then return { "gone" } end
  end
  local m = require(module)
  if type(m) ~= "table" then
    error("resource module '" .. module .. "' returned " .. type(m) .. ", not a table of methods", 0)
  end
  if reset then
    empty()
    store.set(ID_KEY, id)
  end
  local f = m[method]
  if f == nil then
    if reset then yield("COMMIT") end
    return { "missing" }
  end
  if type(f) ~= "function" then return { "notfunction", type(f) } end
  local result = f(...)
  if reset then yield("COMMIT") end
  return { "ok", result }
end
