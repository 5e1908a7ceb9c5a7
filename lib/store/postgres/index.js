// SPDX-License-Identifier: MIT
// PostgresStore: the store on PostgreSQL, one lease with a fencing token per runtime name.
'use strict';
// How and why (docs/persistence.md, The PostgreSQL store):
//   <schema>.lua_tasks_meta       (key, value): the format version row
//   <schema>.lua_tasks_snapshots  (name, seq, bytes): each name's tasks.state snapshot
//   <schema>.lua_tasks_kv         (name, space, key, value): keyed values
//                                 (space 1 tasks.store; 2 and 3 journals and inboxes)
//   <schema>.lua_tasks_leases     (name, token, holder, locked, expires_at): the owner of each name
//
// Ownership. acquire() takes a name's lease row when it is free, released or
// expired, adding 1 to its token, and renews it every third of leaseMs (on
// PostgreSQL's clock, so members' clocks do not matter). The store also holds
// a session advisory lock per name on a connection of its own: PostgreSQL
// drops it when that session ends, so a holder whose process died (SIGKILL)
// is seen at once (the row says it held the lock, the lock is free) and its
// lease is taken over without waiting for it to expire. A holder that only
// lost its network keeps its lock until PostgreSQL notices; its lease expires
// meanwhile. Either way the new owner's token fences the old one's writes.
//
// Writes. Every batch handed over in one loop turn, by every runtime sharing
// this store object, goes in ONE transaction (up to 500 batches; one WAL
// flush, synchronous_commit on); a SAVEPOINT per batch only once a batch
// raised an error (#apply). Each batch is one statement that passes its
// name's fence (schema.js fence(): a shared advisory lock, then the token
// read) and writes only if its token still holds the lease: a stale token's
// batch applies nothing, the others of its transaction land, and a token
// change waits for every transaction that passed the fence under the old
// token. No lease row is locked or written per batch (no WAL for it). One
// transaction is in flight at a time, FIFO, so a name's batches apply in the
// order they were handed over.
// A batch is checked against the store's limits and its parameters built in
// write(), before it joins a transaction: one that cannot be written is
// refused alone (ERR_STORE_LIMIT) and the others of its turn land.
//
// Faults. Every client checked out has an 'error' listener and is released
// broken after a failure, so a reset or a server restart never crashes the
// process; errors say whether they are transient (err.transient: the same
// batch may land later, and the runtime tries a durable task's COMMIT again).
// A transaction left idle (its holder paused) is ended by PostgreSQL after
// idle_in_transaction_session_timeout, and lease statements wait for a row
// lock at most lock_timeout, so a paused holder holds no acquire past them.
//
// Reads. PostgreSQL cannot be read synchronously from the loop, so
// reader(name) answers from the name's keyed rows loaded by acquire(), kept
// up to date by this store's own committed writes: a held name's keyed data
// lives in memory (the directory store is the one for millions of records).

const os = require('node:os');
const { randomUUID } = require('node:crypto');
const { threadId } = require('node:worker_threads');
const { to: copyTo } = require('pg-copy-streams');
const { makeError, typeName, invalidType } = require('../../errors');
const contract = require('../contract');
const { SPACES, SPACE_LIST, checkName, checkScan, snapshotBatch } = contract;
const { checkOptions, loadPg, describeTarget } = require('./options');
const { LIMITS, overLimits, limitError } = require('./limits');
const { Records } = require('./records');
const { isTransient, hearPool } = require('./faults');
const { Watchdog } = require('./watchdog');
const { table, lockId, nameLockKey, statements, createSchema } = require('./schema');
const { WriteQueue } = require('./write_queue');

// How long acquire() waits for PostgreSQL to end the session of a holder on
// this host whose process is gone (its socket closes at once, its backend
// ends a moment later).
const DEAD_HOLDER_WAIT_MS = 3000;

// A batch of write(), checked (the store contract) and copied: its writes
// coalesced (the last write of a key wins: one statement cannot touch a row
// twice) and their values copied.
function checkBatch(batch) {
  const b = contract.checkBatch(batch);
  const last = new Map(); // "space/key" -> { space, key, value }
  for (const w of b.writes) {
    const space = w.space === undefined ? SPACES.store : w.space;
    const id = `${space}/${w.key}`;
    last.delete(id); // so the order of the map is the order of the last writes
    last.set(id, { space, key: w.key, value: w.value === null ? null : Buffer.from(w.value) });
  }
  b.writes = [...last.values()];
  return b;
}

// Whether process `pid` on this host is alive.
function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return e.code === 'EPERM';
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Stores runtimes' state in PostgreSQL, one owner per name (a lease with a
 * fencing token), for runtimes spread over processes and machines.
 *
 * Used like the DirectoryStore: `Runtime.open({ name, store })`. A write is
 * durable before its promise resolves: PostgreSQL committed it with
 * synchronous_commit on. The batches written in one loop turn through one
 * store object share one transaction.
 */
class PostgresStore {
  #pg;
  #pool;
  #ownPool;
  #connection; // what the lock connection is made from (pg.Client options)
  #leaseMs;
  #schema;
  #t; // table names, quoted: { meta, snapshots, kv, leases }
  #sql; // the statements, with their names (prepared once per connection)
  #target; // "host 127.0.0.1, port 5432, database "x", user "y"", for messages
  #id = randomUUID(); // this store object, in its leases' holder records
  #ready = null; // Promise: the schema checked and created
  #lock = null; // Promise<pg.Client>: the session holding the advisory locks
  #leases = new Map(); // name -> lease: the names this store holds (or is taking)
  #writes; // the WriteQueue: batches on their way to PostgreSQL
  #releasing = new Set(); // release()s in progress
  #closed = false;
  #idleTxMs; // idle_in_transaction_session_timeout of the store's transactions
  #lockTimeoutMs; // lock_timeout of its lease queries
  #watchdog; // drops a checked-out connection whose session is gone or waits for the client

  /** @param {PostgresStoreOptions} options */
  constructor(options) {
    const { connectionString, pool, leaseMs, schema, max } = checkOptions(options);
    this.#pg = loadPg();
    this.#leaseMs = leaseMs;
    this.#schema = schema;
    if (connectionString !== undefined) {
      this.#pool = new this.#pg.Pool({ connectionString, max, allowExitOnIdle: true });
      this.#ownPool = true;
      this.#connection = { connectionString };
    } else {
      this.#pool = pool;
      this.#ownPool = false;
      this.#connection = pool.options && typeof pool.options === 'object' ? pool.options : null;
    }
    // An idle connection that breaks (the server restarted) is dropped by the
    // pool and replaced at the next query: nothing to report then. A pool
    // given with no listener gets one too: an unheard 'error' of one of the
    // store's idle connections would kill the process.
    if (this.#ownPool || (typeof this.#pool.listenerCount === 'function' && this.#pool.listenerCount('error') === 0)) {
      hearPool(this.#pool);
    }
    // A session of the store's open transaction (its holder paused: SIGSTOP,
    // a long GC) is ended by PostgreSQL after this, so its fence locks never
    // hold another member's acquire past the lease; lease queries wait for a
    // lock at most lockTimeoutMs (then the name counts as held).
    this.#idleTxMs = Math.max(Math.floor(leaseMs / 2), 1000);
    this.#lockTimeoutMs = Math.max(Math.floor(leaseMs / 4), 250);
    this.#watchdog = new Watchdog(this.#pool, Math.max(Math.floor(leaseMs / 2), 1000));
    this.#target = describeTarget(this.#pg, this.#connection);
    const q = (name) => table(schema, name);
    this.#t = { meta: q('meta'), snapshots: q('snapshots'), kv: q('kv'), leases: q('leases') };
    this.#sql = statements(schema, this.#t);
    this.#writes = new WriteQueue({
      with: (fn) => this.#with(fn),
      ownPool: this.#ownPool,
      idleTxMs: this.#idleTxMs,
      sql: this.#sql,
      leases: this.#t.leases,
      target: this.#target,
      // Committed: a held name's reader sees it.
      written: (b) => {
        const held = this.#leases.get(b.name);
        if (held && !held.pending) {
          for (const w of b.writes) if (w.space === SPACES.store) this.#records(held, w.space).set(w.key, w.value);
        }
      },
    });
  }

  #checkOpen() {
    if (this.#closed) {
      throw makeError(
        'ERR_INVALID_STATE',
        `The PostgresStore of ${this.#target} is closed (its close() was called): make a new PostgresStore.`,
      );
    }
  }

  // A connection of the pool; a failure to connect says what was tried.
  async #connect() {
    try {
      return await this.#pool.connect();
    } catch (e) {
      throw this.#connectFailed(e);
    }
  }

  #connectFailed(e) {
    return Object.assign(
      new Error(`Cannot connect to PostgreSQL (${this.#target}): ${e && e.message ? e.message : String(e)}`),
      { code: e && e.code, cause: e, transient: isTransient(e) },
    );
  }

  // fn(client) on a connection of the pool; a connection that saw an error
  // is dropped rather than handed back (it may be mid-transaction or broken).
  // The listener is there while the client is checked out: node-pg emits
  // 'error' on a client whose connection breaks (a reset, the server's
  // restart, pg_terminate_backend), and an unheard 'error' kills the process.
  async #with(fn) {
    const client = await this.#connect();
    let broken = null;
    const onError = (e) => {
      broken = broken || e || new Error('connection error');
    };
    client.on('error', onError);
    try {
      return await this.#watchdog.watch(client, fn(client));
    } catch (e) {
      broken = broken || e || new Error('query failed');
      throw e;
    } finally {
      client.removeListener('error', onError);
      client.release(broken || undefined);
    }
  }

  // The schema, checked and created once (concurrent first uses from many
  // processes take turns on an advisory lock).
  #ensureReady() {
    if (!this.#ready) {
      this.#ready = this.#with((c) => createSchema(c, this.#schema, this.#t, this.#target));
      this.#ready.catch(() => {
        this.#ready = null; // the next call tries again (the server may be back)
      });
    }
    return this.#ready;
  }

  // a connection of its own, so its locks live exactly as long as it does.
  #lockSession() {
    if (!this.#lock) {
      this.#lock = (async () => {
        let client;
        let release = null;
        // The session is gone, and its locks with it: the next lock query
        // opens another, and each lease's next renewal takes its lock again
        // (until then its row says unlocked, so no member reads the missing
        // lock as its holder's death). The leases stand until they expire
        // or are taken over.
        const gone = () => {
          if (this.#lockClient !== client) return;
          this.#lockClient = null;
          this.#lock = null;
          for (const lease of this.#leases.values()) lease.locked = false;
        };
        if (this.#connection) {
          client = new this.#pg.Client(this.#connection);
          client.on('error', gone); // from the start: a reset during connect() is heard too
          try {
            await client.connect();
          } catch (e) {
            throw this.#connectFailed(e);
          }
        } else {
          client = await this.#connect(); // a pool without options: keep one of its connections
          client.on('error', gone);
          release = () => client.release(true);
        }
        client.on('end', gone);
        this.#lockClient = client;
        this.#lockRelease = release;
        const socket = client.connection && client.connection.stream;
        if (socket && socket.unref && this.#lockBusy === 0) socket.unref();
        return client;
      })();
      this.#lock.catch(() => {
        this.#lock = null;
      });
    }
    return this.#lock;
  }

  #lockClient = null;
  #lockRelease = null;
  #lockBusy = 0; // queries in flight on the lock session: its socket is ref'd meanwhile

  #lockTail = Promise.resolve(); // the last query on the lock session: the next waits for it

  // A query on the lock session, one at a time (concurrent acquires take
  // turns: pg deprecates queueing on a client). Its socket is unref'd while
  // idle: held leases alone do not keep the process alive (a DirectoryStore's
  // do not).
  async #lockQuery(text, values) {
    const client = await this.#lockSession();
    const socket = client.connection && client.connection.stream;
    if (this.#lockBusy++ === 0 && socket && socket.ref) socket.ref();
    const run = this.#lockTail.then(() => client.query(text, values));
    this.#lockTail = run.catch(() => {});
    try {
      return await run;
    } finally {
      if (--this.#lockBusy === 0 && socket && socket.unref) socket.unref();
    }
  }

  // The advisory lock's key for a name (hashed by PostgreSQL).
  #lockKey(name) {
    return nameLockKey(this.#schema, name);
  }

  #holderRecord() {
    return {
      pid: process.pid,
      host: os.hostname(),
      thread: threadId,
      since: new Date().toISOString(),
      store: this.#id,
    };
  }

  #lockedError(name, holder, expiresAt) {
    const where =
      expiresAt instanceof Date
        ? `its lease in ${this.#t.leases} (${this.#target}) runs until ${expiresAt.toISOString()} and is renewed while it runs`
        : `its lease in ${this.#t.leases} (${this.#target}) is being taken`;
    const tail =
      'A holder that stops loses the lease when it closes the runtime, when its process dies (its PostgreSQL session ends), or when the lease expires unrenewed.';
    if (!holder || typeof holder !== 'object') {
      return makeError(
        'ERR_STORE_LOCKED',
        `Runtime "${name}" is already open elsewhere: ${where}. Close it there first (rt.close()), or open another name. ${tail}`,
        { holder: null, expiresAt },
      );
    }
    // store: the holder's store object (a fleet member routes to it, lib/fleet/member.js).
    const h = { pid: holder.pid, host: holder.host, since: holder.since, thread: holder.thread, store: holder.store };
    let text;
    if (h.pid === process.pid && h.host === os.hostname()) {
      let thread;
      if (h.thread === threadId) thread = 'on this thread';
      else if (h.thread === 0) thread = 'on the main thread';
      else thread = `in Worker thread ${h.thread}`;
      text = `in this process (another Runtime ${thread}, not yet closed; since ${h.since}): ${where}. Close it first (await rt.close())`;
    } else {
      text = `in process ${h.pid} on host ${JSON.stringify(h.host)} (since ${h.since}): ${where}. Close it there first (rt.close())`;
    }
    return makeError('ERR_STORE_LOCKED', `Runtime "${name}" is already open ${text}, or open another name. ${tail}`, {
      holder: h,
      expiresAt,
    });
  }

  /**
   * Takes the lease of a name: free, released, expired, or held by a session
   * that ended. Loads the name's keyed rows for reader(). The lease is
   * renewed in the background until release().
   * @param {string} name
   * @returns {Promise<{ token: number, release(): Promise<void> }>}
   * @throws ERR_STORE_LOCKED while another holder's lease runs (`err.holder`
   *   { pid, host, since, thread }, `err.expiresAt`); a connection error
   *   naming host, port, database and user.
   */
  async acquire(name) {
    checkName(name);
    this.#checkOpen();
    const mine = this.#leases.get(name);
    if (mine) throw this.#lockedError(name, mine.holder, mine.expiresAt);
    const lease = {
      name,
      token: 0,
      holder: this.#holderRecord(),
      expiresAt: null,
      validUntil: 0, // on this process's clock: the lease's end as seen from before the query that set it
      pending: true,
      locked: false,
      lost: false,
      spaces: new Map(), // space -> Records
      lastSeq: -Infinity,
      newest: null,
      inflight: new Set(),
      timer: null,
      released: null,
    };
    this.#leases.set(name, lease);
    let taken = false;
    try {
      await this.#ensureReady();
      const key = this.#lockKey(name);
      const start = Date.now();
      for (;;) {
        const got = (await this.#lockQuery(`SELECT pg_try_advisory_lock(${lockId('$1')}) AS got`, [key])).rows[0].got;
        const sent = Date.now();
        const { rows } = await this.#with((c) =>
          c.query({ ...this.#sql.take, values: [name, lease.holder, got, this.#leaseMs, `${this.#lockTimeoutMs}ms`] }),
        ).catch((e) => {
          // Its row is locked by a transaction that outlasted lock_timeout
          // (its holder is paused or slow): held, as far as we can tell now.
          if (e && e.code === '55P03') return { rows: [] };
          throw e;
        });
        if (rows.length) {
          lease.token = Number(rows[0].token);
          lease.expiresAt = rows[0].expires_at;
          lease.validUntil = sent + this.#leaseMs;
          lease.locked = got;
          taken = true;
          break;
        }
        if (got) await this.#lockQuery(`SELECT pg_advisory_unlock(${lockId('$1')})`, [key]);
        const current = await this.#with((c) =>
          c.query(`SELECT holder, expires_at FROM ${this.#t.leases} WHERE name = $1`, [name]),
        );
        if (!current.rows.length) continue; // gone meanwhile: try again
        const { holder, expires_at: expiresAt } = current.rows[0];
        // A holder on this host whose process is gone: PostgreSQL ends its
        // session (and its lock) a moment after its socket closed.
        const dead = holder && holder.host === os.hostname() && holder.pid !== process.pid && !alive(holder.pid);
        if (dead && Date.now() - start < DEAD_HOLDER_WAIT_MS) {
          await sleep(20);
          continue;
        }
        throw this.#lockedError(name, holder, expiresAt);
      }
      // tasks.store's rows only: journals and inboxes stay in PostgreSQL (scan()).
      const { rows } = await this.#with((c) =>
        c.query(`SELECT key, value FROM ${this.#t.kv} WHERE name = $1 AND space = $2`, [name, SPACES.store]),
      );
      const store = this.#records(lease, SPACES.store);
      for (const r of rows) store.set(r.key, r.value);
    } catch (e) {
      if (this.#leases.get(name) === lease) this.#leases.delete(name);
      if (taken) await this.#giveUp(lease).catch(() => {});
      throw e;
    }
    lease.pending = false;
    const every = Math.max(Math.floor(this.#leaseMs / 3), 1);
    lease.timer = setInterval(() => this.#renew(lease), every);
    lease.timer.unref();
    return { token: lease.token, release: () => this.#release(lease) };
  }

  #records(lease, space) {
    let r = lease.spaces.get(space);
    if (!r) {
      r = new Records();
      lease.spaces.set(space, r);
    }
    return r;
  }

  // Extends the lease; a lease taken over meanwhile is lost (its writes are
  // refused here, and fenced by PostgreSQL anyway). A failed renewal is tried
  // again at the next tick: the lease runs a whole leaseMs.
  async #renew(lease) {
    if (lease.released || lease.lost || lease.renewing || this.#closed) return;
    lease.renewing = true;
    try {
      let got = false;
      if (!lease.locked) {
        // Taken over by expiry from a live session: its lock, once that ends.
        got = (
          await this.#lockQuery(`SELECT pg_try_advisory_lock(${lockId('$1')}) AS got`, [this.#lockKey(lease.name)])
        ).rows[0].got;
      }
      const sent = Date.now();
      const { rows } = await this.#with((c) =>
        c.query({
          ...this.#sql.renew,
          values: [lease.name, lease.token, this.#leaseMs, lease.locked || got, `${this.#lockTimeoutMs}ms`],
        }),
      );
      if (rows.length) {
        lease.expiresAt = rows[0].expires_at;
        lease.validUntil = sent + this.#leaseMs;
        if (got) lease.locked = true;
      } else {
        lease.lost = true;
        clearInterval(lease.timer);
      }
    } catch {
      // the next tick tries again
    } finally {
      lease.renewing = false;
    }
  }

  #release(lease) {
    if (lease.released) return lease.released;
    if (this.#leases.get(lease.name) === lease) this.#leases.delete(lease.name);
    clearInterval(lease.timer);
    // Writes already handed over land first; later ones under this token are
    // refused before they reach PostgreSQL.
    lease.released = Promise.allSettled([...lease.inflight]).then(() => this.#giveUp(lease));
    this.#releasing.add(lease.released);
    const done = () => this.#releasing.delete(lease.released);
    lease.released.then(done, done);
    return lease.released;
  }

  // The lease row is marked free (the token stays, so the next one is higher),
  // and the advisory lock let go.
  async #giveUp(lease) {
    try {
      await this.#with((c) =>
        c.query(
          `UPDATE ${this.#t.leases} SET holder = NULL, locked = false, expires_at = now() WHERE name = $1 AND token = $2`,
          [lease.name, lease.token],
        ),
      );
    } finally {
      if (lease.locked && this.#lockClient && this.#lock) {
        lease.locked = false;
        await this.#lockQuery(`SELECT pg_advisory_unlock(${lockId('$1')})`, [this.#lockKey(lease.name)]).catch(
          () => {},
        );
      }
    }
  }

  /**
   * @param {string} name
   * @returns {Promise<Buffer|null>} the last tasks.state snapshot written, or
   *   null; after the writes handed over before it
   */
  async load(name) {
    checkName(name);
    this.#checkOpen();
    await this.#ensureReady();
    await this.#writes.before(name);
    const { rows } = await this.#with((c) => c.query(`SELECT bytes FROM ${this.#t.snapshots} WHERE name = $1`, [name]));
    return rows.length ? rows[0].bytes : null;
  }

  /**
   * Saves a tasks.state snapshot durably: a batch with only `state`.
   * @param {string} name
   * @param {Uint8Array} bytes leave them unchanged until the promise settles
   * @param {{ token?: number, seq?: number }} [info] as for write()
   * @returns {Promise<void>}
   */
  async save(name, bytes, info) {
    return this.write(snapshotBatch(name, bytes, info));
  }

  /**
   * Writes a batch all or nothing, durably (PostgreSQL committed it).
   * @param {{ name: string, token?: number, seq?: number, state?: Uint8Array,
   *   writes?: { space?: number, key: string, value: Uint8Array|null }[] }} batch
   *   `token`: from acquire(); refused (ERR_STORE_LOCKED, nothing of it
   *   written) unless it is still the name's lease. `seq`: grows with each
   *   batch under one lease; one lower than a batch already handed over is
   *   dropped as superseded. A batch handed over after one of its name that
   *   fails is refused too. `state` is sent as it is: leave it unchanged until
   *   the promise settles (the values of `writes` are copied).
   * @returns {Promise<void>}
   */
  async write(batch) {
    const b = checkBatch(batch);
    this.#checkOpen();
    const { name, token, seq } = b;
    const lease = token === undefined ? undefined : this.#leases.get(name);
    if (token !== undefined && (!lease || lease.pending || lease.token !== token)) {
      throw makeError(
        'ERR_STORE_LOCKED',
        `The batch of "${name}" was not written: this store no longer holds the lease of "${name}" under token ${token} (it was released). ${this.#t.leases} was left as it was.`,
      );
    }
    if (lease && lease.lost) {
      throw makeError(
        'ERR_STORE_LOCKED',
        `The batch of "${name}" was not written: the lease of "${name}" under token ${token} was taken over by another holder (it was not renewed in time). Nothing of it was written.`,
      );
    }
    if (lease && seq !== undefined && seq < lease.lastSeq) return lease.newest;
    // Checked and built here, before any transaction: a batch the store
    // cannot take is refused alone, and the others of its turn still land.
    const refused = overLimits(b, LIMITS);
    if (refused.length > 0) throw limitError(b, refused);
    let params;
    try {
      params = this.#writes.params(b);
    } catch (e) {
      throw makeError(
        'ERR_STORE_LIMIT',
        `The batch of "${name}" was refused by PostgresStore: its parameters could not be built (${e && e.message}). Nothing of it was written.`,
        { cause: e, permanent: true, refused: b.writes.map((w) => ({ space: w.space, key: w.key, what: 'params' })) },
      );
    }
    const entry = { b, params, lease, resolve: null, reject: null, done: null };
    const written = new Promise((resolve, reject) => {
      entry.resolve = resolve;
      entry.reject = reject;
    });
    entry.done = written;
    this.#writes.push(entry);
    if (lease) {
      lease.inflight.add(written);
      const done = () => lease.inflight.delete(written);
      written.then(done, done);
      if (seq !== undefined) {
        lease.lastSeq = seq;
        lease.newest = written;
        written.catch(() => {}); // heard by whoever awaits it; never unhandled meanwhile
      }
    }
    return written;
  }

  /** Checks the schema and makes its tables if missing (acquire() does it too). */
  async ready() {
    this.#checkOpen();
    await this.#ensureReady();
  }

  /** This store object's id: its leases' holder records carry it (`err.holder.store`). */
  get id() {
    return this.#id;
  }

  /** The schema its tables are in. */
  get schema() {
    return this.#schema;
  }

  /**
   * What one write may carry; larger or other writes are refused with
   * ERR_STORE_LIMIT, alone (docs/persistence.md#store-limits).
   * @returns {{ maxKeyBytes: number, maxValueBytes: number, maxBatchBytes: number, keyForbidsNul: boolean }}
   */
  get limits() {
    return LIMITS;
  }

  /** The lease time in milliseconds. */
  get leaseMs() {
    return this.#leaseMs;
  }

  /**
   * The lease this store holds on a name, as it knows it: `lost` once a
   * renewal found it taken over (its writes are refused from then on);
   * `validUntil` (ms, this process's clock) when it ends unless renewed,
   * counted from before the query that took or renewed it, so that no clock
   * but this one matters.
   * @param {string} name
   * @returns {{ token: number, expiresAt: Date, validUntil: number, lost: boolean } | null} null when not held (or still being taken)
   */
  lease(name) {
    const l = this.#leases.get(name);
    if (!l || l.pending || l.released) return null;
    return { token: l.token, expiresAt: l.expiresAt, validUntil: l.validUntil, lost: l.lost };
  }

  /** The key spaces it keeps: tasks.store, durable tasks' journals and inboxes (docs/design.md). */
  get spaces() {
    return [...SPACE_LIST];
  }

  /**
   * A page of a name's records in `space`, from PostgreSQL: the keys that
   * sort after `after` (bytewise), at most `limit`, and their values.
   * @param {string} name
   * @param {number} space
   * @param {string} after
   * @param {number} limit
   * @returns {Promise<{ keys: string[], values: Buffer[] }>}
   */
  async scan(name, space, after, limit) {
    checkName(name);
    const page = checkScan(space, after, limit);
    this.#checkOpen();
    const { rows } = await this.#with((c) =>
      c.query({ ...this.#sql.scan, values: [name, space, page.after, page.limit >= 0 ? page.limit : null] }),
    );
    return { keys: rows.map((r) => r.key), values: rows.map((r) => r.value) };
  }

  /**
   * A name's records in `space`, every one, as PostgreSQL's binary COPY of
   * (key text, value bytea) rows in key order, each chunk handed to
   * `onChunk` as the server sends it: what Runtime.open reads the durable
   * index with, no JS value a row (docs/durable.md#restore-at-open). A throw
   * of `onChunk` ends the copy (and its connection) and rejects with it.
   * @param {string} name
   * @param {number} space
   * @param {(chunk: Buffer) => void} onChunk
   * @returns {Promise<void>} once every chunk was handed over
   */
  async copySpace(name, space, onChunk) {
    checkName(name);
    checkScan(space);
    if (typeof onChunk !== 'function') throw invalidType('onChunk', 'a function', onChunk);
    this.#checkOpen();
    await this.#with(
      (c) =>
        new Promise((resolve, reject) => {
          const stream = c.query(copyTo(this.#sql.copy(c.escapeLiteral(name), space)));
          stream.on('data', (chunk) => {
            try {
              onChunk(chunk);
            } catch (e) {
              stream.destroy(e);
            }
          });
          stream.on('error', reject);
          stream.on('end', resolve);
        }),
    );
  }

  /**
   * The records of chosen durable tasks of a name, in one query: their
   * journals (space 2) and, if `inbox`, their inboxes (space 3), each in
   * key order (what a runtime reads to restore them; docs/durable.md#restore-at-open).
   * @param {string} name
   * @param {string[]} ids task ids
   * @param {boolean} inbox
   * @returns {Promise<{ journal: { keys: string[], values: Buffer[] }, inbox: { keys: string[], values: Buffer[] } }>}
   */
  async readTasks(name, ids, inbox) {
    checkName(name);
    if (!Array.isArray(ids) || !ids.every((id) => typeof id === 'string' && id.length > 0)) {
      throw makeError('ERR_INVALID_ARG_TYPE', `readTasks() takes an array of task ids. Received ${typeName(ids)}.`);
    }
    this.#checkOpen();
    const spaces = inbox ? [SPACES.journal, SPACES.inbox] : [SPACES.journal];
    const out = { journal: { keys: [], values: [] }, inbox: { keys: [], values: [] } };
    if (ids.length === 0) return out;
    const { rows } = await this.#with((c) => c.query({ ...this.#sql.tasks, values: [name, ids, spaces] }));
    for (const r of rows) {
      const into = r.space === SPACES.journal ? out.journal : out.inbox;
      into.keys.push(r.key);
      into.values.push(r.value);
    }
    return out;
  }

  /**
   * The runtime names the store holds (a snapshot, a keyed value or a
   * lease), in bytewise order: those matching `pattern` (`*`: any run of
   * characters within a name) after `after`, at most `limit`. Takes no lease.
   * @param {string} [pattern='*']
   * @param {string} [after='']
   * @param {number} [limit=1000] 1 to 10000
   * @returns {Promise<string[]>}
   */
  async names(pattern, after, limit) {
    const q = contract.checkNames(pattern, after, limit);
    this.#checkOpen();
    await this.#ensureReady();
    const { snapshots, kv, leases } = this.#t;
    const { rows } = await this.#with((c) =>
      c.query(
        `SELECT name FROM (SELECT name FROM ${snapshots} UNION SELECT name FROM ${kv} UNION SELECT name FROM ${leases}) n
         WHERE name > $1 AND name LIKE $2 ORDER BY name LIMIT $3`,
        [q.after, contract.likePattern(q.pattern), q.limit],
      ),
    );
    return rows.map((r) => r.name);
  }

  /**
   * Synchronous reads of tasks.store's values (space 1) of a name this store
   * holds, from its rows loaded by acquire() and this store's own committed
   * writes since. Journals and inboxes (spaces 2 and 3) are not kept in
   * memory: scan() reads them.
   * @param {string} name
   * @returns {{ get(key: string, space?: number): Buffer|null,
   *   keys(prefix?: string, after?: string, limit?: number, space?: number): string[] }}
   * @throws ERR_INVALID_STATE (from get and keys) while this store does not hold the name
   */
  reader(name) {
    checkName(name);
    const records = (space) => {
      if (space !== SPACES.store) {
        throw makeError(
          'ERR_INVALID_ARG_VALUE',
          `The PostgresStore's reader reads tasks.store's values (space 1); journals and inboxes are read with scan(name, space, after, limit). Received space ${typeName(space)}.`,
        );
      }
      const lease = this.#leases.get(name);
      if (!lease || lease.pending) {
        throw makeError(
          'ERR_INVALID_STATE',
          `The PostgresStore does not hold "${name}": its reader answers from the records loaded by acquire("${name}"), so acquire it first.`,
        );
      }
      return lease.spaces.get(space);
    };
    return {
      get: (key, space = 1) => {
        const r = records(space);
        return (r && r.values.get(String(key))) || null;
      },
      keys: (prefix = '', after = '', limit = -1, space = 1) => {
        const r = records(space);
        if (!r) return [];
        const n = typeof limit === 'number' && limit >= 0 ? limit : Infinity;
        return r.keys(String(prefix ?? ''), String(after ?? ''), n);
      },
    };
  }

  /**
   * Where a name's state lives, said for a person.
   * @param {string} name
   * @returns {string}
   */
  locate(name) {
    checkName(name);
    return `PostgreSQL (${this.#target}), ${this.#t.snapshots} name "${name}"`;
  }

  /**
   * Counts of what this store object committed.
   * @returns {{ transactions: number, batches: number }} transactions: one WAL flush each
   */
  stats() {
    return this.#writes.stats();
  }

  /**
   * Finishes the writes handed over, then ends the lock session and the pool
   * it made (a pool given stays open). Leases still held lapse: their
   * sessions end, so the next acquire takes them over. Idempotent; other
   * calls after it fail with ERR_INVALID_STATE.
   * @returns {Promise<void>}
   */
  async close() {
    if (this.#closed) return;
    await this.#writes.drain();
    await Promise.allSettled([...this.#releasing]);
    this.#closed = true;
    for (const lease of this.#leases.values()) clearInterval(lease.timer);
    this.#leases.clear();
    // Idle connections are unref'd (they let the process exit); ending them
    // must not: the caller awaits this.
    const keep = setInterval(() => {}, 1 << 30);
    try {
      const lock = this.#lock;
      this.#lock = null;
      if (lock) {
        const client = await lock.catch(() => null);
        if (client) {
          if (this.#lockRelease) this.#lockRelease();
          else await client.end().catch(() => {});
        }
      }
      if (this.#ownPool) await this.#pool.end();
    } finally {
      clearInterval(keep);
    }
  }
}

module.exports = { PostgresStore, isTransient, hearPool };
