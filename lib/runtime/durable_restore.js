// SPDX-License-Identifier: MIT
// Runtime.open's restore of durable tasks, and the activation of those it left dormant in the store.
'use strict';

const { NATIVE_SCAN } = require('../store/contract');
const { makeError } = require('../errors');
const { reasonText } = require('./commit_queue');
const { scanRecords, readIndex } = require('./persist');
const { Task, endRetained } = require('./task');

/**
 * What the restore needs of its Runtime (whose fields are private):
 * @typedef {object} RestoreHost
 * @property {object} rt the Runtime (a retained task's Task is of it)
 * @property {Map<string, object|string>} keys idempotency key -> Task, or the id of a dormant task
 * @property {(id: string, status: string, key: string | null) => void} retain a finished task is retained
 *   (the oldest forgotten past durableRetainedMax)
 * @property {(id: string) => boolean} isRetained whether it still is
 * @property {number} retention ms a finished durable task is kept
 * @property {() => number} now the runtime's wall clock, ms
 * @property {() => boolean} closed
 * @property {() => void} restored a durable task was found: close() writes what its restore wrote
 * @property {(entry: string, id: string, name?: string) => object} start starts the task `id` to replay its
 *   journal, labelled `name` (the name it was spawned with, kept in its start record); its Task
 * @property {(id: string, name: string) => void} label a retained task's label, for rt.task(id)
 * @property {(key: string | null, task: object) => void} keep the key names the task while it lives
 * @property {(task: object, err: Error) => void} failed a task could not be restored, or failed replaying
 */

// Every unfinished durable task of a name runs again from its entry,
// replaying its journal, and goes on from where it was; on the directory
// store only those that need to (docs/durable.md#restore-at-open): the
// others stay dormant, known by id, until something needs them.
class DurableRestore {
  #native;
  #name;
  /** @type {RestoreHost} */
  #host;
  #lazy = null; // [native store, name]: the store a dormant task's journal is read from
  #depth = 0; // restores in progress (an activation can start inside another's replay)
  // id -> description of a task this restore reads but has not started yet:
  // a replay that names one (a join of a durable child) starts it first.
  #waiting = new Map();

  constructor(native, name, host) {
    this.#native = native;
    this.#name = name;
    this.#host = host;
  }

  /**
   * Runtime.open's restore; throws what the store's read throws.
   * @param {boolean} lazy whether tasks that need not run now stay dormant (durableRestore: 'lazy')
   */
  async open(store, reader, lazy) {
    const native = this.#native;
    const scan = typeof reader[NATIVE_SCAN] === 'function' ? reader[NATIVE_SCAN]() : null;
    this.#depth++;
    try {
      // 'all' reads every journal (and rewrites the index from them).
      const index = scan && lazy ? readIndex(native, scan, this.#name) : false;
      if (index === false) await scanRecords(native, store, reader, this.#name);
      if (this.#host.closed()) throw makeError('ERR_RUNTIME_CLOSED', 'This Lua runtime is closed.');
      // Before any replay: a restored task may name a dormant one, or one
      // this restore starts after it.
      native.setActivate(DurableRestore.#dispatch);
      if (scan) {
        this.#lazy = scan;
        const [, keys = [], missing = []] = index || [];
        for (let i = 0; i < keys.length; i += 2) this.#host.keys.set(keys[i + 1], keys[i]);
        for (let i = 0; i < missing.length; i += 2) {
          this.#cannot(missing[i], makeError('ERR_STORE_CORRUPT', missing[i + 1]));
        }
      }
      native.pauseCollector(true);
      let retained;
      try {
        retained = this.#startAll(native.restoreTasks());
      } finally {
        if (!this.#host.closed()) native.pauseCollector(false);
      }
      // A name written without an index gets one, with the next write.
      if (scan && index === false && !this.#host.closed()) {
        native.writeIndex(retained.filter((id) => this.#host.isRetained(id)));
      }
    } finally {
      this.#depth--;
      if (!this.#host.closed()) native.restoreEnd();
    }
  }

  // The native side needs the dormant task `id` (named, or its deadline nears).
  static #dispatch = (rt, id) => rt[ACTIVATE](id);

  /**
   * Reads the dormant task `id`'s journal and starts it to replay it; a
   * failure is reported as a failed restore (its records are kept).
   * @param {string} id
   */
  activate(id) {
    if (this.#host.closed()) return;
    const waiting = this.#waiting.get(id);
    if (waiting !== undefined) {
      this.#waiting.delete(id);
      this.#startOne(waiting, []);
      return;
    }
    if (this.#lazy === null) return;
    const native = this.#native;
    this.#depth++;
    try {
      this.#startAll(native.restoreOne(this.#lazy[0], this.#lazy[1], id));
    } catch (e) {
      this.#cannot(id, e);
    } finally {
      this.#depth--;
      if (this.#depth === 0 && !this.#host.closed()) native.restoreEnd();
    }
  }

  /**
   * The dormant task `id` that `key` names, activated: its Task.
   * @throws ERR_STORE_CORRUPT when it could not be restored (reported as such)
   */
  activateKey(key, id) {
    this.activate(id);
    const task = this.#host.keys.get(key);
    if (typeof task !== 'string') return task;
    throw makeError(
      'ERR_STORE_CORRUPT',
      `The durable task ${id} with the key ${JSON.stringify(key)} could not be restored (its records are kept; see 'taskerror'), and no second task takes its key.`,
    );
  }

  // A finished task is kept until its retention ends (its end is on the
  // runtime's clock), else its record goes: whether it is kept.
  #retain(id, status, ended, value, key, name) {
    const host = this.#host;
    if (host.retention === 0 || ended + host.retention <= host.now()) return false;
    const task = new Task(host.rt, id, name);
    if (name !== undefined) host.label(id, name);
    endRetained(task, status, value);
    if (key !== null) host.keys.set(key, task);
    host.retain(id, status, key);
    return true;
  }

  // Each description of restoreTasks(): a finished task retained (or
  // forgotten past its retention), an unfinished one started to replay its
  // journal. Returns the ids of those retained.
  #startAll(tasks) {
    const retained = [];
    // Every finished one first: a replay that joins one finds its end.
    const later = [];
    for (const description of tasks) {
      if (description[1] === null) this.#startOne(description, retained);
      else later.push(description);
    }
    for (const description of later) this.#waiting.set(description[0], description);
    for (const description of later) {
      if (!this.#waiting.delete(description[0])) continue; // started by a replay that named it
      this.#startOne(description, retained);
    }
    return retained;
  }

  #startOne([id, entry, key, status, ended, value, name], retained) {
    const host = this.#host;
    host.restored();
    let task;
    try {
      if (entry === false) throw makeError('ERR_STORE_CORRUPT', key);
      if (entry === null) {
        if (this.#retain(id, status, ended, value, key, name)) retained.push(id);
        else this.#native.forgetDurable(id);
        return;
      }
      task = host.start(entry, id, name);
      this.#native.restoreInbox(id);
    } catch (e) {
      this.#cannot(id, e);
      return;
    }
    host.keep(key, task);
    task.result.catch(() => {}); // its outcome is the listeners' (taskerror), as for any task nobody awaits
  }

  // Its records stay: code that can run it may be deployed.
  #cannot(id, e) {
    const why = `The durable task ${id} of "${this.#name}" could not be restored: ${reasonText(e)}. Its records are kept.`;
    this.#host.failed({ id, restored: false }, makeError(e.code || 'ERR_STORE_CORRUPT', why, { cause: e }));
  }
}

// The Tasks of restored durable tasks: nobody awaits them, so their failures
// are reported as an unowned task's (docs/durable.md#restore-at-open; the
// dashboard asks too). A WeakSet of the module's: it holds no Task alive.
const restoredTasks = new WeakSet();

/** Whether `task` is a durable task restored at open (or activated since). */
function wasRestored(task) {
  return restoredTasks.has(task);
}

/** Marks `task` as restored (Runtime's start of it, before it can end). */
function markRestored(task) {
  restoredTasks.add(task);
}

/** The Runtime method the native side's activation calls (a symbol: not public API). */
const ACTIVATE = Symbol('lua-tasks.activate');

module.exports = { DurableRestore, ACTIVATE, wasRestored, markRestored };
