// SPDX-License-Identifier: MIT
// PostgreSQL for the tests: a database of a test file's own on the server of LUA_TASKS_PG_URL, dropped after.
'use strict';
//
// LUA_TASKS_PG_URL names a role that may CREATEDB (scripts/pg.sh start prints
// one). Without it the PostgreSQL tests are skipped, saying so, unless
// LUA_TASKS_REQUIRE_PG=1 (set by .ci/run): then they fail, so CI never skips.

const { randomBytes } = require('node:crypto');

const url = process.env.LUA_TASKS_PG_URL || '';
const required = process.env.LUA_TASKS_REQUIRE_PG === '1';

/**
 * describe(title, fn) when PostgreSQL is there; otherwise one skipped test
 * whose title says why (or, with LUA_TASKS_REQUIRE_PG=1, one failing test).
 */
function describePg(title, fn) {
  if (url && !/^postgres(ql)?:\/\/\S+$/.test(url)) {
    // A URL with something else in it (a tool's message captured with it)
    // fails here, saying what it was, not as a DNS error in every test.
    return describe(title, () => {
      test('LUA_TASKS_PG_URL is a postgres:// URL', () => {
        throw new Error(`LUA_TASKS_PG_URL is not one postgres:// URL: ${JSON.stringify(url)}`);
      });
    });
  }
  if (url) return describe(title, fn);
  if (required) {
    return describe(title, () => {
      test('PostgreSQL is required (LUA_TASKS_REQUIRE_PG=1) but LUA_TASKS_PG_URL is not set', () => {
        throw new Error(
          'LUA_TASKS_REQUIRE_PG=1 and no LUA_TASKS_PG_URL: start PostgreSQL with `export LUA_TASKS_PG_URL=$(scripts/pg.sh start)`.',
        );
      });
    });
  }
  process.stderr.write(
    `${title}: skipped, LUA_TASKS_PG_URL is not set (export LUA_TASKS_PG_URL=$(scripts/pg.sh start) runs it)\n`,
  );
  return describe.skip(`${title} (skipped: LUA_TASKS_PG_URL is not set)`, fn);
}

/**
 * Creates a database of a random name; `drop()` drops it, ending any session
 * left in it (a killed child's, say).
 * @returns {Promise<{ url: string, name: string, drop(): Promise<void> }>}
 */
async function createDatabase() {
  const { Client } = require('pg');
  const name = `lua_tasks_test_${randomBytes(6).toString('hex')}`;
  const admin = new Client({ connectionString: url });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const u = new URL(url);
  u.pathname = `/${name}`;
  return {
    url: u.href,
    name,
    async drop() {
      const a = new Client({ connectionString: url });
      await a.connect();
      try {
        // FORCE ends the sessions left in it; an autovacuum worker that
        // entered it is not the role's to end unless it may signal backends
        // (scripts/pg.sh grants that): then wait for the worker to leave.
        for (let attempt = 1; ; attempt++) {
          try {
            await a.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
            return;
          } catch (e) {
            if (e.code !== '42501' || attempt === 50) throw e;
            await new Promise((resolve) => setTimeout(resolve, 100));
          }
        }
      } finally {
        await a.end();
      }
    },
  };
}

/**
 * A query on a database, on a connection of its own.
 * @param {string} dbUrl
 * @param {string} text
 * @param {any[]} [values]
 */
async function query(dbUrl, text, values) {
  const { Client } = require('pg');
  const c = new Client({ connectionString: dbUrl });
  // A server restarted meanwhile ends the session: the query rejects with
  // it, and the client's 'error' event must not go unheard.
  c.on('error', () => {});
  await c.connect();
  try {
    return await c.query(text, values);
  } finally {
    await c.end();
  }
}

/**
 * Makes the writes to `table` wait, for a fault to meet a write in flight:
 * a session of its own (connected when this resolves) that `lock()` makes
 * hold a SHARE ROW EXCLUSIVE lock on it (reads go on, writes wait).
 * `writeWaits(stop)` resolves true once another session (named `app`, if
 * given) waits on a lock, or false once `stop()` holds (nothing left to
 * write: it would wait forever); `release()` ends the lock and the session
 * (a session a restart ended too). An error of its session (a restart) is
 * expected, not thrown.
 * @param {string} dbUrl
 * @param {string} table e.g. '"s".lua_tasks_kv'
 * @param {{ app?: string }} [options]
 */
async function writeHold(dbUrl, table, { app } = {}) {
  const { Client } = require('pg');
  const c = new Client({ connectionString: dbUrl });
  c.on('error', () => {});
  await c.connect();
  let locking = null;
  const waiting = `SELECT count(*)::int AS n FROM pg_stat_activity
    WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'
    ${app === undefined ? '' : 'AND application_name = $1'}`;
  return {
    // Sent at once (no loop turn first): a caller can lock the moment it sees what it waited for.
    lock() {
      locking ??= c.query(`BEGIN; LOCK TABLE ${table} IN SHARE ROW EXCLUSIVE MODE`);
      return locking;
    },
    // Bounded: a writer that never comes fails the test with a reason, not by Jest's timeout
    // (which would leave this loop, and what the test started, running).
    async writeWaits(stop = () => false, { timeoutMs = 60000 } = {}) {
      await this.lock();
      for (const end = Date.now() + timeoutMs; ;) {
        // pg_stat_activity is read once a transaction and kept (PostgreSQL's
        // stats snapshot): this session is inside its lock's transaction, so
        // the snapshot is dropped before each look, or it sees only the first.
        await c.query('SELECT pg_stat_clear_snapshot()');
        if ((await c.query(waiting, app === undefined ? [] : [app])).rows[0].n > 0) return true;
        if (stop()) return false;
        if (Date.now() > end) {
          const { rows } = await c.query(
            `SELECT pid, application_name AS app, state, wait_event_type AS type, wait_event AS event, left(query, 50) AS q
             FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`,
          );
          throw new Error(
            `no write waited on ${table} within ${timeoutMs} ms; the database's sessions: ${JSON.stringify(rows)}`,
          );
        }
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    },
    async release() {
      await c.query('COMMIT').catch(() => {});
      await c.end().catch(() => {});
    },
  };
}

/**
 * A PostgreSQL cluster of the caller's own, for tests that stop or restart
 * the server (never the shared one): initdb and pg_ctl from PG_BIN in a
 * temp directory, on a free port, run as the `postgres` user when this
 * process is root (PostgreSQL refuses to run as root). `stop()` stops it and
 * removes its directory.
 * @param {{ maxConnections?: number }} [options] maxConnections: the server's
 *   max_connections (default 40; a fleet of several members needs more)
 * @returns {Promise<{ url: string, port: number, dir: string, restart(mode?: string): Promise<void>,
 *   stop(): Promise<void> }>} url: a database `lua_tasks` of role `lua_tasks`
 */
async function privateCluster({ maxConnections = 40 } = {}) {
  const fs = require('node:fs');
  const os = require('node:os');
  const path = require('node:path');
  const net = require('node:net');
  const { execFileSync } = require('node:child_process');
  const bin = process.env.PG_BIN || '/usr/lib/postgresql/15/bin';
  const root = process.getuid && process.getuid() === 0;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lua-tasks-pg-'));
  const freePort = () =>
    new Promise((resolve, reject) => {
      const srv = net.createServer();
      srv.once('error', reject);
      srv.listen(0, '127.0.0.1', () => {
        const { port: p } = srv.address();
        srv.close(() => resolve(p));
      });
    });
  // The server's tools run from a directory the postgres user can read (not
  // the test's cwd), and without the sanitizer runtime the test:asan run
  // preloads into Node (the server would run, and die, under it).
  const env = { ...process.env };
  for (const k of ['LD_PRELOAD', 'ASAN_OPTIONS', 'UBSAN_OPTIONS']) delete env[k];
  const as = (cmd, args) => {
    const full = path.join(bin, cmd);
    const opts = { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'], timeout: 120000 };
    return root
      ? execFileSync('runuser', ['-u', 'postgres', '--', full, ...args], opts)
      : execFileSync(full, args, opts);
  };
  if (root) execFileSync('chown', ['postgres:postgres', dir]);
  const data = path.join(dir, 'data');
  const log = path.join(dir, 'log');
  as('initdb', ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync']);
  const conf = path.join(data, 'postgresql.conf');
  fs.appendFileSync(
    conf,
    `listen_addresses = '127.0.0.1'\nunix_socket_directories = '${dir}'\nfsync = off\nmax_connections = ${maxConnections}\nshared_buffers = 16MB\n`,
  );
  const ctl = (args) => as('pg_ctl', ['-D', data, '-l', log, '-w', '-t', '60', ...args]);
  // The port was free when asked for; anything (a client's connection, a
  // cluster another test file makes) may take it before the server binds
  // it: then another (the last port line of the file is the one read).
  let port;
  for (let attempt = 1; ; attempt++) {
    port = await freePort();
    fs.appendFileSync(conf, `port = ${port}\n`);
    try {
      ctl(['start']);
      break;
    } catch (e) {
      const said = fs.existsSync(log) ? fs.readFileSync(log, 'utf8') : '';
      if (attempt === 5 || !/could not bind|Address already in use/.test(said)) throw e;
      fs.writeFileSync(log, '');
    }
  }
  const psql = (sql) => as('psql', ['-h', dir, '-p', String(port), '-U', 'postgres', '-d', 'postgres', '-qAtc', sql]);
  psql("CREATE ROLE lua_tasks LOGIN PASSWORD 'lua_tasks'");
  psql('CREATE DATABASE lua_tasks OWNER lua_tasks');
  psql('GRANT pg_signal_backend TO lua_tasks');
  let stopped = false;
  return {
    url: `postgres://lua_tasks:lua_tasks@127.0.0.1:${port}/lua_tasks`,
    port,
    dir,
    /** pg_ctl restart (mode 'fast': sessions are ended, the server comes back). */
    restart(mode = 'fast') {
      // Off the loop: the process's own connections see the restart as it happens.
      const { execFile } = require('node:child_process');
      const args = ['-D', data, '-l', log, '-w', '-t', '60', 'restart', '-m', mode];
      const full = path.join(bin, 'pg_ctl');
      return new Promise((resolve, reject) => {
        const cb = (err, _out, errText) =>
          err ? reject(new Error(`pg_ctl restart failed: ${errText || err.message}`)) : resolve();
        if (root) execFile('runuser', ['-u', 'postgres', '--', full, ...args], { cwd: dir, env }, cb);
        else execFile(full, args, { cwd: dir, env }, cb);
      });
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      try {
        ctl(['stop', '-m', 'immediate']);
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

module.exports = { describePg, createDatabase, query, writeHold, privateCluster, pgUrl: url };
