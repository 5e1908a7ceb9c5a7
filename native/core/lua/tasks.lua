-- SPDX-License-Identifier: MIT
-- tasks.wait over the C join, and the modules "tasks" and "namazu.coroutine" (lua_api_tasks.cpp).
-- Chunk arguments: the tasks table, join(id), package.loaded.
local tasks, join, LOADED = ...
local error = error

local function joined(ok, ...)
  if ok == true then return ... end
  if ok == false then error((...), 0) end
  return nil, (...)
end
tasks.wait = function(id)
  return joined(join(id))
end

local namazu = {
  current_task_id = tasks.current_id,
  start = tasks.start,
  resume = tasks.resume,
}
LOADED["tasks"] = tasks
LOADED["namazu.coroutine"] = namazu
