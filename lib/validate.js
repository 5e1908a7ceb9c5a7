// SPDX-License-Identifier: MIT
// The one check of a number given as an option or argument, with Node's codes used Node's way.
'use strict';

const { makeError, typeName, invalidType } = require('./errors');

const BOUND_TEXT = new Map([
  [2 ** 53 - 1, '2^53 - 1'],
  [2 ** 31 - 1, '2147483647'],
  [2 ** 31, '2^31'],
  [2 ** 30, '2^30'],
]);
const text = (n) => BOUND_TEXT.get(n) || String(n);

/**
 * `v` checked against a range: anything but a number is ERR_INVALID_ARG_TYPE
 * (TypeError); a number outside the range, not finite, or not an integer
 * where one is asked for is ERR_OUT_OF_RANGE (RangeError). The message names
 * the option or argument, the range and the value given.
 * @param {string} name "options.memoryLimit", or an argument's name
 * @param {unknown} v
 * @param {{ unit: string, min?: number, above?: number, max: number, integer?: boolean, note?: string }} range
 *   unit: what it counts ("bytes", "milliseconds"); min: the least allowed,
 *   or above: what it must exceed; note: what a value means ("0 = no limit")
 * @returns {number} v
 */
function checkNumber(name, v, { unit, min, above, max, integer = false, note }) {
  if (typeof v !== 'number') throw invalidType(name, `a number of ${unit}`, v);
  const low = above === undefined ? v >= min : v > above;
  if (!Number.isFinite(v) || !low || v > max || (integer && !Number.isInteger(v))) {
    const noun = name.startsWith('options.') ? 'option' : 'argument';
    const from = above === undefined ? `from ${text(min)}` : `more than ${text(above)} and at most`;
    throw makeError(
      'ERR_OUT_OF_RANGE',
      `The "${name}" ${noun} must be ${integer ? 'an integer' : 'a'} number of ${unit} ${from} ${above === undefined ? 'to ' : ''}${text(max)}${note ? ` (${note})` : ''}. Received ${typeName(v)}.`,
    );
  }
  return v;
}

module.exports = { checkNumber };
