// SPDX-License-Identifier: MIT
// Runtime.open's side of persistence: the store's timeout, lease and where it keeps a name.
'use strict';

const { withTimeout } = require('./commit_queue');
const { makeError, typeName } = require('./errors');

const DEFAULT_STORE_TIMEOUT = 30000;

function storeTimeoutOf(v) {
  if (v === undefined) return DEFAULT_STORE_TIMEOUT;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0 || v > 2 ** 31 - 1) {
    throw makeError('ERR_OUT_OF_RANGE',
      `The "options.storeTimeout" option must be a number of milliseconds from 0 (no bound) to 2147483647. Received ${typeName(v)}.`);
  }
  return v;
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
    if (e && e.code === 'ERR_STORE_TIMEOUT') pending.then((l) => l && l.release(), () => {});
    throw e;
  }
}

function stripPeriod(message) {
  return String(message).replace(/\.$/, '');
}

module.exports = { storeTimeoutOf, locate, acquireLease, stripPeriod };
