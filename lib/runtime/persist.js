// SPDX-License-Identifier: MIT
// Runtime.open's side of persistence: take the name, load its snapshot, restore it.
'use strict';

const { toStore } = require('../store/directory');
const { checkName, NATIVE_SCAN, SPACES } = require('../store/contract');
const { withTimeout, reasonText, nextTurn, SLICE_MS } = require('./commit_queue');
const { makeError, typeName, invalidType } = require('../errors');
const { checkNumber } = require('../validate');
const { INDEX_MARK_DEFAULT } = require('./task_codes');

const DEFAULT_STORE_TIMEOUT = 30000;
// tasks.store's cache of committed values (the storeCacheBytes option).
const DEFAULT_STORE_CACHE_BYTES = 16 * 1024 * 1024;

function storeTimeoutOf(v) {
  if (v === undefined) return DEFAULT_STORE_TIMEOUT;
  return checkNumber('options.storeTimeout', v, {
    unit: 'milliseconds',
    min: 0,
    max: 2 ** 31 - 1,
    note: '0 = no bound',
  });
}

// How long a finished durable task's end record is kept (docs/durable.md#retention).
const DURABLE_RETENTION_DEFAULT = 7 * 24 * 3600 * 1000;

// How many finished durable tasks a runtime keeps at most (docs/durable.md#retention).
const DURABLE_RETAINED_MAX_DEFAULT = 100000;

function durableRetainedMaxOf(v) {
  if (v === undefined) return DURABLE_RETAINED_MAX_DEFAULT;
  return checkNumber('options.durableRetainedMax', v, {
    unit: 'tasks',
    min: 1,
    max: 1e9,
    integer: true,
    note: 'past it the oldest finished ones are forgotten first',
  });
}

function durableRetentionOf(v) {
  if (v === undefined) return DURABLE_RETENTION_DEFAULT;
  const range = { unit: 'milliseconds', min: 0, max: Number.MAX_SAFE_INTEGER, integer: true };
  return checkNumber('options.durableRetention', v, {
    ...range,
    note: "0 = a finished durable task's records go at once",
  });
}

/**
 * What the store declares it takes (its optional `limits`: docs/persistence.md
 * #store-limits), checked: Lua refuses a key or value past them at the
 * call (tasks.store.set, COMMIT) instead of the store refusing a whole batch.
 * @param {object} store
 * @returns {{ maxKeyBytes?: number, maxValueBytes?: number, maxBatchBytes?: number, keyForbidsNul: boolean }}
 */
function storeLimitsOf(store) {
  const limits = store.limits;
  if (limits === undefined) return { keyForbidsNul: false };
  if (limits === null || typeof limits !== 'object') throw invalidType('store.limits', 'an object', limits);
  const out = { keyForbidsNul: false };
  for (const field of ['maxKeyBytes', 'maxValueBytes', 'maxBatchBytes']) {
    const v = limits[field];
    if (v === undefined) continue;
    if (!Number.isSafeInteger(v) || v < 1) {
      throw makeError(
        'ERR_INVALID_ARG_VALUE',
        `The store's "limits.${field}" must be a positive integer number of bytes. Received ${typeName(v)}.`,
      );
    }
    out[field] = v;
  }
  if (limits.keyForbidsNul !== undefined) {
    if (typeof limits.keyForbidsNul !== 'boolean') {
      throw invalidType('store.limits.keyForbidsNul', 'a boolean', limits.keyForbidsNul);
    }
    out.keyForbidsNul = limits.keyForbidsNul;
  }
  return out;
}

function storeCacheBytesOf(v) {
  if (v === undefined) return DEFAULT_STORE_CACHE_BYTES;
  const range = { unit: 'bytes', min: 0, max: Number.MAX_SAFE_INTEGER, integer: true, note: '0 = no cache' };
  return checkNumber('options.storeCacheBytes', v, range);
}

/**
 * The store's reader of keyed values for `name` (store interface v2), or
 * undefined for a store that keeps only whole snapshots (no reader() and
 * write()): tasks.store then says what it needs.
 * @param {object} store
 * @param {string} name
 * @returns {{ get(key: string): Buffer|null, keys(prefix: string, after: string, limit: number): string[] } | undefined}
 */
function readerOf(store, name) {
  if (typeof store.reader !== 'function' || typeof store.write !== 'function') return undefined;
  const reader = store.reader(name);
  if (
    reader === null ||
    typeof reader !== 'object' ||
    typeof reader.get !== 'function' ||
    typeof reader.keys !== 'function'
  ) {
    throw makeError(
      'ERR_INVALID_ARG_VALUE',
      `The store's reader("${name}") must return an object with get(key) and keys(prefix, after, limit). Received ${typeName(reader)}.`,
    );
  }
  return reader;
}

// Where a store keeps a name, for error messages.
function locate(store, name) {
  if (typeof store.locate === 'function') return String(store.locate(name));
  if (typeof store.file === 'function') return String(store.file(name));
  return `the store's load("${name}")`;
}

// The store's lease on `name`, bounded by the timeout. A lease granted after
// the timeout is released at once: nobody will use it.
async function acquireLease(store, name, timeout) {
  const pending = Promise.resolve().then(() => store.acquire(name));
  try {
    return await withTimeout(pending, timeout, () => `The store's acquire("${name}")`);
  } catch (e) {
    if (e && e.code === 'ERR_STORE_TIMEOUT') {
      pending.then(
        (l) => l && l.release(),
        () => {},
      );
    }
    throw e;
  }
}

function stripPeriod(message) {
  return String(message).replace(/\.$/, '');
}

/**
 * Runtime.open's first half: checks the open options, takes the store's
 * lease on the name and loads its last snapshot. The lease is released if
 * the load fails.
 * @param {object} options Runtime.open's options
 * @returns {Promise<{ rest: object, persist: { name: string, store: object, lease: object|null,
 *   storeTimeout: number, storeCacheBytes: number, reader: object|undefined }, state: Uint8Array|null|undefined,
 *   where: string }>} rest: the runtime's
 *   own options; persist: what the constructor takes under PERSIST; state: the snapshot, if any;
 *   where: where the store keeps the name, for messages
 */
async function openStore(options) {
  if (options === null || typeof options !== 'object') throw invalidType('options', 'an object', options);
  const {
    name,
    store,
    storeTimeout,
    storeCacheBytes,
    setup,
    durableRetention,
    durableRetainedMax,
    durableCatchUp,
    durableRestore,
    ...rest
  } = options;
  if (durableRestore !== undefined && durableRestore !== 'lazy' && durableRestore !== 'all') {
    throw makeError(
      'ERR_INVALID_ARG_VALUE',
      `The "options.durableRestore" option must be 'lazy' (a durable task waiting on a far deadline, INDEFINITELY or in tasks.receive stays in the store until needed) or 'all' (every unfinished durable task is replayed at open). Received ${typeName(durableRestore)}.`,
    );
  }
  if (durableCatchUp !== undefined && durableCatchUp !== 'once' && durableCatchUp !== 'skip') {
    throw makeError(
      'ERR_INVALID_ARG_VALUE',
      `The "options.durableCatchUp" option must be 'once' (an UNTIL_NEXT instant missed while closed fires once at open) or 'skip' (it waits for the next one). Received ${typeName(durableCatchUp)}.`,
    );
  }
  if (setup !== undefined && typeof setup !== 'function') {
    throw makeError(
      'ERR_INVALID_ARG_TYPE',
      `The "options.setup" option must be a function (rt) => void | Promise, run before durable tasks are restored. Received ${typeName(setup)}.`,
    );
  }
  const retention = durableRetentionOf(durableRetention);
  const retainedMax = durableRetainedMaxOf(durableRetainedMax);
  checkName(name);
  const st = toStore(store);
  const timeout = storeTimeoutOf(storeTimeout);
  const cacheBytes = storeCacheBytesOf(storeCacheBytes);
  const where = locate(st, name);
  const lease = typeof st.acquire === 'function' ? await acquireLease(st, name, timeout) : null;
  try {
    let state;
    try {
      state = await withTimeout(
        Promise.resolve().then(() => st.load(name)),
        timeout,
        () => `The store's load("${name}")`,
      );
    } catch (e) {
      if (e && e.code === 'ERR_STORE_TIMEOUT') throw e;
      throw makeError(
        'ERR_COMMIT_FAILED',
        `Cannot load the saved state of runtime "${name}" from ${where}: ${reasonText(e)}.`,
        { cause: e },
      );
    }
    if (state !== null && state !== undefined && !(state instanceof Uint8Array)) {
      throw makeError(
        'ERR_STORE_CORRUPT',
        `The store's load("${name}") must resolve to a Buffer or null. Received ${typeName(state)}.`,
      );
    }
    const reader = readerOf(st, name);
    // Durable tasks need a store that keeps their journals and inboxes.
    const spaces = reader && Array.isArray(st.spaces) ? st.spaces : [1];
    const durable = spaces.includes(SPACES.journal) && spaces.includes(SPACES.inbox);
    // Its index lets Runtime.open leave waiting tasks in the store, read when
    // needed: at once by the directory store's native reader, asynchronously
    // by a store's scan() (docs/durable.md#restore-at-open).
    const nativeScan = durable && typeof reader[NATIVE_SCAN] === 'function';
    const indexed = durable && spaces.includes(SPACES.index) && (nativeScan || typeof st.scan === 'function');
    return {
      rest,
      persist: {
        name,
        store: st,
        lease,
        storeTimeout: timeout,
        storeCacheBytes: cacheBytes,
        storeLimits: storeLimitsOf(st),
        reader,
        setup,
        durableRetention: retention,
        durableRetainedMax: retainedMax,
        durableCatchUp,
        durable,
        // setDurable's: whether tasks are indexed, read asynchronously, the index mark's payload
        indexing: [indexed, indexed && !nativeScan, indexMarks(indexed && !nativeScan, lease).indexMark],
        priorIndexMark: indexMarks(indexed && !nativeScan, lease).priorIndexMark,
        lazy: durableRestore !== 'all',
      },
      state,
      where,
    };
  } catch (e) {
    if (lease) await lease.release();
    throw e;
  }
}

// The payloads of the index's mark on a store read asynchronously
// (docs/durable.md#restore-at-open): indexMark, what this runtime writes
// (its lease's, when the store leases names); priorIndexMark, what the
// index must hold to be trusted at open (the lease taken just before this
// one: each take adds one to the token). Else nulls: the default mark.
function indexMarks(asyncReads, lease) {
  if (!asyncReads) return { indexMark: null, priorIndexMark: null };
  if (!lease || lease.token === undefined) return { indexMark: null, priorIndexMark: INDEX_MARK_DEFAULT };
  return { indexMark: `mark ${lease.token}`, priorIndexMark: `mark ${lease.token - 1}` };
}

// Records read a page at a time at Runtime.open (scanRecords).
const SCAN_PAGE = 10000;

// Decodes the snapshot into a new runtime's tasks.state a slice at a time, a
// loop turn between slices.
async function restore(native, bytes, name, where) {
  try {
    native.restoreBegin(bytes);
    while (!native.restoreStep(SLICE_MS)) await nextTurn();
  } catch (e) {
    // A state that does not fit memoryLimit is intact: it stays as it is,
    // and an open with a larger limit reads it.
    const tooBig = e.code === 'ERR_MEMORY_LIMIT';
    throw makeError(
      tooBig ? e.code : 'ERR_STORE_CORRUPT',
      `Cannot restore the saved state of runtime "${name}" from ${where}: ${stripPeriod(e.message)}.` +
        (tooBig ? ' The saved state is left as it is: open the runtime with a larger memoryLimit to read it.' : ''),
      { cause: e },
    );
  }
}

/**
 * Hands every durable record of the name (journals and inboxes, key spaces 2
 * and 3, and the end records the index keeps, space 4) to the native restore, none of them kept in JS: the directory
 * store's in one native scan; a store with scan() a page at a time (the
 * PostgreSQL store keeps them in the database only); else its reader's
 * keys() and get() a page at a time.
 * @param {object} native the runtime's native object
 * @param {object} store the store
 * @param {object} reader the store's reader(name)
 * @param {string} name
 * @returns {Promise<void>}
 */
async function scanRecords(native, store, reader, name) {
  try {
    await scanSpaces(native, store, reader, name);
  } catch (e) {
    throw readFailed(e, name);
  }
}

/**
 * Reads the name's index of durable tasks natively (the directory store):
 * the tasks that run now into the native restore, the others left dormant.
 * @returns {false | Array} false when the name has no complete index (then
 *   scanRecords reads every journal), else [dormant, [id, key, ...], [id whose journal is missing, ...]]
 */
function readIndex(native, scan, name) {
  try {
    return native.restoreIndex(...scan);
  } catch (e) {
    throw readFailed(e, name);
  }
}

// As a failed load: the open fails saying what it could not read; a
// damaged record keeps its own code.
function readFailed(e, name) {
  if (e && (e.code === 'ERR_STORE_CORRUPT' || e.code === 'ERR_RUNTIME_CLOSED')) return e;
  return makeError(
    'ERR_COMMIT_FAILED',
    `Cannot read the durable tasks' records of runtime "${name}" from the store: ${reasonText(e)}.`,
    { cause: e },
  );
}

async function scanSpaces(native, store, reader, name) {
  if (typeof reader[NATIVE_SCAN] === 'function' && native.restoreScan(...reader[NATIVE_SCAN]())) return;
  // A page of a space: the store's scan(), else its reader's keys() and get().
  const page = async (space, after) => {
    if (typeof store.scan === 'function') return store.scan(name, space, after, SCAN_PAGE);
    const keys = reader.keys('', after, SCAN_PAGE, space) || [];
    return { keys, values: keys.map((k) => reader.get(k, space)) };
  };
  // The spaces at once (a remote store answers them on two connections);
  // a short page is the last. A store that keeps the index keeps a finished
  // task's end record there, not in its journal.
  const spaces = [SPACES.journal, SPACES.inbox];
  if (Array.isArray(store.spaces) && store.spaces.includes(SPACES.index)) spaces.push(SPACES.index);
  await Promise.all(
    spaces.map(async (space) => {
      for (let after = ''; ;) {
        const { keys, values } = await page(space, after);
        if (keys.length > 0) native.restoreFeed(space, keys, values);
        if (keys.length < SCAN_PAGE) return;
        after = keys[keys.length - 1];
      }
    }),
  );
}

module.exports = { openStore, restore, scanRecords, readIndex, readFailed };
