-- SPDX-License-Identifier: MIT
-- The modules resource, index and namazu.response over the embedder's Resources (lib/resources/bridge.js).
-- Chunk result: a function of the host table (JS functions, each answering a list) that returns the modules.
-- Every call is a JS call: it waits for the host's promise (also inside a coroutine the
-- task's code resumed, which then runs on its own), and a durable task journals its answer.
-- Outside a task a call raises before the host is called: nothing is started that nobody waits for.
-- A durable task's invocation runs once (docs/resources.md#exactly-once): its request id is
-- made in a step and written before the request is sent (the outbox), and the resource runs
-- the method as the durable task that id names, so a replay's request finds what the first did.
local current_id, durable, step, patched, error = tasks.current_id, tasks.durable, tasks.step, tasks.patched, error
local sleep = tasks.sleep

return function(host)
  local resource, index = {}, {}

  local function in_task(fn)
    if current_id() == nil then
      error(fn .. ": call it from a task (it waits for its answer): start one with tasks.start or rt.spawn", 3)
    end
  end

  -- resource.create(module, path, ...) -> id, code
  function resource.create(module, path, ...)
    in_task("resource.create")
    local r = host.create(module, path, ...)
    return r[1], r[2]
  end

  -- Whether this invocation runs once: in a durable task (patched: one whose
  -- first run invoked before requests had ids replays as it ran).
  local function once()
    return durable() and patched("lua-tasks.resource.request")
  end

  -- A new request id, journaled and durable (with what the task journaled so
  -- far) before the request goes: a wait is a durable point. tasks.sleep(0),
  -- not yield("COMMIT"): an API wait, so in a coroutine the task resumed it
  -- is refused as a durable task refuses any (a yield there would only go
  -- back to the resumer, leaving the request unsent and its caller waiting).
  local function new_request()
    local rid = step("resource.request", host.request_id)
    sleep(0)
    return rid
  end

  -- An invocation's answer: result, code, and the error's message only for METHOD_FAILED.
  local function answer(r)
    if r[3] ~= nil then return r[1], r[2], r[3] end
    return r[1], r[2]
  end

  -- resource.invoke(id, method, ...) -> result, code (and the error's message for METHOD_FAILED)
  function resource.invoke(id, method, ...)
    in_task("resource.invoke")
    local r
    if once() then r = host.invoke_once(new_request(), id, method, ...) else r = host.invoke(id, method, ...) end
    return answer(r)
  end

  -- resource.invoke_path(path, method, ...) -> result, code
  -- Run once, the path's id is journaled with the request: a replay invokes that resource.
  function resource.invoke_path(path, method, ...)
    in_task("resource.invoke_path")
    if not once() then return answer(host.invoke_path(path, method, ...)) end
    local id = host.resolve(path)
    if id == nil then return nil, host.codes.RESOURCE_NOT_FOUND end
    return answer(host.invoke_once(new_request(), id, method, ...))
  end

  -- resource.destroy(id) -> ok, code
  function resource.destroy(id)
    in_task("resource.destroy")
    local r = host.destroy(id)
    return r[1], r[2]
  end

  -- index.list(pattern) -> { [path] = id }, code
  function index.list(pattern)
    in_task("index.list")
    local r = host.list(pattern)
    return r[1], r[2]
  end

  -- index.link(id, alias) -> code
  function index.link(id, alias)
    in_task("index.link")
    return host.link(id, alias)
  end

  -- index.link_path(path, alias) -> code
  function index.link_path(path, alias)
    in_task("index.link_path")
    return host.link_path(path, alias)
  end

  -- index.unlink(path) -> id, removed, code
  function index.unlink(path)
    in_task("index.unlink")
    local r = host.unlink(path)
    return r[1], r[2], r[3]
  end

  return { resource = resource, index = index, response = { code = host.codes } }
end
