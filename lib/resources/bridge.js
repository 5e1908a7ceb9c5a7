// SPDX-License-Identifier: MIT
// The Lua modules resource, index, namazu.resource, namazu.index, namazu.response(.code) in a runtime given `resources`.
'use strict';
//
// How: lib/lua/resources.lua is loaded in the runtime and called with a
// host table of JS functions (one per call, each named for the durable
// journal); the modules it returns come back to JS as tables whose
// functions are the runtime's own Lua functions, and are preloaded under
// each name (a Lua function handed back to its runtime is itself again).
// A host function answers a promise: the calling task waits for it, and a
// durable task journals its answer as it does any JS call's.

const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const { makeError } = require('../errors');
const { CODES } = require('./codes');

const SOURCE = fs.readFileSync(path.join(__dirname, '..', 'lua', 'resources.lua'), 'utf8');

/** The module names a runtime given `resources` answers itself. */
const MODULE_NAMES = Object.freeze([
  'resource',
  'index',
  'namazu.resource',
  'namazu.index',
  'namazu.response',
  'namazu.response.code',
]);

// Resources objects, and the host each gives its runtimes.
const hosts = new WeakMap();

/**
 * Registers a Resources object's operations as the functions Lua calls.
 * @param {object} resources
 * @param {object} ops { create, invoke, invokePath, invokeOnce, resolve, destroy, list, link, linkPath, unlink },
 *   each answering a Lua list (resolve: an id or null); resumeAt(name, id, ...values): a promise of a boolean
 */
function registerHost(resources, ops) {
  const host = { codes: { ...CODES } };
  // A promise Lua code dropped (a call made outside a task raises at once)
  // still settles: its rejection is heard here, never unhandled.
  const guard = (p) => {
    if (p instanceof Promise) p.catch(() => {});
    return p;
  };
  const name = (fn, n) => Object.defineProperty((...a) => guard(fn(...a)), 'name', { value: n });
  host.create = name((...a) => ops.create(...a), 'resource.create');
  host.invoke = name((...a) => ops.invoke(...a), 'resource.invoke');
  host.invoke_path = name((...a) => ops.invokePath(...a), 'resource.invoke_path');
  host.invoke_once = name((...a) => ops.invokeOnce(...a), 'resource.invoke');
  host.resolve = name((p) => ops.resolve(p), 'index.resolve');
  host.request_id = name(() => crypto.randomUUID(), 'resource.request_id');
  host.resume_at = (...a) => ops.resumeAt(...a);
  host.destroy = name((...a) => ops.destroy(...a), 'resource.destroy');
  host.list = name((...a) => ops.list(...a), 'index.list');
  host.link = name((...a) => ops.link(...a), 'index.link');
  host.link_path = name((...a) => ops.linkPath(...a), 'index.link_path');
  host.unlink = name((...a) => ops.unlink(...a), 'index.unlink');
  hosts.set(resources, host);
}

/** How a runtime given `resources` resumes a task of another runtime (address.js), or null. */
function routeOf(resources) {
  const host = resources && hosts.get(resources);
  return host ? host.resume_at : null;
}

/** Whether v is a Resources object (the `resources` option). */
function isResources(v) {
  return v !== null && typeof v === 'object' && hosts.has(v);
}

/**
 * Gives a new runtime the modules, after the embedder's (whose names may not be these).
 * @param {object} native the runtime's NativeRuntime
 * @param {object} resources a Resources
 * @param {object} [modules] the runtime's modules option
 * @throws {TypeError} ERR_INVALID_ARG_VALUE when `modules` names one of them
 */
function installResources(native, resources, modules) {
  for (const n of MODULE_NAMES) {
    if (modules && Object.hasOwn(modules, n)) {
      throw makeError(
        'ERR_INVALID_ARG_VALUE',
        `The module "${n}" in "options.modules" is the resources' own (the runtime was given "options.resources"). Give your module another name.`,
      );
    }
  }
  const [build] = native.load(SOURCE, '=resources');
  const mods = build(hosts.get(resources));
  native.preload('resource', mods.resource);
  native.preload('index', mods.index);
  native.preload('namazu.resource', mods.resource);
  native.preload('namazu.index', mods.index);
  native.preload('namazu.response', mods.response);
  native.preload('namazu.response.code', mods.response.code);
}

module.exports = { MODULE_NAMES, registerHost, isResources, installResources, routeOf };
