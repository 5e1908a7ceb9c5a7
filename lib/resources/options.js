// SPDX-License-Identifier: MIT
// The options of Resources.open, checked.
'use strict';

const { makeError, typeName, invalidType } = require('../errors');
const { checkNumber, checkOptionKeys } = require('../validate');

/** The keys Resources.open takes. */
const OPTIONS = Object.freeze(['modules', 'idleMs', 'maxValueBytes', 'maxResources', 'maxPaths', 'runtime']);
/** A resource runtime's memoryLimit unless options.runtime sets one. */
const DEFAULT_RESOURCE_MEMORY = 64 << 20;
/** The invocations run once a resource keeps the answer of (durableRetainedMax) unless options.runtime says. */
const DEFAULT_KEPT_ANSWERS = 10000;
// Runtime options a resource's runtime gets from Resources itself.
const OWN_RUNTIME_KEYS = ['name', 'store', 'modules', 'resources', 'setup'];

/**
 * @param {object} options as Resources.open takes them
 * @param {{ maxValueBytes?: number }} [storeLimits] the store's declared limits
 * @returns {{ modules: object, runtime: object, idleMs: number, maxValueBytes: number, maxResources: number, maxPaths: number }}
 * @throws {TypeError} ERR_INVALID_ARG_TYPE, ERR_INVALID_ARG_VALUE; {RangeError} ERR_OUT_OF_RANGE
 */
function checkOptions(options, storeLimits) {
  checkOptionKeys(options, OPTIONS, 'a Resources.open');
  const { modules, runtime = {} } = options;
  if (modules === null || typeof modules !== 'object' || Object.keys(modules).length === 0) {
    throw invalidType('options.modules', 'an object of module name -> Lua source, not empty', modules);
  }
  for (const [name, src] of Object.entries(modules)) {
    if (typeof src !== 'string') {
      throw makeError(
        'ERR_INVALID_ARG_TYPE',
        `The module ${JSON.stringify(name)} in "options.modules" must be Lua source (a string). Received ${typeName(src)}.`,
      );
    }
  }
  if (runtime === null || typeof runtime !== 'object') {
    throw invalidType('options.runtime', 'an object of Runtime options', runtime);
  }
  for (const k of OWN_RUNTIME_KEYS) {
    if (runtime[k] !== undefined) {
      throw makeError(
        'ERR_INVALID_ARG_VALUE',
        `The "options.runtime.${k}" option is set by Resources for each resource; leave it out.`,
      );
    }
  }
  const idleMs =
    options.idleMs === undefined
      ? 30000
      : checkNumber('options.idleMs', options.idleMs, { unit: 'milliseconds', min: 0, max: 2 ** 31 - 1 });
  const storeMax = (storeLimits && storeLimits.maxValueBytes) || Infinity;
  const maxValueBytes =
    options.maxValueBytes === undefined
      ? Math.min(storeMax, 64 << 20)
      : Math.min(
          storeMax,
          checkNumber('options.maxValueBytes', options.maxValueBytes, {
            unit: 'bytes',
            min: 1,
            max: 2 ** 30,
            integer: true,
          }),
        );
  const count = (k, dflt) =>
    options[k] === undefined ? dflt : checkNumber(`options.${k}`, options[k], { min: 1, max: 1e7, integer: true });
  const maxResources = count('maxResources', 10000);
  const maxPaths = count('maxPaths', 50000);
  // A resource's runtime takes values from any caller: bounded by default
  // (its persistence limits follow memoryLimit, and the answers it keeps
  // for repeated requests are counted: docs/security.md).
  const rtOpts = { memoryLimit: DEFAULT_RESOURCE_MEMORY, durableRetainedMax: DEFAULT_KEPT_ANSWERS, ...runtime };
  return { modules: { ...modules }, runtime: rtOpts, idleMs, maxValueBytes, maxResources, maxPaths };
}

module.exports = { OPTIONS, checkOptions };
