// SPDX-License-Identifier: MIT
// Making a fleet schema's tables: one session at a time, on a client that cannot crash the process.
'use strict';

const { lockId, schemaLockKey } = require('../store/postgres/schema');

/**
 * Runs `statements` (CREATE ... IF NOT EXISTS) in one transaction under the
 * schema's advisory lock, the one PostgresStore makes its tables under:
 * CREATE IF NOT EXISTS run by two sessions at once can fail (a duplicate key
 * in pg_type), so members joining together take turns. While checked out, a
 * client's 'error' (its connection reset, the server restarting) is heard
 * here (unheard, it kills the process), and a client that failed is dropped,
 * not handed back to the pool.
 * @param {import('pg').Pool} pool
 * @param {string} schema
 * @param {string[]} statements
 */
async function createUnderSchemaLock(pool, schema, statements) {
  const c = await pool.connect();
  let broken;
  const onError = (e) => {
    broken = broken || e;
  };
  c.on('error', onError);
  try {
    await c.query('BEGIN');
    await c.query(`SELECT pg_advisory_xact_lock(${lockId('$1')})`, [schemaLockKey(schema)]);
    for (const sql of statements) await c.query(sql);
    await c.query('COMMIT');
  } catch (e) {
    broken = broken || e;
    await c.query('ROLLBACK').catch(() => {});
    throw e;
  } finally {
    c.removeListener('error', onError);
    c.release(broken);
  }
}

module.exports = { createUnderSchemaLock };
