// SPDX-License-Identifier: MIT
// FleetRouter: requests between fleet members as rows of PostgreSQL, a NOTIFY only waking the reader.
'use strict';

// Each member listens on a channel named for its store object's id (the id
// its leases' holder records carry), so the holder of a name is found from
// the lease row and reached without a registry of members. PostgreSQL
// delivers a notification to the listeners connected when its transaction
// commits, in commit order, and drops it for a member that is gone.
//
// Requests as rows. A request is a row of <schema>.lua_tasks_requests (id,
// claimed_by, at, expires_at, body, answer): the asker inserts it with its
// body (the operation, v8-serialized) in the transaction of its first
// NOTIFY, which carries only the row's id; the holder reads the body in the
// transaction that claims the row, writes the answer into the same row in
// the transaction of the NOTIFY that tells the asker, and the asker takes
// the answer out by deleting the row. So values are bounded by ROUTE_MAX
// (the PostgreSQL store's value limit), not by NOTIFY's 8000 bytes. An
// answer of at most INLINE_MAX bytes also rides in its notification: the
// asker has it with no round trip of its own, and drops the rows of a loop
// turn's such answers in one statement after.
//
// At most once, by construction. Whoever runs a request claims its row
// first: the receiver in the transaction of its acknowledgement (no
// acknowledgement, and no run, if another claimed it), the asker before
// running it itself (its fallback when no acknowledgement came within ACK_MS
// and the name came to it). One UPDATE on one row decides, so no pause,
// timeout or repeat runs an operation twice, whatever the members' clocks
// say. A repeat (the same id, sent again) to the member that claimed it gets
// the first one's answer (kept in the row until the asker takes it). A
// receiver that claimed a request but no longer hosts the name gives its
// claim back before answering "moved". A member claims as its store id,
// asking or serving alike, so it never serves a request of its own. The row
// lives until the asker takes its answer or its deadline passes (expires_at,
// on PostgreSQL's clock); a row past it is claimed by nobody, so pruning it
// is safe, and a row that is missing (answered and taken, pruned, or lost:
// the table is UNLOGGED, emptied by a crash of PostgreSQL) is claimed by
// nobody either: losing rows can only make a request fail, never run twice.
// One acknowledged but not answered in time rejects with ERR_FLEET_TIMEOUT
// (it may still be served, once). While the asker's own listening session
// is down it may miss acknowledgements: its requests then wait for their
// answer or the timeout.
//
// Bodies and answers are v8-serialized values (members run the same package
// and trust one another: they share the database); notifications are small
// v8-serialized records in base64.
//
// Members of an older version (during an upgrade, docs/fleet.md#upgrading)
// carry the body in the request's notification and the answer in the
// answer's. A request that has one (no `row` mark) is served and answered
// that way, within NOTIFY's bound; a request of ours an older member
// received is answered "moved" without the `row` mark (it cannot read the
// row): it is sent to it again in the older form, if that fits.

const v8 = require('node:v8');
const { createHash } = require('node:crypto');
const { makeError } = require('../errors');
const { LIMITS } = require('../store/postgres/limits');
const { createUnderSchemaLock } = require('./schema');

/** The largest encoded request or answer: the PostgreSQL store's value limit (64 MiB). */
const ROUTE_MAX = LIMITS.maxValueBytes;
const PAYLOAD_MAX = 7999; // PostgreSQL's NOTIFY payload limit is 8000 bytes (the older members' form)
const INLINE_MAX = 5800; // an answer this size or less rides in its notification too (base64 grows it by 4/3)
const RECONNECT_MS = 500;
const ACK_MS = 500;
const SERVED_KEPT_MS = 120000; // how long a request served here is known, for its repeats in flight
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

const MiB = (n) => `${n / 1048576} MiB`;

class FleetRouter {
  #pg;
  #pool;
  #requests; // "<schema>"."lua_tasks_requests"
  #sql; // statements(): the ones made on every request, prepared
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
  // request id -> { resolve, reject, timer, ackTimer, to, body, older }: requests this member asked
  #pending = new Map();
  // "<from> <id>" -> Promise of the text of its answer's notification (null: not served here):
  // requests served here, so that a repeat in flight is answered, not run
  #served = new Map();
  #onRequest;
  #onWake;
  #onError;

  /**
   * @param {object} o
   * @param {object} o.pg the `pg` module
   * @param {object} o.pool the pool rows and NOTIFYs go through
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
    this.#sql = statements(o.schema, this.#requests);
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
  // missing row is claimed by nobody (see the header). A table an older member made has no body
  // and answer: they are added (nullable: the older members' rows leave them empty, and go on
  // working beside them), only when missing, as ALTER TABLE locks the table out for a moment.
  async #create() {
    const t = this.#requests;
    await createUnderSchemaLock(this.#pool, this.#schema, [
      `CREATE UNLOGGED TABLE IF NOT EXISTS ${t} (id text PRIMARY KEY, claimed_by text, at timestamptz,
        expires_at timestamptz NOT NULL, body bytea, answer bytea)`,
      `DO $u$ BEGIN
        IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = '${t}'::regclass AND attname = 'answer' AND NOT attisdropped) THEN
          ALTER TABLE ${t} ADD COLUMN IF NOT EXISTS body bytea, ADD COLUMN IF NOT EXISTS answer bytea;
        END IF;
        IF EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = '${t}'::regclass AND attname IN ('body', 'answer') AND attstorage <> 'e') THEN
          ALTER TABLE ${t} ALTER COLUMN body SET STORAGE EXTERNAL, ALTER COLUMN answer SET STORAGE EXTERNAL;
        END IF;
      END $u$`,
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
    if (msg.t === 'res') this.#answered(msg);
    else if (msg.t === 'ack') {
      const p = this.#pending.get(msg.id);
      if (p) clearTimeout(p.ackTimer);
    } else if (msg.t === 'req') this.#received(msg);
  }

  // The answer to a request this member asked: in its row (taken out of it
  // here), or, from an older member, in the notification.
  #answered(msg) {
    const p = this.#pending.get(msg.id);
    if (!p) return; // timed out meanwhile, or answered already
    if (!msg.row && msg.moved && p.older === undefined) {
      // An older member got our request and could not read its row: sent
      // again in the form it reads, if it fits; else it is "moved" (the name
      // is looked up again, and may be hosted by then where it reads rows).
      p.older = olderForm(p.body, msg.id, this.#channel);
      if (p.older !== null) {
        this.#notify(channelOf(p.to), p.older).catch((e) => this.#settle(msg.id, null, e));
        return;
      }
    }
    if (!msg.row || msg.moved) {
      this.#settle(msg.id, msg);
      return;
    }
    if (msg.inline) {
      // The answer came with the notification: the row is only dropped, with
      // others of this turn (a row left by a failure expires and is pruned).
      this.#settle(msg.id, v8.deserialize(msg.inline));
      this.#drop(`${this.#channel} ${msg.id}`);
      return;
    }
    this.#pool.query({ ...this.#sql.collect, values: [`${this.#channel} ${msg.id}`] }).then(
      ({ rows }) => {
        // None: taken by a repeat's answer already (or lost: the timeout says so).
        if (rows.length === 1) this.#settle(msg.id, v8.deserialize(rows[0].answer));
      },
      (e) => this.#settle(msg.id, null, e),
    );
  }

  #dropping = [];

  #drop(key) {
    this.#dropping.push(key);
    if (this.#dropping.length > 1) return;
    setImmediate(() => {
      const keys = this.#dropping.splice(0);
      this.#pool.query({ ...this.#sql.drop, values: [keys] }).catch(() => {});
    });
  }

  #settle(id, answer, error) {
    const p = this.#pending.get(id);
    if (!p) return;
    this.#pending.delete(id);
    clearTimeout(p.timer);
    clearTimeout(p.ackTimer);
    if (error) p.reject(error);
    else p.resolve(answer);
  }

  // A request to this member. Acknowledged only with its claim (one
  // transaction): a request the asker saw no ack for was claimed by no one
  // here, and one another member claimed is neither acknowledged nor run
  // here. Repeats of an id this member claimed get the first one's answer.
  #received(msg) {
    // One of its own (a member never sends one: lib/fleet/member.js): its
    // claim would be this member's, which the asking side's fallback takes
    // as its own, and both would run it. Unacknowledged: the asker looks again.
    if (msg.from === this.#channel) return;
    const key = `${msg.from} ${msg.id}`;
    const known = this.#served.get(key);
    const claimed = this.#notify(msg.from, encode({ t: 'ack', id: msg.id }), { claim: key, read: !known && msg.row });
    if (!known) {
      const answer = this.#take(msg, key, claimed);
      this.#served.set(key, answer);
      setTimeout(() => this.#served.delete(key), SERVED_KEPT_MS).unref();
      answer.catch((e) => this.#onError(e));
    } else {
      // A repeat's acknowledgement: nothing waits for it here, and its
      // write failing (the server restarting) must not go unheard.
      claimed.catch((e) => this.#onError(e));
      known.then((text) => text && this.#notify(msg.from, text)).catch((e) => this.#onError(e));
    }
  }

  // A request this member received: served if it claimed it, its answer
  // written and notified; resolves with the text of that notification, for
  // repeats (null: another member claimed it, and answers it). A "moved"
  // answer gives the claim back first, so whoever hosts the name now may
  // claim and run it.
  async #take(msg, key, claimed) {
    const c = await claimed;
    if (!c) {
      this.#claimsLost++;
      return null;
    }
    const done = encode({ t: 'res', id: msg.id, row: true });
    if (msg.row && c.answered) {
      // Served here before, its answer still in the row for the asker.
      await this.#notify(msg.from, done);
      return done;
    }
    let req = msg;
    let answer;
    try {
      if (msg.row) req = v8.deserialize(c.body);
      const value = await this.#onRequest(req);
      answer = value && value.moved ? { moved: true } : { value };
    } catch (e) {
      answer = { error: errorRecord(e) };
    }
    if (answer.moved) {
      await this.#pool.query(
        `UPDATE ${this.#requests} SET claimed_by = NULL, at = now() WHERE id = $1 AND claimed_by = $2`,
        [key, this.#storeId],
      );
      this.#served.delete(key); // not run here: a repeat claims again
      const text = encode(
        msg.row ? { t: 'res', id: msg.id, moved: true, row: true } : { t: 'res', id: msg.id, moved: true },
      );
      await this.#notify(msg.from, text);
      return text;
    }
    if (!msg.row) {
      const text = olderAnswer(msg.id, answer);
      await this.#notify(msg.from, text);
      return text;
    }
    // The answer goes into the row (a repeat after this member restarted
    // finds it there) and, when it fits, into the notification too: the
    // asker then has it without a round trip to take it out of the row.
    const bytes = answerBytes(answer, req);
    const inline = bytes.length <= INLINE_MAX ? encode({ t: 'res', id: msg.id, row: true, inline: bytes }) : done;
    const text = inline.length <= PAYLOAD_MAX ? inline : done;
    await this.#notify(msg.from, text, { answer: { id: key, bytes } });
    return text;
  }

  // Notifications made in one loop turn go in one statement (one round trip,
  // one transaction: delivered in this order; PostgreSQL folds identical ones,
  // which here are only repeats), with the rows they write and the claims
  // they carry. `also.open` { id, ms, bytes }: the request row to insert
  // (expiring in ms, its body `bytes`); `also.claim`: the request id this
  // notification acknowledges, sent only if this member claims it (or had),
  // `also.read` reading its body with the claim; `also.answer` { id, bytes }:
  // the answer to write into the row this member claimed, sent only if
  // written. Resolves false when not sent, else true, or for a claim
  // { body, answered }.
  #notify(channel, text, also = {}) {
    return new Promise((resolve, reject) => {
      this.#outbox.push({ channel, text, ...also, resolve, reject });
      if (this.#outbox.length === 1) setImmediate(() => this.#flush());
    });
  }

  #outbox = [];

  async #flush() {
    const batch = this.#outbox.splice(0);
    const simple = batch.every((n) => !n.open && !n.claim && !n.answer);
    try {
      if (simple) {
        await this.#pool.query('SELECT pg_notify(c, p) FROM unnest($1::text[], $2::text[]) AS t(c, p)', [
          batch.map((n) => n.channel),
          batch.map((n) => n.text),
        ]);
        for (const n of batch) n.resolve(true);
        return;
      }
      // The bodies and answers travel as one binary bytea, each a slice of
      // it (a bytea[] parameter would go as hex text, twice their size).
      const bytes = [];
      const slices = [[], []];
      let at = 1;
      for (const n of batch) {
        const b = (n.open && n.open.bytes) || (n.answer && n.answer.bytes) || null;
        slices[0].push(b ? at : null);
        slices[1].push(b ? b.length : null);
        if (b) {
          bytes.push(b);
          at += b.length;
        }
      }
      const { rows } = await this.#pool.query({
        ...this.#sql.flush,
        values: [
          batch.map((n) => n.channel),
          batch.map((n) => n.text),
          batch.map((n) => n.claim || null),
          batch.map((n) => (n.open ? n.open.id : null)),
          batch.map((n) => (n.open ? n.open.ms : null)),
          batch.map((n) => (n.answer ? n.answer.id : null)),
          slices[0],
          slices[1],
          batch.map((n) => n.read === true),
          bytes.length ? Buffer.concat(bytes) : null,
          this.#storeId,
        ],
      });
      const sent = new Map(rows.map((r) => [r.i, r]));
      batch.forEach((n, k) => {
        const r = sent.get(k + 1);
        n.resolve(r === undefined ? false : n.claim ? { body: r.body, answered: r.answered === true } : true);
      });
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
   * first time, which makes its request row (expiring in `timeoutMs`) with
   * its body; a repeat's notification only names the row.
   * @returns {Promise<{ value?: *, error?: object, moved?: true, unreached?: true }>}
   *   its answer; unreached: not acknowledged in time (nobody served it)
   * @throws ERR_INVALID_ARG_VALUE when the body does not serialize;
   *   ERR_STORE_LIMIT when it is over ROUTE_MAX encoded;
   *   ERR_FLEET_TIMEOUT when acknowledged but not answered within `timeoutMs`
   */
  async request(to, body, timeoutMs, id, first) {
    if (!this.#client) await this.#listen(); // its answer must find us listening
    let bytes = null;
    if (first) {
      try {
        bytes = v8.serialize(body);
      } catch (e) {
        throw makeError(
          'ERR_INVALID_ARG_VALUE',
          `The arguments of ${body.op} "${body.name}" cannot be routed to the member holding it: ${e.message}. Routed values are those the structured clone algorithm copies (no functions, no Lua values).`,
        );
      }
      if (bytes.length > ROUTE_MAX) throw tooLarge(`request (${body.op} "${body.name}")`, bytes.length);
    }
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
      this.#pending.set(id, { resolve, reject, timer, ackTimer, to, body, older: undefined });
    });
    // It may time out while its NOTIFY is still being written (the server
    // slow or restarting), before anyone awaits it: the caller hears of it
    // when it is returned below, or hears the write's failure instead.
    answered.catch(() => {});
    try {
      const also = first ? { open: { id: `${this.#channel} ${id}`, ms: timeoutMs, bytes } } : {};
      await this.#notify(channelOf(to), encode({ t: 'req', id, from: this.#channel, row: true }), also);
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

// The statements made on every routed request, prepared once per
// connection (parsed and planned once, not per request). Named per schema,
// as a connection may serve several; PostgreSQL cuts names at 63 bytes, so
// the schema goes in as a hash.
function statements(schema, requests) {
  const h = createHash('sha256').update(schema).digest('hex').slice(0, 16);
  return {
    // $1-$9 one entry each: channel, text, claim, open, ms, answer id, the
    // start and length of its bytes (body or answer) in $10, read; $11 this
    // member's store id. Every part sees the rows as the statement began: a
    // row opened in this same statement is one this member asked, never one
    // it claims, and a claim does not change the body read beside it. No
    // row is updated twice (PostgreSQL would keep one of the two): a claim
    // updates only a row nobody claimed (one this member claimed is read),
    // an answer only one this member claimed.
    flush: {
      name: `lua_tasks_route_${h}`,
      text: `WITH n AS (SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::float8[], $6::text[],
                $7::int[], $8::int[], $9::boolean[]) WITH ORDINALITY AS t(c, p, claim, open, ms, ans, s, len, rd, i)),
        opened AS (INSERT INTO ${requests} (id, expires_at, body)
          SELECT DISTINCT ON (open) open, now() + ms * interval '1 millisecond',
            CASE WHEN s IS NOT NULL THEN substring($10::bytea FROM s FOR len) END
          FROM n WHERE open IS NOT NULL
          ON CONFLICT (id) DO NOTHING),
        took AS (UPDATE ${requests} r SET claimed_by = $11, at = now()
          WHERE r.id IN (SELECT claim FROM n) AND r.expires_at > now() AND r.claimed_by IS NULL
          RETURNING r.id, r.answer IS NOT NULL AS answered),
        claimed AS (SELECT * FROM took UNION ALL
          SELECT id, answer IS NOT NULL FROM ${requests}
          WHERE id IN (SELECT claim FROM n) AND expires_at > now() AND claimed_by = $11),
        written AS (UPDATE ${requests} r SET answer = substring($10::bytea FROM n.s FOR n.len)
          FROM n WHERE r.id = n.ans AND r.claimed_by = $11
          RETURNING r.id)
      SELECT i::int, pg_notify(c, p), (SELECT answered FROM claimed WHERE id = claim) AS answered,
        CASE WHEN rd THEN (SELECT body FROM ${requests} WHERE id = claim) END AS body
      FROM n WHERE (claim IS NULL OR claim IN (SELECT id FROM claimed))
        AND (ans IS NULL OR ans IN (SELECT id FROM written))`,
    },
    // The asker takes an answer out of its row.
    collect: {
      name: `lua_tasks_route_take_${h}`,
      text: `DELETE FROM ${requests} WHERE id = $1 AND answer IS NOT NULL RETURNING answer`,
    },
    // The asker drops the rows of answers that came in their notifications.
    drop: {
      name: `lua_tasks_route_drop_${h}`,
      text: `DELETE FROM ${requests} WHERE id = ANY($1::text[])`,
    },
  };
}

function tooLarge(what, n) {
  return makeError(
    'ERR_STORE_LIMIT',
    `A routed ${what} is ${n} bytes encoded, over the fleet's limit of ${ROUTE_MAX} bytes (${MiB(ROUTE_MAX)}, the PostgreSQL store's value limit) a request or an answer. Send large data through tasks.store or a table of your own, and route its key.`,
    { bytes: n, limit: ROUTE_MAX },
  );
}

// The bytes of an answer for its row: an answer past ROUTE_MAX (or that
// does not serialize) is replaced by the error that says so.
function answerBytes(answer, req) {
  try {
    const bytes = v8.serialize(answer);
    if (bytes.length <= ROUTE_MAX) return bytes;
    throw tooLarge(`answer (${req.op} "${req.name}")`, bytes.length);
  } catch (e) {
    return v8.serialize({ error: errorRecord(e) });
  }
}

// A request in the form an older member reads (its body in the
// notification), or null when it does not fit in one.
function olderForm(body, id, from) {
  try {
    const text = encode({ ...body, t: 'req', id, from });
    return text.length <= PAYLOAD_MAX ? text : null;
  } catch {
    return null;
  }
}

// An answer in the form an older member reads: in the notification, or
// the error that says it did not fit.
function olderAnswer(id, answer) {
  try {
    const text = encode({ t: 'res', id, ...answer });
    if (text.length <= PAYLOAD_MAX) return text;
    throw makeError(
      'ERR_STORE_LIMIT',
      `A routed answer is ${text.length} bytes encoded, over the ${PAYLOAD_MAX} an older member reads in its notification: upgrade the asking member.`,
    );
  } catch (e) {
    return encode({ t: 'res', id, error: errorRecord(e) });
  }
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

module.exports = { FleetRouter, channelOf, ROUTE_MAX };
