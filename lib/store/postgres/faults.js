// SPDX-License-Identifier: MIT
// PostgreSQL's failures: which are transient, which end a session, and how a pool's errors are heard.
'use strict';

const { makeError } = require('../../errors');
const { SOCKET_ERRORS } = require('../faults');

// A PostgreSQL error (it has a SQLSTATE): the connection is still usable.
const isSqlError = (e) => Boolean(e) && typeof e.code === 'string' && /^[0-9A-Z]{5}$/.test(e.code);
// An SQL error that ends its session (FATAL: admin_shutdown, a connection
// failure, an idle transaction timed out): nothing more runs on it.
const connectionGone = (e) => e.severity === 'FATAL' || /^(08|57P0)/.test(e.code) || e.code === '25P03';

// SQLSTATEs that say "try again later", not "this batch is wrong": the
// server is shutting down or restarting (57P01-57P03), out of connections
// (53300) or resources (53xxx), the connection failed (08xxx), a lock or
// statement timed out (55P03, 57014), a deadlock or serialization failure
// (40001, 40P01), or the session sat idle in a transaction too long (25P03).
const TRANSIENT_SQL = /^(08...|53...|57P0[123]|55P03|57014|40001|40P01|25P03)$/;

/**
 * Whether a failure of PostgreSQL is transient (the same write may succeed
 * later): a broken or refused connection, a server shutting down, a timeout.
 * node-pg's own "Connection terminated" errors carry no code: any error that
 * is not an SQL error and not one of ours is the connection's.
 * @param {*} e
 * @returns {boolean}
 */
function isTransient(e) {
  if (!e || typeof e !== 'object') return false;
  if (e.transient === true) return true;
  if (e.permanent === true) return false;
  const code = typeof e.code === 'string' ? e.code : '';
  if (SOCKET_ERRORS.has(code) || TRANSIENT_SQL.test(code)) return true;
  if (code.startsWith('ERR_') || isSqlError(e)) return false;
  return /connection|terminat|timeout|socket/i.test(String(e.message));
}

/**
 * A batch refused because an earlier batch of its name, handed over before
 * it, failed: it was taken after that one and must not land without it.
 */
function laterRefused(b, earlier) {
  const message = `The batch of "${b.name}"${b.seq === undefined ? '' : ` (seq ${b.seq})`} was not written: an earlier batch of "${b.name}" failed (${earlier.message}), and this one was taken after it.`;
  // Refused for the earlier one's sake: transient if that was (this one may
  // land when tried again), never a limit of its own.
  const transient = isTransient(earlier);
  if (typeof earlier.code === 'string' && earlier.code.startsWith('ERR_') && earlier.code !== 'ERR_STORE_LIMIT') {
    return makeError(earlier.code, message, { cause: earlier, transient });
  }
  return Object.assign(new Error(message), { code: transient ? earlier.code : undefined, cause: earlier, transient });
}

/**
 * Makes every 'error' of a pool and of its clients heard. A client checked
 * out has no listener of the pool's: node-pg (8.x) hands it over from inside
 * the socket read that completed its connection, and a server's "terminating
 * connection" (a restart, pg_terminate_backend) in that same read is emitted
 * before whoever checked it out can listen, which would kill the process. So
 * each client gets a listener of its own as it connects; its failure still
 * reaches the checkout (its queries fail, it is released broken).
 * @param {import('pg').Pool} pool
 */
function hearPool(pool) {
  if (typeof pool.on !== 'function') return;
  pool.on('error', () => {});
  pool.on('connect', (client) => client.on('error', () => {}));
}

module.exports = { isSqlError, connectionGone, isTransient, laterRefused, hearPool };
