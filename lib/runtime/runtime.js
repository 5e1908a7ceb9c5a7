// SPDX-License-Identifier: MIT
// Runtime: one Lua state on this thread's event loop, and the tasks started from JS.
'use strict';

const { EventEmitter } = require('node:events');
const binding = require('../binding');
const { CommitQueue, reasonText } = require('./commit_queue');
const { RestoredCalls } = require('./restored_calls');
const { TaskIds } = require('./task_ids');
const { makeError, typeName, invalidType, AbortError } = require('../errors');
const { PERSIST, normalizeOptions, clockOffsetOf, checkSpawnOptions } = require('./options');
const { installModules } = require('./modules');
const { ROUTE, taskAddress, installAddresses } = require('./address');
const { routeOf } = require('../resources/bridge');
const { Task, endTask, kTaskInfo, taskSnapshot, cancelledError, isAbortSignal } = require('./task');
const { inspectTask } = require('./inspect');
const { DurableKeys, DURABLE_KEY } = require('./durable_keys');
const { END, ENDED_KEPT, AFTER_RESTORE, startKey, startEnd, stateStatus } = require('./task_codes');
const { openStore, restore } = require('./persist');
const { DurableRestore, ACTIVATE, wasRestored, markRestored } = require('./durable_restore');
const { RuntimeTelemetry } = require('../telemetry/runtime');

function checkFn(fn) {
  if (typeof fn !== 'string' && typeof fn !== 'function') {
    throw invalidType('fn', "a global name, a 'module.fn' path or a Lua function", fn);
  }
}

/**
 * One Lua 5.4 state on this thread's event loop. Runtimes share nothing.
 * Close what you open: `close()` frees the state at once; the garbage
 * collector only frees a runtime nothing can reach any more.
 *
 * Events: 'taskdone' (task, value) for tasks started from JS; 'taskcancel'
 * (task, error) for tasks started from JS that were cancelled (by rt.cancel,
 * task.cancel, their signal, tasks.cancel in Lua or close), with the error
 * their result rejects with; 'taskerror'
 * (task or { id }, error) for every task that fails, and ({ id: null,
 * callback: true }, error) for a Lua function handed to JS as a callback that
 * fails when JS calls it from the loop (no Lua caller to raise to). Such a
 * failure, or a Lua-started task's, while no 'taskerror' listener is attached
 * is reported with process.emitWarning, never dropped.
 */

class Runtime extends EventEmitter {
  #native;
  #idPrefix; // a task's id is this + its key in 13 base-36 digits (as the native side writes it)
  #ids; // TaskIds: ids from keys and back
  #startOut = [undefined]; // see start()
  #tasks = new Map(); // key -> Task, for tasks started from JS
  #early = new Map(); // key -> [kind, value] for tasks that ended inside start()
  #closed = false;
  #cancelReasons = new Map();
  #aborted = new Set(); // ids being cancelled by their AbortSignal
  #labels = new Map(); // id -> { name?, meta? } of live spawned tasks given either
  #endedLabels = new Map(); // the same for the last ENDED_KEPT that ended: rt.task(id) knows as many ended tasks
  #name = null;
  #commits = null; // the CommitQueue of a runtime with a store
  #store = null; // that store (rt.inspect reads journals from it)
  #lease = null; // the store's lease on #name, released once the last write settles
  #closing = null; // what close() returns
  #durableKeys = new DurableKeys(0, Infinity, () => {}); // durable tasks by key, finished ones retained
  #clockOffsetMs = 0; // added to Date.now() for the runtime's wall clock (setClockOffset)
  #hasDurable = false; // a durable task was started or restored: close() writes their records first
  #restoreFailures = 0; // restored tasks that failed or could not be restored (stats())
  #heldReports = null; // while Runtime.open restores: failures reported once it has resolved
  #durable = false; // the store keeps journals and inboxes (its spaces include 2 and 3)
  #restorer = null; // the DurableRestore of a runtime with durable tasks: activates dormant ones
  #calls; // RestoredCalls: the embedder's calls on a task being read, and the durable calls' answers
  #tel = null; // RuntimeTelemetry with the telemetry option (docs/operations.md#metrics-and-traces)

  /**
   * @param {object} [options]
   * @param {'safe'|'all'|string[]} [options.libs='safe'] which standard libraries Lua can use
   * @param {number} [options.memoryLimit=0] bytes the Lua state may hold (0 = no limit)
   * @param {number} [options.conversionLimit] bytes one conversion between JS and Lua may produce
   *   (0 = no cap); default 4 x memoryLimit, or a quarter of V8's heap limit without one
   * @param {(line: string) => void} [options.print] receives each line Lua prints (default: stdout)
   * @param {boolean} [options.keepAlive=true] whether timed waits keep the process alive
   * @param {Object<string, string|object>} [options.modules] modules for `require`: Lua source, or a value
   * @param {number} [options.timeSlice] ms a task may run before it is made to yield (as IMMEDIATE)
   * @param {number} [options.taskTimeout] CPU ms a task (or a call from JS) may use before it is killed
   * @param {boolean} [options.trustedObjects=false] Lua reads JS object fields as JS does (getters,
   *   prototype chain, `constructor`): only for Lua code trusted as much as the host's JS (docs/security.md)
   * @param {string[]} [options.modulePaths] directories `require` may read .lua files from
   * @param {object} [options.resources] a Resources object: Lua may require resource, index and namazu.* (docs/resources.md)
   * @param {string} [options.timeZone] IANA zone for UNTIL_NEXT without a zone of its own (default: the process's)
   * @param {number} [options.clockOffsetMs=0] ms added to this process's wall clock for UNTIL_TIME,
   *   UNTIL_NEXT, durable deadlines and os.time (a fleet member sets PostgreSQL's clock's)
   * @param {number} [options.mailboxLimit=1000] messages a task's mailbox holds (rt.send, tasks.send) before a send throws ERR_MAILBOX_FULL
   * @param {number} [options.maxValueBytes] largest encoded value a script may persist (default memoryLimit, else 2^30)
   * @param {number} [options.maxPendingBytes] tasks.store bytes that may wait for a COMMIT (default memoryLimit, else no bound)
   * @param {number} [options.maxJournalBytes] bytes of one run of a durable journal, 32 a record besides its payload (default memoryLimit, else 64 MiB)
   * @param {boolean|object} [options.telemetry=false] metrics and spans through OpenTelemetry: true, or { meterProvider?, tracerProvider? }
   * @throws {TypeError|RangeError} for a bad option
   */
  constructor(options) {
    super();
    const opts = normalizeOptions(options);
    if (opts.clockOffsetMs !== undefined) this.#clockOffsetMs = opts.clockOffsetMs;
    // The listener captures nothing: the native side holds it strongly and
    // holds this Runtime only weakly while no task waits on the loop, so an
    // idle runtime nothing references can be collected.
    const persist = options && options[PERSIST];
    this.#native = new binding.NativeRuntime(
      {
        ...opts,
        hasStore: Boolean(persist),
        storeCacheBytes: persist ? persist.storeCacheBytes : undefined,
        storeLimits: persist ? persist.storeLimits : undefined,
      },
      opts.print,
      Runtime.#dispatchEnd,
      this,
      Runtime.#dispatchCommit,
    );
    this.#idPrefix = this.#native.idPrefix();
    this.#ids = new TaskIds(this.#idPrefix);
    this.#tel = RuntimeTelemetry.of(opts.telemetry, this, this.#native, persist ? persist.name : null);
    if (persist) {
      this.#name = persist.name;
      this.#store = persist.store;
      this.#lease = persist.lease;
      this.#commits = new CommitQueue(
        this.#native,
        persist.store,
        persist.name,
        persist.storeTimeout,
        persist.lease,
        (e) => this.#storeHealth(e),
        this.#tel,
      );
      if (persist.reader) this.#native.setStoreReader(persist.reader);
      this.#durableKeys = new DurableKeys(
        persist.durableRetention,
        persist.durableRetainedMax,
        (id) => {
          this.#endedLabels.delete(id);
          this.#native.forgetDurable(id);
        },
        (id) => this.#ids.refOf(id),
        (ref) => this.#ids.idOfRef(ref),
      );
      this.#durable = persist.durable;
      const skipMissed = persist.durableCatchUp === 'skip';
      this.#native.setDurable(persist.durable, persist.durableRetention > 0, skipMissed, ...persist.indexing);
    }
    this.#calls = new RestoredCalls(() => this.#restorer, this.#commits);
    if (!opts.keepAlive) this.#native.keepAlive(false);
    installModules(this.#native, opts);
    // A named runtime's tasks have addresses; Lua resumes another runtime's
    // through its resources, or the fleet member hosting it.
    if (persist) installAddresses(this.#native, persist.name, routeOf(opts.resources) || options[ROUTE] || null);
  }

  static #dispatchEnd = (rt, key, kind, value) => rt.#onEnd(key, kind, value);

  // A task yielded COMMIT: the queue writes a snapshot and wakes it through settle.
  // Key 0: durable tasks journaled records, to be written soon.
  static #dispatchCommit = (rt, durable, settle, key, token) => {
    if (key === 0) rt.#commits.flushSoon();
    else rt.#commits.request({ settle, key, token, durable: durable === true });
  };

  // The store's writes fail transiently (a durable committer waits for them
  // to work again), or work again: 'storehealth' (docs/persistence.md#faults).
  #storeHealth(event) {
    if (this.listenerCount('storehealth') > 0) this.emit('storehealth', event);
    else if (!event.ok) {
      process.emitWarning(
        `lua-tasks: the store's writes of "${this.#name}" fail (${event.error && event.error.message}); durable tasks wait for it and retry.`,
        { code: 'LUA_TASKS_STORE' },
      );
    }
  }

  /**
   * Creates a runtime with a persistent `tasks.state`, restored from the
   * store's last snapshot for this name (a new name starts empty). The
   * runtime owns the name until it is closed: a second open of it, here or
   * in another process, fails with ERR_STORE_LOCKED.
   * @param {RuntimeOptions & { name: string, store: string | Store, storeTimeout?: number,
   *   storeCacheBytes?: number }} options
   * @returns {Promise<Runtime>}
   * @throws ERR_STORE_LOCKED (the name is open elsewhere), ERR_STORE_CORRUPT (the
   *   snapshot does not read), ERR_STORE_TIMEOUT (the store did not answer),
   *   ERR_COMMIT_FAILED (the store's load failed), or a TypeError for a bad option
   */
  static async open(options) {
    const { rest, persist, state, where } = await openStore(options);
    let rt;
    try {
      rt = new Runtime({ ...rest, [PERSIST]: persist });
      if (state) await restore(rt.#native, state, persist.name, where);
      if (persist.setup !== undefined) await persist.setup(rt);
      if (persist.durable) await rt.#restoreDurable(persist);
      return rt;
    } catch (e) {
      if (rt) rt.#lease = null; // released below, once
      if (rt) rt.closeSync();
      if (persist.lease) await persist.lease.release();
      throw e;
    }
  }

  /**
   * Saves `tasks.state` durably. The snapshot is taken now, or, if a write is
   * in flight, when the next one begins (commits asked for meanwhile share
   * it); no task of this runtime runs until it is written.
   * @returns {Promise<void>}
   * @throws ERR_COMMIT_FAILED (no store, a value that cannot persist, a failed
   *   or timed-out write), ERR_RUNTIME_CLOSED
   */
  async commit() {
    this.#check();
    if (!this.#commits) {
      throw makeError(
        'ERR_COMMIT_FAILED',
        'commit() failed: this runtime has no store, so its state cannot be saved (create it with Runtime.open({ name, store })).',
      );
    }
    // What was answered for tasks being read from the store is done first.
    const reading = this.#restorer?.settled();
    if (reading) {
      await reading;
      this.#check();
    }
    return this.#commits.request();
  }

  // The error a cancelled task's result rejects with, as a function that
  // makes it: only a result someone took needs it, and making an Error (its
  // stack) was over half of what rt.cancel cost (6.5 us a call).
  // `committed`: for a task cancelled while its COMMIT was being written,
  // whether that snapshot landed.
  #cancelledError(id, committed) {
    const reason = this.#cancelReasons.get(id);
    this.#cancelReasons.delete(id);
    const aborted = this.#aborted.delete(id);
    return () => cancelledError(id, reason, committed, aborted);
  }

  #onEnd(key, kind, value) {
    if (kind === END.callbackFailed) {
      this.#reportUnowned({ id: null, callback: true }, value);
      return;
    }
    const task = this.#tasks.get(key);
    if (kind === END.cancelled && task) {
      // Cancelled with its COMMIT in flight: it settles when the write does,
      // saying whether it landed (never "cancelled" for a state written).
      const outcome = this.#commits && this.#commits.outcomeOf(key);
      if (outcome) {
        this.#tasks.delete(key);
        outcome.then((committed) => this.#ended(task, END.cancelled, this.#cancelledError(task.id, committed)));
        return;
      }
    }
    if (kind === END.cancelled) value = this.#cancelledError(task ? task.id : this.#ids.of(key));
    if (!task) {
      if (this.#starting) {
        this.#early.set(key, [kind, value]);
        return;
      }
      if (kind === END.failed) this.#reportUnowned({ id: this.#ids.of(key) }, value);
      return;
    }
    this.#tasks.delete(key);
    this.#ended(task, kind, value, key);
  }

  // A task started from JS ended: settle it, keep its labels a while, tell
  // listeners. `key`: its key, when at hand (a durable one is retained by it).
  #ended(task, kind, value, key) {
    if (this.#tel !== null) this.#tel.ended(task, kind, value);
    // Most tasks have no labels: no lookup by their id then (W8).
    const labels = this.#labels.size > 0 ? this.#labels.get(task.id) : undefined;
    if (labels) {
      this.#labels.delete(task.id);
      this.#endedLabels.set(task.id, labels);
      if (this.#endedLabels.size > ENDED_KEPT) this.#endedLabels.delete(this.#endedLabels.keys().next().value);
    }
    if (kind === END.cancelled && this.listenerCount('taskcancel') > 0) {
      // Listeners and the result get the same error.
      const err = value();
      value = () => err;
      endTask(task, kind, value);
      if (task[DURABLE_KEY] !== undefined) this.#durableKeys.retire(task, kind, value, this.#ids.endRef(key, task));
      this.emit('taskcancel', task, err);
      return;
    }
    endTask(task, kind, value);
    if (task[DURABLE_KEY] !== undefined) this.#durableKeys.retire(task, kind, value, this.#ids.endRef(key, task));
    if (kind === END.done) this.emit('taskdone', task, value);
    else if (kind === END.failed && wasRestored(task)) this.#restoreFailed(task, value);
    else if (kind === END.failed && this.listenerCount('taskerror') > 0) this.emit('taskerror', task, value);
  }

  // A restored durable task failed (a replay that met changed code, a bug
  // after it) or could not be restored: 'taskerror', or a process warning
  // when nobody listens; never silent. During Runtime.open, with no
  // listener yet (one added in setup hears it at once), it is held until
  // the open has resolved, so a listener added just after it hears it.
  #restoreFailed(task, err) {
    this.#restoreFailures++;
    if (this.#heldReports && this.listenerCount('taskerror') === 0) this.#heldReports.push([task, err]);
    else this.#reportUnowned(task, err);
  }

  #releaseReports() {
    const held = this.#heldReports;
    this.#heldReports = null;
    if (held.length === 0) return;
    setImmediate(() => {
      for (const [task, err] of held) this.#reportUnowned(task, err);
    });
  }

  #reportUnowned(task, err) {
    if (this.listenerCount('taskerror') > 0) {
      this.emit('taskerror', task, err);
    } else if (task.callback) {
      process.emitWarning(`lua-tasks: a Lua callback failed: ${err && err.message}`, { code: 'LUA_TASK_FAILED' });
    } else {
      process.emitWarning(`lua-tasks: task ${task.id} failed: ${err && err.message}`, { code: 'LUA_TASK_FAILED' });
    }
  }

  #starting = 0;

  #check() {
    if (this.#closed) throw makeError('ERR_RUNTIME_CLOSED', 'This Lua runtime is closed.');
  }

  // What a Task's status and waiting getters read (lib/runtime/task.js).
  [kTaskInfo](id) {
    return this.#closed ? undefined : this.#snapshot(id);
  }

  // { id, status, waiting?, name?, meta? } of a live or recently ended task, else undefined.
  #snapshot(id) {
    const code = this.#native.taskState(id);
    if (code === undefined) {
      const status = this.#durableKeys.status(id);
      return status === undefined ? undefined : this.#labelled({ id, status }); // a finished durable task, retained
    }
    const until = stateStatus(code) === 'waiting' ? this.#native.taskUntil(id) : undefined;
    return this.#labelled(taskSnapshot(id, code, until));
  }

  // The snapshot with the name and meta its task was spawned with, if any.
  #labelled(info) {
    if (this.#labels.size === 0 && this.#endedLabels.size === 0) return info;
    const labels = this.#labels.get(info.id) || this.#endedLabels.get(info.id);
    return labels ? Object.assign(info, labels) : info;
  }

  /**
   * Runs a chunk of Lua source now.
   * @param {string} source Lua source text (binary chunks are refused)
   * @param {{ name?: string }} [options] name: the chunk name used in error messages
   * @returns {Array} the chunk's return values (nil inside the array is null)
   * @throws {LuaError} ERR_LUA_SYNTAX, ERR_LUA_RUNTIME, ERR_MEMORY_LIMIT
   */
  load(source, options) {
    if (typeof source !== 'string') throw invalidType('source', 'a string of Lua source', source);
    let name;
    if (options !== undefined) {
      if (options === null || typeof options !== 'object') throw invalidType('options', 'an object', options);
      name = options.name;
      if (name !== undefined && typeof name !== 'string') throw invalidType('options.name', 'a string', name);
    }
    return this.#native.load(source, name);
  }

  /**
   * Sets a Lua global. JS functions become Lua functions.
   * @param {string} name
   * @param {*} value
   * @throws {ConversionError} ERR_CONVERSION for a value that cannot cross
   */
  set(name, value) {
    if (typeof name !== 'string') throw invalidType('name', 'a string', name);
    this.#native.set(name, value);
  }

  /**
   * Reads a Lua global. Lua functions come back as JS functions.
   * @param {string} name
   * @returns {*}
   */
  get(name) {
    if (typeof name !== 'string') throw invalidType('name', 'a string', name);
    return this.#native.get(name);
  }

  /**
   * Starts a task and runs it now until its first wait.
   * @param {string|Function} fn a global name, a 'module.fn' path, or a Lua function
   * @param {...*} args arguments; an AbortSignal as the last one cancels the task when
   *   aborted (its result then rejects with an AbortError, code ABORT_ERR, cause the reason)
   * @returns {Task}
   * @throws {AbortError} if that signal is already aborted (nothing is started)
   */
  start(fn, ...args) {
    this.#check();
    checkFn(fn);
    let signal;
    if (args.length > 0 && isAbortSignal(args[args.length - 1])) signal = args.pop();
    return this.#start(fn, args, signal);
  }

  /**
   * Starts a task as start() does, its arguments given as an option: no
   * argument is taken for an AbortSignal.
   * @param {string|Function} fn a global name, a 'module.fn' path, or a Lua function
   * @param {{ args?: Array, signal?: AbortSignal, name?: string, meta?: * }} [options]
   *   args: the arguments (default []); signal: cancels the task when aborted (its
   *   result rejects with an AbortError); name: a label, shown on the Task and in
   *   rt.task(id) / rt.tasks(); meta: any value, kept in JS (never converted to Lua),
   *   shown as name is
   * @returns {Task}
   * @throws {TypeError} for a bad option; {AbortError} if the signal is already aborted
   */
  spawn(fn, options) {
    this.#check();
    checkFn(fn);
    const { args, signal, name, durable, key, labels } = checkSpawnOptions(options);
    if (durable) this.#checkDurable(fn);
    if (key !== undefined) {
      let existing = this.#durableKeys.keys.get(key);
      if (typeof existing === 'string') existing = this.#restorer.activateKey(key, existing);
      if (existing) return existing; // the live task with this key: start-up code can "ensure" its tasks
    }
    if (!durable) return this.#start(fn, [...args], signal, labels);
    this.#hasDurable = true;
    const task = this.#start(fn, [...args], signal, labels, { key: key ?? null, label: name });
    this.#durableKeys.keep(key ?? null, task);
    return task;
  }

  // Durable tasks need an entry that a restart can find again and a store
  // that keeps their journals.
  #checkDurable(fn) {
    if (typeof fn !== 'string') {
      throw makeError(
        'ERR_INVALID_ARG_TYPE',
        'A durable task starts from a global name or a "module.fn" path: a Lua function (a closure) cannot be found again after a restart.',
      );
    }
    if (!this.#durable) {
      throw makeError(
        'ERR_INVALID_ARG_VALUE',
        'Durable tasks need a runtime opened with a store that keeps their journals (Runtime.open({ name, store }) with a directory path, or a store with write(), reader() and spaces including 2 and 3).',
      );
    }
  }

  // Runtime.open: the store's unfinished durable tasks run again, or stay
  // dormant until needed (lib/runtime/durable_restore.js).
  async #restoreDurable({ store, reader, name, lazy, priorIndexMark }) {
    this.#heldReports = [];
    this.#restorer = new DurableRestore(this.#native, name, {
      rt: this,
      keys: this.#durableKeys.keys,
      retain: (id, status, key) => this.#durableKeys.retain(id, status, key),
      isRetained: (id) => this.#durableKeys.isRetained(id),
      retention: this.#durableKeys.retention,
      now: () => Date.now() + this.#clockOffsetMs,
      closed: () => this.#closed,
      restored: () => (this.#hasDurable = true),
      start: (entry, id, name, task) =>
        this.#start(entry, [], undefined, name === undefined ? name : { name }, { id, task }),
      label: (id, name) => this.#endedLabels.set(id, { name }),
      keep: (key, task) => this.#durableKeys.keep(key, task),
      failed: (task, err) => this.#restoreFailed(task, err),
    });
    await this.#restorer.open(store, reader, lazy, priorIndexMark);
    this.#releaseReports();
  }

  // The native side needs a dormant durable task: its journal is read and replayed.
  [ACTIVATE](id) {
    if (this.#restorer) this.#restorer.activate(id);
  }

  #start(fn, args, signal, labels, durable) {
    if (signal && signal.aborted) {
      throw new AbortError('The task was not started: its AbortSignal is already aborted.', { cause: signal.reason });
    }
    let started;
    // A task that ends before start returns (most short ones) does not call
    // back into JS: native start returns its key and its end kind, or that it
    // runs on, in one number (startKey, startEnd), and puts the end value,
    // if not undefined, in out[0].
    // Starts nest (Lua calling JS that starts a task): the outermost one
    // reuses an array, nested ones get their own.
    const out = this.#starting === 0 ? this.#startOut : [undefined];
    out[0] = undefined;
    const t0 = this.#tel === null ? 0 : this.#tel.now();
    this.#starting++;
    try {
      started = this.#native.start(fn, args, out, durable);
    } finally {
      this.#starting--;
    }
    const key = startKey(started);
    if (durable && durable.id) this.#ids.restored(key, durable.id);
    const id = this.#ids.of(key);
    // (One named by its key while it was read from the store has its Task.)
    const task =
      (durable && durable.task) || new Task(this, id, labels && labels.name, labels && labels.meta, fn, args);
    if (durable) task[DURABLE_KEY] = durable.key ?? null; // before it can end (DurableKeys.keep may name its key later)
    if (this.#tel !== null) this.#tel.started(key, task, fn, durable, t0);
    if (durable && durable.id) markRestored(task); // before it can end
    if (labels) this.#labels.set(task.id, labels);
    let endKind = startEnd(started);
    let endValue;
    if (endKind !== -1) {
      endValue = endKind === END.cancelled ? this.#cancelledError(task.id) : out[0];
      out[0] = undefined;
    } else if (this.#early.size > 0) {
      const early = this.#early.get(key);
      if (early) [endKind, endValue] = early;
      this.#early.delete(key);
    }
    if (this.#starting === 0 && this.#early.size > 0) {
      // Tasks started from Lua that failed while this start() ran: unowned.
      for (const [k, [kind, value]] of this.#early) {
        if (kind === END.failed) this.#reportUnowned({ id: this.#ids.of(k) }, value);
      }
      this.#early.clear();
    }
    if (endKind !== -1) {
      this.#ended(task, endKind, endValue, key);
    } else {
      this.#tasks.set(key, task);
      if (signal && signal.aborted) {
        // Aborted while the task ran its first part (by JS that it called).
        this.#abort(task.id, signal.reason);
      } else if (signal) {
        const onAbort = () => this.#abort(task.id, signal.reason);
        signal.addEventListener('abort', onAbort, { once: true });
        task.result.then(
          () => signal.removeEventListener('abort', onAbort),
          () => signal.removeEventListener('abort', onAbort),
        );
      }
    }
    return task;
  }

  /**
   * rt.send(id, ...values), resolved once the message is durable: for a
   * durable task, whose inbox keeps it until it is received, across
   * restarts (docs/durable.md#messages).
   * @returns {Promise<boolean>} true once queued and written; false for an
   *   unknown or ended task, once what this runtime knows of it is written
   */
  async sendDurable(id, ...values) {
    // Either answer waits for the runtime's writes: a task whose end is not
    // yet written would be restored waiting after a crash (or a takeover),
    // and a message refused meanwhile is lost (docs/durable.md#messages).
    return this.#calls.written(id, this.#send(id, values, true));
  }

  /**
   * rt.resume(id, ...values), resolved once the wake is durable: the values
   * the task was resumed with are in its journal in the store, so a crash
   * after this resolves never loses the wake (docs/durable.md#guarantees).
   * @returns {Promise<boolean>} true once resumed and written; false for a
   *   task that is unknown, ended, or not waiting on a yield instruction, once
   *   what this runtime knows of it is written
   */
  async resumeDurable(id, ...values) {
    // The wake's record is journaled as the task runs with it (now, once a
    // COMMIT's snapshot lets go, or once it is read from the store): the
    // next write takes it. A refusal waits for it too, as in sendDurable.
    return this.#calls.written(id, this.#resume(id, values, true));
  }

  /**
   * The address of task `id` of this runtime: names it from any runtime
   * (tasks.resume, member.resume, res.resume; docs/api.md#task-addresses).
   * @throws ERR_INVALID_STATE for a runtime without a name (new Runtime(): only Runtime.open names one)
   */
  address(id) {
    if (typeof id !== 'string') throw invalidType('id', 'a task id string', id);
    if (this.#name === undefined || this.#name === null) {
      throw makeError(
        'ERR_INVALID_STATE',
        'This runtime has no name, so its tasks have no addresses: open it with Runtime.open({ name, store }).',
      );
    }
    return taskAddress(this.#name, id);
  }

  /**
   * start() and await its result.
   * @returns {Promise<*>}
   */
  async call(fn, ...args) {
    return this.start(fn, ...args).result;
  }

  /**
   * Resumes a task waiting on a yield instruction with `values` (the yield
   * returns exactly them); runs it until its next wait before returning (a
   * dormant durable task being read from the store: once it is read).
   * @returns {boolean} true if a waiting task was resumed
   */
  resume(id, ...values) {
    return this.#resume(id, values, false) === true;
  }

  // rt.resume's answer, or RestoredCalls.later's.
  #resume(id, values, durable) {
    this.#check();
    if (typeof id !== 'string') throw invalidType('id', 'a task id string', id);
    const resumed = this.#native.resume(id, values);
    const again = () => this.#resume(id, values, false) === true;
    if (resumed === AFTER_RESTORE) return this.#calls.later(id, again, durable);
    if (resumed !== 2) return resumed;
    // A dormant task activated during a COMMIT's snapshot replays at its end.
    this.#commits.afterUnlock(() => this.#native.resume(id, values));
    return true;
  }

  /**
   * Queues a message for a task, whatever it is doing (running, waiting on
   * anything, committing, awaiting a promise); the task takes it with
   * tasks.receive(), which returns `values` (converted to Lua now). Unlike
   * resume(), nothing is lost: a task waiting in tasks.receive() is woken
   * (through the ready queue, never run inside this call).
   * @param {string} id
   * @param {...*} values the message: at least one value, the first not null or undefined
   * @returns {boolean} true if queued; false for an unknown or ended task
   * @throws {TypeError} ERR_INVALID_ARG_VALUE without a first value
   * @throws {LuaTasksError} ERR_MAILBOX_FULL when the task holds mailboxLimit messages
   */
  send(id, ...values) {
    return this.#send(id, values, false) === true;
  }

  // rt.send's answer, or RestoredCalls.later's.
  #send(id, values, durable) {
    this.#check();
    if (typeof id !== 'string') throw invalidType('id', 'a task id string', id);
    if (values.length === 0 || values[0] === undefined || values[0] === null) {
      throw makeError(
        'ERR_INVALID_ARG_VALUE',
        `A message's first value must not be null or undefined (tasks.receive() answers nil, "timeout" for a timeout). Received ${values.length === 0 ? 'no value' : typeName(values[0])}.`,
      );
    }
    const sent = this.#native.send(id, values);
    return sent === AFTER_RESTORE ? this.#calls.later(id, () => this.#native.send(id, values), durable) : sent;
  }

  /**
   * Cancels a task: its <close> variables run and its result rejects with
   * ERR_TASK_CANCELLED (carrying `reason`).
   * @returns {boolean} true if a live task was cancelled
   */
  cancel(id, reason) {
    this.#check();
    if (typeof id !== 'string') throw invalidType('id', 'a task id string', id);
    if (reason !== undefined) this.#cancelReasons.set(id, reason);
    const ok = this.#native.cancel(id);
    if (ok === AFTER_RESTORE) return this.#calls.later(id, () => this.#native.cancel(id), false);
    if (!ok) this.#cancelReasons.delete(id);
    return ok;
  }

  // Cancels a task for its AbortSignal: its result rejects with an AbortError.
  #abort(id, reason) {
    if (this.#closed) return;
    this.#aborted.add(id);
    let ok = false;
    try {
      ok = this.cancel(id, reason);
    } finally {
      if (!ok) this.#aborted.delete(id); // not cancelled: a later plain cancel must not say aborted
    }
  }

  /** A snapshot `{ id, status, waiting?, name?, meta? }` of a live or recently ended task, or undefined. */
  task(id) {
    this.#check();
    if (typeof id !== 'string') throw invalidType('id', 'a task id string', id);
    return this.#snapshot(id);
  }

  /** Snapshots of every live task, oldest first, then of the dormant durable tasks. */
  tasks() {
    this.#check();
    const rows = this.#native.tasks(); // key, state code, until: per live task, oldest first
    const list = [];
    for (let i = 0; i < rows.length; i += 3) {
      list.push(this.#labelled(taskSnapshot(this.#ids.of(rows[i]), rows[i + 1], rows[i + 2])));
    }
    // Then the durable tasks left in the store at open (dormant), by id.
    const dormant = this.#restorer ? this.#native.dormantTasks() : [];
    for (let i = 0; i < dormant.length; i += 3) list.push(taskSnapshot(dormant[i], dormant[i + 1], dormant[i + 2]));
    return list;
  }

  /** A task's details on demand (lib/runtime/inspect.js, docs/api.md#inspecting-a-task). @returns {Promise<object|undefined>} */
  inspect(id, options) {
    const lent = [this.#native, (i) => this.#snapshot(i), this.#tasks, this.#idPrefix, this.#store, this.#name];
    return inspectTask(lent, id, options);
  }

  /** Timed waits keep the process alive (the default). */
  ref() {
    this.#check();
    this.#native.keepAlive(true);
    return this;
  }

  /** Timed waits no longer keep the process alive. */
  unref() {
    this.#check();
    this.#native.keepAlive(false);
    return this;
  }

  /**
   * Sets the offset (ms) added to this process's wall clock for everything the
   * runtime times by the wall clock: UNTIL_TIME, UNTIL_NEXT, the deadlines of
   * durable timed waits, `task.waiting.until`, `os.time`. A fleet member sets
   * it to PostgreSQL's clock (docs/fleet.md#one-clock). Waits already armed
   * follow it: the clock set forward wakes them sooner.
   * @param {number} ms from -1 year to 1 year
   * @returns {this}
   * @throws {TypeError|RangeError} for a bad offset; ERR_RUNTIME_CLOSED once closed
   */
  setClockOffset(ms) {
    this.#check();
    this.#clockOffsetMs = clockOffsetOf('ms', ms);
    this.#native.setClockOffset(ms);
    return this;
  }

  /** Memory figures of the Lua state in bytes, and the number of live tasks. */
  stats() {
    this.#check();
    const stats = this.#native.stats();
    stats.restoreFailures = this.#restoreFailures;
    return stats;
  }

  /**
   * Closes the runtime. It refuses new calls at once (ERR_RUNTIME_CLOSED);
   * COMMITs and rt.commit() calls made before it are written first (no Lua
   * runs meanwhile); then every task is cancelled (running its <close>
   * variables; results reject with ERR_TASK_CANCELLED), the Lua state is
   * freed and the store's lease on the name released. Idempotent: every
   * call returns the same promise. Afterwards every call (including calls of
   * Lua functions obtained from this runtime) throws ERR_RUNTIME_CLOSED.
   * @returns {Promise<void>}
   */
  close() {
    if (!this.#closing) this.#closing = this.#closeDrained();
    return this.#closing;
  }

  async #closeDrained() {
    if (!this.#closed) {
      this.#closed = true;
      const commits = this.#commits;
      if (commits && this.#hasDurable) commits.request().catch(() => {}); // durable tasks' last records
      if (commits && !commits.idle) {
        this.#native.lock(); // no Lua runs while the writes finish
        await commits.drain();
      }
      this.#shutdown();
    }
    await this.#released;
  }

  /**
   * close() without waiting: the Lua state is freed at once. Commits whose
   * snapshot was not taken yet reject with ERR_RUNTIME_CLOSED; a write in
   * flight goes on, its callers and its task learn its true outcome, and the
   * name stays owned (ERR_STORE_LOCKED for a new opener) until it settles.
   */
  closeSync() {
    if (this.#closed) return;
    this.#closed = true;
    this.#shutdown();
  }

  #released = Promise.resolve();

  #shutdown() {
    if (this.#tel !== null) this.#tel.close();
    this.#native.close(); // cancels every task: a committer in flight asks the queue for its outcome
    if (!this.#commits) return;
    const lease = this.#lease;
    this.#lease = null;
    const settled = this.#commits.close();
    if (lease) {
      this.#released = settled
        .then(() => lease.release())
        .catch((e) => {
          process.emitWarning(`lua-tasks: could not release the store's lease on "${this.#name}": ${reasonText(e)}`, {
            code: 'LUA_TASK_FAILED',
          });
        });
    }
  }
}

module.exports = { Runtime };
