// SPDX-License-Identifier: MIT
// The store contract: runtime names, the key spaces and the batch format, checked the same way by every store.
'use strict';

// What a store's write(batch) takes (docs/persistence.md, The store interface):
//   { name, token?, seq?, state?, writes?: [{ space?, key, value }] }
// name   a runtime name (checkName)
// token  from acquire(): a positive safe integer; absent for an unfenced write
// seq    a finite number growing with each batch under one lease
// state  the tasks.state snapshot (bytes), or absent / null: none in this batch
// writes keyed values: space one of SPACES (absent: 1), key a non-empty
//        string, value bytes, or null to delete the key (never undefined: a
//        value forgotten is a mistake, not a delete)

const { makeError, typeName } = require('../errors');

/** The key spaces a store keeps: tasks.store, durable tasks' journals, their inboxes, their index. */
const SPACES = Object.freeze({ store: 1, journal: 2, inbox: 3, index: 4 });
const SPACE_LIST = Object.freeze([SPACES.store, SPACES.journal, SPACES.inbox, SPACES.index]);

/**
 * A reader's optional method, for the runtime's restore only: () -> [native
 * store, name] when the reader's records can be scanned natively in one pass
 * (the directory store), so Runtime.open makes no JS value per record.
 */
const NATIVE_SCAN = Symbol('lua-tasks.nativeScan');

/**
 * A store's optional flag, and a batch's field under the same symbol: a
 * store whose `[NATIVE_JOURNAL]` is true takes a runtime's durable records
 * as the opaque batch the runtime's native side made (the directory store),
 * applied after `writes`, with no JS value per record. Any other store gets
 * them in `writes`.
 */
const NATIVE_JOURNAL = Symbol('lua-tasks.nativeJournal');

// Names become file names (DirectoryStore) and lock keys (PostgresStore):
// keep them to a safe, portable alphabet.
const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/**
 * Validates a runtime name for persistence.
 * @param {string} name
 * @throws {TypeError} ERR_INVALID_ARG_VALUE
 */
function checkName(name) {
  if (typeof name !== 'string' || !NAME_RE.test(name) || name.includes('..')) {
    throw makeError(
      'ERR_INVALID_ARG_VALUE',
      `The "options.name" option must be 1-128 characters of letters, digits, ".", "_" or "-", starting with a letter or digit. Received ${JSON.stringify(name)}.`,
    );
  }
}

// `what` names the field and its owner in messages.
function checkToken(token, what) {
  if (token !== undefined && !(Number.isSafeInteger(token) && token > 0)) {
    throw makeError(
      'ERR_INVALID_ARG_TYPE',
      `${what} must be a positive integer from acquire(). Received ${typeName(token)}.`,
    );
  }
}

function checkSeq(seq, what) {
  if (seq !== undefined && !Number.isFinite(seq)) {
    throw makeError('ERR_INVALID_ARG_TYPE', `${what} must be a finite number. Received ${typeName(seq)}.`);
  }
}

/**
 * The { token, seq } of save(name, bytes, info), checked; {} for none.
 * @returns {{ token?: number, seq?: number }}
 */
function checkInfo(info) {
  if (info === undefined || info === null) return {};
  if (typeof info !== 'object') {
    throw makeError(
      'ERR_INVALID_ARG_TYPE',
      `The save info must be an object { token, seq }. Received ${typeName(info)}.`,
    );
  }
  const { token, seq } = info;
  checkToken(token, `The save info's "token"`);
  checkSeq(seq, `The save info's "seq"`);
  return { token, seq };
}

/** The snapshot of save(name, bytes), checked. */
function checkSnapshot(name, bytes) {
  if (!(bytes instanceof Uint8Array)) {
    throw makeError(
      'ERR_INVALID_ARG_TYPE',
      `The snapshot of "${name}" must be a Buffer or Uint8Array. Received ${typeName(bytes)}.`,
    );
  }
}

/**
 * The arguments of a store's scan(name, space, after, limit), checked:
 * space one of SPACE_LIST, after a string ('' from the first key), limit a
 * non-negative integer or -1 (every key).
 * @returns {{ after: string, limit: number }}
 * @throws {TypeError} ERR_INVALID_ARG_VALUE, ERR_INVALID_ARG_TYPE
 */
function checkScan(space, after, limit) {
  if (!SPACE_LIST.includes(space)) {
    throw makeError(
      'ERR_INVALID_ARG_VALUE',
      `A store keeps spaces 1 (tasks.store), 2 (durable tasks' journals), 3 (their inboxes) and 4 (their index). Received ${typeName(space)}.`,
    );
  }
  if (after !== undefined && typeof after !== 'string') {
    throw makeError(
      'ERR_INVALID_ARG_TYPE',
      `The scan's "after" must be a key string ('' from the first). Received ${typeName(after)}.`,
    );
  }
  if (limit !== undefined && !(Number.isSafeInteger(limit) && limit >= -1)) {
    throw makeError(
      'ERR_INVALID_ARG_VALUE',
      `The scan's "limit" must be an integer of at least 0, or -1 for every key. Received ${typeName(limit)}.`,
    );
  }
  return { after: after ?? '', limit: limit ?? -1 };
}

// A names() pattern: a name's alphabet, and `*` for any run of characters
// within a name (none of the alphabet is a wildcard in SQLite's GLOB).
const PATTERN_RE = /^[A-Za-z0-9._*-]{1,128}$/;
const NAMES_MAX = 10000; // names one call lists at most

/**
 * The arguments of a store's names(pattern, after, limit), checked: pattern
 * a glob of a name's characters where `*` is any run of them (default `*`:
 * every name), after a name ('' from the first), limit 1 to NAMES_MAX
 * (default 1000).
 * @returns {{ pattern: string, after: string, limit: number }}
 * @throws {TypeError} ERR_INVALID_ARG_VALUE, ERR_INVALID_ARG_TYPE; {RangeError} ERR_OUT_OF_RANGE
 */
function checkNames(pattern, after, limit) {
  if (pattern !== undefined && (typeof pattern !== 'string' || !PATTERN_RE.test(pattern))) {
    throw makeError(
      'ERR_INVALID_ARG_VALUE',
      `A names() pattern is 1-128 characters of letters, digits, ".", "_", "-" and "*" (any run of characters within a name). Received ${typeName(pattern)}.`,
    );
  }
  if (after !== undefined && typeof after !== 'string') {
    throw makeError(
      'ERR_INVALID_ARG_TYPE',
      `The names() "after" must be a name string ('' from the first). Received ${typeName(after)}.`,
    );
  }
  if (limit !== undefined && !(Number.isSafeInteger(limit) && limit >= 1 && limit <= NAMES_MAX)) {
    throw makeError(
      'ERR_OUT_OF_RANGE',
      `The names() "limit" must be an integer from 1 to ${NAMES_MAX}. Received ${typeName(limit)}.`,
    );
  }
  return { pattern: pattern ?? '*', after: after ?? '', limit: limit ?? 1000 };
}

/**
 * A checked names() pattern as a SQL LIKE pattern (escape character `\`).
 * @param {string} pattern
 * @returns {string}
 */
function likePattern(pattern) {
  return pattern.replace(/[\\%_]/g, (c) => `\\${c}`).replace(/\*/g, '%');
}

/**
 * A batch of write(), checked; neither its writes nor their values are
 * copied. `state` is null when the batch carries none; `writes` [] when none.
 * @returns {{ name: string, token?: number, seq?: number, state: Uint8Array|null,
 *   writes: { space?: number, key: string, value: Uint8Array|null }[] }}
 */
function checkBatch(batch) {
  if (batch === null || typeof batch !== 'object') {
    throw makeError(
      'ERR_INVALID_ARG_TYPE',
      `The batch must be an object { name, token, seq, state, writes }. Received ${typeName(batch)}.`,
    );
  }
  const { name, token, seq, state, writes } = batch;
  checkName(name);
  checkToken(token, `The batch's "token" of "${name}"`);
  checkSeq(seq, `The batch's "seq" of "${name}"`);
  if (state !== undefined && state !== null && !(state instanceof Uint8Array)) {
    throw makeError(
      'ERR_INVALID_ARG_TYPE',
      `The batch's "state" of "${name}" must be a Buffer or Uint8Array. Received ${typeName(state)}.`,
    );
  }
  if (writes !== undefined && !Array.isArray(writes)) {
    throw makeError(
      'ERR_INVALID_ARG_TYPE',
      `The batch's "writes" of "${name}" must be an array. Received ${typeName(writes)}.`,
    );
  }
  for (const w of writes || []) {
    if (w === null || typeof w !== 'object' || typeof w.key !== 'string' || w.key === '') {
      throw makeError(
        'ERR_INVALID_ARG_TYPE',
        `Each write of the batch of "${name}" must be { space, key, value } with a non-empty string key.`,
      );
    }
    if (w.space !== undefined && !SPACE_LIST.includes(w.space)) {
      throw makeError(
        'ERR_INVALID_ARG_VALUE',
        `The write of "${w.key}" of "${name}" names space ${typeName(w.space)}: a store keeps spaces 1 (tasks.store), 2 (durable tasks' journals), 3 (their inboxes) and 4 (their index).`,
      );
    }
    if (w.value !== null && !(w.value instanceof Uint8Array)) {
      throw makeError(
        'ERR_INVALID_ARG_TYPE',
        `The value of store["${w.key}"] of "${name}" must be a Buffer, or null to delete it. Received ${typeName(w.value)}.`,
      );
    }
  }
  return { name, token, seq, state: state ?? null, writes: writes || [] };
}

/**
 * save(name, bytes, info) as the batch every store writes for it: the
 * snapshot alone, checked.
 * @returns {{ name: string, token?: number, seq?: number, state: Uint8Array, writes: [] }}
 */
function snapshotBatch(name, bytes, info) {
  checkName(name);
  checkSnapshot(name, bytes);
  const { token, seq } = checkInfo(info);
  return { name, token, seq, state: bytes, writes: [] };
}

module.exports = {
  SPACES,
  SPACE_LIST,
  NATIVE_SCAN,
  NATIVE_JOURNAL,
  checkName,
  checkScan,
  checkNames,
  likePattern,
  checkInfo,
  checkSnapshot,
  checkBatch,
  snapshotBatch,
};
