-- SPDX-License-Identifier: MIT
-- require with cross-task locks, when the package library is not open (lua_api_require.cpp).
-- Chunk arguments: the tasks table, package.loaded, the preload table.
local tasks, LOADED, PRELOAD = ...
local error, type, setmetatable = error, type, setmetatable

if not require then
  -- name -> id of the task running the module's top level, while that top
  -- level waits (tasks.sleep, a JS Promise): another task requiring it then
  -- waits for it rather than running the module a second time, looking
  -- again after 1, 2, 4 ... ms (at most 50: such modules are rare, and a
  -- wake-up list would have to be woken from the <close> of a cancel).
  -- Cleared when the top level ends, fails or is cancelled.
  local loading = {}
  -- task id -> the module it waits for another task to load. A task about to
  -- wait follows owner -> the module that owner waits for -> its owner ...:
  -- reaching itself is a require loop across tasks, which would wait for ever.
  local waiting_for = {}
  local current_id, status, sleep = tasks.current_id, tasks.status, tasks.sleep
  local loaded_mt = {__close = function(mark)
    if loading[mark[1]] == mark[2] then loading[mark[1]] = nil end
  end}
  local waiting_mt = {__close = function(mark) waiting_for[mark[1]] = nil end}
  local function waits_on(owner, id)
    for _ = 1, 1000 do
      if owner == id then return true end
      local name = waiting_for[owner]
      owner = name and loading[name]
      if not owner then return false end
      local st = status(owner)  -- a killed task's marks stay (no <close> ran): not a loop through it
      if owner ~= id and st ~= "running" and st ~= "waiting" then return false end
    end
    return false
  end
  local function load_module(name, loader, id)
    local mark <close> = id and setmetatable({name, id}, loaded_mt)
    if id then loading[name] = id end
    local v = loader(name)
    if v == nil then v = true end
    LOADED[name] = v
    return v
  end
  require = function(name)
    if type(name) ~= "string" then
      error("bad argument #1 to 'require' (string expected, got " .. type(name) .. ")", 2)
    end
    local v = LOADED[name]
    if v ~= nil then return v end
    local loader = PRELOAD[name]
    if loader == nil then
      error("module '" .. name .. "' not found (modules come from the Runtime's modules and modulePaths options)", 2)
    end
    local id = current_id()
    local pause = 0.001
    local mark <close> = loading[name] and id and setmetatable({id}, waiting_mt)
    while loading[name] do
      local owner = loading[name]
      if owner == id then error("module '" .. name .. "' requires itself while it loads (a require loop)", 2) end
      local st = status(owner)
      if st ~= "running" and st ~= "waiting" then break end  -- killed while loading: no <close> ran
      if waits_on(owner, id) then
        error("module '" .. name .. "' is loading in task " .. owner .. ", which waits for a module this task loads (a require loop)", 2)
      end
      if not id then
        error("module '" .. name .. "' is loading in task " .. owner .. " (its top level waits); require it from a task to wait for it", 2)
      end
      waiting_for[id] = name
      sleep(pause)
      if pause < 0.05 then pause = pause * 2 end
      v = LOADED[name]
      if v ~= nil then return v end
    end
    if id then waiting_for[id] = nil end  -- loading it ourselves now
    return load_module(name, loader, id)
  end
end
