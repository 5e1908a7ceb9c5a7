// SPDX-License-Identifier: MIT
// A resource slot's store name, emptied before a new resource takes it: what a destroyed resource left goes.
'use strict';
//
// A resource's runtime is the store name of its slot (registry.js), and a
// destroyed resource's slot is taken by a later create: so the names
// resources ever use number at most maxResources, and their bytes are
// bounded as their count is. A create first deletes every key the slot's
// name holds (tasks.store, durable journals, inboxes, their index) under the
// name's lease; its tasks.state is emptied by the new runtime before `init`.

const { SPACE_LIST } = require('../store/contract');

const PAGE = 1000;

/**
 * Deletes every keyed record of `name` in `store` (all spaces), under its lease.
 * @param {object} store a DirectoryStore or PostgresStore
 * @param {string} name
 * @returns {Promise<number>} how many records it deleted
 * @throws ERR_STORE_LOCKED when another holds the name (nothing deleted)
 */
async function emptyName(store, name) {
  const lease = await store.acquire(name);
  let n = 0;
  try {
    for (const space of SPACE_LIST) {
      for (;;) {
        // Each page deleted before the next is read: the next starts again from the first key.
        const { keys } = await store.scan(name, space, '', PAGE);
        if (keys.length === 0) break;
        await store.write({ name, token: lease.token, writes: keys.map((key) => ({ space, key, value: null })) });
        n += keys.length;
        if (keys.length < PAGE) break;
      }
    }
  } finally {
    await lease.release();
  }
  return n;
}

module.exports = { emptyName };
