-- SPDX-License-Identifier: MIT
-- Text-only load, loadfile and dofile (installed by lua_libs.cpp): written in Lua so that error
-- levels and multiple returns behave like the originals.
-- Chunk arguments: Lua's load, loadfile (nil when files are off), select, error.
local load, loadfile, select, error = ...
local function mode_ok(mode)
  if mode ~= nil and mode ~= "t" then
    error("binary chunks are not allowed (mode " .. tostring(mode) .. " given, only \"t\")", 3)
  end
end
local G = _G
-- An explicit env (even nil) must reach load as given: count the varargs.
G.load = function(chunk, name, mode, ...)
  mode_ok(mode)
  if select("#", ...) > 0 then return load(chunk, name, "t", (...)) end
  return load(chunk, name, "t")
end
if loadfile then
  G.loadfile = function(file, mode, ...)
    mode_ok(mode)
    if select("#", ...) > 0 then return loadfile(file, "t", (...)) end
    return loadfile(file, "t")
  end
  G.dofile = function(file)
    local f = assert(loadfile(file, "t"))
    return f()
  end
end
