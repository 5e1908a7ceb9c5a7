// SPDX-License-Identifier: MIT
// The seed's endpoint over a fleet of two processes: one is SIGKILLed mid-fan-out, and every resource is updated once.
'use strict';
//
//   export LUA_TASKS_PG_URL=$(scripts/pg.sh start)
//   node examples/update-resources-fleet.js
//
// This process is member A; it starts member B (this file, "member"), which
// creates three of the player's items (hosted on B), while A creates two
// (hosted on A). A runs the seed's endpoint (index.list, one coroutine per
// resource calling resource.invoke, wait for all) and SIGKILLs B as soon as
// B's items begin their update. On a fleet every invocation carries a request
// id and runs as the durable task that id names in its resource: the calls
// B did not answer are sent again, B's items are taken over by A, each
// update goes on from B's last durable point (its sleep), and no update runs
// twice (docs/resources.md#exactly-once). The item keeps no update ids.

const fs = require('node:fs');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { Fleet, Resources, Runtime } = require('..');

const URL = process.env.LUA_TASKS_PG_URL || process.env.DATABASE_URL;
const FLEET = { leaseMs: 1000, idleMs: 0, routeTimeoutMs: 3000 };

// A player's item: an update waits a little (a durable point), then applies.
const ITEM = `
local item = {}
function item.init(name) tasks.state.name, tasks.state.updates = name, 0 end
function item.update_resource(info)
  print("updating " .. tasks.state.name)
  tasks.sleep(0.3)
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

// The resources of a member; `print`: where its items' print goes (B's say when an update begins).
async function open(schema, print = () => {}) {
  const member = await Fleet.join({ connectionString: URL, schema, ...FLEET });
  member.on('error', () => {}); // a member killed mid-request: heard as its calls' answers
  const res = await Resources.open(member, {
    modules: { item: ITEM, endpoint: ENDPOINT },
    runtime: { print },
  });
  return { member, res };
}

// Member B: creates its items, then serves until killed.
async function memberB(schema) {
  const { res } = await open(schema, (line) => process.stdout.write(`${line}\n`));
  for (const name of ['sword', 'shield', 'helmet']) await res.create('item', `resources/ada/${name}`, name);
  process.stdout.write('ready\n');
  setInterval(() => {}, 1 << 30);
}

async function main() {
  if (!URL) {
    console.log('Set LUA_TASKS_PG_URL to a PostgreSQL URL (scripts/pg.sh start prints one).');
    return;
  }
  const schema = `res_demo_${process.pid}`;
  const a = await open(schema);
  await a.res.create('item', 'resources/ada/boots', 'boots');
  await a.res.create('item', 'resources/ada/ring', 'ring');
  await a.res.create('item', 'resources/bob/sword', 'sword'); // another profile's: not listed

  const b = spawn(process.execPath, [__filename, 'member', schema], { stdio: ['ignore', 'pipe', 'inherit'] });
  b.stdout.setEncoding('utf8');
  let killed = false;
  await new Promise((resolve, reject) => {
    b.on('exit', (code) => (killed ? undefined : reject(new Error(`member B exited (${code})`))));
    b.stdout.on('data', (d) => {
      if (d.includes('ready')) resolve();
      // B's items began their update: B dies mid-fan-out.
      if (d.includes('updating') && !killed) {
        killed = true;
        b.kill('SIGKILL');
        console.log('member B SIGKILLed mid-fan-out');
      }
    });
  });

  const rt = new Runtime({ resources: a.res, modules: { endpoint: ENDPOINT } });
  const n = await rt.call('endpoint.update_resources', 'ada', { level: 2 });
  console.log(`updated ${n} resources`);
  let once = true;
  for (const [p, id] of Object.entries(await a.res.list('resources/*/*')).sort()) {
    const line = (await a.res.invoke(id, 'updates')).result;
    console.log(`${p} -> ${line}`);
    if (p.startsWith('resources/ada/') && !line.endsWith(': 1')) once = false;
  }
  console.log(once ? 'Every resource of ada was updated once.' : 'Some resource was not updated exactly once!');
  await rt.close();
  await a.res.close();
  await a.member.leave();
  const { Client } = require('pg');
  const c = new Client({ connectionString: URL });
  await c.connect();
  await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await c.end();
}

if (process.argv[2] === 'member') memberB(process.argv[3]);
else main();
