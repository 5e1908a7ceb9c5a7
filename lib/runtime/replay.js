// SPDX-License-Identifier: MIT
// The deploy check: a name's stored unfinished durable journals replayed against new code, nothing run live, nothing written.
'use strict';

// How (docs/operations.md#a-deploy-check): a runtime of its own, in the
// native side's replay-only mode (Replayer::set_replay_only), is given the
// new code and the name's journals, read with the store's scan() (no lease
// taken: the name may be open elsewhere meanwhile). Each unfinished task
// runs again from its entry: JS calls, steps, clock reads and waits are
// answered from its journal; where the journal ends the task stops (it
// ends cancelled) before anything runs live. A task whose replay meets
// other code fails ERR_NONDETERMINISM, as it would at the next
// Runtime.open; one whose code fails otherwise (a missing function, an
// error) fails with that. Nothing is written: the runtime has no store to
// write to, and its journals are not told to write.

const fs = require('node:fs');
const path = require('node:path');
const binding = require('../binding');
const { normalizeOptions } = require('./options');
const { installModules } = require('./modules');
const { restore } = require('./persist');
const { END, startKey, startEnd } = require('./task_codes');
const { SPACES } = require('../store/contract');
const { invalidType } = require('../errors');

const PAGE = 10000; // records one scan of the store reads
const DEFAULT_TASK_TIMEOUT = 10000; // CPU ms a replay may take: code that loops for ever is killed

// What a replay's setup may call (lib/cli.js hands it to --setup): the
// Runtime methods that give code its globals.
function setupApi(native) {
  return {
    set(name, value) {
      if (typeof name !== 'string') throw invalidType('name', 'a string', name);
      native.set(name, value);
    },
    get(name) {
      if (typeof name !== 'string') throw invalidType('name', 'a string', name);
      return native.get(name);
    },
    load(source, options) {
      if (typeof source !== 'string') throw invalidType('source', 'a string of Lua source', source);
      return native.load(source, options && options.name);
    },
  };
}

// Feeds every journal record of `name` to the native restore; returns the
// count of records per task id.
async function feedJournals(native, store, name) {
  const counts = new Map();
  for (let after = ''; ;) {
    const { keys, values } = await store.scan(name, SPACES.journal, after, PAGE);
    if (keys.length > 0) native.restoreFeed(SPACES.journal, keys, values);
    for (const k of keys) {
      const id = k.slice(0, k.lastIndexOf('/'));
      counts.set(id, (counts.get(id) || 0) + 1);
    }
    if (keys.length < PAGE) return counts;
    after = keys[keys.length - 1];
  }
}

// A task's outcome from how it ended.
function outcomeOf(kind, value) {
  if (kind === END.cancelled || kind === END.done) return { outcome: 'ok' };
  const code = (value && value.code) || 'ERR_LUA_RUNTIME';
  const message = value && value.message ? value.message : String(value);
  return { outcome: code === 'ERR_NONDETERMINISM' ? 'diverged' : 'failed', code, message };
}

/**
 * Replays the unfinished durable tasks of `name` against new code.
 * @param {object} store a store with scan(name, space, after, limit) (and load(name), reader(name) if it has them)
 * @param {string} name
 * @param {{ code?: string, codeName?: string, modulePaths?: string[], setup?: (rt: object) => unknown,
 *   options?: object }} how `code`: Lua source run at the top level first (its chunk name `codeName`);
 *   `modulePaths`: directories `require` and `mod.fn` entries read; `setup(rt)`: gives the code its JS
 *   globals (rt.set, rt.get, rt.load; never called during a replay); `options`: the runtime's options
 * @returns {Promise<{ name: string, tasks: { id: string, entry: string|null, records: number,
 *   outcome: 'ok'|'diverged'|'failed', code?: string, message?: string }[] }>}
 */
async function replayName(store, name, how = {}) {
  const { code, codeName, modulePaths, setup, options = {} } = how;
  const opts = normalizeOptions({ taskTimeout: DEFAULT_TASK_TIMEOUT, print: () => {}, ...options, modulePaths });
  const ends = new Map(); // key -> resolve(kind, value)
  const owner = {};
  const native = new binding.NativeRuntime(
    { ...opts, hasStore: true },
    opts.print,
    (_, key, kind, value) => {
      const settle = ends.get(key);
      if (settle) settle(kind, value);
    },
    owner,
    () => {}, // no COMMIT is ever written: a replay answers them from the journal
  );
  const tasks = [];
  try {
    native.setDurable(true, false, false);
    native.setReplayOnly(true);
    installModules(native, opts);
    if (typeof store.reader === 'function' && typeof store.write === 'function') {
      try {
        native.setStoreReader(store.reader(name)); // tasks.store reads what was committed
      } catch {
        // A store whose reader needs the name's lease (PostgreSQL): tasks.store is not read.
      }
    }
    // A directory store imports a <name>.state file of its version 1 at the
    // name's first load: a write this check must not make.
    if (typeof store.dir === 'string' && fs.existsSync(path.join(store.dir, `${name}.state`))) {
      throw new Error(
        `"${name}" has a ${name}.state file of a directory store before version 2, imported at its next open: open it once (Runtime.open), then check it.`,
      );
    }
    if (typeof store.load === 'function') {
      const state = await store.load(name);
      if (state) await restore(native, state, name, `the store's load("${name}")`);
    }
    if (code !== undefined) native.load(code, codeName);
    if (setup) await setup(setupApi(native));
    const counts = await feedJournals(native, store, name);
    const out = [undefined];
    const waits = [];
    for (const [id, entry, why] of native.restoreTasks()) {
      if (entry === null) continue; // finished and retained: nothing to replay
      const row = { id, entry: typeof entry === 'string' ? entry : null, records: counts.get(id) || 0 };
      tasks.push(row);
      if (entry === false) {
        Object.assign(row, { outcome: 'failed', code: 'ERR_STORE_CORRUPT', message: why });
        continue;
      }
      let started;
      try {
        out[0] = undefined;
        started = native.start(entry, [], out, { id });
      } catch (e) {
        Object.assign(row, outcomeOf(END.failed, e));
        continue;
      }
      const kind = startEnd(started);
      if (kind !== -1) {
        Object.assign(row, outcomeOf(kind, out[0]));
        continue;
      }
      // Still going (a preempted replay): its end comes through the listener.
      waits.push(
        new Promise((resolve) => {
          ends.set(startKey(started), (k, v) => resolve(Object.assign(row, outcomeOf(k, v))));
        }),
      );
    }
    await Promise.all(waits);
  } finally {
    native.close();
  }
  return { name, tasks };
}

module.exports = { replayName };
