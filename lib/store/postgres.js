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
// this store object, goes in ONE transaction (one WAL flush, synchronous_commit
// on); a SAVEPOINT per batch only once a batch raised an error (#apply). Each
// batch is one statement that locks its name's lease row (FOR UPDATE) if it
// still carries the batch's token and writes only if it does: a stale token's
// batch applies nothing, the others of its transaction land, and a takeover
// waits for the transaction that holds the row. One transaction is in flight
// at a time, FIFO, so a name's batches apply in the order they were handed over.
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
const { createHash, randomUUID } = require('node:crypto');
const { threadId } = require('node:worker_threads');
const { makeError, typeName } = require('../errors');
const contract = require('./contract');
const { SPACES, SPACE_LIST, checkName, checkInfo, checkSnapshot } = contract;
const { SOCKET_ERRORS } = require('./faults');

// The schema's format version, in lua_tasks_meta.
const FORMAT_VERSION = 1;
const PREFIX = 'lua_tasks_';
const LEASE_MS = 10000;
const LEASE_MS_MIN = 100;
const SCHEMA_RE = /^[a-z_][a-z0-9_]{0,62}$/;
// How long acquire() waits for PostgreSQL to end the session of a holder on
// this host whose process is gone (its socket closes at once, its backend
// ends a moment later).
const DEAD_HOLDER_WAIT_MS = 3000;

// What one write may carry (the store's `limits`, docs/persistence.md). Keys
// are text: PostgreSQL's text cannot hold NUL, and a key is a btree entry,
// which must fit in a third of a page (8 KiB pages: ~2,700 bytes with the
// name and space beside it). Values travel as raw bytes (binary parameters,
// never bytea's hex text, which doubles them inside one V8 string); a value's
// bound keeps its copies (the Bind message, the backend's) small against
// PostgreSQL's 1 GB per message and per field, and a batch's total under it.
const LIMITS = Object.freeze({
  maxKeyBytes: 2048,
  maxValueBytes: 64 * 1024 * 1024,
  maxBatchBytes: 512 * 1024 * 1024,
  keyForbidsNul: true,
});

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
  if (typeof leaseMs !== 'number') {
    throw makeError(
      'ERR_INVALID_ARG_TYPE',
      `The "options.leaseMs" option must be a number of milliseconds. Received ${typeName(leaseMs)}.`,
    );
  }
  if (!Number.isInteger(leaseMs) || leaseMs < LEASE_MS_MIN || leaseMs > 2 ** 31 - 1) {
    throw makeError(
      'ERR_INVALID_ARG_VALUE',
      `The "options.leaseMs" option must be an integer from ${LEASE_MS_MIN} to 2147483647. Received ${leaseMs}.`,
    );
  }
  if (typeof schema !== 'string' || !SCHEMA_RE.test(schema)) {
    throw makeError(
      'ERR_INVALID_ARG_VALUE',
      `The "options.schema" option must be a lowercase SQL identifier (letters, digits, "_"; at most 63). Received ${typeName(schema)}.`,
    );
  }
  if (!Number.isInteger(max) || max < 1) {
    throw makeError(
      'ERR_INVALID_ARG_VALUE',
      `The "options.max" option must be a positive integer (connections of the pool the store makes). Received ${typeName(max)}.`,
    );
  }
  return { connectionString, pool, leaseMs, schema, max };
}

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

// Orders strings as their UTF-8 bytes (as PostgreSQL's "C" collation and the
// directory store do): by code point. JS compares UTF-16 units, which puts a
// surrogate (U+D800-DFFF) below U+E000-FFFF; shifted here above them.
function byteOrder(a, b) {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    let x = a.charCodeAt(i);
    let y = b.charCodeAt(i);
    if (x !== y) {
      if (x >= 0xd800 && y >= 0xd800) {
        x = x >= 0xe000 ? x - 0x800 : x + 0x2000;
        y = y >= 0xe000 ? y - 0x800 : y + 0x2000;
      }
      return x - y;
    }
  }
  return a.length - b.length;
}

// The first index of `sorted` whose key is not before `key`.
function lowerBound(sorted, key) {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (byteOrder(sorted[mid], key) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * One space of a held name's keyed rows, in memory: the values, and their
 * keys sorted when keys() asks (kept until a key comes or goes).
 */
class Records {
  values = new Map(); // key -> Buffer
  #sorted = null;

  set(key, value) {
    if (value === null) {
      if (this.values.delete(key)) this.#sorted = null;
    } else {
      if (!this.values.has(key)) this.#sorted = null;
      this.values.set(key, value);
    }
  }

  keys(prefix, after, limit) {
    if (!this.#sorted) this.#sorted = [...this.values.keys()].sort(byteOrder);
    const sorted = this.#sorted;
    let i = lowerBound(sorted, prefix);
    if (after !== '' && byteOrder(after, prefix) >= 0) {
      i = lowerBound(sorted, after);
      if (i < sorted.length && sorted[i] === after) i++;
    }
    const out = [];
    for (; i < sorted.length && out.length < limit && sorted[i].startsWith(prefix); i++) out.push(sorted[i]);
    return out;
  }
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

const MiB = (n) => `${(n / 1048576).toFixed(n < 1048576 ? 3 : 1)} MiB`;

/**
 * The writes of a batch its store's limits refuse: [{ space, key, bytes,
 * limit, what }] (none: it fits). `what`: 'key-nul', 'key-size',
 * 'value-size', 'state-size', 'batch-size'.
 */
function overLimits(b, limits) {
  const out = [];
  let total = b.state ? b.state.byteLength : 0;
  if (b.state && b.state.byteLength > limits.maxValueBytes) {
    out.push({ space: 0, key: null, bytes: b.state.byteLength, limit: limits.maxValueBytes, what: 'state-size' });
  }
  for (const w of b.writes) {
    const keyBytes = Buffer.byteLength(w.key);
    total += keyBytes + (w.value ? w.value.byteLength : 0);
    if (limits.keyForbidsNul && w.key.includes('\0')) {
      out.push({ space: w.space, key: w.key, bytes: keyBytes, limit: null, what: 'key-nul' });
    } else if (keyBytes > limits.maxKeyBytes) {
      out.push({ space: w.space, key: w.key, bytes: keyBytes, limit: limits.maxKeyBytes, what: 'key-size' });
    } else if (w.value && w.value.byteLength > limits.maxValueBytes) {
      out.push({
        space: w.space,
        key: w.key,
        bytes: w.value.byteLength,
        limit: limits.maxValueBytes,
        what: 'value-size',
      });
    }
  }
  if (out.length === 0 && total > limits.maxBatchBytes) {
    // No one write is at fault: the batch as a whole is dropped.
    for (const w of b.writes) {
      out.push({ space: w.space, key: w.key, bytes: total, limit: limits.maxBatchBytes, what: 'batch-size' });
    }
    if (out.length === 0) {
      out.push({ space: 0, key: null, bytes: total, limit: limits.maxBatchBytes, what: 'batch-size' });
    }
  }
  return out;
}

// The refusal of a batch by the store's limits: ERR_STORE_LIMIT naming the
// first write at fault, its size and the limit; `refused` lists them all.
function limitError(b, refused) {
  const r = refused[0];
  const where =
    r.space === 1
      ? `tasks.store key ${JSON.stringify(r.key)}`
      : r.key === null
        ? 'the tasks.state snapshot'
        : `record ${JSON.stringify(r.key)} (space ${r.space})`;
  const why =
    {
      'key-nul': `${where} holds a NUL character, which PostgreSQL text cannot keep (limits.keyForbidsNul)`,
      'key-size': `the key of ${where} is ${r.bytes} bytes, over limits.maxKeyBytes (${r.limit})`,
      'batch-size': `the batch is ${MiB(r.bytes)}, over limits.maxBatchBytes (${MiB(r.limit)}): commit less at a time`,
    }[r.what] || `${where} is ${MiB(r.bytes)}, over limits.maxValueBytes (${MiB(r.limit)})`;
  const more = refused.length > 1 ? ` (${refused.length} writes refused in all)` : '';
  return makeError(
    'ERR_STORE_LIMIT',
    `The batch of "${b.name}" was refused by PostgresStore: ${why}${more}. Nothing of it was written: PostgresStore can never take such a write.`,
    { refused, permanent: true },
  );
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

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
  #queue = []; // batches handed over, waiting for the next transaction
  #flush = null; // the setImmediate that starts the next transaction
  #running = null; // the transaction in flight (a Promise), or null
  #releasing = new Set(); // release()s in progress
  #stats = { transactions: 0, batches: 0 };
  #closed = false;
  #idleTxMs; // idle_in_transaction_session_timeout of the store's transactions
  #lockTimeoutMs; // lock_timeout of its lease queries

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
    // a long GC) is ended by PostgreSQL after this, so its row locks never
    // hold another member's acquire past the lease; lease queries wait for a
    // row lock at most lockTimeoutMs (then the name counts as held).
    this.#idleTxMs = Math.max(Math.floor(leaseMs / 2), 1000);
    this.#lockTimeoutMs = Math.max(Math.floor(leaseMs / 4), 250);
    this.#target = this.#describe();
    const q = (table) => `"${schema}"."${PREFIX}${table}"`;
    this.#t = { meta: q('meta'), snapshots: q('snapshots'), kv: q('kv'), leases: q('leases') };
    this.#sql = this.#statements();
  }

  /** Where the store connects, for messages: never the password. */
  #describe() {
    try {
      const c = new this.#pg.Client(this.#connection || {});
      return `host ${c.host}, port ${c.port}, database "${c.database}", user "${c.user}"`;
    } catch {
      return 'the pool given';
    }
  }

  #statements() {
    const { snapshots, kv, leases } = this.#t;
    // Prepared statements are named per schema (a connection may serve
    // stores of several); PostgreSQL cuts names at 63 bytes, so the schema
    // goes in as a hash, or two long schemas' statements would share a name.
    const s = createHash('sha256').update(this.#schema).digest('hex').slice(0, 16);
    // $1 name, $2 token, $3 seq, $4 state, $5-$9 upserts (space, key, the
    // values one after another, each one's start (from 1) and length),
    // $10-$11 deletes (space, key). The values travel as one binary bytea:
    // a bytea[] parameter goes as hex text, twice their size in one string.
    const apply = (fence) => `WITH fence AS (${fence}),
      snap AS (INSERT INTO ${snapshots} (name, seq, bytes) SELECT $1, $3, $4 FROM fence WHERE $4::bytea IS NOT NULL
        ON CONFLICT (name) DO UPDATE SET seq = EXCLUDED.seq, bytes = EXCLUDED.bytes RETURNING 1),
      up AS (INSERT INTO ${kv} (name, space, key, value)
        SELECT $1, u.space, u.key, substring($7::bytea FROM u.start FOR u.len)
        FROM fence, unnest($5::int[], $6::text[], $8::int[], $9::int[]) AS u(space, key, start, len)
        ON CONFLICT (name, space, key) DO UPDATE SET value = EXCLUDED.value RETURNING 1),
      del AS (DELETE FROM ${kv} USING fence, unnest($10::int[], $11::text[]) AS d(space, key)
        WHERE ${kv}.name = $1 AND ${kv}.space = d.space AND ${kv}.key = d.key RETURNING 1)
      SELECT count(*)::int AS fenced FROM fence`;
    return {
      fenced: {
        name: `lua_tasks_write_${s}`,
        text: apply(`SELECT name FROM ${leases} WHERE name = $1 AND token = $2 AND holder IS NOT NULL FOR UPDATE`),
      },
      unfenced: {
        name: `lua_tasks_write_unfenced_${s}`,
        text: apply(`SELECT $1::text AS name WHERE $2::bigint IS NULL`),
      },
      take: {
        name: `lua_tasks_take_${s}`,
        // Free, released, expired, or its holder's session ended ($3: this
        // store got the advisory lock, and the holder had held it).
        // $5 lock_timeout: set before the row's lock is waited for (the
        // source row is made first), for this statement only.
        text: `WITH cfg AS (SELECT set_config('lock_timeout', $5, true) AS t)
          INSERT INTO ${leases} AS l (name, token, holder, locked, expires_at)
          SELECT $1::text, 1, $2::jsonb, $3::boolean, now() + $4::float8 * interval '1 millisecond' FROM cfg
          ON CONFLICT (name) DO UPDATE SET token = l.token + 1, holder = EXCLUDED.holder,
            locked = EXCLUDED.locked, expires_at = EXCLUDED.expires_at
          WHERE l.holder IS NULL OR l.expires_at <= now() OR (l.locked AND $3)
          RETURNING token, expires_at`,
      },
      renew: {
        name: `lua_tasks_renew_${s}`,
        // locked = $4: the lock session may have ended since (a restart):
        // the row says what holds now. $5 lock_timeout, as for take.
        text: `UPDATE ${leases} SET expires_at = now() + $3 * interval '1 millisecond', locked = $4
          FROM (SELECT set_config('lock_timeout', $5, true) AS t) cfg
          WHERE name = $1 AND token = $2 AND holder IS NOT NULL RETURNING expires_at`,
      },
    };
  }

  // Closed: ERR_INVALID_STATE, as the directory store says it.
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
      return await fn(client);
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
      this.#ready = this.#with((c) => this.#createSchema(c));
      this.#ready.catch(() => {
        this.#ready = null; // the next call tries again (the server may be back)
      });
    }
    return this.#ready;
  }

  async #createSchema(c) {
    const { meta, snapshots, kv, leases } = this.#t;
    await c.query('BEGIN');
    try {
      await c.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [`lua_tasks schema ${this.#schema}`]);
      if (this.#schema !== 'public') await c.query(`CREATE SCHEMA IF NOT EXISTS "${this.#schema}"`);
      await c.query(`CREATE TABLE IF NOT EXISTS ${meta} (key text PRIMARY KEY, value text NOT NULL)`);
      const { rows } = await c.query(`SELECT value FROM ${meta} WHERE key = 'format_version'`);
      const version = rows.length ? Number(rows[0].value) : 0;
      // A newer schema is not ours to touch.
      if (!(version <= FORMAT_VERSION)) {
        throw makeError(
          'ERR_STORE_CORRUPT',
          `The PostgreSQL store in schema "${this.#schema}" (${this.#target}) has format version ${rows[0].value}, written by a newer lua-tasks; this one reads format version ${FORMAT_VERSION} only. Open it with that newer lua-tasks.`,
          { version, supported: FORMAT_VERSION },
        );
      }
      if (version < FORMAT_VERSION) {
        await c.query(`CREATE TABLE IF NOT EXISTS ${snapshots} (
          name text COLLATE "C" PRIMARY KEY, seq double precision, bytes bytea NOT NULL)`);
        await c.query(`CREATE TABLE IF NOT EXISTS ${kv} (
          name text COLLATE "C", space integer, key text COLLATE "C", value bytea NOT NULL,
          PRIMARY KEY (name, space, key))`);
        await c.query(`CREATE TABLE IF NOT EXISTS ${leases} (
          name text COLLATE "C" PRIMARY KEY, token bigint NOT NULL, holder jsonb,
          locked boolean NOT NULL DEFAULT false, expires_at timestamptz NOT NULL)`);
        await c.query(
          `INSERT INTO ${meta} (key, value) VALUES ('format_version', $1)
           ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`,
          [String(FORMAT_VERSION)],
        );
      }
      await c.query('COMMIT');
    } catch (e) {
      await c.query('ROLLBACK').catch(() => {});
      throw e;
    }
  }

  // The session that holds this store's advisory locks (one per held name):
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
    return `${this.#schema}.${PREFIX}${name}`;
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
        const got = (await this.#lockQuery('SELECT pg_try_advisory_lock(hashtextextended($1, 0)) AS got', [key]))
          .rows[0].got;
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
        if (got) await this.#lockQuery('SELECT pg_advisory_unlock(hashtextextended($1, 0))', [key]);
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
      const { rows } = await this.#with((c) =>
        c.query(`SELECT space, key, value FROM ${this.#t.kv} WHERE name = $1`, [name]),
      );
      for (const r of rows) this.#records(lease, r.space).set(r.key, r.value);
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
          await this.#lockQuery('SELECT pg_try_advisory_lock(hashtextextended($1, 0)) AS got', [
            this.#lockKey(lease.name),
          ])
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
        await this.#lockQuery('SELECT pg_advisory_unlock(hashtextextended($1, 0))', [this.#lockKey(lease.name)]).catch(
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
    const before = this.#queue.filter((e) => e.b.name === name).map((e) => e.done);
    if (this.#running) before.push(this.#running);
    await Promise.allSettled(before);
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
    checkName(name);
    checkSnapshot(name, bytes);
    const { token, seq } = checkInfo(info);
    return this.write({ name, token, seq, state: bytes, writes: [] });
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
      params = this.#params(b);
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
    this.#queue.push(entry);
    this.#schedule();
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

  // The next transaction starts once the loop turn's batches are all in
  // (setImmediate: after this turn's I/O callbacks) and the one in flight ended.
  #schedule() {
    if (this.#flush || this.#running) return;
    this.#flush = setImmediate(() => {
      this.#flush = null;
      if (this.#running || this.#queue.length === 0) return;
      const group = this.#queue.splice(0);
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
      ({ outcomes, committed } = await this.#with((c) => this.#apply(c, group)));
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
      const { b } = group[i];
      const held = this.#leases.get(b.name);
      if (held && !held.pending) {
        for (const w of b.writes) this.#records(held, w.space).set(w.key, w.value);
      }
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
    if (this.#ownPool && !this.#synced.has(c)) {
      await c.query('SET synchronous_commit = on');
      this.#synced.add(c);
    }
    const alone = group.length === 1 && this.#ownPool;
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
    return `BEGIN; SET LOCAL synchronous_commit = on; SET LOCAL idle_in_transaction_session_timeout = ${this.#idleTxMs}`;
  }

  // One batch's statement: null if written, the refusal if its token is stale.
  async #statement(c, b, params) {
    const { rows } = await c.query({
      ...this.#sql[b.token === undefined ? 'unfenced' : 'fenced'],
      values: params,
    });
    if (rows[0].fenced !== 0) return null;
    return makeError(
      'ERR_STORE_LOCKED',
      `The batch of "${b.name}" was not written: ${this.#t.leases} records another owner of "${b.name}" than token ${b.token} (its lease was taken over). Nothing of it was written.`,
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
        `The connection to PostgreSQL (${this.#target}) failed during a write transaction: ${e && e.message ? e.message : String(e)}. If it failed during COMMIT, PostgreSQL may have committed it.`,
      ),
      // Transient: the same batch written again is harmless (its rows are
      // upserts and deletes of the same values).
      { code: e && e.code, cause: e, transient: true },
    );
  }

  // The statement's parameters, in the form node-pg sends (prepareValue:
  // arrays become their text here, not inside the transaction), so that a
  // batch whose parameters cannot be made fails alone, before BEGIN.
  #params(b) {
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
   * Synchronous keyed reads of a name this store holds, from its rows loaded
   * by acquire() and this store's own committed writes since. `space`
   * (default 1, tasks.store) picks the key space, as the directory store's.
   * @param {string} name
   * @returns {{ get(key: string, space?: number): Buffer|null,
   *   keys(prefix?: string, after?: string, limit?: number, space?: number): string[] }}
   * @throws ERR_INVALID_STATE (from get and keys) while this store does not hold the name
   */
  reader(name) {
    checkName(name);
    const records = (space) => {
      if (!Number.isInteger(space) || space < 1) {
        throw makeError(
          'ERR_INVALID_ARG_VALUE',
          `The reader's space must be a positive integer. Received ${typeName(space)}.`,
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
    return { ...this.#stats };
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
    while (this.#running || this.#queue.length > 0 || this.#flush) {
      if (this.#running) await this.#running;
      else await new Promise((resolve) => setImmediate(resolve));
    }
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

module.exports = { PostgresStore, isTransient, hearPool };
