// SPDX-License-Identifier: MIT
// The command line's store commands: `lua-tasks inspect` (names, tasks, histories) and `lua-tasks replay` (the deploy check).
'use strict';

// Both read a store and never write it: no name is acquired (no lease), so
// they work while the names are open elsewhere (docs/operations.md).

const fs = require('node:fs');
const path = require('node:path');
const { checkName } = require('./store/contract');
const { openDecoder } = require('./runtime/inspect');
const { listTasks } = require('./runtime/task_list');

const NAMES_PAGE = 1000;

// A store from the command line: a postgres:// URL, else a directory that
// must exist (inspecting a path that is not a store creates nothing).
function openStore(where, opts, fail) {
  if (/^postgres(ql)?:\/\//.test(where)) {
    const { PostgresStore } = require('./store/postgres');
    const options = { connectionString: where };
    if (opts.schema !== undefined) options.schema = opts.schema;
    return new PostgresStore(options);
  }
  if (!fs.existsSync(path.join(where, 'lua-tasks.sqlite'))) {
    fail(`no store at ${where} (a directory store holds lua-tasks.sqlite; or give a postgres:// URL)`);
  }
  const { DirectoryStore } = require('./store/directory');
  return new DirectoryStore(where);
}

function positive(opts, key, fail) {
  if (opts[key] === undefined) return undefined;
  const n = Number(opts[key]);
  if (!Number.isInteger(n) || n < 1) fail(`--${key} must be a whole number of at least 1, got "${opts[key]}"`);
  return n;
}

// Every name of the store matching `pattern`, page by page.
async function* allNames(store, pattern) {
  for (let after = ''; ;) {
    const page = await store.names(pattern, after, NAMES_PAGE);
    yield* page;
    if (page.length < NAMES_PAGE) return;
    after = page[page.length - 1];
  }
}

function time(d) {
  return d instanceof Date ? d.toISOString() : '';
}

// One history record on one line.
function recordLine(r) {
  const parts = [`#${r.seq}`, r.kind];
  if (r.what && r.kind !== 'start' && r.kind !== 'end') parts.push(r.what);
  if (r.kind === 'start') parts.push(`entry ${r.entry}${r.key ? ` key ${JSON.stringify(r.key)}` : ''}`);
  if (r.kind === 'end') parts.push(`${r.status} at ${time(r.ended)}`);
  if (r.instruction !== undefined) {
    parts.push(`at ${time(r.start)}${r.deadline ? ` until ${time(r.deadline)}` : ''}`);
  }
  if (r.landed !== undefined) parts.push(`after ${r.landed} COMMIT(s) that landed`);
  const values = r.args || r.values;
  if (values && values.length > 0) parts.push(`(${values.join(', ')})`);
  if (r.error) parts.push(`does not read: ${r.error}`);
  return parts.join('  ');
}

// The durable tasks of a name, a line each, every page of listTasks's.
async function nameTasks(store, name) {
  const lines = [];
  for (let after = ''; after !== null;) {
    const page = await listTasks(store, { name, after, limit: 1000 });
    for (const t of page.tasks) {
      const cols = [t.id];
      if (t.status === 'waiting') {
        cols.push(`waiting ${t.waiting.instruction}${t.waiting.until ? ` until ${time(t.waiting.until)}` : ''}`);
      } else if (t.ended) {
        cols.push(`${t.status} at ${time(t.ended)}`);
      } else {
        cols.push(t.status);
      }
      if (t.entry !== undefined) cols.push(`entry ${t.entry}`);
      if (t.name !== undefined) cols.push(`name ${JSON.stringify(t.name)}`);
      if (t.error !== undefined) cols.push(`does not read: ${t.error}`);
      lines.push(cols.join('  '));
    }
    after = page.next;
  }
  return lines;
}

/**
 * lua-tasks inspect <store> [name] [task].
 * @returns {Promise<number>} the exit code
 */
async function inspect(argv, parse, help, fail) {
  const { pos, opts } = parse(argv, 'inspect');
  if (opts.help) {
    console.log(help);
    return 0;
  }
  const [where, name, id, ...extra] = pos;
  if (!where) fail('inspect needs a store: a directory or a postgres:// URL (see lua-tasks inspect --help)');
  if (extra.length > 0) fail(`inspect takes a store, a name and a task id; unexpected "${extra[0]}"`);
  const limit = positive(opts, 'limit', fail);
  const store = openStore(where, opts, fail);
  try {
    if (name === undefined) {
      const page = await store.names(opts.pattern ?? '*', opts.after ?? '', limit ?? NAMES_PAGE);
      for (const n of page) console.log(n);
      return 0;
    }
    checkName(name);
    if (id === undefined) {
      for (const line of await nameTasks(store, name)) console.log(line);
      return 0;
    }
    const decoder = openDecoder();
    try {
      const { history, skipped } = await decoder.history(store, name, id);
      if (history.length === 0) {
        process.stderr.write(`lua-tasks: "${name}" holds no journal of task ${id}\n`);
        return 1;
      }
      history.forEach((r, i) => {
        console.log(recordLine(r));
        if (i === 0 && skipped > 0) console.log(`... ${skipped} records not shown`);
      });
      return 0;
    } finally {
      decoder.close();
    }
  } finally {
    await store.close();
  }
}

// --setup's module: a function (rt) => void, or an object with a setup one.
function loadSetup(file, fail) {
  let mod;
  try {
    mod = require(path.resolve(file));
  } catch (e) {
    fail(`cannot load --setup ${file}: ${e.message}`);
  }
  const setup = typeof mod === 'function' ? mod : mod && mod.setup;
  if (typeof setup !== 'function') fail(`--setup ${file} must export a function (rt) => void (or { setup })`);
  return setup;
}

/**
 * lua-tasks replay <store> <code>.
 * @returns {Promise<number>} the exit code: 1 if a task would break, else 0
 */
async function replay(argv, parse, help, fail) {
  const { pos, opts } = parse(argv, 'replay');
  if (opts.help) {
    console.log(help);
    return 0;
  }
  const [where, codePath, ...extra] = pos;
  if (!where || !codePath) fail('replay needs a store and the new code (see lua-tasks replay --help)');
  if (extra.length > 0) fail(`replay takes a store and the code; unexpected "${extra[0]}"`);
  if (opts.name !== undefined) checkName(opts.name);
  const how = { options: {} };
  let stat;
  try {
    stat = fs.statSync(codePath);
  } catch (e) {
    fail(`cannot read ${codePath}: ${e.message}`);
  }
  if (stat.isDirectory()) {
    how.modulePaths = [path.resolve(codePath)];
  } else {
    how.code = fs.readFileSync(codePath, 'utf8');
    how.codeName = path.basename(codePath);
  }
  if (opts.setup !== undefined) how.setup = loadSetup(opts.setup, fail);
  if (opts.libs !== undefined) {
    how.options.libs = opts.libs === 'safe' || opts.libs === 'all' ? opts.libs : opts.libs.split(',');
  }
  const timeout = positive(opts, 'task-timeout', fail);
  if (timeout !== undefined) how.options.taskTimeout = timeout;
  const { replayName } = require('./runtime/replay');
  const store = openStore(where, opts, fail);
  let replayed = 0;
  let broken = 0;
  try {
    const names = opts.name !== undefined ? [opts.name] : allNames(store, '*');
    for await (const name of names) {
      const { tasks } = await replayName(store, name, how);
      for (const t of tasks) {
        replayed++;
        if (t.outcome === 'ok') continue;
        broken++;
        console.log(`${name}  ${t.id}  ${t.entry || '?'}  ${t.code}: ${t.message}`);
      }
    }
  } finally {
    await store.close();
  }
  const summary = `${replayed} unfinished durable task${replayed === 1 ? '' : 's'} replayed; ${broken} would break`;
  process.stderr.write(`lua-tasks: ${summary}\n`);
  return broken > 0 ? 1 : 0;
}

module.exports = { inspect, replay, recordLine };
