-- SPDX-License-Identifier: MIT
-- The resource registry, run in its own runtime (lib/resources/registry.js owns the format).
-- Which resources exist (id -> module), their paths (path -> id) and their slots: a resource's
-- runtime is the store name of its slot, and slots number 0 .. maxResources - 1, so the names
-- resources ever use are bounded as their count is. Kept in tasks.store, one key per resource
-- ("r/<id>" -> module) and per path ("p/<path>" -> id), read into memory at load; a change is
-- one COMMIT, done before the call answers, and undone in memory if the COMMIT fails.
-- An id is "<slot>-<nonce>": a slot reused by a later create has another id.
local store, yield, pcall, error = tasks.store, coroutine.yield, pcall, error
local ids, paths = {}, {} -- id -> { module, slot, paths = { [path] = true }, n }; path -> id
local slots = {} -- slot -> id, or true while a create holds it
local reserved = {} -- path -> true while a create holds it
local count = { resources = 0, paths = 0, creating = 0 }

local function slot_of(id)
  return tonumber(string.match(id, "^(%d+)%-"))
end

local function read(prefix, each)
  local after
  repeat
    local keys = store.keys(prefix, after, 10000)
    for _, k in ipairs(keys) do each(string.sub(k, #prefix + 1), store.get(k)) end
    after = keys[#keys]
  until #keys < 10000
end

read("r/", function(id, module)
  local slot = slot_of(id)
  ids[id] = { module = module, slot = slot, paths = {}, n = 0 }
  slots[slot] = id
  count.resources = count.resources + 1
end)
read("p/", function(path, id)
  local r = ids[id]
  if r == nil then return end -- never written so: a path goes in its resource's COMMIT
  r.paths[path] = true
  r.n = r.n + 1
  paths[path] = id
  count.paths = count.paths + 1
end)

-- Applies `changes` ({ key, value-or-false }) and COMMITs; on failure runs undo and raises.
local function write(changes, undo)
  for _, c in ipairs(changes) do
    if c[2] then store.set(c[1], c[2]) else store.delete(c[1]) end
  end
  local ok, err = pcall(yield, "COMMIT")
  if not ok then
    undo()
    error(err, 0)
  end
end

local function limit(what, n, max)
  return { code = "LIMIT", what = what, count = n, max = max }
end

-- A create's first step: holds `path` and a free slot (none of `busy`), or says why not.
function registry_reserve(module, path, max_resources, max_paths, nonce, busy)
  if paths[path] or reserved[path] then return { code = "DUPLICATE_RESOURCE" } end
  if count.resources + count.creating >= max_resources then
    return limit("resources", count.resources + count.creating, max_resources)
  end
  if count.paths + count.creating >= max_paths then
    return limit("paths", count.paths + count.creating, max_paths)
  end
  local avoid = {}
  for _, s in ipairs(busy or {}) do avoid[s] = true end
  local slot
  for s = 0, max_resources - 1 do
    if slots[s] == nil and not avoid[s] then
      slot = s
      break
    end
  end
  if slot == nil then return { code = "BUSY" } end
  slots[slot] = true
  reserved[path] = true
  count.creating = count.creating + 1
  return { code = "OK", id = slot .. "-" .. nonce, slot = slot }
end

-- A create's end: its entry written (ok), or its hold given back.
function registry_finish(id, module, path, ok)
  local slot = slot_of(id)
  reserved[path] = nil
  count.creating = count.creating - 1
  if not ok then
    slots[slot] = nil
    return true
  end
  local r = { module = module, slot = slot, paths = { [path] = true }, n = 1 }
  ids[id], paths[path], slots[slot] = r, id, id
  count.resources, count.paths = count.resources + 1, count.paths + 1
  write({ { "r/" .. id, module }, { "p/" .. path, id } }, function()
    ids[id], paths[path], slots[slot] = nil, nil, nil
    count.resources, count.paths = count.resources - 1, count.paths - 1
  end)
  return true
end

-- { module, slot } of a resource, or nil.
function registry_get(id)
  local r = ids[id]
  if r == nil then return nil end
  return { module = r.module, slot = r.slot }
end

-- { id, module, slot } of the resource at `path`, or nil.
function registry_resolve(path)
  local id = paths[path]
  if id == nil then return nil end
  return { id = id, module = ids[id].module, slot = ids[id].slot }
end

-- Adds `alias` to the resource `id` (or to the one at `path` when id is false).
function registry_link(id, path, alias, max_paths)
  if not id then id = paths[path] end
  local r = id and ids[id]
  if r == nil then return { code = "RESOURCE_NOT_FOUND" } end
  if paths[alias] or reserved[alias] then return { code = "DUPLICATE_RESOURCE" } end
  if count.paths + count.creating >= max_paths then
    return limit("paths", count.paths + count.creating, max_paths)
  end
  r.paths[alias], r.n, paths[alias] = true, r.n + 1, id
  count.paths = count.paths + 1
  write({ { "p/" .. alias, id } }, function()
    r.paths[alias], r.n, paths[alias] = nil, r.n - 1, nil
    count.paths = count.paths - 1
  end)
  return { code = "OK" }
end

local function remove(id)
  local r = ids[id]
  local changes, list = { { "r/" .. id, false } }, {}
  for p in pairs(r.paths) do
    changes[#changes + 1] = { "p/" .. p, false }
    list[#list + 1] = p
  end
  ids[id], slots[r.slot] = nil, nil
  for _, p in ipairs(list) do paths[p] = nil end
  count.resources, count.paths = count.resources - 1, count.paths - #list
  write(changes, function()
    ids[id], slots[r.slot] = r, id
    for _, p in ipairs(list) do paths[p] = id end
    count.resources, count.paths = count.resources + 1, count.paths + #list
  end)
  return r.slot
end

-- Removes a resource and its paths: { ok, slot }.
function registry_destroy(id)
  if ids[id] == nil then return { ok = false } end
  return { ok = true, slot = remove(id) }
end

-- Removes a path; the last one removes its resource: { id, removed, slot } or { } for an unknown path.
function registry_unlink(path)
  local id = paths[path]
  if id == nil then return {} end
  local r = ids[id]
  if r.n == 1 then return { id = id, removed = true, slot = remove(id) } end
  r.paths[path], r.n, paths[path] = nil, r.n - 1, nil
  count.paths = count.paths - 1
  write({ { "p/" .. path, false } }, function()
    r.paths[path], r.n, paths[path] = true, r.n + 1, id
    count.paths = count.paths + 1
  end)
  return { id = id, removed = false, slot = r.slot }
end

-- { [path] = id } of the paths matching `pattern` (checked by the caller: "*" is one whole segment).
function registry_list(pattern)
  local want = {}
  for s in string.gmatch(pattern, "[^/]+") do want[#want + 1] = s end
  local out = {}
  if not string.find(pattern, "*", 1, true) then
    if paths[pattern] then out[pattern] = paths[pattern] end
    return out
  end
  for p, id in pairs(paths) do
    local i, ok = 0, true
    for s in string.gmatch(p, "[^/]+") do
      i = i + 1
      local w = want[i]
      if w == nil or (w ~= "*" and w ~= s) then
        ok = false
        break
      end
    end
    if ok and i == #want then out[p] = id end
  end
  return out
end

-- { resources, paths, creating }.
function registry_count()
  return { resources = count.resources, paths = count.paths, creating = count.creating }
end
