// SPDX-License-Identifier: MIT
// Watchdog: a checked-out connection whose session is gone, or waits for the client, is dropped, not waited on.
'use strict';

/**
 * A statement waits on its connection's socket, and a socket whose server
 * end went away without the client hearing (a session ended while its FIN or
 * RST was lost on the way: a failover behind a proxy, a dropped route) waits
 * until TCP gives up, hours by default. A write stuck so holds every later
 * write of the store (they are FIFO).
 *
 * So while a connection is checked out, every `probeMs` PostgreSQL is asked
 * (on another connection, bounded by `probeMs`) what that session is doing.
 * A session gone, or waiting to read from its client (`ClientRead`) with the
 * same `state_change` on two probes, is waiting on nothing the client will
 * ever send: the store's checkouts never idle on a connection between
 * statements. The connection is then destroyed, so its statement fails
 * (transient: the write is tried again; its rows are upserts, and a gone
 * session commits nothing more). A session that runs or waits for a lock is
 * left alone, however long; a server that does not answer the probe is left
 * to the socket's own errors.
 */
class Watchdog {
  #pool; // where a probe asks (a connection not checked out)
  #probeMs;
  #out = new Map(); // client -> { since, seen }: connections checked out
  #timer = null;
  #probing = false;

  /**
   * @param {import('pg').Pool} pool the store's pool
   * @param {number} probeMs how often a checked-out connection is looked at
   */
  constructor(pool, probeMs) {
    this.#pool = pool;
    this.#probeMs = probeMs;
  }

  /**
   * Watches `client` while `work` runs.
   * @template T
   * @param {import('pg').PoolClient} client
   * @param {Promise<T>} work
   * @returns {Promise<T>}
   */
  async watch(client, work) {
    this.#out.set(client, { since: Date.now(), seen: undefined });
    if (this.#timer === null) {
      this.#timer = setInterval(() => this.#probe(), this.#probeMs);
      this.#timer.unref();
    }
    try {
      return await work;
    } finally {
      this.#out.delete(client);
      if (this.#out.size === 0) this.stop();
    }
  }

  /** No more probes (the store closes, or nothing is checked out). */
  stop() {
    if (this.#timer !== null) clearInterval(this.#timer);
    this.#timer = null;
  }

  // What PostgreSQL's session `pid` is doing (null: gone), within probeMs (a
  // pool with no connection free does not answer in time).
  #session(pid) {
    let timer;
    const late = new Promise((resolve, reject) => {
      timer = setTimeout(() => reject(new Error('no answer')), this.#probeMs);
    });
    const asked = this.#pool.query({
      // state_change as text: its microseconds tell two changes in one millisecond apart
      text: 'SELECT wait_event, state_change::text AS changed FROM pg_stat_activity WHERE pid = $1',
      values: [pid],
      query_timeout: this.#probeMs,
    });
    asked.catch(() => {});
    return Promise.race([asked, late])
      .then(({ rows }) => rows[0] || null)
      .finally(() => clearTimeout(timer));
  }

  async #probe() {
    if (this.#probing) return;
    this.#probing = true;
    try {
      const now = Date.now();
      for (const [client, w] of this.#out) {
        if (now - w.since < this.#probeMs || !client.processID) continue;
        let session;
        try {
          session = await this.#session(client.processID);
        } catch {
          return; // the server does not answer: the connection's socket will say so
        }
        if (this.#out.get(client) !== w) continue; // it was handed back meanwhile
        const mark = session === null ? 'gone' : session.wait_event === 'ClientRead' ? `read ${session.changed}` : null;
        if (mark === null || mark !== w.seen) {
          w.seen = mark; // first sight (or the session moved on): look again at the next probe
          continue;
        }
        this.#out.delete(client);
        const err = Object.assign(
          new Error(
            `The connection to PostgreSQL stopped answering: its session (pid ${client.processID}) ${mark === 'gone' ? 'is gone' : 'was waiting for this client'} while this client waited for it for over ${Date.now() - w.since} ms, so the connection was dropped`,
          ),
          { transient: true },
        );
        const stream = client.connection && client.connection.stream;
        if (stream && typeof stream.destroy === 'function') stream.destroy(err);
      }
    } finally {
      this.#probing = false;
    }
  }
}

module.exports = { Watchdog };
