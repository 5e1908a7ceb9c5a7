// SPDX-License-Identifier: MIT
// The resource registry: id -> module and slot, path -> id, counted; run as Lua in one runtime of the store.
'use strict';
//
// Format and rules: lib/lua/resource_registry.lua (this file is its one
// owner in JS). The registry is the runtime REGISTRY_NAME: embedded, opened
// here on the store (its lease: one Resources per store); on a fleet, hosted
// by one member and reached by name through the router, so every member's
// Resources asks the same one. Each call is a task of that runtime; a change
// answers once its COMMIT is durable.

const fs = require('node:fs');
const path = require('node:path');
const { Runtime } = require('../runtime/runtime');

/** The store name that keeps the registry; a runtime cannot open it while a Resources holds it. */
const REGISTRY_NAME = 'lua-tasks.resources';

/** The registry's Lua: loaded in the runtime REGISTRY_NAME (its `setup` on a fleet). */
const REGISTRY_LUA = fs.readFileSync(path.join(__dirname, '..', 'lua', 'resource_registry.lua'), 'utf8');

const SLOT_RE = /^(\d+)-[0-9a-f]+$/;

const SLOT_PREFIX = 'lua-tasks.r.';

/** A resource's runtime name in the store: its slot's. */
function slotName(slot) {
  return `${SLOT_PREFIX}${slot}`;
}

/** Whether a runtime name is a resource slot's. */
function isSlotName(name) {
  return typeof name === 'string' && name.startsWith(SLOT_PREFIX);
}

/** Whether a string has the form of a resource id ("<slot>-<hex>"). */
function isId(id) {
  return typeof id === 'string' && SLOT_RE.test(id);
}

/** Loads the registry's functions in its runtime. */
function setupRegistry(rt) {
  rt.load(REGISTRY_LUA, { name: '=resource_registry' });
}

class Registry {
  #call;
  #close;

  /** @param {(fn: string, ...args: unknown[]) => Promise<unknown>} call runs a registry function; @param {() => Promise<void>} close */
  constructor(call, close) {
    this.#call = call;
    this.#close = close;
  }

  /**
   * Opens the registry's runtime on a store (its lease: one Resources per store) and reads it.
   * @returns {Promise<Registry>}
   * @throws ERR_STORE_LOCKED when another Resources holds it
   */
  static async open(store) {
    const rt = await Runtime.open({ name: REGISTRY_NAME, store });
    try {
      setupRegistry(rt);
    } catch (e) {
      await rt.close();
      throw e;
    }
    return new Registry(
      (fn, ...args) => rt.call(fn, ...args),
      () => rt.close(),
    );
  }

  /** The registry of a fleet: the runtime REGISTRY_NAME wherever it is hosted, through `member`. */
  static onFleet(member) {
    return new Registry(
      (fn, ...args) => member.call(REGISTRY_NAME, fn, ...args),
      async () => {},
    );
  }

  /** Holds `path` and a slot (none of `busy`) for a create: { code: OK, id, slot } | { code: DUPLICATE_RESOURCE | BUSY } | { code: LIMIT, what, count, max }. */
  reserve(module, path, maxResources, maxPaths, nonce, busy) {
    return this.#call('registry_reserve', module, path, maxResources, maxPaths, nonce, busy);
  }

  /** Ends a create: writes its entry (`ok`), or gives its hold back. */
  finish(id, module, path, ok) {
    return this.#call('registry_finish', id, module, path, ok);
  }

  /** { module, slot } of a resource, or null. */
  async get(id) {
    if (!isId(id)) return null;
    return (await this.#call('registry_get', id)) ?? null;
  }

  /** { id, module, slot } of the resource at `path`, or null. */
  async resolve(path) {
    return (await this.#call('registry_resolve', path)) ?? null;
  }

  /** Adds `alias` to resource `id` (or, id null, to the one at `path`): { code[, what, count, max] }. */
  link(id, path, alias, maxPaths) {
    if (id !== null && !isId(id)) return Promise.resolve({ code: 'RESOURCE_NOT_FOUND' });
    return this.#call('registry_link', id ?? false, path ?? false, alias, maxPaths);
  }

  /** Removes a resource: { ok, slot? }. */
  destroy(id) {
    if (!isId(id)) return Promise.resolve({ ok: false });
    return this.#call('registry_destroy', id);
  }

  /** Removes a path (the last one removes its resource): { id?, removed?, slot? }. */
  unlink(path) {
    return this.#call('registry_unlink', path);
  }

  /** { [path]: id } of the paths matching a checked pattern. */
  async list(pattern) {
    return (await this.#call('registry_list', pattern)) ?? {};
  }

  /** { resources, paths, creating }. */
  count() {
    return this.#call('registry_count');
  }

  /** Closes the registry's runtime (its COMMITs drained), giving its lease back. */
  close() {
    return this.#close();
  }
}

module.exports = { Registry, REGISTRY_NAME, REGISTRY_LUA, slotName, isSlotName, setupRegistry, isId };
