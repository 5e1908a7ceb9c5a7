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
  await c.connect();
  try {
    return await c.query(text, values);
  } finally {
    await c.end();
  }
}

module.exports = { describePg, createDatabase, query, pgUrl: url };
