-- SPDX-License-Identifier: MIT
-- The seed's endpoint (elements-coroutines.txt), with only module names mapped and the profile given as an
-- argument instead of auth: examples/update-resources.js and update-resources-fleet.js load it as `endpoint`.
local index = require("namazu.index")
local resource = require("namazu.resource")
local namazu_response = require("namazu.response")

local test_endpoint = {}

function test_endpoint.update_resources(profile_id, payload)
  local update_info = payload
  local resources_path = string.format("resources/%s/*", profile_id)
  local resource_listings = index.list(resources_path)
  local active_tasks = 0
  local codes = {}
  for path, resource_id in pairs(resource_listings) do
    local co = coroutine.create(function()
      active_tasks = active_tasks + 1
      local result, code = resource.invoke(resource_id, "update_resource", update_info)
      codes[#codes + 1] = code
      active_tasks = active_tasks - 1
    end)
    coroutine.resume(co)
  end
  while active_tasks > 0 do coroutine.yield() end
  for _, code in ipairs(codes) do assert(code == namazu_response.code.OK, "an update answered " .. code) end
  return #codes
end

return test_endpoint
