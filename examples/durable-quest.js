// SPDX-License-Identifier: MIT
// durable-quest: an HTTP quest server whose quests are durable tasks; it is SIGKILLed and restarted, and they go on.
//   node examples/durable-quest.js
//
// This process is the player: it starts the server (this file again, as a
// child process, on a store in a temporary directory), plays over HTTP,
// kills the server with SIGKILL mid-quest, starts it again, and plays on.
// Each quest is a durable task: its events come by rt.send from an HTTP
// request, its time limit is a durable timer task (FOR) that sends it
// "timeout", and a daily-reset task waits UNTIL_NEXT midnight. After the
// restart every task is back with its id, its place and its deadline, and
// nothing it did before the kill is done again.
'use strict';
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');

const QUESTS = `
STAGES = { "enter-cave", "find-sword", "slay-dragon" }

-- Where a quest stands, for the HTTP side: a keyed record, changed in a step
-- (the step's journal record and the change are written as one batch).
local function mark(player, fields)
  tasks.step(function()
    local q = tasks.store.get("quest:" .. player) or {}
    for k, v in pairs(fields) do q[k] = v end
    tasks.store.set("quest:" .. player, q)
  end)
end

function quest(player, limit_s)
  -- The time limit: a durable task of its own. A replay does not start it again.
  tasks.start_durable("quest_timer", tasks.current_id(), limit_s)
  for i, want in ipairs(STAGES) do
    mark(player, { stage = i - 1, waiting_for = want })
    repeat
      local ev = tasks.receive()
      if ev == "timeout" then
        mark(player, { waiting_for = false, outcome = "failed: time ran out" })
        return "timed out"
      end
    until ev == want
    announce(player, want) -- a JS call: journaled, so it runs once, never again on replay
  end
  mark(player, { stage = #STAGES, waiting_for = false, outcome = "completed" })
  return "completed"
end

function quest_timer(quest_id, limit_s)
  coroutine.yield("FOR", limit_s, "SECONDS")
  tasks.send(quest_id, "timeout") -- nothing happens if the quest is over
end

function daily_reset()
  while true do
    coroutine.yield("UNTIL_NEXT", "0 0 0 * * ?", "UTC")
    tasks.step(function() tasks.store.set("resets", (tasks.store.get("resets") or 0) + 1) end)
  end
end

function progress(player) return tasks.store.get("quest:" .. player) end
`;

// ------------------------------------------------------------------ server

async function serve(dir) {
  const { Runtime } = require('..');
  const say = (line) => console.log(`  [server ${process.pid}] ${line}`);
  const rt = await Runtime.open({
    name: 'quests',
    store: dir,
    setup: (r) => {
      r.set('announce', (player, stage) => say(`${player} did ${stage} (announced once)`));
      r.on('taskerror', (t, e) => say(`task ${t.id} failed: ${e.message}`));
      r.load(QUESTS);
    },
  });
  // Ensured at every start: the same task, restored or new.
  rt.spawn('daily_reset', { durable: true, key: 'daily-reset' });
  say(`up with ${rt.tasks().length} durable task(s) restored or ensured`);

  const quests = new Map(); // player -> Task, from this process's spawns (ids come back after a restart)
  const questTask = (player) =>
    quests.get(player) || rt.spawn('quest', { durable: true, key: `quest:${player}`, args: [player, 60] });

  const routes = {
    // POST /quest/<player>?limit=<s>: starts a quest (or gives the one that exists).
    'POST quest': async (player, q) => {
      const t = rt.spawn('quest', {
        durable: true,
        key: `quest:${player}`,
        args: [player, Number(q.get('limit') || 60)],
      });
      quests.set(player, t);
      await rt.commit();
      return { id: t.id };
    },
    // POST /event/<player>?e=<event>: a message to the quest, durable before the answer.
    'POST event': async (player, q) => {
      const t = questTask(player);
      const sent = rt.send(t.id, q.get('e'));
      await rt.commit();
      return { sent };
    },
    // GET /quest/<player>: the task and where its quest stands.
    'GET quest': async (player) => {
      const t = questTask(player);
      const info = rt.task(t.id) || { id: t.id, status: t.status };
      return { ...info, progress: await rt.call('progress', player) };
    },
    'GET reset': async () => {
      const t = rt.spawn('daily_reset', { durable: true, key: 'daily-reset' });
      return rt.task(t.id);
    },
  };

  const server = http.createServer(async (req, res) => {
    const url = new URL(req.url, 'http://x');
    const [, what, player] = url.pathname.split('/');
    const route = routes[`${req.method} ${what}`];
    try {
      if (!route) throw new Error(`no route ${req.method} ${url.pathname}`);
      const body = await route(player, url.searchParams);
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    } catch (e) {
      res.writeHead(500).end(JSON.stringify({ error: e.message }));
    }
  });
  server.listen(0, '127.0.0.1', () => console.log(`listening ${server.address().port}`));
  process.on('SIGTERM', async () => {
    server.close();
    await rt.close();
    say('closed');
    process.exit(0);
  });
}

// ------------------------------------------------------------------ player

function startServer(dir) {
  const child = spawn(process.execPath, [__filename, 'serve', dir], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    let buf = '';
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk) => {
      buf += chunk;
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        const m = /^listening (\d+)$/.exec(line);
        if (m) resolve({ child, port: Number(m[1]) });
        else console.log(line);
      }
    });
    child.on('exit', (code, signal) => reject(new Error(`the server exited (${signal || code}) before listening`)));
  });
}

function request(port, method, p) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path: p }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (body += c));
      res.on('end', () => (res.statusCode === 200 ? resolve(JSON.parse(body)) : reject(new Error(body))));
    });
    req.on('error', reject);
    req.end();
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function show(q) {
  const p = q.progress || {};
  const where = p.outcome || `${p.stage} of 3 stages done, waiting for ${p.waiting_for}`;
  const wait = q.waiting ? ` (${q.waiting.instruction})` : '';
  return `${q.id} ${q.status}${wait}: ${where}`;
}

async function play() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lua-tasks-quest-'));
  let child;
  try {
    console.log('Starting the quest server.');
    let port;
    ({ child, port } = await startServer(dir));
    const call = (method, p) => request(port, method, p);

    const alice = await call('POST', '/quest/alice?limit=60');
    const bob = await call('POST', '/quest/bob?limit=1');
    console.log(`alice's quest is task ${alice.id}; bob's is ${bob.id}, with a 1 s limit`);
    await call('POST', '/event/alice?e=enter-cave');
    await call('POST', '/event/alice?e=find-sword');
    await sleep(100);
    const before = await call('GET', '/quest/alice');
    console.log(`alice: ${show(before)}`);
    const reset = await call('GET', '/reset');
    console.log(`daily reset ${reset.id}: ${reset.waiting.instruction} until ${reset.waiting.until}`);

    console.log(`SIGKILL the server (pid ${child.pid}).`);
    const gone = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await gone;
    await sleep(1200); // bob's time limit runs out while the server is down

    console.log('Starting it again on the same store.');
    ({ child, port } = await startServer(dir));
    const after = await call('GET', '/quest/alice');
    console.log(`alice: ${show(after)}`);
    if (after.id !== alice.id || after.progress.stage !== 2) throw new Error('alice did not resume where she was');
    await sleep(100);
    const lateBob = await call('GET', '/quest/bob');
    console.log(`bob: ${show(lateBob)}`);
    const reset2 = await call('GET', '/reset');
    console.log(`daily reset ${reset2.id}: ${reset2.waiting.instruction} until ${reset2.waiting.until}`);
    if (reset2.id !== reset.id || reset2.waiting.until !== reset.waiting.until) throw new Error('the reset task moved');

    await call('POST', '/event/alice?e=slay-dragon');
    await sleep(100);
    const done = await call('GET', '/quest/alice');
    console.log(`alice: ${show(done)}`);
    if (done.progress.outcome !== 'completed') throw new Error('alice did not complete her quest');

    const closed = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await closed;
    console.log('Done: the quests resumed where they were.');
  } finally {
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const main = process.argv[2] === 'serve' ? () => serve(process.argv[3]) : play;
main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
