// SPDX-License-Identifier: MIT
// What may cross between resources: values that persist (nil, booleans, numbers, strings, tables of them), bounded in size.
'use strict';

const { makeError } = require('../errors');

// A Lua value handed to JS by reference (a coroutine, a userdata) is an
// object whose `luaType` the addon defined read-only; a table a script made
// may hold a field of that name, but never a read-only one.
function isLuaHandle(v) {
  const d = Object.getOwnPropertyDescriptor(v, 'luaType');
  return d !== undefined && d.writable === false;
}

function refuse(fn, what, where, got) {
  return makeError(
    'ERR_INVALID_ARG_VALUE',
    `${fn}: ${what}${where} is ${got}, which cannot persist; what crosses between resources is nil, booleans, numbers, strings and tables of them.`,
  );
}

/**
 * Checks that values persist and that together they stay within maxBytes,
 * counted as the durable encoding counts them: string bytes, 8 per number,
 * 16 per table entry plus its key, each shared table and long string once
 * (a table repeated a million times costs once, as it is written once).
 * @param {string} fn the call, for messages
 * @param {string} what the values ("the arguments", "the result")
 * @param {unknown[]} values
 * @param {number} maxBytes
 * @throws {TypeError} ERR_INVALID_ARG_VALUE for a value that cannot persist;
 *   {StoreError} ERR_STORE_LIMIT past maxBytes
 */
function checkValues(fn, what, values, maxBytes) {
  const seen = new Set();
  const strings = new Set();
  let bytes = 0;
  const stack = values.map((v, i) => [v, values.length > 1 ? ` (value ${i + 1})` : '']);
  while (stack.length > 0) {
    const [v, where] = stack.pop();
    switch (typeof v) {
      case 'undefined':
      case 'boolean':
        bytes += 1;
        break;
      case 'number':
      case 'bigint':
        bytes += 8;
        break;
      case 'string':
        // A long string repeated is written once (by reference), as a table is.
        if (v.length > 32) {
          if (strings.has(v)) {
            bytes += 8;
            break;
          }
          strings.add(v);
        }
        bytes += Buffer.byteLength(v) + 4;
        break;
      case 'object': {
        if (v === null) {
          bytes += 1;
          break;
        }
        if (v instanceof Uint8Array) {
          bytes += v.byteLength + 4;
          break;
        }
        if (isLuaHandle(v)) throw refuse(fn, what, where, `a Lua ${v.luaType}`);
        // A plain object's prototype is null or a realm's Object.prototype
        // (one with no prototype itself): Lua's tables come from the addon's realm.
        const proto = Object.getPrototypeOf(v);
        if (!Array.isArray(v) && proto !== null && Object.getPrototypeOf(proto) !== null) {
          throw refuse(fn, what, where, `an object of class ${(v.constructor && v.constructor.name) || 'unknown'}`);
        }
        if (seen.has(v)) {
          bytes += 8;
          break;
        }
        seen.add(v);
        for (const [k, x] of Object.entries(v)) {
          bytes += 16 + Buffer.byteLength(k);
          stack.push([x, `${where}[${JSON.stringify(k)}]`]);
        }
        break;
      }
      default:
        throw refuse(fn, what, where, `a ${typeof v === 'function' ? 'function' : typeof v}`);
    }
    if (bytes > maxBytes) {
      throw makeError(
        'ERR_STORE_LIMIT',
        `${fn}: ${what} come to more than ${maxBytes} bytes encoded, past the resources' maxValueBytes; send less, or keep large data in the resource's own tasks.store.`,
      );
    }
  }
}

module.exports = { checkValues };
