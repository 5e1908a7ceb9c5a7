// SPDX-License-Identifier: MIT
// The options a runtime takes: their names (the one list the docs are checked
// against) and their checks.
'use strict';

const fs = require('node:fs');
const v8 = require('node:v8');
const binding = require('../binding');
const { makeError, quote, typeName, invalidType } = require('../errors');
const { nearest } = require('../nearest');
const { checkNumber, checkOptionKeys } = require('../validate');
const { checkTelemetry } = require('../telemetry/api');
const { isResources } = require('../resources/bridge');
const { isAbortSignal, checkDurableName } = require('./task');

/**
 * Every option `new Runtime()` takes. The Options table in docs/api.md, the
 * constructor's JSDoc and index.d.ts's RuntimeOptions are checked against
 * this list (test/js/readme.test.js, types.test.js); any other key is refused.
 */
const RUNTIME_OPTIONS = Object.freeze([
  'libs',
  'memoryLimit',
  'conversionLimit',
  'print',
  'keepAlive',
  'trustedObjects',
  'modules',
  'modulePaths',
  'resources',
  'timeSlice',
  'taskTimeout',
  'timeZone',
  'mailboxLimit',
  'clockOffsetMs',
  'maxValueBytes',
  'maxPendingBytes',
  'maxJournalBytes',
  'telemetry',
]);

/** The options only `Runtime.open` takes (OpenOptions in index.d.ts). */
const OPEN_OPTIONS = Object.freeze([
  'name',
  'store',
  'storeTimeout',
  'storeCacheBytes',
  'setup',
  'durableRetention',
  'durableRetainedMax',
  'durableCatchUp',
  'durableRestore',
]);

const LIB_NAMES = ['base', 'coroutine', 'string', 'table', 'math', 'utf8', 'os', 'io', 'debug', 'package'];

// Marks the options Runtime.open hands to the constructor.
const PERSIST = Symbol('lua-tasks.persist');

function defaultPrint(line) {
  process.stdout.write(`${line}\n`);
}

/**
 * The conversionLimit a runtime gets: the option, else 4 x memoryLimit (a
 * converted value is at most about as large as the state holding it), else a
 * quarter of V8's heap limit (one value converted to JS must not exhaust the
 * heap, and a Lua state without a limit must not take more in one go).
 * @param {number|undefined} given
 * @param {number|undefined} memoryLimit
 * @returns {number}
 */
function conversionLimitOf(given, memoryLimit) {
  if (given !== undefined) {
    const range = { unit: 'bytes', min: 0, max: Number.MAX_SAFE_INTEGER, integer: true, note: '0 = no cap' };
    return checkNumber('options.conversionLimit', given, range);
  }
  if (memoryLimit) return Math.min(4 * memoryLimit, Number.MAX_SAFE_INTEGER);
  return Math.floor(v8.getHeapStatistics().heap_size_limit / 4);
}

// The codec's own ceiling on one encoded value (native/core/codec/state_codec.hpp).
const MAX_ENCODED_VALUE = 2 ** 30;
// The defaults without memoryLimit. A journal is bounded even then: every
// record costs the store a row until the task ends, and ending it deletes
// them all (64 MiB is about 1.5 million small records).
const UNLIMITED = {
  maxValueBytes: MAX_ENCODED_VALUE,
  maxPendingBytes: Number.MAX_SAFE_INTEGER,
  maxJournalBytes: 64 * 2 ** 20,
};

/**
 * The persistence limits (docs/security.md#persistence-routes): each option
 * as given, else tied to memoryLimit (an encoded value stays about the size
 * it has in Lua, so a state under memoryLimit encodes under it too), else
 * UNLIMITED's.
 * @param {object} options
 * @param {number|undefined} memoryLimit
 * @returns {{ maxValueBytes: number, maxPendingBytes: number, maxJournalBytes: number }}
 */
function persistLimitsOf(options, memoryLimit) {
  const out = {};
  for (const name of ['maxValueBytes', 'maxPendingBytes', 'maxJournalBytes']) {
    const v = options[name];
    if (v === undefined) {
      out[name] = memoryLimit ? Math.min(memoryLimit, UNLIMITED[name]) : UNLIMITED[name];
      continue;
    }
    const max = name === 'maxValueBytes' ? MAX_ENCODED_VALUE : Number.MAX_SAFE_INTEGER;
    out[name] = checkNumber(`options.${name}`, v, { unit: 'bytes', min: 1, max, integer: true });
  }
  return out;
}

// A wall-clock offset beyond a year is a mistake, not a clock's error.
const MAX_CLOCK_OFFSET_MS = 365 * 86400 * 1000;

/**
 * A clock offset (the clockOffsetMs option, rt.setClockOffset's argument) checked.
 * @param {string} name how the message names it
 * @param {unknown} v
 * @returns {number} ms
 * @throws {TypeError|RangeError}
 */
function clockOffsetOf(name, v) {
  const range = { unit: 'milliseconds', min: -MAX_CLOCK_OFFSET_MS, max: MAX_CLOCK_OFFSET_MS, note: 'a year' };
  return checkNumber(name, v, range);
}

function normalizeOptions(options) {
  if (options === undefined) options = {};
  if (options === null || typeof options !== 'object') throw invalidType('options', 'an object', options);
  const out = {};
  const { libs = 'safe', memoryLimit, print, keepAlive = true, modules, trustedObjects = false } = options;
  for (const key of ['timeSlice', 'taskTimeout']) {
    const v = options[key];
    if (v === undefined) continue;
    out[key] = checkNumber(`options.${key}`, v, { unit: 'milliseconds', above: 0, max: 2 ** 31 });
  }
  if (OPEN_OPTIONS.some((k) => options[k] !== undefined) && !options[PERSIST]) {
    throw makeError(
      'ERR_INVALID_ARG_VALUE',
      'A runtime with a store and a name is created with "await Runtime.open(options)", which restores its saved state first.',
    );
  }
  for (const key of Object.keys(options)) {
    if (RUNTIME_OPTIONS.includes(key) || OPEN_OPTIONS.includes(key)) continue;
    // A misspelt option would otherwise be ignored without a word.
    const near = nearest(key, [...RUNTIME_OPTIONS, ...OPEN_OPTIONS]);
    throw makeError(
      'ERR_INVALID_ARG_VALUE',
      `The option ${JSON.stringify(key)} is not a Runtime option${near ? `; did you mean "${near}"?` : '.'} Options: ${RUNTIME_OPTIONS.join(', ')} (and ${OPEN_OPTIONS.join(', ')} with Runtime.open).`,
    );
  }
  if (options.modulePaths !== undefined) {
    const mp = options.modulePaths;
    if (!Array.isArray(mp) || mp.some((d) => typeof d !== 'string' || d === '')) {
      throw invalidType('options.modulePaths', 'an array of directory paths', mp);
    }
    out.modulePaths = mp.map((d) => {
      try {
        return fs.realpathSync(d);
      } catch (e) {
        throw makeError(
          'ERR_INVALID_ARG_VALUE',
          `The "options.modulePaths" directory ${JSON.stringify(d)} does not exist (${e.code}).`,
        );
      }
    });
  }
  if (options.timeZone !== undefined) {
    if (typeof options.timeZone !== 'string') {
      throw invalidType('options.timeZone', 'an IANA zone name', options.timeZone);
    }
    const error = binding.checkZone(options.timeZone);
    if (error !== null) {
      throw makeError('ERR_INVALID_ARG_VALUE', `The "options.timeZone" option is not a known zone: ${error}.`);
    }
    out.timeZone = options.timeZone;
  }
  if (options.mailboxLimit !== undefined) {
    const range = { unit: 'messages', min: 1, max: 2 ** 31, integer: true };
    out.mailboxLimit = checkNumber('options.mailboxLimit', options.mailboxLimit, range);
  }
  if (options.clockOffsetMs !== undefined) {
    out.clockOffsetMs = clockOffsetOf('options.clockOffsetMs', options.clockOffsetMs);
  }
  out.telemetry = checkTelemetry(options.telemetry);
  if (typeof keepAlive !== 'boolean') throw invalidType('options.keepAlive', 'a boolean', keepAlive);
  out.keepAlive = keepAlive;
  if (typeof trustedObjects !== 'boolean') throw invalidType('options.trustedObjects', 'a boolean', trustedObjects);
  out.trustedObjects = trustedObjects;
  if (modules !== undefined) {
    if (modules === null || typeof modules !== 'object') throw invalidType('options.modules', 'an object', modules);
    for (const [name, mod] of Object.entries(modules)) {
      if (mod === undefined || mod === null) {
        throw makeError(
          'ERR_INVALID_ARG_VALUE',
          `The module "${name}" in "options.modules" must be Lua source or a value. Received ${typeName(mod)}.`,
        );
      }
    }
    out.modules = modules;
  }
  if (options.resources !== undefined) {
    if (!isResources(options.resources)) {
      throw invalidType(
        'options.resources',
        'a Resources object (from await Resources.open(store, options))',
        options.resources,
      );
    }
    out.resources = options.resources;
  }
  if (libs === 'safe' || libs === 'all') {
    out.libs = libs;
  } else if (Array.isArray(libs)) {
    for (const name of libs) {
      if (!LIB_NAMES.includes(name)) {
        const what =
          typeof name === 'string' ? `an unknown library ${quote(name)}` : `${typeName(name)}, not a library name`;
        throw makeError(
          'ERR_INVALID_ARG_VALUE',
          `The "options.libs" list holds ${what}. Allowed: ${LIB_NAMES.join(', ')}.`,
        );
      }
    }
    out.libs = [...libs];
  } else {
    throw makeError(
      'ERR_INVALID_ARG_VALUE',
      `The "options.libs" option must be 'safe', 'all' or an array of library names. Received ${typeName(libs)}.`,
    );
  }
  if (memoryLimit !== undefined) {
    const range = { unit: 'bytes', min: 0, max: Number.MAX_SAFE_INTEGER, integer: true, note: '0 = no limit' };
    out.memoryLimit = checkNumber('options.memoryLimit', memoryLimit, range);
  }
  out.conversionLimit = conversionLimitOf(options.conversionLimit, out.memoryLimit);
  Object.assign(out, persistLimitsOf(options, out.memoryLimit));
  if (print !== undefined && typeof print !== 'function') throw invalidType('options.print', 'a function', print);
  out.print = print || defaultPrint;
  return out;
}

// The keys rt.spawn takes (any other is refused, naming the nearest).
const SPAWN_OPTIONS = Object.freeze(['args', 'signal', 'name', 'meta', 'durable', 'key']);

/**
 * rt.spawn's options, checked: what they say, with `labels` ({ name, meta }
 * as given, or undefined for neither).
 * @throws {TypeError} for a bad option
 */
function checkSpawnOptions(options = {}) {
  checkOptionKeys(options, SPAWN_OPTIONS, 'a spawn');
  const { args = [], signal, name, meta, durable = false, key } = options;
  if (!Array.isArray(args)) throw invalidType('options.args', 'an array', args);
  if (typeof durable !== 'boolean') throw invalidType('options.durable', 'a boolean', durable);
  if (key !== undefined && (typeof key !== 'string' || key === '')) {
    throw invalidType('options.key', 'a non-empty string', key);
  }
  if (key !== undefined && !durable) {
    throw makeError(
      'ERR_INVALID_ARG_VALUE',
      'The option "key" (an idempotency key) is for durable tasks: add durable: true.',
    );
  }
  if (signal !== undefined && !isAbortSignal(signal)) throw invalidType('options.signal', 'an AbortSignal', signal);
  if (name !== undefined && typeof name !== 'string') throw invalidType('options.name', 'a string', name);
  if (durable && name !== undefined) checkDurableName(name);
  let labels;
  if (name !== undefined || meta !== undefined) {
    labels = {};
    if (name !== undefined) labels.name = name;
    if (meta !== undefined) labels.meta = meta;
  }
  return { args, signal, name, durable, key, labels };
}

module.exports = {
  RUNTIME_OPTIONS,
  OPEN_OPTIONS,
  SPAWN_OPTIONS,
  PERSIST,
  normalizeOptions,
  clockOffsetOf,
  checkSpawnOptions,
};
