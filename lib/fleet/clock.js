// SPDX-License-Identifier: MIT
// FleetClock: this process's offset to PostgreSQL's clock, the one clock a fleet's deadlines are on.
'use strict';

// How and why (docs/fleet.md#one-clock): a deadline one member records (an
// UNTIL_TIME target, a durable FOR's start, a hibernated name's wake time)
// another member checks. On each member's own wall clock, a member 4 s ahead
// fires every timer it takes over 4 s early. So every member measures how far
// its wall clock is from PostgreSQL's and sets that offset on the runtimes it
// hosts: their wall clock is PostgreSQL's.
//
// A sample: local t0, the server's clock_timestamp(), local t1. The server
// read it somewhere between t0 and t1, so taking the midpoint errs by at most
// half the round trip; of SAMPLES the one with the shortest round trip is
// kept. Date.now() counts whole ms (the true time is up to 1 ms later), so the
// midpoint gets half a ms: the error is then at most RTT/2 + 0.5 ms, plus
// whatever the local clock drifts or is stepped until the next measurement.

const SAMPLES = 5;
const EVERY_MS = 10000; // re-measured this often: drift (NTP slews at most 0.5 ms/s) stays small

class FleetClock {
  #offsetMs = 0;
  #rttMs = null;
  #at = -Infinity; // Date.now() of the last measurement

  /** ms to add to Date.now() for PostgreSQL's clock. */
  get offsetMs() {
    return this.#offsetMs;
  }

  /** The round trip of the sample the offset came from (its error is at most half of it, plus 0.5 ms). */
  get rttMs() {
    return this.#rttMs;
  }

  /** Now on PostgreSQL's clock, as Date.now() is on this process's. */
  now() {
    return Date.now() + this.#offsetMs;
  }

  /** Whether the offset is older than its re-measurement interval. */
  due() {
    return Date.now() - this.#at >= EVERY_MS;
  }

  /**
   * Measures the offset (SAMPLES round trips on the pool).
   * @param {import('pg').Pool} pool
   * @returns {Promise<boolean>} whether the offset changed
   */
  async measure(pool) {
    let best = null;
    for (let i = 0; i < SAMPLES; i++) {
      const t0 = Date.now();
      const { rows } = await pool.query('SELECT extract(epoch FROM clock_timestamp())::float8 * 1000 AS ms');
      const t1 = Date.now();
      const rtt = t1 - t0;
      if (best === null || rtt < best.rtt) best = { rtt, offset: rows[0].ms - ((t0 + t1) / 2 + 0.5) };
    }
    this.#at = Date.now();
    this.#rttMs = best.rtt;
    const changed = best.offset !== this.#offsetMs;
    this.#offsetMs = best.offset;
    return changed;
  }
}

module.exports = { FleetClock };
