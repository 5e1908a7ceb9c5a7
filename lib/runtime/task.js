// SPDX-License-Identifier: MIT
// Task: the JS handle of one Lua task, and how its end settles its result.
'use strict';

const { END, END_NAMES, stateStatus, stateWait } = require('./task_codes');
const { AbortError, makeError } = require('../errors');

// The one builder of a task's snapshot { id, status, waiting? } (rt.task,
// rt.tasks, a Task's getters), from the native state code (PackState) and,
// for a waiting task, the wall-clock ms its timed wait ends (or undefined).
function taskSnapshot(id, code, until) {
  const status = stateStatus(code);
  if (status !== 'waiting') return { id, status };
  const waiting = { instruction: stateWait(code) };
  if (until !== undefined) waiting.until = new Date(until);
  return { id, status, waiting };
}

// What a cancelled task's error adds when it was cancelled while its COMMIT
// was being written: whether that snapshot landed.
function commitNote(reason, committed) {
  if (committed === undefined) return '';
  const sep = reason !== undefined ? '.' : '';
  return committed
    ? `${sep} Its COMMIT had been written: the snapshot it asked for is saved.`
    : `${sep} Its COMMIT was being written and failed: the snapshot it asked for is not saved.`;
}

// The error a task cancelled through its AbortSignal ends with, as Node's
// APIs reject on an abort: an AbortError whose cause is the signal's reason.
function abortedError(id, reason, committed) {
  const message = `Task ${id} was aborted${reason !== undefined ? `: ${String(reason)}` : '.'}${commitNote(reason, committed)}`;
  return new AbortError(message, { cause: reason }, committed !== undefined ? { committed } : undefined);
}

// The error of a cancelled task: an AbortError when its AbortSignal did it,
// else (rt.cancel, task.cancel, Lua's tasks.cancel, close) ERR_TASK_CANCELLED
// carrying the reason given.
function cancelledError(id, reason, committed, aborted) {
  if (aborted) return abortedError(id, reason, committed);
  const message = `Task ${id} was cancelled${reason !== undefined ? `: ${String(reason)}` : '.'}${commitNote(reason, committed)}`;
  const props = {};
  if (reason !== undefined) props.reason = reason;
  if (committed !== undefined) props.committed = committed;
  return makeError('ERR_TASK_CANCELLED', message, props);
}

function isAbortSignal(v) {
  return typeof AbortSignal !== 'undefined' && v instanceof AbortSignal;
}

// The method a Task reads its live status through: its Runtime's
// [kTaskInfo](id) answers a snapshot { status, waiting? }, or undefined for
// a task it does not know (any more) or once it is closed. A symbol, so it is no
// method of the Runtime's API.
const kTaskInfo = Symbol('lua-tasks.taskInfo');

// endTask(task, kind, value) settles a task that ended; only the Runtime
// that started it calls it (set below, with access to Task's privates).
let endTask;
// startOf(task) -> [fn, args]: what it was started with from JS (args
// until it ends), for rt.inspect (lib/runtime/inspect.js).
let startOf;

/**
 * A Lua coroutine running as a task. `status` and `waiting` are live;
 * `result` is a Promise made on first access, so a failed task whose result
 * nobody took never causes an unhandled rejection.
 */
class Task {
  #rt;
  #outcome; // [kind, value] once ended
  #promise;
  #settle;
  #fn; // the entry it was started with: a name, a path or a Lua function
  #args; // its arguments array, by reference, until it ends (rt.inspect summarises it)

  constructor(rt, id, name, meta, fn, args) {
    this.#rt = rt;
    /** Opaque id, unique in the process and across restarts. */
    this.id = id;
    /** The label given to rt.spawn, else undefined. */
    this.name = name;
    /** The value given to rt.spawn (kept in JS, never converted), else undefined. */
    this.meta = meta;
    this.#fn = fn;
    this.#args = args;
  }

  /**
   * rt.inspect(task.id, options): its details, read now.
   * @param {{ history?: boolean, where?: boolean }} [options]
   * @returns {Promise<object|undefined>}
   */
  inspect(options) {
    return this.#rt.inspect(this.id, options);
  }

  /**
   * rt.cancel(task.id, reason).
   * @returns {boolean} true if a live task was cancelled
   */
  cancel(reason) {
    return this.#rt.cancel(this.id, reason);
  }

  /**
   * rt.resume(task.id, ...values).
   * @returns {boolean} true if a waiting task was resumed
   */
  resume(...values) {
    return this.#rt.resume(this.id, ...values);
  }

  /**
   * rt.send(task.id, ...values): queues a message for its tasks.receive.
   * @returns {boolean} true if queued, false if the task has ended
   */
  send(...values) {
    return this.#rt.send(this.id, ...values);
  }

  /** @returns {'running'|'waiting'|'done'|'failed'|'cancelled'} */
  get status() {
    if (this.#outcome) return END_NAMES[this.#outcome[0]];
    const info = this.#rt[kTaskInfo](this.id);
    return info ? info.status : 'cancelled';
  }

  /** `{ instruction, until? }` while waiting, else undefined. */
  get waiting() {
    if (this.#outcome) return undefined;
    const info = this.#rt[kTaskInfo](this.id);
    return info && info.waiting;
  }

  /** @returns {Promise<*>} the task's first return value, or rejects with its error */
  get result() {
    if (!this.#promise) {
      this.#promise = new Promise((resolve, reject) => {
        this.#settle = [resolve, reject];
      });
      if (this.#outcome) this.#end(...this.#outcome);
    }
    return this.#promise;
  }

  // value: what it returned, its error, or (cancelled) a function making the error.
  #end(kind, value) {
    this.#outcome = [kind, value];
    this.#args = undefined;
    if (!this.#settle) return;
    const [resolve, reject] = this.#settle;
    this.#settle = undefined;
    if (kind === END.done) resolve(value);
    else reject(kind === END.cancelled ? value() : value);
  }

  static {
    endTask = (task, kind, value) => task.#end(kind, value);
    startOf = (task) => [task.#fn, task.#args];
  }
}

/**
 * Settles the Task of a durable task that had ended before this runtime was
 * opened, from its end record (status 'done', 'failed' or 'cancelled').
 */
function endRetained(task, status, value) {
  const kind = status === 'done' ? END.done : status === 'failed' ? END.failed : END.cancelled;
  const error = () =>
    makeError(
      kind === END.failed ? 'ERR_LUA_RUNTIME' : 'ERR_TASK_CANCELLED',
      `The durable task ${task.id} ${status === 'failed' ? `failed before this runtime was opened: ${value}` : 'was cancelled before this runtime was opened.'}`,
    );
  endTask(task, kind, kind === END.done ? value : kind === END.failed ? error() : error);
}

// A durable task's label is kept in its start record, in at most as many
// bytes as a record's identity (kMaxIdentity, native/core/durable/durable_record.hpp).
const DURABLE_NAME_BYTES = 255;

/**
 * A durable task's name, checked: one the store keeps whole.
 * @throws {RangeError} ERR_OUT_OF_RANGE past DURABLE_NAME_BYTES bytes of UTF-8
 */
function checkDurableName(name) {
  const bytes = Buffer.byteLength(name);
  if (bytes <= DURABLE_NAME_BYTES) return;
  throw makeError(
    'ERR_OUT_OF_RANGE',
    `The "options.name" of a durable task must be at most ${DURABLE_NAME_BYTES} bytes of UTF-8 (it is kept in the task's start record). Received a string of ${bytes} bytes.`,
  );
}

module.exports = {
  checkDurableName,
  Task,
  endTask,
  endRetained,
  startOf,
  kTaskInfo,
  taskSnapshot,
  cancelledError,
  isAbortSignal,
};
