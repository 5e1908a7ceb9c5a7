// SPDX-License-Identifier: MIT
// What one write to PostgresStore may carry, and the refusal of one that cannot be written.
'use strict';

const { makeError } = require('../../errors');

// What one write may carry (the store's `limits`, docs/persistence.md). Keys
// are text: PostgreSQL's text cannot hold NUL, and a key is a btree entry,
// which must fit in a third of a page (8 KiB pages: ~2,700 bytes with the
// name and space beside it). Values travel as raw bytes (binary parameters,
// never bytea's hex text, which doubles them inside one V8 string); a value's
// bound keeps its copies (the Bind message, the backend's) small against
// PostgreSQL's 1 GB per message and per field, and a batch's total under it.
const LIMITS = Object.freeze({
  maxKeyBytes: 2048,
  maxValueBytes: 64 * 1024 * 1024,
  maxBatchBytes: 512 * 1024 * 1024,
  keyForbidsNul: true,
});

const MiB = (n) => `${(n / 1048576).toFixed(n < 1048576 ? 3 : 1)} MiB`;

/**
 * The writes of a batch its store's limits refuse: [{ space, key, bytes,
 * limit, what }] (none: it fits). `what`: 'key-nul', 'key-size',
 * 'value-size', 'state-size', 'batch-size'.
 */
function overLimits(b, limits) {
  const out = [];
  let total = b.state ? b.state.byteLength : 0;
  if (b.state && b.state.byteLength > limits.maxValueBytes) {
    out.push({ space: 0, key: null, bytes: b.state.byteLength, limit: limits.maxValueBytes, what: 'state-size' });
  }
  for (const w of b.writes) {
    const keyBytes = Buffer.byteLength(w.key);
    total += keyBytes + (w.value ? w.value.byteLength : 0);
    if (limits.keyForbidsNul && w.key.includes('\0')) {
      out.push({ space: w.space, key: w.key, bytes: keyBytes, limit: null, what: 'key-nul' });
    } else if (keyBytes > limits.maxKeyBytes) {
      out.push({ space: w.space, key: w.key, bytes: keyBytes, limit: limits.maxKeyBytes, what: 'key-size' });
    } else if (w.value && w.value.byteLength > limits.maxValueBytes) {
      out.push({
        space: w.space,
        key: w.key,
        bytes: w.value.byteLength,
        limit: limits.maxValueBytes,
        what: 'value-size',
      });
    }
  }
  if (out.length === 0 && total > limits.maxBatchBytes) {
    // No one write is at fault: the batch as a whole is dropped.
    for (const w of b.writes) {
      out.push({ space: w.space, key: w.key, bytes: total, limit: limits.maxBatchBytes, what: 'batch-size' });
    }
    if (out.length === 0) {
      out.push({ space: 0, key: null, bytes: total, limit: limits.maxBatchBytes, what: 'batch-size' });
    }
  }
  return out;
}

// The refusal of a batch by the store's limits: ERR_STORE_LIMIT naming the
// first write at fault, its size and the limit; `refused` lists them all.
function limitError(b, refused) {
  const r = refused[0];
  const where =
    r.space === 1
      ? `tasks.store key ${JSON.stringify(r.key)}`
      : r.key === null
        ? 'the tasks.state snapshot'
        : `record ${JSON.stringify(r.key)} (space ${r.space})`;
  const why =
    {
      'key-nul': `${where} holds a NUL character, which PostgreSQL text cannot keep (limits.keyForbidsNul)`,
      'key-size': `the key of ${where} is ${r.bytes} bytes, over limits.maxKeyBytes (${r.limit})`,
      'batch-size': `the batch is ${MiB(r.bytes)}, over limits.maxBatchBytes (${MiB(r.limit)}): commit less at a time`,
    }[r.what] || `${where} is ${MiB(r.bytes)}, over limits.maxValueBytes (${MiB(r.limit)})`;
  const more = refused.length > 1 ? ` (${refused.length} writes refused in all)` : '';
  return makeError(
    'ERR_STORE_LIMIT',
    `The batch of "${b.name}" was refused by PostgresStore: ${why}${more}. Nothing of it was written: PostgresStore can never take such a write.`,
    { refused, permanent: true },
  );
}

module.exports = { LIMITS, overLimits, limitError };
