// SPDX-License-Identifier: MIT
// A runtime's task ids from the native side's keys, and back.
'use strict';

const { ID_KEY_DIGITS } = require('./task_codes');

// A task's id is the runtime's prefix and its key in ID_KEY_DIGITS base-36
// digits (as the native side writes it), except a restored durable task's,
// which keeps its first run's id.
class TaskIds {
  #prefix;
  #restored = new Map(); // key -> id of a restored durable task

  constructor(prefix) {
    this.#prefix = prefix;
  }

  /** The id of the task with native key `key`. */
  of(key) {
    if (this.#restored.size > 0) {
      const id = this.#restored.get(key);
      if (id !== undefined) return id;
    }
    return this.own(key);
  }

  /** The id a task of this runtime's with `key` has, restored or not. */
  own(key) {
    return this.#prefix + key.toString(36).padStart(ID_KEY_DIGITS, '0');
  }

  /** A restored durable task's key keeps its first run's id. */
  restored(key, id) {
    this.#restored.set(key, id);
  }

  /**
   * A durable task's ref in DurableKeys: its key when the id is this
   * runtime's own (a number: cheaper to file than a long id), else the id.
   */
  refOf(id) {
    const prefix = this.#prefix;
    if (typeof id !== 'string' || id.length !== prefix.length + ID_KEY_DIGITS || !id.startsWith(prefix)) return id;
    const key = parseInt(id.slice(prefix.length), 36);
    return Number.isSafeInteger(key) && this.own(key) === id && !this.#restored.has(key) ? key : id;
  }

  /** refOf of the task `task` with native key `key` (undefined when not given), without parsing its id. */
  endRef(key, task) {
    if (key === undefined) return undefined;
    return this.#restored.size > 0 && this.#restored.has(key) ? task.id : key;
  }

  /** The id a ref names. */
  idOfRef(ref) {
    return typeof ref === 'number' ? this.own(ref) : ref;
  }
}

module.exports = { TaskIds };
