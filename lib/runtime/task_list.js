// SPDX-License-Identifier: MIT
// listTasks: a name's durable tasks read from a store, without activating any, filtered and a page at a time.
'use strict';

// What is read: a directory store's index (space 4, one entry a task: its
// state and wait, or its end record once it finished) and, for each task
// the page shows, its start record (entry, key, label, arguments); a store
// without an index (PostgreSQL, or a name written before the index existed)
// its journals (space 2), each task's first and last record telling the
// same. Every record is decoded by the one decoder (lib/runtime/inspect.js,
// native/core/durable/journal_history.cpp). Nothing is locked or leased: a
// name open elsewhere is read as the store holds it, its latest writes
// perhaps not yet there (docs/api.md#listing-durable-tasks).

const { checkOptionKeys } = require('../validate');
const { SPACES, checkName } = require('../store/contract');
const { makeError, invalidType, typeName } = require('../errors');
const { openDecoder } = require('./inspect');
const { INDEX_MARK_KEY } = require('./task_codes');

const OPTIONS = ['name', 'status', 'entry', 'label', 'after', 'limit'];
const STATUSES = ['running', 'waiting', 'done', 'failed', 'cancelled'];
const LIMIT_MAX = 1000;
const LIMIT_DEFAULT = 100;
// Tasks one call looks at, at most, per task it may return: a filter that
// few tasks pass ends a page early, with `next` to go on from.
const EXAMINED_PER_RESULT = 10;
// Records one scan of the store reads.
const PAGE = 256;
// The index's own entry: present once every unfinished task of the name
// has an entry. '<' sorts just before its key, and a task id has neither.
const BEFORE_MARK = '<';

/**
 * The options of listTasks, checked.
 * @returns {{ name: string, status?: string, entry?: string, label?: string, after: string, limit: number }}
 */
function listOptions(options) {
  checkOptionKeys(options, OPTIONS, 'a listTasks', 'an object with a runtime name ({ name })');
  const { name, status, entry, label, after = '', limit = LIMIT_DEFAULT } = options;
  checkName(name);
  if (status !== undefined && !STATUSES.includes(status)) {
    throw makeError(
      'ERR_INVALID_ARG_VALUE',
      `The option "status" must be one of ${STATUSES.join(', ')}. Received ${typeName(status)}.`,
    );
  }
  for (const [key, v] of [
    ['entry', entry],
    ['label', label],
  ]) {
    if (v !== undefined && typeof v !== 'string') throw invalidType(`options.${key}`, 'a string', v);
  }
  if (typeof after !== 'string') throw invalidType('options.after', "a task id string ('' from the first)", after);
  if (!Number.isInteger(limit) || limit < 1 || limit > LIMIT_MAX) {
    throw makeError(
      'ERR_OUT_OF_RANGE',
      `The "options.limit" option must be an integer from 1 to ${LIMIT_MAX}. Received ${typeName(limit)}.`,
    );
  }
  return { name, status, entry, label, after, limit };
}

// Its wait as rt.task(id) shows one.
function waitOf(record) {
  const waiting = { instruction: record.instruction };
  if (record.deadline) waiting.until = record.deadline;
  return waiting;
}

// A listed task from its state (an index entry, or its journal's last
// record) and its first record (start or end); null if the filters drop it.
function listed(id, state, first, o) {
  const t = { id, status: 'running' };
  if (first && first.kind === 'end') {
    t.status = first.status;
    t.ended = first.ended;
  } else if (state && state.kind === 'index') {
    t.status = state.status;
    if (state.status === 'waiting') t.waiting = waitOf(state);
  } else if (state && state.kind === 'yield') {
    t.status = 'waiting';
    t.waiting = waitOf(state);
  } else if (state && state.error) {
    t.error = state.error;
  }
  if (first && first.error) t.error = first.error;
  if (first && first.label !== undefined) t.name = first.label;
  if (first && first.kind === 'start') {
    t.entry = first.entry;
    t.args = first.args;
  }
  t.key = first && first.key !== undefined ? first.key : state && state.key !== undefined ? state.key : null;
  if (o.status !== undefined && t.status !== o.status) return null;
  if (o.entry !== undefined && t.entry !== o.entry) return null;
  if (o.label !== undefined && t.name !== o.label) return null;
  // (Resources, once tasks have paths: a path pattern filters here.)
  return t;
}

// Whether the store holds `name`'s index, complete.
async function indexed(store, name) {
  if (!Array.isArray(store.spaces) || !store.spaces.includes(SPACES.index)) return false;
  const page = await store.scan(name, SPACES.index, BEFORE_MARK, 1);
  return page.keys[0] === INDEX_MARK_KEY;
}

// From the index: an entry a task, and the start record of those that run or wait.
async function fromIndex(store, o, decoder) {
  const tasks = [];
  const budget = o.limit * EXAMINED_PER_RESULT;
  let examined = 0;
  for (let after = o.after; ;) {
    const page = await store.scan(o.name, SPACES.index, after, PAGE);
    for (let i = 0; i < page.keys.length; i++) {
      const id = page.keys[i];
      after = id;
      if (id === INDEX_MARK_KEY) continue;
      const [state] = decoder.describe([`${id}/0000000000`], [page.values[i]]);
      let first = state.kind === 'end' ? state : undefined;
      // A finished task's end record is its entry; the others need their start only past the status filter.
      const wanted = o.status === undefined || (first ? first.status === o.status : state.status === o.status);
      if (!first && wanted) {
        const start = await store.scan(o.name, SPACES.journal, `${id}/`, 1);
        if (start.keys.length === 1 && start.keys[0].startsWith(`${id}/`)) {
          [first] = decoder.describe(start.keys, start.values);
        }
      }
      const t = wanted ? listed(id, state, first, o) : null;
      if (t) tasks.push(t);
      examined++;
      if (tasks.length === o.limit || examined >= budget) {
        return { tasks, next: i + 1 < page.keys.length || page.keys.length === PAGE ? id : null };
      }
    }
    if (page.keys.length < PAGE) return { tasks, next: null };
  }
}

// From the journals: each task's first and last record.
async function fromJournals(store, o, decoder) {
  const tasks = [];
  const budget = o.limit * EXAMINED_PER_RESULT;
  let examined = 0;
  let cur = null; // { id, first: [key, value], last: [key, value] }
  const finish = () => {
    const [first, last] = decoder.describe([cur.first[0], cur.last[0]], [cur.first[1], cur.last[1]]);
    const t = listed(cur.id, last, first, o);
    if (t) tasks.push(t);
    examined++;
  };
  // `after` names a task: the scan goes on past all its records ('~' sorts after the digits of a seq).
  for (let after = o.after === '' ? '' : `${o.after}/~`; ;) {
    const page = await store.scan(o.name, SPACES.journal, after, PAGE);
    for (let i = 0; i < page.keys.length; i++) {
      const key = page.keys[i];
      const id = key.slice(0, key.lastIndexOf('/'));
      if (cur && cur.id !== id) {
        finish();
        if (tasks.length === o.limit || examined >= budget) return { tasks, next: cur.id };
        cur = null;
      }
      if (!cur) cur = { id, first: [key, page.values[i]] };
      cur.last = [key, page.values[i]];
    }
    if (page.keys.length < PAGE) break;
    after = page.keys[page.keys.length - 1];
  }
  if (cur) finish();
  return { tasks, next: null };
}

/**
 * A runtime name's durable tasks as a store holds them, without activating
 * any (docs/api.md#listing-durable-tasks): a page of them in id order.
 * @param {object} store a DirectoryStore, a PostgresStore (a fleet's shares one database), or any store with scan()
 * @param {{ name: string, status?: 'running'|'waiting'|'done'|'failed'|'cancelled', entry?: string,
 *   label?: string, after?: string, limit?: number }} options name: the runtime name; status, entry,
 *   label: keep only those tasks (label: the name they were spawned with); after: the `next` of the page
 *   before (default '': from the first); limit: tasks at most (1 to 1,000, default 100)
 * @returns {Promise<{ tasks: object[], next: string|null }>} each task `{ id, status, waiting?, name?,
 *   entry?, key, args?, ended?, error? }`; `next`: where the next page starts, null after the last
 * @throws {TypeError|RangeError} for bad options (ERR_INVALID_ARG_TYPE, ERR_INVALID_ARG_VALUE, ERR_OUT_OF_RANGE)
 */
async function listTasks(store, options) {
  if (!store || typeof store.scan !== 'function') {
    throw invalidType('store', 'a store with scan() (a DirectoryStore, a PostgresStore)', store);
  }
  const o = listOptions(options);
  const decoder = openDecoder();
  try {
    return (await indexed(store, o.name)) ? await fromIndex(store, o, decoder) : await fromJournals(store, o, decoder);
  } finally {
    decoder.close();
  }
}

module.exports = { listTasks, listOptions, STATUSES, BEFORE_MARK };
