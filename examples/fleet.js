// SPDX-License-Identifier: MIT
// A fleet of two processes on PostgreSQL: chat rooms that live on one member, reached from either.
'use strict';
//
//   export LUA_TASKS_PG_URL=$(scripts/pg.sh start)   # Debian's postgresql, started as CI does
//   node examples/fleet.js                           # the demo: two members, a SIGKILL, a takeover
//   node examples/fleet.js serve 3001 & node examples/fleet.js serve 3002 &   # or run them yourself
//   curl -d hi localhost:3001/rooms/lobby; curl localhost:3002/rooms/lobby
//
// Each member serves HTTP: POST /rooms/<room> (the body is a message) and
// GET /rooms/<room> (its history). A room is a named runtime with one
// durable task that receives messages and COMMITs them to its history;
// whichever member gets the request, the room runs on the one that holds it.

const http = require('node:http');
const { spawn } = require('node:child_process');
const { Fleet } = require('..');

const URL = process.env.LUA_TASKS_PG_URL || process.env.DATABASE_URL;

const ROOM_LUA = `
function room()
  while true do
    local text = tasks.receive()
    -- In a step: a replay after a takeover does not append it again.
    tasks.step(function()
      tasks.state.history = tasks.state.history or {}
      table.insert(tasks.state.history, text)
    end)
    coroutine.yield("COMMIT")
  end
end
function history()
  return { messages = tasks.state.history or {}, pid = member_pid }
end
`;

async function serve(port, schema) {
  const member = await Fleet.join({
    connectionString: URL,
    schema,
    leaseMs: 2000,
    runtime: {
      setup: (rt) => {
        rt.set('member_pid', process.pid);
        rt.load(ROOM_LUA);
      },
    },
  });
  member.on('activate', (e) => console.log(`[${process.pid}] hosts ${e.name} (token ${e.token}, ${e.reason})`));
  const server = http.createServer(async (req, res) => {
    const room = /^\/rooms\/([\w.-]+)$/.exec(req.url);
    if (!room) return reply(res, 404, { error: 'try /rooms/<name>' });
    try {
      if (req.method === 'POST') {
        let body = '';
        for await (const chunk of req) body += chunk;
        const id = await member.spawn(room[1], 'room', { key: 'main' });
        reply(res, 200, { sent: await member.sendDurable(room[1], id, body) });
      } else {
        reply(res, 200, await member.call(room[1], 'history'));
      }
    } catch (e) {
      reply(res, 500, { error: e.message, code: e.code });
    }
  });
  server.listen(port, '127.0.0.1', () =>
    console.log(`[${process.pid}] member ${member.id.slice(0, 8)} on port ${server.address().port}`),
  );
  process.on('SIGTERM', async () => {
    server.close();
    await member.leave();
    process.exit(0);
  });
}

function reply(res, status, value) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(value));
}

async function request(port, method, path, body) {
  const res = await fetch(`http://127.0.0.1:${port}${path}`, { method, body });
  return res.json();
}

// A member process on a free port: resolves with it and its port.
function start(schema) {
  const p = spawn(process.execPath, [__filename, 'serve', '0', schema], { stdio: ['ignore', 'pipe', 'inherit'] });
  p.stdout.setEncoding('utf8');
  p.stdout.on('data', (d) => process.stdout.write(d.replace(/ on port \d+/, '')));
  return new Promise((resolve, reject) => {
    p.stdout.on('data', (d) => {
      const m = / on port (\d+)/.exec(d);
      if (m) resolve({ p, port: Number(m[1]) });
    });
    p.once('exit', (code) => reject(new Error(`a member exited (${code}) before it served`)));
  });
}

async function historyOf(port, want) {
  for (let i = 0; ; i++) {
    const h = await request(port, 'GET', '/rooms/lobby');
    if (h.messages && h.messages.length >= want) return h;
    if (i > 200) throw new Error(`the lobby did not reach ${want} messages: ${JSON.stringify(h)}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

async function demo() {
  const schema = `fleet_demo_${process.pid}`;
  const one = await start(schema);
  const two = await start(schema);
  const who = (h) => (h.pid === one.p.pid ? 'the first' : 'the second');
  try {
    await request(one.port, 'POST', '/rooms/lobby', 'ann: hello');
    await request(two.port, 'POST', '/rooms/lobby', 'bob: hi ann'); // routed to the first member
    let h = await historyOf(two.port, 2);
    console.log(`lobby, asked of the second member, answered by ${who(h)} member:`, h.messages);
    console.log('SIGKILL the first member');
    one.p.kill('SIGKILL');
    await request(two.port, 'POST', '/rooms/lobby', 'ann: still here?');
    h = await historyOf(two.port, 3);
    console.log(`lobby after the kill, answered by ${who(h)} member:`, h.messages);
  } finally {
    one.p.kill('SIGKILL');
    two.p.kill('SIGTERM');
    await new Promise((r) => two.p.once('exit', r));
    const { Client } = require('pg');
    const c = new Client({ connectionString: URL });
    await c.connect();
    await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await c.end();
  }
  console.log('Done: the room moved to the member left standing, its history whole.');
}

if (!URL) {
  console.log(
    'Set LUA_TASKS_PG_URL (or DATABASE_URL) to a PostgreSQL database: export LUA_TASKS_PG_URL=$(scripts/pg.sh start)',
  );
} else if (process.argv[2] === 'serve') {
  serve(Number(process.argv[3]), process.argv[4] || 'public').catch((e) => {
    console.error(e);
    process.exit(1);
  });
} else {
  demo().catch((e) => {
    console.error(e);
    process.exit(1);
  });
}
