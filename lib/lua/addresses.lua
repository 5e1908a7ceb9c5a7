-- SPDX-License-Identifier: MIT
-- Task addresses in a named runtime: "<id>@<name>" names a task of any runtime (lib/runtime/address.js).
-- Chunk result: a function(name, route, id_length) that installs tasks.address and the resume by
-- address (id_length: a task id's length, the native side's).
-- route(name, id, ...): a JS function answering a promise of whether the task was resumed (and
-- the wake written), or nil when this runtime reaches no other; it waits, so it is called from a task.
-- Answers as tasks.resume does: true, or nil and why.
local tasks, type, error, require, pcall = tasks, type, error, require, pcall
local find, sub = string and string.find, string and string.sub

return function(name, route, id_length)
  if not find then return end -- without the string library, ids only
  local resume, current_id = tasks.resume, tasks.current_id

  -- The id and runtime name of an address; nil for anything else (a plain id).
  local function split(v)
    if type(v) ~= "string" then return nil end
    local at = find(v, "@", 1, true)
    if at == nil or at == 1 or at == #v then return nil end
    return sub(v, 1, at - 1), sub(v, at + 1)
  end

  -- tasks.address([id]) -> the address of task id (default: the running task) of this runtime
  local function address(id)
    if id == nil then id = current_id() end
    if id == nil or split(id) then return id end
    if type(id) ~= "string" then error("tasks.address: the task id must be a string, not a " .. type(id), 2) end
    return id .. "@" .. name
  end

  -- tasks.resume(id_or_address, ...): a plain id or this runtime's address resumes here, as ever;
  -- another runtime's address goes through the route and waits for its answer.
  local function resume_any(id, ...)
    -- A task id is id_length bytes; an address is longer: a plain id pays one length check.
    if type(id) ~= "string" or #id == id_length then return resume(id, ...) end
    local local_id, at = split(id)
    if local_id == nil then return resume(id, ...) end
    if at == name then return resume(local_id, ...) end
    if route == nil then
      error("tasks.resume: " .. id .. " names a task of the runtime \"" .. at ..
        "\", which this runtime cannot reach: give it resources, or host it on a fleet", 2)
    end
    if current_id() == nil then
      error("tasks.resume: resuming a task of another runtime waits for its answer: call it from a task", 2)
    end
    if route(at, local_id, ...) then return true end
    return nil, "no such task waiting to be resumed (unknown, finished, or not waiting on a yield instruction)"
  end

  tasks.address = address
  tasks.resume = resume_any
  local ok, namazu = pcall(require, "namazu.coroutine")
  if ok and type(namazu) == "table" then
    namazu.resume = resume_any
    namazu.current_task_id = address
  end
end
