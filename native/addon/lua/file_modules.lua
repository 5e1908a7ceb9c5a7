-- SPDX-License-Identifier: MIT
-- modulePaths: require falls back to files the JS finder reads (the preload table's __index),
-- and loadfile/dofile read only through it as well (installed by runtime.cpp, JS_modulePaths).
-- Chunk arguments: find(name), read_file(file), load, error, the preload table, _G, whether the profile is 'safe'.
local find, read_file, load, error, PRELOAD, G, safe = ...
setmetatable(PRELOAD, { __index = function(_, name)
  local found = find(name)  -- { source, chunkname } or nil
  if found == nil then return nil end
  local f, err = load(found[1], found[2], "t")
  if not f then error(err, 0) end
  return f
end })
if safe then
  G.loadfile = function(file, mode, env)
    if mode ~= nil and mode ~= "t" then
      error("binary chunks are not allowed (mode " .. tostring(mode) .. " given, only \"t\")", 2)
    end
    local src = read_file(file)
    if src == nil then
      return nil, "cannot open " .. tostring(file) .. " (only files inside modulePaths can be loaded)"
    end
    if env ~= nil then return load(src, "@" .. tostring(file), "t", env) end
    return load(src, "@" .. tostring(file), "t")
  end
  G.dofile = function(file)
    local f, err = G.loadfile(file)
    if not f then error(err, 2) end
    return f()
  end
end
