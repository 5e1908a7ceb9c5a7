// SPDX-License-Identifier: MIT
// Balancer: how many names each member hosts, and to whom a member over the fleet's spread gives one.
'use strict';

// How and why (docs/fleet.md#balance):
// After a rolling restart the first member up holds every active name.
// Every balanceMs each member writes how many names it
// hosts (with those given to it and not yet taken) in the UNLOGGED table
// <schema>.lua_tasks_members (id, hosted, seen_until), and reads the others'.
// A member that hosts at least two more than the least loaded live member
// gives it one name: one a round, so a fleet evens out at a bounded rate
// and the spread ends within one. The count of the member given a name is
// raised at once, so the next round (of any member) does not give it more
// than its share; a member's own row may say one name too many until its
// next round, which only delays a move. Rows are not WAL-logged: a crash of
// PostgreSQL empties the table, and each member writes its row again at its
// next round. A member gone silent is left out after its row lapses.

const { createUnderSchemaLock } = require('./schema');
const { table } = require('../store/postgres/schema');

class Balancer {
  #members;
  #schema;
  #id;
  #everyMs;
  #ttlMs;
  #next = 0;

  /**
   * @param {object} o
   * @param {string} o.schema the store's schema
   * @param {string} o.id this member's id
   * @param {number} o.everyMs how often a round runs; 0: never
   * @param {number} o.leaseMs the fleet's lease: a member's row lives at least this long
   */
  constructor(o) {
    this.#members = table(o.schema, 'members');
    this.#schema = o.schema;
    this.#id = o.id;
    this.#everyMs = o.everyMs;
    this.#ttlMs = Math.max(3 * o.everyMs, o.leaseMs);
  }

  /** Creates the members table if it is missing. */
  async create(pool) {
    if (this.#everyMs === 0) return;
    await createUnderSchemaLock(pool, this.#schema, [
      `CREATE UNLOGGED TABLE IF NOT EXISTS ${this.#members} (id text PRIMARY KEY, hosted integer NOT NULL, seen_until timestamptz NOT NULL)`,
    ]);
  }

  /** Whether a round is due (Date.now() as `now`). */
  due(now) {
    return this.#everyMs > 0 && now >= this.#next;
  }

  /**
   * One round: writes this member's count, reads the others'.
   * @param {import('pg').Pool} pool
   * @param {number} hosted the names this member hosts or is activating
   * @param {string} pendingSql SQL counting the names given to member $1 and not yet taken
   * @returns {Promise<string|null>} the member to give one name to, or null
   */
  async round(pool, hosted, pendingSql) {
    this.#next = Date.now() + this.#everyMs;
    const { rows } = await pool.query(
      `WITH me AS (
         INSERT INTO ${this.#members} (id, hosted, seen_until)
         SELECT $1, $2 + ${pendingSql}, now() + $3 * interval '1 millisecond'
         ON CONFLICT (id) DO UPDATE SET hosted = EXCLUDED.hosted, seen_until = EXCLUDED.seen_until
         RETURNING hosted)
       SELECT m.id, m.hosted, (SELECT hosted FROM me) AS mine FROM ${this.#members} m
       WHERE m.seen_until > now() AND m.id <> $1
       ORDER BY m.hosted, m.id LIMIT 1`,
      [this.#id, hosted, this.#ttlMs],
    );
    if (!rows.length || rows[0].mine - rows[0].hosted < 2) return null;
    return rows[0].id;
  }

  /** Counts a name given to member `id` at once (its own round counts it again). */
  async credit(pool, id) {
    await pool.query(`UPDATE ${this.#members} SET hosted = hosted + 1 WHERE id = $1`, [id]);
  }

  /** Takes this member's row out (it leaves). */
  async leave(pool) {
    if (this.#everyMs === 0) return;
    await pool.query(`DELETE FROM ${this.#members} WHERE id = $1`, [this.#id]);
  }
}

module.exports = { Balancer };
