// SPDX-License-Identifier: MIT
// PostgresStore's tables, their statements, and the advisory-lock keys: the one place the fleet reads them from too.
'use strict';

const { createHash } = require('node:crypto');
const { makeError } = require('../../errors');

// The schema's format version, in lua_tasks_meta. 2: writes are fenced by
// an advisory lock (fence(), below); format 1 locked the lease row per batch.
const FORMAT_VERSION = 2;
const PREFIX = 'lua_tasks_';

/** A table of the store's (or a fleet's) in `schema`, quoted. */
const table = (schema, name) => `"${schema}"."${PREFIX}${name}"`;

// Advisory locks. PostgreSQL hashes a text key to the lock's bigint; a lock
// is looked up in pg_locks by that hash, so every session that takes or
// reads one must make its key here.
/** The SQL that hashes the text `param` (an expression) to an advisory lock's id. */
const lockId = (param) => `hashtextextended(${param}, 0)`;
/** What every name's lock key starts with, in `schema`: its key is this and the name. */
const nameLockPrefix = (schema) => `${schema}.${PREFIX}`;
/** The lock a session holds while its store holds a name's lease. */
const nameLockKey = (schema, name) => `${nameLockPrefix(schema)}${name}`;
/** The lock the schema's tables are made under (CREATE IF NOT EXISTS races otherwise). */
const schemaLockKey = (schema) => `lua_tasks schema ${schema}`;
/**
 * The SQL of a name's fence lock id, `nameSql` an expression: held SHARED by
 * every fenced write's transaction, EXCLUSIVELY by the transaction that
 * changes the name's token. Not the lease's session lock (nameLockKey): that
 * one is held by the holder's lock session, which would block its own writes.
 */
const fenceLockId = (schema, nameSql) => lockId(`'lua_tasks fence ${schema}.' || ${nameSql}`);

/** The fence function of `schema`, quoted. */
const fenceFunction = (schema) => `"${schema}".${PREFIX}fence`;

/**
 * The SQL that is true when `tokenSql` still holds the lease of `nameSql`,
 * and keeps it so until the calling transaction ends: no token change can
 * commit before it does (docs/fleet.md#failover-and-handover). The one
 * fence of every write by token, the store's and the fleet's.
 */
const fence = (schema, nameSql, tokenSql) => `${fenceFunction(schema)}(${nameSql}, ${tokenSql})`;

// The fence, made by createSchema. A batch takes the name's fence lock SHARED
// for its transaction and then reads the token; a token change takes it
// EXCLUSIVELY (the trigger), so it waits for every batch that already passed
// its check, and a batch that comes after it waits for its commit. The read
// is a statement of its own in a VOLATILE function: it gets a snapshot taken
// after the lock was granted, not the calling statement's (which would miss
// a token change committed while the batch waited for the lock). The trigger
// fires for every token change, whoever makes it: an older lua-tasks still
// running (whose takes know nothing of the lock) is fenced too.
function fenceDdl(schema, leases) {
  const f = fenceFunction(schema);
  return [
    `CREATE OR REPLACE FUNCTION ${f}(n text, t bigint) RETURNS boolean LANGUAGE plpgsql VOLATILE AS $f$
      BEGIN
        PERFORM pg_advisory_xact_lock_shared(${fenceLockId(schema, 'n')});
        RETURN EXISTS (SELECT 1 FROM ${leases} WHERE name = n AND token = t AND holder IS NOT NULL);
      END $f$`,
    `CREATE OR REPLACE FUNCTION ${f}_take() RETURNS trigger LANGUAGE plpgsql AS $f$
      BEGIN
        PERFORM pg_advisory_xact_lock(${fenceLockId(schema, 'NEW.name')});
        RETURN NEW;
      END $f$`,
    `DROP TRIGGER IF EXISTS ${PREFIX}fence ON ${leases}`,
    `CREATE TRIGGER ${PREFIX}fence BEFORE UPDATE OF token ON ${leases} FOR EACH ROW
      WHEN (OLD.token IS DISTINCT FROM NEW.token) EXECUTE FUNCTION ${f}_take()`,
  ];
}

/**
 * The store's statements, named per schema (prepared once per connection).
 * @param {string} schema
 * @param {{ snapshots: string, kv: string, leases: string }} t the tables, quoted
 */
function statements(schema, t) {
  const { snapshots, kv, leases } = t;
  // Prepared statements are named per schema (a connection may serve
  // stores of several); PostgreSQL cuts names at 63 bytes, so the schema
  // goes in as a hash, or two long schemas' statements would share a name.
  const s = createHash('sha256').update(schema).digest('hex').slice(0, 16);
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
      text: apply(`SELECT $1::text AS name WHERE ${fence(schema, '$1', '$2')}`),
    },
    unfenced: {
      name: `lua_tasks_write_unfenced_${s}`,
      text: apply(`SELECT $1::text AS name WHERE $2::bigint IS NULL`),
    },
    scan: {
      name: `lua_tasks_scan_${s}`,
      text: `SELECT key, value FROM ${kv} WHERE name = $1 AND space = $2 AND key > $3 ORDER BY key LIMIT $4`,
    },
    // A name's space as binary COPY rows (COPY takes no parameters: the
    // name goes in as a quoted literal, the space as a checked integer).
    copy: (nameLiteral, space) =>
      `COPY (SELECT key, value FROM ${kv} WHERE name = ${nameLiteral} AND space = ${space} ORDER BY key) TO STDOUT (FORMAT binary)`,
    // $2 task ids, $3 spaces: each task's records "<id>/<seq>" ('0' follows
    // '/'), a range of the primary key each.
    tasks: {
      name: `lua_tasks_tasks_${s}`,
      text: `SELECT k.space, k.key, k.value FROM unnest($2::text[]) AS t(id)
        JOIN ${kv} k ON k.name = $1 AND k.space = ANY($3::int[]) AND k.key > t.id || '/' AND k.key < t.id || '0'
        ORDER BY k.space, k.key`,
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

/**
 * Checks the schema's format version and makes its tables if missing, on
 * client `c`; concurrent first uses from many processes take turns on the
 * schema's advisory lock.
 */
async function createSchema(c, schema, t, target) {
  const { meta, snapshots, kv, leases } = t;
  await c.query('BEGIN');
  try {
    await c.query(`SELECT pg_advisory_xact_lock(${lockId('$1')})`, [schemaLockKey(schema)]);
    if (schema !== 'public') await c.query(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
    await c.query(`CREATE TABLE IF NOT EXISTS ${meta} (key text PRIMARY KEY, value text NOT NULL)`);
    const { rows } = await c.query(`SELECT value FROM ${meta} WHERE key = 'format_version'`);
    const version = rows.length ? Number(rows[0].value) : 0;
    // A newer schema is not ours to touch.
    if (!(version <= FORMAT_VERSION)) {
      throw makeError(
        'ERR_STORE_CORRUPT',
        `The PostgreSQL store in schema "${schema}" (${target}) has format version ${rows[0].value}, written by a newer lua-tasks; this one reads format version ${FORMAT_VERSION} only. Open it with that newer lua-tasks.`,
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
      // From format 1: its members may still run (they opened it before);
      // the trigger fences their takes, and their batches lock the lease row,
      // which a take's UPDATE waits for (docs/fleet.md#upgrading).
      for (const sql of fenceDdl(schema, leases)) await c.query(sql);
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

module.exports = {
  FORMAT_VERSION,
  PREFIX,
  table,
  lockId,
  nameLockPrefix,
  nameLockKey,
  schemaLockKey,
  fence,
  statements,
  createSchema,
};
