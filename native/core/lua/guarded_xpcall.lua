-- SPDX-License-Identifier: MIT
-- xpcall whose message handler is passed over while Lua is being stopped (installed by lua_host.cpp).
--
-- xpcall's message handler runs where the error is raised: for the budget's
-- kill or an interrupt's stop, inside the count hook, where Lua runs no
-- hooks, so a handler that loops could not be stopped (it hung the process
-- past taskTimeout, and a Worker's terminate() for ever). While Lua is being
-- stopped, the handler is passed over and the stop goes on as it is. Every
-- runtime can be stopped (interrupt_watch.hpp), so every runtime has it.
-- Chunk arguments: Lua's xpcall, killing(), type, select, error.
local xpcall, killing, type, select, error = ...
_G.xpcall = function(...)
  local f, msgh = ...
  if type(msgh) ~= "function" then  -- as xpcall says it, at the caller's line
    local got = select("#", ...) < 2 and "no value" or type(msgh)
    error("bad argument #2 to 'xpcall' (function expected, got " .. got .. ")", 2)
  end
  return xpcall(f, function(e)
    if killing() then return e end
    return msgh(e)
  end, select(3, ...))
end
