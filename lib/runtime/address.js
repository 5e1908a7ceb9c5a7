// SPDX-License-Identifier: MIT
// A task's address: one string that names a task of any named runtime (docs/api.md#task-addresses).
'use strict';
//
// `<id>@<name>`: a task id has no "@" and a runtime name cannot have one
// (store/contract.js), so the first "@" splits it. A runtime opened with a
// name answers its tasks' addresses (tasks.address, rt.address,
// namazu.coroutine.current_task_id) and resumes by address from Lua
// (lib/lua/addresses.lua): its own tasks itself, another runtime's through
// its route (the Resources it was given, or the fleet member hosting it).

const fs = require('node:fs');
const path = require('node:path');

const { ID_KEY_DIGITS } = require('./task_codes');

const SOURCE = fs.readFileSync(path.join(__dirname, '..', 'lua', 'addresses.lua'), 'utf8');
/** The Runtime option (a symbol: not a user option) a fleet member gives its runtimes: their route. */
const ROUTE = Symbol('lua-tasks.route');

/** The address of task `id` of the runtime `name`. */
function taskAddress(name, id) {
  return `${id}@${name}`;
}

/** { id, name } of an address, or null for a string that is not one (a plain id). */
function parseAddress(v) {
  if (typeof v !== 'string') return null;
  const at = v.indexOf('@');
  if (at <= 0 || at === v.length - 1) return null;
  return { id: v.slice(0, at), name: v.slice(at + 1) };
}

/**
 * Gives a named runtime's Lua its addresses: tasks.address, and tasks.resume
 * and namazu.coroutine.resume taking an address (current_task_id answers one).
 * @param {object} native the runtime's NativeRuntime
 * @param {string} name the runtime's name
 * @param {((name: string, id: string, ...values: unknown[]) => Promise<boolean>) | null} route how a
 *   task of another runtime is resumed, or null (none reachable)
 */
function installAddresses(native, name, route) {
  const [install] = native.load(SOURCE, '=addresses');
  const named = route && Object.defineProperty((...a) => route(...a), 'name', { value: 'tasks.resume' });
  install(name, named || undefined, native.idPrefix().length + ID_KEY_DIGITS);
}

module.exports = { ROUTE, taskAddress, parseAddress, installAddresses };
