'use strict';
// The command line's store commands (lib/cli_store.js): `lua-tasks inspect`
// reads names, tasks and histories of a store in use; `lua-tasks replay`
// replays the stored durable tasks against new code with no side effects
// and names those it would break (docs/operations.md).
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { Runtime, DirectoryStore, PostgresStore } = require('../..');
const { root, runNode } = require('./helpers');
const { describePg, createDatabase } = require('./pg-helpers');

const CLI = path.join(root, 'lib', 'cli.js');

const V1 = `
function quest(player)
  local got = tasks.step("grant", function() return grant(player) end)
  notify(player)
  coroutine.yield("FOR", 1, "HOURS")
  return got
end
function waiter() return coroutine.yield("INDEFINITELY") end
function quick() return "done" end
`;

let dir;
let marker; // a line a call of the --setup's grant: the replay must call none
let files;
const ids = {};

function write(name, text) {
  const file = path.join(dir, name);
  fs.writeFileSync(file, text);
  return file;
}

async function open(name) {
  return Runtime.open({
    name,
    store: path.join(dir, 'store'),
    setup: (rt) => {
      rt.set('grant', (p) => `${p}+gold`);
      rt.set('notify', () => true);
      rt.load(V1, { name: 'quests.lua' });
    },
  });
}

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lua-tasks-cli-store-'));
  marker = path.join(dir, 'called');
  files = {
    v1: write('v1.lua', V1),
    // Compatible: a comment above, a new function, more code after the wait.
    later: write('later.lua', `-- v2\nfunction bonus() end\n${V1.replace('return got', 'bonus()\n  return got')}`),
    step: write('step.lua', V1.replace('"grant"', '"pay"')),
    wait: write('wait.lua', V1.replace('"FOR", 1, "HOURS"', '"FOR", 2, "HOURS"')),
    setup: write(
      'setup.js',
      `const called = () => require('fs').appendFileSync(${JSON.stringify(marker)}, 'called\\n');
module.exports = (rt) => {
  rt.set('grant', called);
  rt.set('notify', called);
};`,
    ),
  };
  const game = await open('game');
  ids.a = game.spawn('quest', { durable: true, args: ['ann'] }).id;
  ids.b = game.spawn('quest', { durable: true, args: ['bo'] }).id;
  ids.waiter = game.spawn('waiter', { durable: true }).id;
  ids.quick = game.spawn('quick', { durable: true }).id; // finished: its end record is retained
  await game.close();
  const guild = await open('guild');
  ids.guild = guild.spawn('quest', { durable: true, args: ['cy'] }).id;
  await guild.close();
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const cli = (...args) => runNode([CLI, ...args], { timeout: 30000 });

// Every journal record of the store, to show that nothing was written.
async function records() {
  const store = new DirectoryStore(path.join(dir, 'store'));
  try {
    const out = [];
    for (const name of await store.names()) {
      const { keys, values } = await store.scan(name, 2, '', -1);
      out.push(...keys.map((k, i) => `${name} ${k} ${Buffer.from(values[i]).toString('hex')}`));
    }
    return out;
  } finally {
    await store.close();
  }
}

describe('lua-tasks replay', () => {
  test('the code the tasks started with replays them all: exit 0, nothing listed, nothing called or written, no lease taken', async () => {
    const before = await records();
    const held = await open('game'); // the name is open meanwhile: replay takes no lease
    try {
      for (const code of [files.v1, files.later]) {
        const r = await cli('replay', path.join(dir, 'store'), code, '--setup', files.setup);
        expect({ code: r.code, stdout: r.stdout }).toEqual({ code: 0, stdout: '' });
        expect(r.stderr).toContain('4 unfinished durable tasks replayed; 0 would break');
      }
    } finally {
      await held.close();
    }
    expect(fs.existsSync(marker)).toBe(false);
    expect(await records()).toEqual(before);
  });

  test.each([
    ['a step renamed', 'step', 'record 1', 'tasks.step "grant"'],
    ['a wait changed', 'wait', 'record 3', 'a yield (FOR)'],
  ])(
    '%s: exit 1 and exactly the tasks it breaks, each with ERR_NONDETERMINISM and its position',
    async (_, file, at, held) => {
      const before = await records();
      const r = await cli('replay', path.join(dir, 'store'), files[file], '--setup', files.setup);
      expect(r.code).toBe(1);
      const lines = r.stdout.trim().split('\n');
      const listed = lines.map((l) => l.split('  ')[1]).sort();
      expect(listed).toEqual([ids.a, ids.b, ids.guild].sort()); // not the waiter, not the finished task
      for (const line of lines) {
        expect(line).toContain('quest  ERR_NONDETERMINISM: durable task');
        expect(line).toContain(`diverged from its journal at ${at}: the journal holds ${held}`);
      }
      expect(r.stderr).toContain('4 unfinished durable tasks replayed; 3 would break');
      expect(fs.existsSync(marker)).toBe(false);
      expect(await records()).toEqual(before);
    },
  );

  test('--name replays one name; a missing JS function or entry is a break of its own', async () => {
    const r = await cli('replay', path.join(dir, 'store'), files.step, '--name', 'guild', '--setup', files.setup);
    expect(r.code).toBe(1);
    expect(
      r.stdout
        .trim()
        .split('\n')
        .map((l) => l.split('  ')[1]),
    ).toEqual([ids.guild]);
    // Without --setup, notify is not there: the replay of a quest fails calling it (a nil global).
    const bare = await cli('replay', path.join(dir, 'store'), files.v1, '--name', 'game');
    expect(bare.code).toBe(1);
    expect(bare.stdout).toContain(ids.a);
    expect(bare.stdout).not.toContain(ids.waiter);
  });

  test('the code as a directory of modules: a mod.fn entry is required from it', async () => {
    const mods = path.join(dir, 'mods');
    fs.mkdirSync(mods, { recursive: true });
    fs.writeFileSync(
      path.join(mods, 'quests.lua'),
      `local M = {}\n${V1.replace(/function (\w+)/g, 'function M.$1')}\nreturn M\n`,
    );
    const rt = await Runtime.open({
      name: 'mods',
      store: path.join(dir, 'store-mods'),
      modulePaths: [mods],
      setup: (r) => {
        r.set('grant', (p) => `${p}+gold`);
        r.set('notify', () => true);
      },
    });
    const id = rt.spawn('quests.quest', { durable: true, args: ['eve'] }).id;
    await rt.close();
    const ok = await cli('replay', path.join(dir, 'store-mods'), mods, '--name', 'mods', '--setup', files.setup);
    expect({ code: ok.code, stdout: ok.stdout }).toEqual({ code: 0, stdout: '' });
    expect(ok.stderr).toContain('1 unfinished durable task replayed; 0 would break');
    fs.writeFileSync(
      path.join(mods, 'quests.lua'),
      fs.readFileSync(path.join(mods, 'quests.lua'), 'utf8').replace('"grant"', '"pay"'),
    );
    const broken = await cli('replay', path.join(dir, 'store-mods'), mods, '--name', 'mods', '--setup', files.setup);
    expect(broken.code).toBe(1);
    expect(broken.stdout).toContain(`mods  ${id}  quests.quest  ERR_NONDETERMINISM`);
  });

  test('a name still in a state file of the first store version is refused, not imported (a write)', async () => {
    const legacy = path.join(dir, 'store', 'legacy.state');
    fs.writeFileSync(legacy, 'LTST\x04');
    try {
      const r = await cli('replay', path.join(dir, 'store'), files.v1, '--name', 'legacy');
      expect(r.code).toBe(1);
      expect(r.stderr).toContain('legacy.state file of a directory store before version 2');
      expect(fs.existsSync(legacy)).toBe(true);
    } finally {
      fs.rmSync(legacy);
    }
  });

  test('usage errors exit 2 saying what is wrong', async () => {
    const r = await cli('replay', path.join(dir, 'store'));
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('replay needs a store and the new code');
    const none = await cli('replay', path.join(dir, 'nowhere'), files.v1);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('no store at');
  });
});

describe('lua-tasks inspect', () => {
  test('lists the names, by pattern and a page at a time', async () => {
    const r = await cli('inspect', path.join(dir, 'store'));
    expect({ code: r.code, stdout: r.stdout }).toEqual({ code: 0, stdout: 'game\nguild\n' });
    expect((await cli('inspect', path.join(dir, 'store'), '--pattern', 'gu*')).stdout).toBe('guild\n');
    expect((await cli('inspect', path.join(dir, 'store'), '--limit', '1', '--after', 'game')).stdout).toBe('guild\n');
    const bad = await cli('inspect', path.join(dir, 'store'), '--pattern', 'a b');
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('names() pattern');
  });

  test("a name's durable tasks, read from their journals while the name is open elsewhere", async () => {
    const held = await open('game');
    try {
      const r = await cli('inspect', path.join(dir, 'store'), 'game');
      expect(r.code).toBe(0);
      const byId = Object.fromEntries(
        r.stdout
          .trim()
          .split('\n')
          .map((l) => [l.split('  ')[0], l]),
      );
      expect(Object.keys(byId).sort()).toEqual([ids.a, ids.b, ids.waiter, ids.quick].sort());
      expect(byId[ids.a]).toMatch(/ {2}waiting FOR until \d{4}-\d\d-\d\dT.* {2}entry quest$/);
      expect(byId[ids.waiter]).toContain('waiting INDEFINITELY  entry waiter');
      expect(byId[ids.quick]).toMatch(/ {2}done at \d{4}-/);
    } finally {
      await held.close();
    }
  });

  test("one task's history, record by record", async () => {
    const r = await cli('inspect', path.join(dir, 'store'), 'game', ids.a);
    expect(r.code).toBe(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines[0]).toBe('#0  start  entry quest  ("ann")');
    expect(lines[1]).toBe('#1  step  tasks.step "grant"  ("ann+gold")');
    expect(lines[2]).toBe('#2  call  a JS call to notify  (true, true)');
    expect(lines[3]).toMatch(/^#3 {2}yield {2}a yield \(FOR\) {2}at \d{4}-.* until \d{4}-/);
    const missing = await cli('inspect', path.join(dir, 'store'), 'game', 'no-such-task');
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('holds no journal of task no-such-task');
  });
});

describePg('the store commands on PostgreSQL', () => {
  const hostFunctions = (r) => {
    r.set('grant', (p) => `${p}+gold`);
    r.set('notify', () => true);
    r.load(V1);
  };
  let db;
  let id;
  beforeAll(async () => {
    db = await createDatabase();
    const store = new PostgresStore({ connectionString: db.url });
    const rt = await Runtime.open({ name: 'game', store, setup: hostFunctions });
    id = rt.spawn('quest', { durable: true, args: ['dee'] }).id;
    await rt.close();
    await store.close();
  });
  afterAll(async () => {
    if (db) await db.drop();
  });

  test('replay reads the journals with scan() and takes no lease; inspect lists names and a history', async () => {
    const store = new PostgresStore({ connectionString: db.url });
    const held = await Runtime.open({ name: 'game', store, setup: hostFunctions }); // its lease meanwhile
    let ok;
    try {
      ok = await cli('replay', db.url, files.v1, '--setup', files.setup);
    } finally {
      await held.close();
      await store.close();
    }
    expect({ code: ok.code, stdout: ok.stdout }).toEqual({ code: 0, stdout: '' });
    const broken = await cli('replay', db.url, files.step, '--setup', files.setup);
    expect(broken.code).toBe(1);
    expect(broken.stdout).toContain(`game  ${id}  quest  ERR_NONDETERMINISM`);
    expect((await cli('inspect', db.url)).stdout).toBe('game\n');
    const history = await cli('inspect', db.url, 'game', id);
    expect(history.stdout.split('\n')[1]).toBe('#1  step  tasks.step "grant"  ("dee+gold")');
    expect(fs.existsSync(marker)).toBe(false);
  });
});
