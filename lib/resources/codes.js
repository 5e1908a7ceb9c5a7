// SPDX-License-Identifier: MIT
// The response codes of resource and index calls (namazu.response.code in Lua), one list for Lua, JS and the docs.
'use strict';

/**
 * Each code is its own name as a string, so a code printed or sent to JS
 * reads as itself. OK, RESOURCE_NOT_FOUND and UNKNOWN are the seed's names;
 * the others name the seed's other ordinary misses (docs/resources.md#codes).
 */
const CODES = Object.freeze({
  OK: 'OK',
  RESOURCE_NOT_FOUND: 'RESOURCE_NOT_FOUND', // no resource has that id, or no path is that one
  METHOD_NOT_FOUND: 'METHOD_NOT_FOUND', // the resource's module has no field of that name
  DUPLICATE_RESOURCE: 'DUPLICATE_RESOURCE', // the path (create, link) is already taken
  METHOD_FAILED: 'METHOD_FAILED', // the method raised an error (its message comes with the code)
  UNKNOWN: 'UNKNOWN', // any other failure (the resources object closed meanwhile)
});

module.exports = { CODES };
