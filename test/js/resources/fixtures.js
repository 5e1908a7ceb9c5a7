// SPDX-License-Identifier: MIT
// Shared by the resources tests: a temporary store directory, the modules, and an embedder runtime that can call them.
'use strict';
const { Runtime, Resources } = require('../../..');
const { tempDirs } = require('../helpers');

const tempDir = tempDirs('lua-tasks-res-');
const opened = [];
afterEach(async () => {
  for (const x of opened.splice(0)) await x.close();
});

// A counter resource: its count persists in tasks.state; `slow` sleeps first.
const COUNTER = `
local counter = {}
function counter.init(start, label)
  tasks.state.count = start or 0
  tasks.state.label = label
end
function counter.add(n)
  tasks.state.count = tasks.state.count + (n or 1)
  coroutine.yield("COMMIT")
  return tasks.state.count
end
function counter.get() return tasks.state.count end
function counter.label() return tasks.state.label end
function counter.slow(seconds, n)
  tasks.sleep(seconds)
  return counter.add(n)
end
function counter.fail() error("no way") end
-- Parks until resumed (by its address, from anywhere), answering what it was resumed with.
function counter.park()
  -- Told in the same run as the wait: whoever reads it finds the task waiting.
  tasks.state.parked = require("namazu.coroutine").current_task_id()
  return coroutine.yield("INDEFINITELY")
end
function counter.parked() return tasks.state.parked end
function counter.wake(address, v) return require("namazu.coroutine").resume(address, v) == true end
function counter.echo(v) return v end
function counter.give_function() return function() end end
counter.not_a_method = 42
return counter
`;

// The seed's endpoint: one coroutine per listed resource, then wait for them all.
const ENDPOINT = `
local index = require("namazu.index")
local resource = require("namazu.resource")
local endpoint = {}
function endpoint.update_resources(profile_id, update_info)
  local listings = index.list(string.format("resources/%s/*", profile_id))
  local active_tasks = 0
  local log = {}
  for path, resource_id in pairs(listings) do
    local co = coroutine.create(function()
      active_tasks = active_tasks + 1
      log[#log + 1] = "start"
      local result, code = resource.invoke(resource_id, "slow", 0.1, update_info)
      log[#log + 1] = "end " .. code
      active_tasks = active_tasks - 1
    end)
    coroutine.resume(co)
  end
  while active_tasks > 0 do coroutine.yield() end
  return table.concat(log, ",")
end
return endpoint
`;

async function openResources(dir, options = {}) {
  const res = await Resources.open(dir, { modules: { counter: COUNTER }, ...options });
  opened.push(res);
  return res;
}

// An embedder's runtime (no store) given the resources.
function caller(res, options = {}) {
  const rt = new Runtime({ resources: res, ...options });
  opened.unshift(rt); // closed before the resources
  return rt;
}

module.exports = { tempDir, openResources, caller, COUNTER, ENDPOINT, opened };
