// SPDX-License-Identifier: MIT
// Runtime.open's restore of durable tasks, and the activation of those it left dormant in the store.
'use strict';

const { NATIVE_SCAN, SPACES } = require('../store/contract');
const { makeError } = require('../errors');
const { reasonText } = require('./commit_queue');
const { scanRecords, readIndex, readFailed } = require('./persist');
const { Task, endRetained, endTask } = require('./task');
const { END, INDEX_MARK_KEY } = require('./task_codes');
const { BEFORE_MARK } = require('./task_list');
const { readTasks } = require('./task_reads');

// Dormant tasks read from an asynchronous store in one query, at most.
const READ_BATCH = 500;
// Its retries after a failed read (a lost connection): from the first to the longest, ms.
const RETRY_FIRST_MS = 50;
const RETRY_LONGEST_MS = 2000;
// Records read a page at a time at open.
const PAGE = 10000;

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
 * @property {(entry: string, id: string, name?: string, task?: object) => object} start starts the task `id`
 *   to replay its journal, labelled `name` (the name it was spawned with, kept in its start record), as
 *   `task` if given (the Task its key was answered with while it was read); its Task
 * @property {(id: string, name: string) => void} label a retained task's label, for rt.task(id)
 * @property {(key: string | null, task: object) => void} keep the key names the task while it lives
 * @property {(task: object, err: Error) => void} failed a task could not be restored, or failed replaying
 */

// Every unfinished durable task of a name runs again from its entry,
// replaying its journal, and goes on from where it was; with the name's
// index, only those that need to (docs/durable.md#restore-at-open): the
// others stay dormant, known by id, until something needs them. The
// directory store reads a dormant task's journal inside the call that names
// it; a store with scan() reads it asynchronously, the task meanwhile among
// the native side's activations.
class DurableRestore {
  #native;
  #name;
  /** @type {RestoreHost} */
  #host;
  #lazy = null; // [native store, name]: the store a dormant task's journal is read from
  #store = null; // the store read asynchronously, if so
  #depth = 0; // restores in progress (an activation can start inside another's replay)
  // id -> { promise, resolve, task? } of a task being read asynchronously;
  // task: the Task its idempotency key was answered with meanwhile.
  #reading = new Map();
  #queue = []; // ids to read, in the order named
  #draining = false;
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
   * @param {string|null} mark with a store read asynchronously, the payload its index's mark must hold
   *   for the index to be trusted (else null): the last holder's, who kept it (persist.js)
   */
  async open(store, reader, lazy, mark) {
    const native = this.#native;
    const scan = typeof reader[NATIVE_SCAN] === 'function' ? reader[NATIVE_SCAN]() : null;
    this.#depth++;
    try {
      // 'all' reads every journal (and rewrites the index from them).
      let index = false;
      if (scan && lazy) index = readIndex(native, scan, this.#name);
      else if (mark !== null && lazy) index = await this.#readIndex(store, mark);
      if (index === false) await scanRecords(native, store, reader, this.#name);
      if (this.#host.closed()) throw makeError('ERR_RUNTIME_CLOSED', 'This Lua runtime is closed.');
      // Before any replay: a restored task may name a dormant one, or one
      // this restore starts after it.
      native.setActivate(DurableRestore.#dispatch);
      if (mark !== null) this.#store = store;
      if (scan || mark !== null) {
        this.#lazy = scan;
        const [, keys = [], missing = []] = index || [];
        for (let i = 0; i < keys.length; i += 2) this.#host.keys.set(keys[i + 1], keys[i]);
        for (let i = 0; i < missing.length; i += 2) {
          this.#cannot(missing[i], makeError('ERR_STORE_CORRUPT', missing[i + 1]));
        }
      }
      native.pauseCollector(true);
      let retained;
      let described;
      try {
        described = native.restoreTasks();
        retained = this.#startAll(described);
      } finally {
        if (!this.#host.closed()) native.pauseCollector(false);
      }
      // A name written without an index gets one, with the next write; an
      // index read asynchronously is marked as this holder's.
      if (mark !== null && index === false) await this.#dropStale(store, new Set(described.map((d) => d[0])));
      if ((scan || mark !== null) && !this.#host.closed()) {
        if (index === false) native.writeIndex(retained.filter((id) => this.#host.isRetained(id)));
        else if (mark !== null) native.writeIndex(null);
      }
    } finally {
      this.#depth--;
      if (!this.#host.closed()) native.restoreEnd();
    }
  }

  // Before the index is written again from the journals: the entries of
  // tasks with no journal, which a holder that kept no index left behind
  // (it ended them), go; those of this run's tasks stay.
  async #dropStale(store, known) {
    for (let after = ''; ;) {
      let keys;
      try {
        ({ keys } = await store.scan(this.#name, SPACES.index, after, PAGE));
      } catch (e) {
        throw readFailed(e, this.#name);
      }
      if (this.#host.closed()) return;
      for (const id of keys) {
        const stale = id !== INDEX_MARK_KEY && !known.has(id) && this.#host.rt.task(id) === undefined;
        if (stale) this.#native.forgetDurable(id);
      }
      if (keys.length < PAGE) return;
      after = keys[keys.length - 1];
    }
  }

  // The native side needs the dormant task `id` (named, or its deadline nears).
  static #dispatch = (rt, id) => rt[ACTIVATE](id);

  // The name's index from a store's pages: false when it is not complete
  // or was not kept by the last holder (its mark says who: a holder of an
  // older version keeps no index), else what readIndex answers.
  async #readIndex(store, mark) {
    const native = this.#native;
    const name = this.#name;
    try {
      const first = await store.scan(name, SPACES.index, BEFORE_MARK, 1);
      if (first.keys[0] !== INDEX_MARK_KEY || native.indexMark(first.values[0]) !== mark) return false;
      // Every inbox first (which tasks have messages), then every entry.
      // As binary COPY rows where the store streams them (PostgresStore),
      // else a page at a time, the next asked for before this one is fed.
      for (const space of [SPACES.inbox, SPACES.index]) {
        if (typeof store.copySpace === 'function') {
          await store.copySpace(name, space, (chunk) => native.indexFeedCopy(space, chunk));
          native.indexFeedCopy(space, null);
          continue;
        }
        for (let page = store.scan(name, space, '', PAGE); page !== null;) {
          const { keys, values } = await page;
          page = keys.length < PAGE ? null : store.scan(name, space, keys[keys.length - 1], PAGE);
          page?.catch(() => {}); // awaited next, unless this page's feed throws
          if (keys.length > 0) native.indexFeed(space, keys, values);
        }
      }
      // The journals of the tasks that run now.
      const now = native.indexNow();
      for (let i = 0; i < now.length; i += READ_BATCH) {
        const rows = await readTasks(store, name, now.slice(i, i + READ_BATCH), false);
        if (rows.journal.keys.length > 0) native.restoreFeed(SPACES.journal, rows.journal.keys, rows.journal.values);
      }
      return native.indexFinish();
    } catch (e) {
      throw readFailed(e, name);
    }
  }

  /**
   * Reads the dormant task `id`'s journal and starts it to replay it (at
   * once, or once a store read asynchronously answers); a failure is
   * reported as a failed restore (its records are kept).
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
    if (this.#store !== null) {
      this.#queueRead(id);
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
    if (this.#store !== null) {
      // Being read: its Task now, the same one its restore starts. Else it
      // could not be restored (and was reported): no second read.
      const reading = this.#native.activate(id) ? this.#reading.get(id) : undefined;
      if (reading !== undefined) {
        if (reading.task === undefined) reading.task = new Task(this.#host.rt, id);
        this.#host.keys.set(key, reading.task);
        return reading.task;
      }
    } else {
      this.activate(id);
    }
    const task = this.#host.keys.get(key);
    if (typeof task !== 'string') return task;
    throw makeError(
      'ERR_STORE_CORRUPT',
      `The durable task ${id} with the key ${JSON.stringify(key)} could not be restored (its records are kept; see 'taskerror'), and no second task takes its key.`,
    );
  }

  /**
   * Resolves once the task `id`, if it is being read from the store, is
   * restored (or could not be): what a call answered for it meanwhile then
   * runs (rt.resume, rt.send, rt.cancel answered 3 by the native side).
   * @returns {Promise<void>|null} null when it is not being read
   */
  restored(id) {
    const reading = this.#reading.get(id);
    return reading ? reading.promise : null;
  }

  /**
   * Makes `call` once the task `id`, being read, is restored (the native
   * side answered the call meanwhile).
   * @returns {Promise<*>} what `call` returns (or throws), or undefined when
   *   the runtime closed first and it was not made
   */
  after(id, call) {
    return this.restored(id).then(() => (this.#host.closed() ? undefined : call()));
  }

  /**
   * Resolves once every task being read now is restored (or could not be).
   * @returns {Promise<void>|null} null when none is being read
   */
  settled() {
    if (this.#reading.size === 0) return null;
    return (async () => {
      while (this.#reading.size > 0) await Promise.all([...this.#reading.values()].map((r) => r.promise));
    })();
  }

  #queueRead(id) {
    if (this.#reading.has(id)) return;
    let resolve;
    const promise = new Promise((r) => (resolve = r));
    this.#reading.set(id, { promise, resolve, task: undefined });
    this.#queue.push(id);
    if (!this.#draining) this.#drain();
  }

  // One batch of ids read at a time, in the order they were named; a failed
  // read is tried again (the store's outage) until it lands or the runtime closes.
  async #drain() {
    this.#draining = true;
    try {
      for (let delay = RETRY_FIRST_MS; this.#queue.length > 0 && !this.#host.closed();) {
        const ids = this.#queue.slice(0, READ_BATCH);
        let rows;
        try {
          rows = await readTasks(this.#store, this.#name, ids, true);
        } catch (e) {
          if (e && e.code === 'ERR_STORE_CORRUPT') {
            this.#queue.splice(0, ids.length);
            for (const id of ids) this.#ended(id, e);
            continue;
          }
          await new Promise((r) => setTimeout(r, delay));
          delay = Math.min(delay * 2, RETRY_LONGEST_MS);
          continue;
        }
        delay = RETRY_FIRST_MS;
        this.#queue.splice(0, ids.length);
        if (!this.#host.closed()) this.#startRead(ids, rows);
      }
    } finally {
      this.#draining = false;
      if (this.#host.closed()) {
        // Nothing more is read: what waits for a read goes on (and finds the runtime closed).
        this.#queue.length = 0;
        for (const r of this.#reading.values()) r.resolve();
        this.#reading.clear();
      }
    }
  }

  // The records of `ids` read: each is started to replay them.
  #startRead(ids, { journal, inbox }) {
    const native = this.#native;
    this.#depth++;
    try {
      if (journal.keys.length > 0) native.restoreFeed(SPACES.journal, journal.keys, journal.values);
      if (inbox.keys.length > 0) native.restoreFeed(SPACES.inbox, inbox.keys, inbox.values);
      for (const id of ids) {
        let failure;
        try {
          const [description] = native.restoreDescribe(id);
          const reading = this.#reading.get(id);
          if (reading && reading.task !== undefined) description[7] = reading.task;
          this.#startAll([description]);
        } catch (e) {
          failure = e;
        }
        this.#ended(id, failure);
      }
    } finally {
      this.#depth--;
      if (this.#depth === 0 && !this.#host.closed()) native.restoreEnd();
    }
  }

  // The read of `id` is over: started, or `failure` (reported).
  #ended(id, failure) {
    if (failure !== undefined) this.#cannot(id, failure);
    const reading = this.#reading.get(id);
    this.#reading.delete(id);
    if (!this.#host.closed()) this.#native.activated(id);
    if (reading !== undefined) reading.resolve();
  }

  // A listener's throw is its own bug, thrown as an emitter's would be (an
  // uncaught exception), never into a restore under way: that would leave
  // the tasks of its batch being read for ever.
  #report(task, err) {
    try {
      this.#host.failed(task, err);
    } catch (e) {
      process.nextTick(() => {
        throw e;
      });
    }
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

  #startOne([id, entry, key, status, ended, value, name, made], retained) {
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
      task = host.start(entry, id, name, made);
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
    const err = makeError(e.code || 'ERR_STORE_CORRUPT', why, { cause: e });
    this.#report({ id, restored: false }, err);
    // The Task its key was answered with while it was read: it fails so.
    const made = this.#reading.get(id)?.task;
    if (made !== undefined) endTask(made, END.failed, err);
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
