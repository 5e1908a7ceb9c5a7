// SPDX-License-Identifier: MIT
// The records of chosen durable tasks, read from a store: what an index's open and a dormant task's activation read.
'use strict';

const { SPACES } = require('../store/contract');

// A page of a range read through scan().
const PAGE = 1000;

/**
 * The journals (space 2) of the tasks `ids` and, if `inbox`, their inboxes
 * (space 3), each in key order: the store's readTasks() in one read when it
 * has one (PostgresStore), else its scan() a task at a time.
 * @param {object} store
 * @param {string} name
 * @param {string[]} ids
 * @param {boolean} inbox
 * @returns {Promise<{ journal: { keys: string[], values: Buffer[] }, inbox: { keys: string[], values: Buffer[] } }>}
 */
async function readTasks(store, name, ids, inbox) {
  if (typeof store.readTasks === 'function') return store.readTasks(name, ids, inbox);
  const out = { journal: { keys: [], values: [] }, inbox: { keys: [], values: [] } };
  for (const id of [...ids].sort()) {
    await readRange(store, name, SPACES.journal, id, out.journal);
    if (inbox) await readRange(store, name, SPACES.inbox, id, out.inbox);
  }
  return out;
}

// A task's records of `space` ("<id>/<seq>") into `into`.
async function readRange(store, name, space, id, into) {
  const prefix = `${id}/`;
  for (let after = prefix; ;) {
    const { keys, values } = await store.scan(name, space, after, PAGE);
    for (let i = 0; i < keys.length; i++) {
      if (!keys[i].startsWith(prefix)) return;
      into.keys.push(keys[i]);
      into.values.push(values[i]);
    }
    if (keys.length < PAGE) return;
    after = keys[keys.length - 1];
  }
}

module.exports = { readTasks };
