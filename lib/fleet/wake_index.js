// SPDX-License-Identifier: MIT
// WakeIndex: the fleet's due-timer index in PostgreSQL, which names must run and from when.
'use strict';

const { createUnderSchemaLock } = require('./schema');
const { table, lockId, nameLockPrefix, fence } = require('../store/postgres/schema');

// One row per name the fleet has hosted, in <schema>.lua_tasks_wake:
//   wake_at = '-infinity'  the name is active: a member hosts it, or must
//                          (its holder died: the next member to poll takes it)
//   wake_at = T            hibernated; its earliest timer is due at T
//   wake_at IS NULL        hibernated with nothing due: a message, resume or
//                          call wakes it (any operation by name activates it)
// Every change is fenced by the writer's lease token through the store's
// fence (schema.js fence()): a member that lost a name cannot overwrite what
// its new holder says, even when the takeover commits while its change runs.
//
// claimDue() hands each due name to one member: the rows are locked FOR
// UPDATE SKIP LOCKED and marked claimed for a moment, so members polling at
// once split the due names instead of all trying each. A name handed over by
// its holder to balance the fleet (reserve()) is claimed for the member it is
// given to (reserved_for) until the claim lapses: only that member claims it
// meanwhile, then anyone. A name is due when
// wake_at has passed and no live lease holds it: free, expired, or held by
// a session that ended (the holder's advisory lock is gone from pg_locks:
// its process died; PostgreSQL saw its socket close).

class WakeIndex {
  #t;
  #lockPrefix;
  #schema;

  /**
   * @param {string} schema the store's schema
   */
  constructor(schema) {
    this.#t = { wake: table(schema, 'wake'), leases: table(schema, 'leases') };
    // A name's lock key is this and the name (nameLockKey).
    this.#lockPrefix = nameLockPrefix(schema);
    this.#schema = schema;
  }

  /** Creates the table if it is missing (the store made the schema and its leases table). */
  async create(pool) {
    await createUnderSchemaLock(pool, this.#schema, [
      `CREATE TABLE IF NOT EXISTS ${this.#t.wake} (name text PRIMARY KEY, wake_at timestamptz, claimed_until timestamptz)`,
      `CREATE INDEX IF NOT EXISTS lua_tasks_wake_due ON ${this.#t.wake} (wake_at)`,
      `ALTER TABLE ${this.#t.wake} ADD COLUMN IF NOT EXISTS reserved_for text`,
      `CREATE INDEX IF NOT EXISTS lua_tasks_wake_reserved ON ${this.#t.wake} (reserved_for) WHERE reserved_for IS NOT NULL`,
    ]);
  }

  // A statement's condition: `token` still holds the name's lease, and does
  // until the statement's transaction ends. A sub-select: run once, not per row.
  #fence(nameParam, tokenParam) {
    return `(SELECT ${fence(this.#schema, nameParam, tokenParam)})`;
  }

  /** Whether `token` holds the name's lease now (writes nothing). @returns {Promise<boolean>} */
  async holds(pool, name, token) {
    const { rows } = await pool.query(`SELECT ${this.#fence('$1', '$2')} AS held`, [name, token]);
    return rows[0].held === true;
  }

  /** The holder of `token` made the name active. @returns {Promise<boolean>} whether its token still held it */
  async active(pool, name, token) {
    const { rowCount } = await pool.query(
      `INSERT INTO ${this.#t.wake} AS w (name, wake_at) SELECT $1, '-infinity' WHERE ${this.#fence('$1', '$2')}
       ON CONFLICT (name) DO UPDATE SET wake_at = '-infinity', claimed_until = NULL, reserved_for = NULL`,
      [name, token],
    );
    return rowCount > 0;
  }

  /**
   * The holder of `token` hibernates the name, to be woken at `wakeAt` (a
   * Date) or by an operation (null).
   * @returns {Promise<boolean>} whether its token still held it
   */
  async hibernate(pool, name, token, wakeAt) {
    const { rowCount } = await pool.query(
      `UPDATE ${this.#t.wake} SET wake_at = $3, claimed_until = NULL, reserved_for = NULL WHERE name = $1 AND ${this.#fence('$1', '$2')}`,
      [name, token, wakeAt],
    );
    return rowCount > 0;
  }

  /**
   * The holder of `token`, about to let the name go, gives it to member `to`:
   * for `claimMs` only `to` claims it (the name stays active in the index).
   * @returns {Promise<boolean>} whether its token still held it
   */
  async reserve(pool, name, token, to, claimMs) {
    const { rowCount } = await pool.query(
      `UPDATE ${this.#t.wake} SET reserved_for = $3, claimed_until = now() + $4 * interval '1 millisecond'
       WHERE name = $1 AND ${this.#fence('$1', '$2')}`,
      [name, token, to, claimMs],
    );
    return rowCount > 0;
  }

  /** The SQL that counts the names given to member `idSql` and not yet claimed. */
  pendingFor(idSql) {
    return `(SELECT count(*) FROM ${this.#t.wake} WHERE reserved_for = ${idSql} AND claimed_until > now())`;
  }

  /**
   * Claims up to `limit` due names for `claimMs` (the caller activates them);
   * `me`: this member's id, which names given to it are claimed by.
   * @returns {Promise<{ name: string, takeover: boolean, handed: boolean }[]>} takeover: it was
   *   active (its holder is gone), not hibernated; handed: its holder gave it to `me`
   */
  async claimDue(pool, limit, claimMs, me) {
    const { rows } = await pool.query(
      `UPDATE ${this.#t.wake} w SET claimed_until = now() + $2 * interval '1 millisecond', reserved_for = NULL
       FROM (
         SELECT d.name, coalesce(d.reserved_for = $4, false) AS handed
         FROM ${this.#t.wake} d LEFT JOIN ${this.#t.leases} l ON l.name = d.name
         WHERE d.wake_at <= now() AND (d.claimed_until IS NULL OR d.claimed_until <= now() OR d.reserved_for = $4)
           AND (l.name IS NULL OR l.holder IS NULL OR l.expires_at <= now()
             OR (l.locked AND NOT EXISTS (
               SELECT 1 FROM pg_locks k WHERE k.locktype = 'advisory' AND k.granted AND k.objsubid = 1
                 AND k.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                 AND ((k.classid::bigint << 32) | k.objid::bigint) = ${lockId('$3 || d.name')})))
         ORDER BY d.wake_at LIMIT $1
         FOR UPDATE OF d SKIP LOCKED) due
       WHERE w.name = due.name
       RETURNING w.name, w.wake_at = '-infinity' AS takeover, due.handed`,
      [limit, claimMs, this.#lockPrefix, me],
    );
    return rows;
  }

  /** The row of a name: { wakeAt: Date|null, active: boolean } or null. */
  async get(pool, name) {
    const { rows } = await pool.query(`SELECT wake_at FROM ${this.#t.wake} WHERE name = $1`, [name]);
    if (!rows.length) return null;
    const w = rows[0].wake_at;
    return { wakeAt: w, active: w === -Infinity || (w instanceof Date && !Number.isFinite(w.getTime())) };
  }
}

module.exports = { WakeIndex };
