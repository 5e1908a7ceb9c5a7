// SPDX-License-Identifier: MIT
// rt.inspect: one task's details on demand, and a durable task's journal read from the store as its history.
'use strict';

// Nothing here runs until asked: a task keeps only what it already had (its
// entry and, for a task started from JS, its arguments array by reference),
// and the rest is read at the call: the task's state and Lua traceback
// from the native side, a durable task's start record and journal from the
// store (docs/api.md#inspecting-a-task).

const { checkOptionKeys } = require('../validate');
const { types } = require('node:util');
const binding = require('../binding');
const { normalizeOptions } = require('./options');
const { invalidType } = require('../errors');
const { SPACES } = require('../store/contract');
const { startOf } = require('./task');

const OPTIONS = ['history', 'where'];
// The bound of one value's summary and of a list's in all (as the native
// side's, native/core/host/value_summary.hpp).
const SUMMARY_BYTES = 120;
const SUMMARY_LIST_BYTES = 1024;
// Records a history holds at most: the start record and the latest others.
const HISTORY_MAX = 1000;
// Records one scan of the store reads.
const PAGE = 256;

/**
 * The options of rt.inspect, checked.
 * @returns {{ history: boolean, where: boolean }}
 */
function inspectOptions(options) {
  if (options === undefined) return { history: false, where: false };
  checkOptionKeys(options, OPTIONS, 'an inspect');
  const { history = false, where = false } = options;
  if (typeof history !== 'boolean') throw invalidType('options.history', 'a boolean', history);
  if (typeof where !== 'boolean') throw invalidType('options.where', 'a boolean', where);
  return { history, where };
}

function quoted(s, max) {
  const shown = s.length > max ? `${s.slice(0, max)}...` : s;
  return JSON.stringify(shown) + (s.length > max ? ` (${s.length} characters)` : '');
}

// The intrinsic getters builtin() reads through, so that no property of the
// value itself (an own getter, a Symbol.toStringTag) runs.
const TYPED_LENGTH = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(Uint8Array.prototype), 'byteLength').get;
const MAP_SIZE = Object.getOwnPropertyDescriptor(Map.prototype, 'size').get;
const SET_SIZE = Object.getOwnPropertyDescriptor(Set.prototype, 'size').get;

// A builtin object by its kind, from its internal slots; undefined for others.
function builtin(v) {
  if (types.isTypedArray(v)) return `TypedArray(${TYPED_LENGTH.call(v)} bytes)`;
  if (types.isMap(v)) return `Map(${MAP_SIZE.call(v)})`;
  if (types.isSet(v)) return `Set(${SET_SIZE.call(v)})`;
  if (types.isDate(v)) {
    const t = Date.prototype.getTime.call(v);
    return Number.isNaN(t) ? 'Date(invalid)' : `Date(${new Date(t).toISOString()})`;
  }
  if (types.isPromise(v)) return 'Promise';
  if (types.isNativeError(v)) return 'Error';
  return undefined;
}

// A JS value in about `max` characters. Runs none of its code: no getter,
// no Proxy trap, no toString.
function summarize(v, max = SUMMARY_BYTES, depth = 0) {
  if (typeof v === 'string') return quoted(v, depth > 0 ? 40 : max);
  if (v === null || typeof v !== 'object') {
    if (typeof v === 'function') return 'function';
    if (typeof v === 'symbol') return 'symbol';
    return String(v);
  }
  if (types.isProxy(v)) return 'Proxy';
  const special = builtin(v);
  if (special !== undefined) return special;
  if (depth > 0) return Array.isArray(v) ? '[...]' : '{...}';
  const list = Array.isArray(v);
  const keys = list ? [] : Object.keys(v);
  const count = list ? v.length : keys.length;
  const parts = [];
  let length = 0;
  for (let i = 0; i < count && parts.length < 3 && length < max; i++) {
    const key = list ? i : keys[i];
    const d = Object.getOwnPropertyDescriptor(v, key);
    const shown = !d ? 'undefined' : 'value' in d ? summarize(d.value, max, 1) : '[getter]';
    const part = list ? shown : `${key.length > 40 ? `${key.slice(0, 40)}...` : key}: ${shown}`;
    parts.push(part);
    length += part.length;
  }
  const more = parts.length < count;
  let text = `${list ? '[' : '{'}${parts.join(', ')}${more ? ', ...' : ''}${list ? ']' : '}'}`;
  if (more) text += ` (${count} ${list ? 'items' : 'keys'})`;
  return text.length > max + 40 ? `${text.slice(0, max)}...` : text;
}

/**
 * Arguments as a person reads them: a short string each, about
 * SUMMARY_LIST_BYTES in all; the rest is one last entry ("... (7 more)").
 * @param {Array} args
 * @returns {string[]}
 */
function summarizeArgs(args) {
  const out = [];
  let total = 0;
  for (let i = 0; i < args.length; i++) {
    if (total >= SUMMARY_LIST_BYTES) {
      out.push(`... (${args.length - i} more)`);
      break;
    }
    const s = summarize(args[i]);
    out.push(s);
    total += s.length;
  }
  return out;
}

/**
 * A durable task's journal as stored: its records in order, from the
 * store's scan() a page at a time. Keeps the first record (the start, or
 * the end of a finished task) and the latest HISTORY_MAX - 1 others;
 * `skipped` counts the records left out between them.
 * @param {object} store a store with scan(name, space, after, limit)
 * @param {string} name
 * @param {string} id
 * @param {number} [max] records kept at most
 * @returns {Promise<{ keys: string[], values: Uint8Array[], skipped: number }>}
 */
async function readJournal(store, name, id, max = HISTORY_MAX) {
  const prefix = `${id}/`;
  const keys = [];
  const values = [];
  let skipped = 0;
  for (let after = prefix; ;) {
    const page = await store.scan(name, SPACES.journal, after, PAGE);
    let i = 0;
    for (; i < page.keys.length && page.keys[i].startsWith(prefix); i++) {
      keys.push(page.keys[i]);
      values.push(page.values[i]);
      if (keys.length > max) {
        keys.splice(1, 1);
        values.splice(1, 1);
        skipped++;
      }
    }
    if (i < page.keys.length || page.keys.length < PAGE) break;
    after = page.keys[page.keys.length - 1];
  }
  return { keys, values, skipped };
}

/**
 * A durable task's history: its journal read from the store and decoded on
 * `native` (a NativeRuntime), one object a record.
 * @returns {Promise<{ history: object[], skipped: number }>}
 */
async function readHistory(native, store, name, id) {
  const { keys, values, skipped } = await readJournal(store, name, id);
  return { history: native.describeRecords(keys, values), skipped };
}

/**
 * A durable task's first record as stored (its start, or its end once it
 * finished and is retained), or none.
 * @returns {Promise<{ keys: string[], values: Uint8Array[] }>}
 */
async function readFirst(store, name, id) {
  const page = await store.scan(name, SPACES.journal, `${id}/`, 1);
  if (page.keys.length === 1 && page.keys[0].startsWith(`${id}/`)) return page;
  // A finished task retained by a directory store: its end record is its
  // index entry, its journal gone (docs/durable.md#restore-at-open).
  // (After: the largest key before `id`, ids being [0-9a-z-] and '~' above them.)
  const before = `${id.slice(0, -1)}${String.fromCharCode(id.charCodeAt(id.length - 1) - 1)}~`;
  const index = await store.scan(name, SPACES.index, before, 1);
  const at = index.keys.indexOf(id);
  return at >= 0 ? { keys: [`${id}/0000000000`], values: [index.values[at]] } : { keys: [], values: [] };
}

/**
 * rt.inspect(id, options) and task.inspect(options) (lib/runtime/runtime.js delegates here).
 * @param {Array} lent what the runtime lends: [its NativeRuntime, snapshot(id) (rt.task's), its
 *   Tasks started from JS by key, its id prefix (such a task's id is it + its key in base 36),
 *   its store or null, its name or null]
 * @param {string} id
 * @param {{ history?: boolean, where?: boolean }} [options]
 * @returns {Promise<object|undefined>} undefined for an id the runtime does not know
 */
async function inspectTask(lent, id, options) {
  const [native, snapshot, tasks, prefix, store0, name] = lent;
  if (typeof id !== 'string') throw invalidType('id', 'a task id string', id);
  const opts = inspectOptions(options);
  const info = snapshot(id);
  if (info === undefined) return undefined;
  const out = { ...info };
  const live = native.inspect(id, true);
  const task = id.startsWith(prefix) ? tasks.get(parseInt(id.slice(prefix.length), 36)) : undefined;
  const [fn, args] = task ? startOf(task) : [];
  const store = store0 && typeof store0.scan === 'function' ? store0 : null;
  let first; // its start or end record, decoded
  if (store && (live ? live.durable : typeof fn !== 'function')) {
    const { keys, values } = await readFirst(store, name, id);
    [first] = native.describeRecords(keys, values);
    if (first && first.kind !== 'start' && first.kind !== 'end') first = undefined; // a running task's index entry
  }
  out.durable = live ? live.durable : first !== undefined;
  if (live && live.durable) {
    out.entry = live.entry;
    out.key = live.key;
  } else if (first && first.kind === 'start') {
    out.entry = first.entry;
    out.key = first.key;
  } else if (first && first.kind === 'end') {
    out.key = first.key;
  } else if (typeof fn === 'string') {
    out.entry = fn;
  } else if (live && live.origin) {
    out.entry = `function ${live.origin}`;
  }
  if (first && first.label !== undefined && out.name === undefined) out.name = first.label; // a task restored since
  if (first && first.kind === 'start') out.args = first.args;
  else if (args) out.args = summarizeArgs(args);
  if (opts.where && live) {
    if (live.where === undefined) {
      out.where = { error: live.whereError };
    } else {
      out.where = { traceback: live.where };
      if (live.line !== undefined) Object.assign(out.where, { source: live.source, line: live.line });
    }
  }
  if (opts.history && out.durable && store) {
    const { history, skipped } = await readHistory(native, store, name, id);
    out.history = history;
    if (skipped > 0) out.historySkipped = skipped;
  }
  return out;
}

/**
 * A Lua state of its own to decode stored records with, for readers that
 * have no runtime (lua-tasks inspect): close() it when done.
 * @returns {{ describe(keys: string[], values: Uint8Array[]): object[],
 *   history(store: object, name: string, id: string): Promise<{ history: object[], skipped: number }>,
 *   close(): void }}
 */
function openDecoder() {
  const opts = normalizeOptions({ print: () => {} });
  const native = new binding.NativeRuntime(
    opts,
    opts.print,
    () => {},
    {},
    () => {},
  );
  return {
    describe: (keys, values) => native.describeRecords(keys, values),
    history: (store, name, id) => readHistory(native, store, name, id),
    close: () => native.close(),
  };
}

module.exports = {
  inspectTask,
  inspectOptions,
  readJournal,
  readFirst,
  readHistory,
  openDecoder,
  summarize,
  summarizeArgs,
};
