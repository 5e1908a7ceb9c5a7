// SPDX-License-Identifier: MIT
// PostgresStore's writes: every batch of a loop turn in one transaction (group commit), one transaction at a time.
'use strict';

const { makeError } = require('../../errors');
const { loadPgUtils } = require('./options');
const { isSqlError, connectionGone, isTransient, laterRefused } = require('./faults');

// Batches a transaction carries at most. Each holds its name's fence lock
// until COMMIT, in PostgreSQL's shared lock table, which holds
// max_locks_per_transaction × max_connections locks (6,400 by default) for
// every session together; past it a transaction fails ("out of shared
// memory"). The rest wait for the next transaction.
const GROUP_MAX = 500;

/**
 * The batches handed over, FIFO, and the transaction in flight. An entry is
 * { b, params, resolve, reject, done }: a batch checked and its statement's
 * parameters (params(b)), settled when its transaction ends.
 */
class WriteQueue {
  #db; // { with(fn), ownPool, idleTxMs, sql, leases, target, written(b) }: the store's side
  #queue = []; // batches handed over, waiting for the next transaction
  #flush = null; // the setImmediate that starts the next transaction
  #running = null; // the transaction in flight (a Promise), or null
  #stats = { transactions: 0, batches: 0 };

  /**
   * @param {object} db with(fn): fn(client) on a connection of the pool; ownPool:
   *   whether the store made the pool; idleTxMs; sql: the statements; leases:
   *   the leases table, quoted; target: where, for messages; written(b): a
   *   batch committed
   */
  constructor(db) {
    this.#db = db;
  }

  /** Hands an entry over: it joins the next transaction. */
  push(entry) {
    this.#queue.push(entry);
    this.#schedule();
  }

  /** Settles once the batches of `name` handed over so far, and the transaction in flight, have. */
  before(name) {
    const before = this.#queue.filter((e) => e.b.name === name).map((e) => e.done);
    if (this.#running) before.push(this.#running);
    return Promise.allSettled(before);
  }

  /** Settles once every batch handed over has (those handed over meanwhile too). */
  async drain() {
    while (this.#running || this.#queue.length > 0 || this.#flush) {
      if (this.#running) await this.#running;
      else await new Promise((resolve) => setImmediate(resolve));
    }
  }

  /** Counts of what was committed: { transactions, batches }. */
  stats() {
    return { ...this.#stats };
  }

  // The next transaction starts once the loop turn's batches are all in
  // (setImmediate: after this turn's I/O callbacks) and the one in flight ended.
  #schedule() {
    if (this.#flush || this.#running) return;
    this.#flush = setImmediate(() => {
      this.#flush = null;
      if (this.#running || this.#queue.length === 0) return;
      const group = this.#queue.splice(0, GROUP_MAX);
      this.#running = this.#transact(group).finally(() => {
        this.#running = null;
        if (this.#queue.length > 0) this.#schedule();
      });
    });
  }

  async #transact(group) {
    let outcomes; // per batch: null (written) or its error
    let committed = false;
    try {
      ({ outcomes, committed } = await this.#db.with((c) => this.#apply(c, group)));
    } catch (e) {
      // Nothing of the transaction was written; a connection lost during
      // COMMIT leaves its outcome unknown, as the message says.
      const err = isSqlError(e) || (e && e.cause) ? e : this.#lostDuring(e);
      outcomes = group.map(() => err);
    }
    // Said on the error, for the runtime: a transient failure is tried again.
    for (const err of outcomes) {
      if (err && typeof err === 'object' && err.transient === undefined) err.transient = isTransient(err);
    }
    const failed = new Map(); // name -> the error of its first failed batch
    for (let i = 0; i < group.length; i++) {
      if (outcomes[i] && !failed.has(group[i].b.name)) failed.set(group[i].b.name, outcomes[i]);
    }
    let written = 0;
    for (let i = 0; i < group.length; i++) {
      if (outcomes[i]) continue;
      written++;
      this.#db.written(group[i].b);
    }
    if (committed) {
      this.#stats.transactions++;
      this.#stats.batches += written;
    }
    // The batches of a failed name handed over meanwhile were taken after
    // the failed one: refused with it, before anyone hears of the failure.
    const refused = [];
    if (failed.size > 0) {
      this.#queue = this.#queue.filter((e) => {
        const earlier = failed.get(e.b.name);
        if (!earlier) return true;
        refused.push([e, laterRefused(e.b, earlier)]);
        return false;
      });
    }
    for (let i = 0; i < group.length; i++) {
      if (outcomes[i]) group[i].reject(outcomes[i]);
      else group[i].resolve();
    }
    for (const [e, err] of refused) e.reject(err);
  }

  // The group's batches on one connection, the fast way first: no savepoint
  // (a batch alone in autocommit on a connection of the store's own pool,
  // else BEGIN, a statement a batch, COMMIT). A batch that raises an SQL
  // error aborts that, and the group is applied again with a savepoint a
  // batch, so that only its name's batches fail. Either way one WAL flush.
  async #apply(c, group) {
    // synchronous_commit on: per session on the store's own connections
    // (once each), per transaction on a pool given (its sessions are not ours).
    if (this.#db.ownPool && !this.#synced.has(c)) {
      await c.query('SET synchronous_commit = on');
      this.#synced.add(c);
    }
    const alone = group.length === 1 && this.#db.ownPool;
    try {
      if (!alone) await c.query(this.#begin());
      const outcomes = [];
      for (const { b, params } of group) outcomes.push(await this.#statement(c, b, params));
      if (!alone) await c.query('COMMIT');
      return { outcomes, committed: true };
    } catch (e) {
      if (!alone) await c.query('ROLLBACK').catch(() => {});
      if (!isSqlError(e) || connectionGone(e)) throw e; // the connection broke: the transaction is gone
      if (alone) return { outcomes: [e], committed: false };
    }
    return this.#applySavepoints(c, group);
  }

  #synced = new WeakSet(); // connections of the own pool with synchronous_commit on

  // BEGIN, with the transaction's settings (one round trip).
  #begin() {
    return `BEGIN; SET LOCAL synchronous_commit = on; SET LOCAL idle_in_transaction_session_timeout = ${this.#db.idleTxMs}`;
  }

  // One batch's statement: null if written, the refusal if its token is stale.
  async #statement(c, b, params) {
    const { rows } = await c.query({
      ...this.#db.sql[b.token === undefined ? 'unfenced' : 'fenced'],
      values: params,
    });
    if (rows[0].fenced !== 0) return null;
    return makeError(
      'ERR_STORE_LOCKED',
      `The batch of "${b.name}" was not written: ${this.#db.leases} records another owner of "${b.name}" than token ${b.token} (its lease was taken over). Nothing of it was written.`,
    );
  }

  // The slow way: a savepoint a batch; a batch that fails fails the later
  // batches of its name in the group too (they were made after it).
  async #applySavepoints(c, group) {
    const outcomes = new Array(group.length).fill(null);
    const failed = new Map();
    await c.query(this.#begin());
    try {
      for (let i = 0; i < group.length; i++) {
        const { b, params } = group[i];
        const earlier = failed.get(b.name);
        if (earlier) {
          outcomes[i] = laterRefused(b, earlier);
          continue;
        }
        await c.query('SAVEPOINT batch');
        try {
          outcomes[i] = await this.#statement(c, b, params);
          await c.query('RELEASE SAVEPOINT batch');
        } catch (e) {
          if (!isSqlError(e) || connectionGone(e)) throw e;
          await c.query('ROLLBACK TO SAVEPOINT batch');
          await c.query('RELEASE SAVEPOINT batch');
          outcomes[i] = e;
        }
        if (outcomes[i]) failed.set(b.name, outcomes[i]);
      }
      await c.query('COMMIT');
    } catch (e) {
      await c.query('ROLLBACK').catch(() => {});
      throw e;
    }
    return { outcomes, committed: true };
  }

  #lostDuring(e) {
    return Object.assign(
      new Error(
        `The connection to PostgreSQL (${this.#db.target}) failed during a write transaction: ${e && e.message ? e.message : String(e)}. If it failed during COMMIT, PostgreSQL may have committed it.`,
      ),
      // Transient: the same batch written again is harmless (its rows are
      // upserts and deletes of the same values).
      { code: e && e.code, cause: e, transient: true },
    );
  }

  // The statement's parameters, in the form node-pg sends (prepareValue:
  // arrays become their text here, not inside the transaction), so that a
  // batch whose parameters cannot be made fails alone, before BEGIN.
  params(b) {
    const up = b.writes.filter((w) => w.value !== null);
    const del = b.writes.filter((w) => w.value === null);
    const starts = [];
    let at = 1;
    for (const w of up) {
      starts.push(at);
      at += w.value.byteLength;
    }
    const values = [
      b.name,
      b.token === undefined ? null : b.token,
      b.seq === undefined ? null : b.seq,
      b.state === null ? null : Buffer.from(b.state.buffer, b.state.byteOffset, b.state.byteLength),
      up.map((w) => w.space),
      up.map((w) => w.key),
      Buffer.concat(up.map((w) => w.value)),
      starts,
      up.map((w) => w.value.byteLength),
      del.map((w) => w.space),
      del.map((w) => w.key),
    ];
    return values.map((v) => (Array.isArray(v) ? this.#prepare(v) : v));
  }

  #prepare = loadPgUtils();
}

module.exports = { WriteQueue };
