// SPDX-License-Identifier: MIT
// The names of the options a runtime takes: the one list the docs are checked against.
'use strict';

/**
 * Every option `new Runtime()` takes. The README's Options table, the
 * constructor's JSDoc and index.d.ts's RuntimeOptions are checked against
 * this list (test/js/types.test.js), and any other key is refused.
 */
const RUNTIME_OPTIONS = Object.freeze(['libs', 'memoryLimit', 'conversionLimit', 'print', 'keepAlive', 'trustedObjects',
  'modules', 'modulePaths', 'timeSlice', 'taskTimeout', 'timeZone']);

/** The options only `Runtime.open` takes (OpenOptions in index.d.ts). */
const OPEN_OPTIONS = Object.freeze(['name', 'store', 'storeTimeout']);

module.exports = { RUNTIME_OPTIONS, OPEN_OPTIONS };
