// SPDX-License-Identifier: MIT
// PostgresStore's options, checked, the pg package it loads, and how it names where it connects.
'use strict';

const { makeError, typeName } = require('../../errors');
const { checkNumber } = require('../../validate');

const LEASE_MS = 10000;
const LEASE_MS_MIN = 100;
const SCHEMA_RE = /^[a-z_][a-z0-9_]{0,62}$/;

// node-pg's own parameter conversion (what client.query applies to each value).
function loadPgUtils() {
  try {
    return require('pg/lib/utils').prepareValue;
  } catch {
    return (v) => v; // a pg without it: client.query converts them
  }
}

/** The `pg` package, required at first use. */
function loadPg() {
  try {
    return require('pg');
  } catch (e) {
    if (e && e.code === 'MODULE_NOT_FOUND' && String(e.message).includes("'pg'")) {
      throw Object.assign(
        new Error(
          'PostgresStore needs the "pg" package (node-postgres), an optional peer dependency of lua-tasks: install it beside lua-tasks with `npm install pg`.',
        ),
        { code: 'MODULE_NOT_FOUND', cause: e },
      );
    }
    throw e;
  }
}

/** Where a store connects, for messages: never the password. */
function describeTarget(pg, connection) {
  try {
    const c = new pg.Client(connection || {});
    return `host ${c.host}, port ${c.port}, database "${c.database}", user "${c.user}"`;
  } catch {
    return 'the pool given';
  }
}

// Options of the constructor, checked: what is wrong names the option.
function checkOptions(options) {
  if (options === null || typeof options !== 'object') {
    throw makeError(
      'ERR_INVALID_ARG_TYPE',
      `The "options" argument must be an object { connectionString } or { pool }. Received ${typeName(options)}.`,
    );
  }
  const { connectionString, pool, leaseMs = LEASE_MS, schema = 'public', max = 10 } = options;
  if (connectionString !== undefined && (typeof connectionString !== 'string' || connectionString === '')) {
    throw makeError(
      'ERR_INVALID_ARG_TYPE',
      `The "options.connectionString" option must be a non-empty string (postgres://user:password@host:port/database). Received ${typeof connectionString}.`,
    );
  }
  if (pool !== undefined && (pool === null || typeof pool !== 'object' || typeof pool.connect !== 'function')) {
    throw makeError(
      'ERR_INVALID_ARG_TYPE',
      `The "options.pool" option must be a pg.Pool (an object with connect()). Received ${typeName(pool)}.`,
    );
  }
  if ((connectionString === undefined) === (pool === undefined)) {
    throw makeError(
      'ERR_INVALID_ARG_VALUE',
      `PostgresStore needs exactly one of "options.connectionString" and "options.pool". Received ${connectionString === undefined ? 'neither' : 'both'}.`,
    );
  }
  checkNumber('options.leaseMs', leaseMs, { unit: 'milliseconds', min: LEASE_MS_MIN, max: 2 ** 31 - 1, integer: true });
  if (typeof schema !== 'string' || !SCHEMA_RE.test(schema)) {
    throw makeError(
      'ERR_INVALID_ARG_VALUE',
      `The "options.schema" option must be a lowercase SQL identifier (letters, digits, "_"; at most 63). Received ${typeName(schema)}.`,
    );
  }
  checkNumber('options.max', max, { unit: 'connections', min: 1, max: 10000, integer: true });
  return { connectionString, pool, leaseMs, schema, max };
}

/**
 * @typedef {object} PostgresStoreOptions
 * @property {string} [connectionString] postgres://user:password@host:port/database;
 *   the store makes (and close() ends) a pg.Pool of `max` connections
 * @property {object} [pool] a pg.Pool of yours (close() leaves it open);
 *   exactly one of connectionString and pool
 * @property {number} [leaseMs] how long a lease lasts unless renewed (it is
 *   renewed every third of it); a holder that vanished without its session
 *   ending is taken over after it. @default 10000
 * @property {string} [schema] where the lua_tasks_* tables are (created, with
 *   the schema, at first use). @default 'public'
 * @property {number} [max] connections of the pool the store makes. @default 10
 */

module.exports = { checkOptions, loadPg, loadPgUtils, describeTarget };
