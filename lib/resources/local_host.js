// SPDX-License-Identifier: MIT
// Where resources run embedded: their runtimes in this process, opened on demand and closed when idle.
'use strict';
//
// A resource's runtime is its slot's store name (registry.js). It is
// activated (Runtime.open) when a call needs it and hibernated (closed:
// everything it committed stays in the store) once it has had no call in
// flight and no live task for idleMs. A method runs as a task of it
// (lib/lua/resource_dispatch.lua). A slot taken by a create is emptied
// first (slots.js): nothing a destroyed resource left is seen again.

const { Runtime } = require('../runtime/runtime');
const { makeError } = require('../errors');
const { emptyName } = require('./slots');
const { loadDispatch, runMethod } = require('./dispatch');
const { isSlotName } = require('./registry');

class LocalHost {
  #store;
  #options; // the Runtime options of each resource's runtime, resources and modules included
  #idleMs;
  #active = new Map(); // runtime name -> { rt, id, inflight, timer, opening }
  #closing = new Map(); // runtime name -> the close of its runtime, while it hibernates
  #creating = new Set(); // runtime names a create is filling
  #closed = false;
  #counts = { activations: 0, hibernations: 0 };

  /** Invocations run in this process: only a durable caller's carry request ids. */
  get routed() {
    return false;
  }

  /** The store the resources' runtimes are kept in (Resources.tasks reads it). */
  get store() {
    return this.#store;
  }

  constructor(store, options, idleMs) {
    this.#store = store;
    this.#options = { ...options, setup: loadDispatch };
    this.#idleMs = idleMs;
  }

  /**
   * Makes the slot `name` ready for a new resource: its last runtime closed
   * and every keyed record of it deleted.
   * @throws ERR_STORE_LOCKED when its runtime is still in use (the caller takes another slot)
   */
  async prepare(name) {
    if (this.#active.has(name) || this.#creating.has(name)) {
      throw makeError('ERR_STORE_LOCKED', `The slot "${name}" is still in use.`, { holder: null });
    }
    this.#creating.add(name);
    try {
      const closing = this.#closing.get(name);
      if (closing) await closing;
      await emptyName(this.#store, name);
    } catch (e) {
      this.#creating.delete(name);
      throw e;
    }
  }

  /**
   * Runs `module[method](...args)` in the resource `id` at slot `name`.
   * `reset` (a create, after prepare): the slot's state is emptied and what
   * init did is committed before the answer. `rid`: the request's id, run
   * once (dispatch.js's runMethod).
   * @returns {Promise<{ status: string, result?: unknown, type?: string } | { failed: unknown } | null>}
   *   null when the slot holds another resource now
   */
  async run(name, id, module, method, args, reset = false, rid = undefined) {
    const h = this.#activate(name, id, reset);
    if (!h) return null;
    try {
      await h.opening;
      return await runMethod(h.rt, reset, id, module, method, args, rid);
    } finally {
      this.#release(name, h);
    }
  }

  /**
   * rt.resumeDurable(id, ...values) in the resource runtime `name`, opened if
   * need be: true once the wake is written.
   * @throws ERR_INVALID_ARG_VALUE when `name` is not a resource's runtime (these resources reach no other)
   */
  async resume(name, id, values) {
    if (!isSlotName(name)) {
      throw makeError(
        'ERR_INVALID_ARG_VALUE',
        `tasks.resume: the runtime "${name}" is not one of these resources' (an address reaches the runtimes of resources, or any runtime of a fleet).`,
      );
    }
    const h = this.#activate(name, null, false);
    if (!h) return false; // a create is filling the slot: no task of it waits yet
    try {
      await h.opening;
      return await h.rt.resumeDurable(id, ...values);
    } finally {
      this.#release(name, h);
    }
  }

  /** The end of a create on slot `name`: its runtime stays (ok) or is closed. */
  async created(name, ok) {
    this.#creating.delete(name);
    if (!ok) await this.drop(name);
  }

  /** Closes the runtime of slot `name`, if active (a destroy: its tasks are cancelled). */
  drop(name) {
    const h = this.#active.get(name);
    if (!h) return this.#closing.get(name) || Promise.resolve();
    this.#active.delete(name);
    if (h.timer) clearTimeout(h.timer);
    const closed = h.opening
      .then(() => h.rt.close())
      .catch(() => {})
      .finally(() => {
        if (this.#closing.get(name) === closed) this.#closing.delete(name);
      });
    this.#closing.set(name, closed);
    return closed;
  }

  /** { active, activations, hibernations }. */
  stats() {
    return { active: this.#active.size, ...this.#counts };
  }

  /** Closes every active runtime. */
  async close() {
    this.#closed = true;
    await Promise.allSettled([...this.#active.keys()].map((name) => this.drop(name)));
    await Promise.allSettled([...this.#closing.values()]);
  }

  // The slot's holder, counted as in use until #release; null when it holds
  // another resource, or a create is filling it (and this is not that create).
  // `id` null (a resume by address): whichever resource it holds.
  #activate(name, id, reset) {
    let h = this.#active.get(name);
    if (h && id !== null && h.id !== id) {
      if (h.id !== null) return null;
      h.id = id; // opened by a resume: the first call names its resource
    }
    if (!h) {
      if (this.#creating.has(name) !== reset) return null;
      h = { rt: null, id, inflight: 0, timer: null, opening: null };
      this.#active.set(name, h);
      h.opening = this.#open(name, h);
      h.opening.catch(() => {
        if (this.#active.get(name) === h) this.#active.delete(name);
      });
    }
    h.inflight++;
    if (h.timer) {
      clearTimeout(h.timer);
      h.timer = null;
    }
    return h;
  }

  async #open(name, h) {
    // A hibernation still closing holds the name's lease: it goes first.
    const closing = this.#closing.get(name);
    if (closing) await closing;
    h.rt = await Runtime.open({ ...this.#options, name, store: this.#store });
    this.#counts.activations++;
  }

  #release(name, h) {
    h.inflight--;
    if (h.inflight > 0 || this.#active.get(name) !== h || this.#closed) return;
    h.timer = setTimeout(() => this.#idle(name, h), this.#idleMs);
    h.timer.unref();
  }

  #idle(name, h) {
    h.timer = null;
    if (h.inflight > 0 || this.#active.get(name) !== h) return;
    // A task still living (a method that started one) keeps it active.
    if (h.rt.stats().tasks > 0) {
      h.timer = setTimeout(() => this.#idle(name, h), this.#idleMs);
      h.timer.unref();
      return;
    }
    this.#counts.hibernations++;
    this.drop(name).catch(() => {});
  }
}

module.exports = { LocalHost };
