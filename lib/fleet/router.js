// SPDX-License-Identifier: MIT
// FleetRouter: requests between fleet members over PostgreSQL's LISTEN/NOTIFY.
'use strict';

// Each member listens on a channel named for its store object's id (the id
// its leases' holder records carry), so the holder of a name is found from
// the lease row and reached without a registry of members. A request and its
// answer are one NOTIFY each: PostgreSQL delivers a notification to the
// listeners connected when its transaction commits, in commit order, and
// drops it for a member that is gone.
//
// At most once, by construction. A request is a row of
// <schema>.lua_tasks_requests (id, claimed_by, at, expires_at), inserted by
// the asker in the transaction of its first NOTIFY, and whoever runs it
// claims the row first: the receiver in the transaction of its
// acknowledgement (no acknowledgement, and no run, if another claimed it),
// the asker before running it itself (its fallback when no acknowledgement
// came within ACK_MS and the name came to it). One UPDATE on one row decides,
// so no pause, timeout or repeat runs an operation twice, whatever the
// members' clocks say. A repeat (the same id, sent again) to the member that
// claimed it gets the first one's answer. A receiver that claimed a request
// but no longer hosts the name gives its claim back before answering
// "moved". The row lives until the asker's deadline (expires_at, on
// PostgreSQL's clock); a row past it is claimed by nobody, so pruning it is
// safe, and a row that is missing (pruned, or lost: the table is UNLOGGED,
// emptied by a crash of PostgreSQL) is claimed by nobody either: losing
// rows can only make a request fail, never run twice. One acknowledged but
// not answered in time rejects with ERR_FLEET_TIMEOUT (it may still be
// served, once). While the asker's own listening session is down it may miss
// acknowledgements: its requests then wait for their answer or the timeout.
//
// Payloads are v8-serialized values (members run the same package and trust
// one another: they share the database), base64 in the NOTIFY's text, which
// PostgreSQL bounds at 8000 bytes.

const v8 = require('node:v8');
const { createHash } = require('node:crypto');
const { makeError } = require('../errors');
const { createUnderSchemaLock } = require('./schema');

const PAYLOAD_MAX = 7999; // PostgreSQL's NOTIFY payload limit is 8000 bytes
const RECONNECT_MS = 500;
const ACK_MS = 500;
const SERVED_KEPT_MS = 120000; // how long a served request's answer is kept for its repeats
const PRUNE_EVERY_MS = 60000;

/** The channel a member with this store id listens on. */
function channelOf(storeId) {
  return `lua_tasks_${String(storeId).replace(/-/g, '')}`;
}

// The channel every member of a schema listens on for "look for due names
// now". A channel name is an identifier (at most 63 bytes): a long schema's
// is hashed.
function wakeChannelOf(schema) {
  const tail = schema.length <= 40 ? schema : createHash('sha256').update(schema).digest('hex').slice(0, 40);
  return `lua_tasks_wake_${tail}`;
}

function encode(value) {
  return v8.serialize(value).toString('base64');
}

function decode(text) {
  return v8.deserialize(Buffer.from(text, 'base64'));
}

class FleetRouter {
  #pg;
  #pool;
  #requests; // "<schema>"."lua_tasks_requests"
  #schema;
  #storeId;
  #pruned = 0;
  #claimsLost = 0;
  #connection;
  #channel;
  #wakeChannel;
  #client = null;
  #connecting = null;
  #closed = false;
  #seq = 0;
  #pending = new Map(); // request id -> { resolve, reject, timer, ackTimer }
  #served = new Map(); // "<from> <id>" -> Promise of the answer's text: requests served, for their repeats
  #onRequest;
  #onWake;
  #onError;

  /**
   * @param {object} o
   * @param {object} o.pg the `pg` module
   * @param {object} o.pool the pool NOTIFYs go through
   * @param {object} o.connection pg.Client options for the listening session
   * @param {string} o.storeId this member's store id
   * @param {string} o.schema the store's schema (the wake channel is per schema)
   * @param {(req: object) => Promise<*>} o.onRequest serves a request; its value or error is the answer
   * @param {() => void} o.onWake another member asks every member to look for due names now
   * @param {(e: Error) => void} o.onError a failure of the listening session, kept up meanwhile
   */
  constructor(o) {
    this.#pg = o.pg;
    this.#pool = o.pool;
    this.#connection = o.connection;
    this.#channel = channelOf(o.storeId);
    this.#storeId = o.storeId;
    this.#schema = o.schema;
    this.#requests = `"${o.schema}"."lua_tasks_requests"`;
    this.#wakeChannel = wakeChannelOf(o.schema);
    this.#onRequest = o.onRequest;
    this.#onWake = o.onWake;
    this.#onError = o.onError;
  }

  /** Makes the requests table if it is missing, and connects the listening session (LISTEN on its channels). */
  async start() {
    await this.#create();
    await this.#listen();
  }

  // UNLOGGED: no WAL for a row that lives seconds; a crash of PostgreSQL empties the table, and a
  // missing row is claimed by nobody (see the header).
  async #create() {
    await createUnderSchemaLock(this.#pool, this.#schema, [
      `CREATE UNLOGGED TABLE IF NOT EXISTS ${this.#requests} (id text PRIMARY KEY, claimed_by text, at timestamptz, expires_at timestamptz NOT NULL)`,
    ]);
  }

  #listen() {
    if (!this.#connecting) {
      this.#connecting = (async () => {
        const client = new this.#pg.Client(this.#connection);
        client.on('error', (e) => this.#lost(client, e));
        client.on('notification', (n) => this.#notified(n));
        await client.connect();
        await client.query(`LISTEN "${this.#channel}"`);
        await client.query(`LISTEN "${this.#wakeChannel}"`);
        if (this.#closed) {
          await client.end().catch(() => {});
          return;
        }
        this.#client = client;
      })().finally(() => {
        this.#connecting = null;
      });
    }
    return this.#connecting;
  }

  // The listening session broke: notifications meanwhile are lost (requests
  // to this member time out, as for a member that is gone); a new one is made.
  #lost(client, e) {
    if (this.#client === client) this.#client = null;
    // Acks may be lost with it: no request in flight counts as unheard.
    for (const p of this.#pending.values()) clearTimeout(p.ackTimer);
    client.end().catch(() => {});
    if (this.#closed) return;
    this.#onError(e);
    const retry = () => {
      if (this.#closed) return;
      this.#listen().catch((err) => {
        this.#onError(err);
        setTimeout(retry, RECONNECT_MS).unref();
      });
    };
    setTimeout(retry, RECONNECT_MS).unref();
  }

  #notified(n) {
    if (n.channel === this.#wakeChannel) {
      this.#onWake();
      return;
    }
    let msg;
    try {
      msg = decode(n.payload);
    } catch (e) {
      this.#onError(new Error(`A fleet notification on "${n.channel}" does not decode: ${e.message}`));
      return;
    }
    if (msg.t === 'res') {
      const p = this.#pending.get(msg.id);
      if (!p) return; // timed out meanwhile
      this.#pending.delete(msg.id);
      clearTimeout(p.timer);
      clearTimeout(p.ackTimer);
      p.resolve(msg);
    } else if (msg.t === 'ack') {
      const p = this.#pending.get(msg.id);
      if (p) clearTimeout(p.ackTimer);
    } else if (msg.t === 'req') {
      // Acknowledged only with its claim (one transaction): a request the
      // asker saw no ack for was claimed by no one here, and one another
      // member claimed is neither acknowledged nor run here. Repeats of an
      // id this member claimed get the first one's answer.
      const key = `${msg.from} ${msg.id}`;
      const claimed = this.#notify(msg.from, encode({ t: 'ack', id: msg.id }), { claim: key });
      let answer = this.#served.get(key);
      if (!answer) {
        answer = this.#take(msg, key, claimed);
        this.#served.set(key, answer);
        setTimeout(() => this.#served.delete(key), SERVED_KEPT_MS).unref();
      } else {
        // A repeat's acknowledgement: nothing waits for it here, and its
        // write failing (the server restarting) must not go unheard.
        claimed.catch((e) => this.#onError(e));
      }
      answer.then((text) => text && this.#notify(msg.from, text)).catch((e) => this.#onError(e));
    }
  }

  // A request this member received: served if it claimed it; null if another
  // member did (that one answers). A "moved" answer gives the claim back
  // first, so whoever hosts the name now may claim and run it.
  async #take(msg, key, claimed) {
    if (!(await claimed)) {
      this.#claimsLost++;
      return null;
    }
    const { text, moved } = await this.#serve(msg);
    if (moved) {
      await this.#pool.query(
        `UPDATE ${this.#requests} SET claimed_by = NULL, at = now() WHERE id = $1 AND claimed_by = $2`,
        [key, this.#storeId],
      );
      this.#served.delete(key); // not run here: a repeat claims again
    }
    return text;
  }

  // Serves a request: the text of its answer, and whether it said "moved".
  async #serve(msg) {
    let answer;
    try {
      const value = await this.#onRequest(msg);
      answer = value && value.moved ? { t: 'res', id: msg.id, moved: true } : { t: 'res', id: msg.id, value };
    } catch (e) {
      answer = { t: 'res', id: msg.id, error: errorRecord(e) };
    }
    let text;
    try {
      text = encode(answer);
      if (text.length > PAYLOAD_MAX) throw tooLarge('answer', text.length);
    } catch (e) {
      text = encode({ t: 'res', id: msg.id, error: errorRecord(e) });
    }
    return { text, moved: answer.moved === true };
  }

  // Notifications made in one loop turn go in one statement (one round trip,
  // one transaction: delivered in this order; PostgreSQL folds identical ones,
  // which here are only repeats), with the request rows they open and the
  // claims they carry. `also.open` { id, ms }: the request row to insert
  // (expiring in ms); `also.claim`: the request id this notification
  // acknowledges, sent only if this member claims it (or had).
  // Resolves whether it was sent.
  #notify(channel, text, also = {}) {
    return new Promise((resolve, reject) => {
      this.#outbox.push({ channel, text, ...also, resolve, reject });
      if (this.#outbox.length === 1) setImmediate(() => this.#flush());
    });
  }

  #outbox = [];

  async #flush() {
    const batch = this.#outbox.splice(0);
    const simple = batch.every((n) => !n.open && !n.claim);
    try {
      if (simple) {
        await this.#pool.query('SELECT pg_notify(c, p) FROM unnest($1::text[], $2::text[]) AS t(c, p)', [
          batch.map((n) => n.channel),
          batch.map((n) => n.text),
        ]);
        for (const n of batch) n.resolve(true);
        return;
      }
      // The claims see the rows as the statement began: a row opened in
      // this same statement is one this member asked, never one it claims.
      const { rows } = await this.#pool.query(
        `WITH n AS (SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::float8[])
                      WITH ORDINALITY AS t(c, p, claim, open, ms, i)),
          opened AS (INSERT INTO ${this.#requests} (id, expires_at)
                     SELECT DISTINCT ON (open) open, now() + ms * interval '1 millisecond' FROM n WHERE open IS NOT NULL
                     ON CONFLICT (id) DO NOTHING),
          claimed AS (UPDATE ${this.#requests} r SET claimed_by = $6, at = now()
                      WHERE r.id IN (SELECT claim FROM n WHERE claim IS NOT NULL) AND r.expires_at > now()
                        AND (r.claimed_by IS NULL OR r.claimed_by = $6)
                      RETURNING r.id)
        SELECT i::int, pg_notify(c, p) FROM n WHERE claim IS NULL OR claim IN (SELECT id FROM claimed)`,
        [
          batch.map((n) => n.channel),
          batch.map((n) => n.text),
          batch.map((n) => n.claim || null),
          batch.map((n) => (n.open ? n.open.id : null)),
          batch.map((n) => (n.open ? n.open.ms : null)),
          this.#storeId,
        ],
      );
      const sent = new Set(rows.map((r) => r.i));
      batch.forEach((n, k) => n.resolve(sent.has(k + 1)));
    } catch (e) {
      for (const n of batch) n.reject(e);
    }
  }

  /**
   * Claims a request this member asked, to run it itself (its fallback):
   * `{ ok: true }`, or `{ ok: false, by }`: the store id of the member that
   * claimed it (that one answers it), or null when its row is gone (its
   * deadline passed, or PostgreSQL lost it): then nobody may run it.
   */
  async claim(id) {
    const key = `${this.#channel} ${id}`;
    const { rows } = await this.#pool.query(
      `WITH c AS (UPDATE ${this.#requests} SET claimed_by = $2, at = now()
                  WHERE id = $1 AND expires_at > now() AND (claimed_by IS NULL OR claimed_by = $2) RETURNING id)
       SELECT (SELECT count(*) FROM c)::int AS mine, (SELECT claimed_by FROM ${this.#requests} WHERE id = $1) AS by`,
      [key, this.#storeId],
    );
    if (rows[0].mine === 1) return { ok: true };
    return { ok: false, by: rows[0].by || null };
  }

  /** Gives back this member's claim of a request it asked and did not run: whoever hosts the name may run it. */
  async unclaim(id) {
    await this.#pool.query(
      `UPDATE ${this.#requests} SET claimed_by = NULL, at = now() WHERE id = $1 AND claimed_by = $2`,
      [`${this.#channel} ${id}`, this.#storeId],
    );
  }

  /** Requests whose member claims were lost to another (not run here). */
  get claimsLost() {
    return this.#claimsLost;
  }

  /**
   * Deletes the request rows past their deadline, at most once a minute: no
   * one may claim them any more (the claims check expires_at), so their
   * absence changes nothing.
   */
  async prune() {
    const now = Date.now();
    if (now - this.#pruned < PRUNE_EVERY_MS) return;
    this.#pruned = now;
    await this.#pool.query(`DELETE FROM ${this.#requests} WHERE expires_at < now()`);
  }

  /** A new request id: one per operation, kept by its repeats. */
  newId() {
    return ++this.#seq;
  }

  /**
   * Sends a request to the member with store id `to`; `id` (from newId())
   * is the operation's, the same for each time it is sent; `first`: its
   * first time, which makes its request row (expiring in `timeoutMs`).
   * @returns {Promise<{ value?: *, error?: object, moved?: true, unreached?: true }>}
   *   its answer; unreached: not acknowledged in time (nobody served it)
   * @throws ERR_FLEET_TIMEOUT when acknowledged but not answered within `timeoutMs`
   */
  async request(to, body, timeoutMs, id, first) {
    if (!this.#client) await this.#listen(); // its answer must find us listening
    let text;
    try {
      text = encode({ ...body, t: 'req', id, from: this.#channel });
    } catch (e) {
      throw makeError(
        'ERR_INVALID_ARG_VALUE',
        `The arguments of ${body.op} "${body.name}" cannot be routed to the member holding it: ${e.message}. Routed values are those the structured clone algorithm copies (no functions, no Lua values).`,
      );
    }
    if (text.length > PAYLOAD_MAX) throw tooLarge(`request (${body.op} "${body.name}")`, text.length);
    const answered = new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        reject(
          makeError(
            'ERR_FLEET_TIMEOUT',
            `The member holding "${body.name}" did not answer its ${body.op} within ${timeoutMs} ms: it may have stopped (its lease then lapses and another member takes the name over) or the request may still be served.`,
            { runtime: body.name, op: body.op },
          ),
        );
      }, timeoutMs);
      const ackTimer = setTimeout(
        () => {
          clearTimeout(timer);
          this.#pending.delete(id);
          resolve({ unreached: true });
        },
        Math.min(ACK_MS, timeoutMs),
      );
      this.#pending.set(id, { resolve, reject, timer, ackTimer });
    });
    // It may time out while its NOTIFY is still being written (the server
    // slow or restarting), before anyone awaits it: the caller hears of it
    // when it is returned below, or hears the write's failure instead.
    answered.catch(() => {});
    try {
      const also = first ? { open: { id: `${this.#channel} ${id}`, ms: timeoutMs } } : {};
      await this.#notify(channelOf(to), text, also);
    } catch (e) {
      const p = this.#pending.get(id);
      if (p) {
        clearTimeout(p.timer);
        clearTimeout(p.ackTimer);
      }
      this.#pending.delete(id);
      throw e;
    }
    return answered;
  }

  /** Asks every member of the schema to look for due names now. */
  wakeAll() {
    return this.#notify(this.#wakeChannel, '');
  }

  /** Stops listening; pending requests reject with ERR_RUNTIME_CLOSED. */
  async close() {
    this.#closed = true;
    for (const [id, p] of this.#pending) {
      clearTimeout(p.timer);
      clearTimeout(p.ackTimer);
      p.reject(makeError('ERR_RUNTIME_CLOSED', 'The fleet member left: its routed request was abandoned.'));
      this.#pending.delete(id);
    }
    if (this.#connecting) await this.#connecting.catch(() => {});
    const client = this.#client;
    this.#client = null;
    if (client) await client.end().catch(() => {});
  }
}

function tooLarge(what, n) {
  return makeError(
    'ERR_INVALID_ARG_VALUE',
    `A routed ${what} is too large for PostgreSQL's NOTIFY: ${n} bytes encoded, at most ${PAYLOAD_MAX}. Send large data through tasks.store or a table of your own, and route its key.`,
  );
}

// An error, as plain fields that serialize: the asker rebuilds it.
function errorRecord(e) {
  if (e === null || typeof e !== 'object') return { message: String(e) };
  const r = { message: String(e.message), name: e.name };
  for (const k of ['code', 'luaStack', 'reason', 'holder', 'expiresAt']) {
    if (e[k] !== undefined) r[k] = e[k];
  }
  return r;
}

module.exports = { FleetRouter, channelOf };
