// SPDX-License-Identifier: MIT
// A runtime's durable tasks by idempotency key, and the finished ones it retains (docs/durable.md#retention).
'use strict';

const { END, END_NAMES } = require('./task_codes');

// On a durable task's Task: its idempotency key (null: none) while it
// lives, RETIRED once its end was recorded, KEPT once its replay failed
// (its journal stays in the store: it is not finished there).
const DURABLE_KEY = Symbol('lua-tasks.durableKey');
const RETIRED = Symbol('lua-tasks.retired');
const KEPT = Symbol('lua-tasks.kept');

/**
 * A durable task's key names it while it lives and, once it ended, while it
 * is retained: for `retention` ms and among the latest `max` finished ones;
 * past them the oldest is forgotten (`forget(id)`: its records deleted with
 * the next write, its key free). Its Task holds the key (DURABLE_KEY) from
 * its start, so its end (retire) needs no promise a task.
 */
class DurableKeys {
  /** idempotency key -> Task of a live or retained durable task, or the id of a dormant one */
  keys = new Map();
  // ref -> status of a finished durable task retained, oldest first. A ref
  // is the task's numeric key when its id is this runtime's (refOf), else
  // its id: a durable wake retains its task, and a Map.set of a string id
  // (flattened and hashed there, cold) into a table of 100,000 was a sixth
  // of the loop's time a wake (W14 wakes).
  #retained = new Map();
  #retainedKeys = new Map(); // ref -> idempotency key, of those retained that have one
  #retention;
  #max;
  #forget;
  #refOf;
  #idOfRef;

  /**
   * @param {number} retention ms a finished one is kept (durableRetention; 0: none)
   * @param {number} max the most kept (durableRetainedMax)
   * @param {(id: string) => void} forget one is forgotten
   * @param {(id: string) => number|string} refOf an id's ref (its key when the id is the runtime's own)
   * @param {(ref: number|string) => string} idOfRef a ref's id
   */
  constructor(retention, max, forget, refOf = (id) => id, idOfRef = (ref) => ref) {
    this.#retention = retention;
    this.#max = max;
    this.#forget = forget;
    this.#refOf = refOf;
    this.#idOfRef = idOfRef;
  }

  get retention() {
    return this.#retention;
  }

  /** A retained task's status, or undefined. */
  status(id) {
    return this.#retained.size > 0 ? this.#retained.get(this.#refOf(id)) : undefined;
  }

  isRetained(id) {
    return this.#retained.size > 0 && this.#retained.has(this.#refOf(id));
  }

  /** A durable task started (or found again): its key names it. */
  keep(key, task) {
    if (task[DURABLE_KEY] === KEPT) {
      if (key !== null) this.keys.set(key, task);
      return;
    }
    if (task[DURABLE_KEY] === RETIRED) {
      // Ended as it started: retained (and so named) unless forgotten since.
      const ref = this.#refOf(task.id);
      if (key !== null && this.#retained.has(ref)) {
        this.keys.set(key, task);
        this.#retainedKeys.set(ref, key);
      }
      return;
    }
    task[DURABLE_KEY] = key;
    if (key !== null) this.keys.set(key, task);
  }

  /**
   * A durable task ended (`kind`, an END code; `value`, its result or error).
   * `ref`: refOf(task.id), when the caller has it at hand.
   */
  retire(task, kind, value, ref) {
    const key = task[DURABLE_KEY];
    if (key === RETIRED || key === KEPT) return;
    // A failed replay leaves its journal for code that replays it (the next
    // open restores it): its key stays its own, whatever durableRetention,
    // and it is no retained end (forgetting one deletes its start record).
    if (kind === END.failed && value && value.code === 'ERR_NONDETERMINISM') {
      task[DURABLE_KEY] = KEPT;
      if (key !== null) this.keys.set(key, task);
      return;
    }
    task[DURABLE_KEY] = RETIRED;
    if (this.#retention > 0) this.retain(task.id, END_NAMES[kind], key, ref);
    else if (key !== null && this.keys.get(key) === task) this.keys.delete(key);
  }

  /** A finished task is retained: the oldest forgotten past `max`. */
  retain(id, status, key, ref = this.#refOf(id)) {
    this.#retained.set(ref, status);
    if (key !== null) this.#retainedKeys.set(ref, key);
    while (this.#retained.size > this.#max) {
      const oldRef = this.#retained.keys().next().value;
      const old = this.#idOfRef(oldRef);
      this.#retained.delete(oldRef);
      const oldKey = this.#retainedKeys.get(oldRef);
      if (oldKey !== undefined) {
        this.#retainedKeys.delete(oldRef);
        const t = this.keys.get(oldKey);
        if (t === old || (t && t.id === old)) this.keys.delete(oldKey); // its Task, or a dormant id
      }
      this.#forget(old);
    }
  }
}

module.exports = { DurableKeys, DURABLE_KEY };
