// SPDX-License-Identifier: MIT
// update-resources: the seed's endpoint (index.list, one coroutine per resource calling resource.invoke, wait for all) on the directory store.
'use strict';
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { Runtime, Resources } = require('..');

// A player's item: its updates persist in the resource's own tasks.state.
const ITEM = `
local item = {}
function item.init(name) tasks.state.name, tasks.state.updates = name, 0 end
function item.update_resource(info)
  tasks.sleep(0.1)                                  -- a slow update: 100 ms each
  tasks.state.updates = tasks.state.updates + 1
  tasks.state.level = info.level
  coroutine.yield("COMMIT")
  return tasks.state.updates
end
function item.updates() return tasks.state.name .. ": " .. tasks.state.updates end
return item
`;

// The seed's endpoint, with the profile given as an argument instead of auth.
const ENDPOINT = fs.readFileSync(path.join(__dirname, 'update-resources-endpoint.lua'), 'utf8');

async function main() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lua-tasks-resources-'));
  const res = await Resources.open(dir, { modules: { item: ITEM } });
  for (const name of ['sword', 'shield', 'helmet', 'boots', 'ring']) {
    await res.create('item', `resources/ada/${name}`, name);
  }
  await res.create('item', 'resources/bob/sword', 'sword'); // another profile's: not listed
  const rt = new Runtime({ resources: res, modules: { endpoint: ENDPOINT } });
  const t0 = Date.now();
  const n = await rt.call('endpoint.update_resources', 'ada', { level: 2 });
  const ms = Date.now() - t0;
  console.log(`updated ${n} resources concurrently (${ms < 500 ? 'under' : 'over'} the 500 ms of one after another)`);
  for (const [p, id] of Object.entries(await res.list('resources/*/*')).sort()) {
    console.log(`${p} -> ${(await res.invoke(id, 'updates')).result}`);
  }
  await rt.close();
  await res.close();
  fs.rmSync(dir, { recursive: true, force: true });
}

main();
