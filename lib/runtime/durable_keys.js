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
  #retained = new Map(); // id -> status of a finished durable task retained, oldest first
  #retainedKeys = new Map(); // id -> idempotency key, of those retained that have one
  #retention;
  #max;
  #forget;

  /**
   * @param {number} retention ms a finished one is kept (durableRetention; 0: none)
   * @param {number} max the most kept (durableRetainedMax)
   * @param {(id: string) => void} forget one is forgotten
   */
  constructor(retention, max, forget) {
    this.#retention = retention;
    this.#max = max;
    this.#forget = forget;
  }

  get retention() {
    return this.#retention;
  }

  /** A retained task's status, or undefined. */
  status(id) {
    return this.#retained.size > 0 ? this.#retained.get(id) : undefined;
  }

  isRetained(id) {
    return this.#retained.has(id);
  }

  /** A durable task started (or found again): its key names it. */
  keep(key, task) {
    if (task[DURABLE_KEY] === KEPT) {
      if (key !== null) this.keys.set(key, task);
      return;
    }
    if (task[DURABLE_KEY] === RETIRED) {
      // Ended as it started: retained (and so named) unless forgotten since.
      if (key !== null && this.#retained.has(task.id)) {
        this.keys.set(key, task);
        this.#retainedKeys.set(task.id, key);
      }
      return;
    }
    task[DURABLE_KEY] = key;
    if (key !== null) this.keys.set(key, task);
  }

  /** A durable task ended (`kind`, an END code; `value`, its result or error). */
  retire(task, kind, value) {
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
    if (this.#retention > 0) this.retain(task.id, END_NAMES[kind], key);
    else if (key !== null && this.keys.get(key) === task) this.keys.delete(key);
  }

  /** A finished task is retained: the oldest forgotten past `max`. */
  retain(id, status, key) {
    this.#retained.set(id, status);
    if (key !== null) this.#retainedKeys.set(id, key);
    while (this.#retained.size > this.#max) {
      const old = this.#retained.keys().next().value;
      this.#retained.delete(old);
      const oldKey = this.#retainedKeys.get(old);
      if (oldKey !== undefined) {
        this.#retainedKeys.delete(old);
        const t = this.keys.get(oldKey);
        if (t === old || (t && t.id === old)) this.keys.delete(oldKey); // its Task, or a dormant id
      }
      this.#forget(old);
    }
  }
}

module.exports = { DurableKeys, DURABLE_KEY };
