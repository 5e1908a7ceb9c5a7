// SPDX-License-Identifier: MIT
// A held name's keyed rows in memory, for reader(): values and their keys in byte order.
'use strict';

// Orders strings as their UTF-8 bytes (as PostgreSQL's "C" collation and the
// directory store do): by code point. JS compares UTF-16 units, which puts a
// surrogate (U+D800-DFFF) below U+E000-FFFF; shifted here above them.
function byteOrder(a, b) {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    let x = a.charCodeAt(i);
    let y = b.charCodeAt(i);
    if (x !== y) {
      if (x >= 0xd800 && y >= 0xd800) {
        x = x >= 0xe000 ? x - 0x800 : x + 0x2000;
        y = y >= 0xe000 ? y - 0x800 : y + 0x2000;
      }
      return x - y;
    }
  }
  return a.length - b.length;
}

// The first index of `sorted` whose key is not before `key`.
function lowerBound(sorted, key) {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (byteOrder(sorted[mid], key) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * One space of a held name's keyed rows, in memory: the values, and their
 * keys sorted when keys() asks (kept until a key comes or goes).
 */
class Records {
  values = new Map(); // key -> Buffer
  #sorted = null;

  set(key, value) {
    if (value === null) {
      if (this.values.delete(key)) this.#sorted = null;
    } else {
      if (!this.values.has(key)) this.#sorted = null;
      this.values.set(key, value);
    }
  }

  keys(prefix, after, limit) {
    if (!this.#sorted) this.#sorted = [...this.values.keys()].sort(byteOrder);
    const sorted = this.#sorted;
    let i = lowerBound(sorted, prefix);
    if (after !== '' && byteOrder(after, prefix) >= 0) {
      i = lowerBound(sorted, after);
      if (i < sorted.length && sorted[i] === after) i++;
    }
    const out = [];
    for (; i < sorted.length && out.length < limit && sorted[i].startsWith(prefix); i++) out.push(sorted[i]);
    return out;
  }
}

module.exports = { Records, byteOrder };
