// SPDX-License-Identifier: MIT
// The one check of a number given as an option or argument, and of an options object's keys, with Node's codes used Node's way.
'use strict';

const { makeError, typeName, invalidType } = require('./errors');
const { nearest } = require('./nearest');

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

/**
 * An options object checked: an object (else ERR_INVALID_ARG_TYPE, saying
 * `shape`), whose every key is one of `allowed` (else ERR_INVALID_ARG_VALUE
 * naming the key, the nearest allowed one and the list).
 * @param {unknown} options
 * @param {readonly string[]} allowed
 * @param {string} what whose options, as the message says it ("a spawn", "a dashboard")
 * @param {string} [shape] what an object of them looks like, for the type error
 * @returns {object} options
 */
function checkOptionKeys(options, allowed, what, shape = 'an object') {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw invalidType('options', shape, options);
  }
  for (const key of Object.keys(options)) {
    if (allowed.includes(key)) continue;
    const near = nearest(key, allowed);
    throw makeError(
      'ERR_INVALID_ARG_VALUE',
      `The option ${JSON.stringify(key)} is not ${what} option${near ? `; did you mean "${near}"?` : '.'} Options: ${allowed.join(', ')}.`,
    );
  }
  return options;
}

module.exports = { checkNumber, checkOptionKeys };
