// SPDX-License-Identifier: MIT
// FleetRouter: requests between fleet members over PostgreSQL's LISTEN/NOTIFY.
'use strict';

// Each member listens on a channel named for its store object's id (the id
// its leases' holder records carry), so the holder of a name is found from
// the lease row and reached without a registry of members. A request and its
// answer are one NOTIFY each: PostgreSQL delivers a notification to the
// listeners connected when its transaction commits, in commit order, and
// drops it for a member that is gone. The receiver acknowledges a request
// and serves it only once the acknowledgement is committed. A request not
// acknowledged within ACK_MS was run by no one (the member is gone, its
// listening session broke, or its loop was busy): the asker looks again and
// sends it again under the SAME id, and a member serves an id once (a
// repeat gets the first one's answer), so a slow holder never runs an
// operation twice, and another holder runs it only if the first never
// acknowledged it (if that one still ran it, its lease had lapsed: its writes
// are fenced). One acknowledged but not answered in time rejects with
// ERR_FLEET_TIMEOUT (it may still be served). While the asker's own
// listening session is down it may miss acknowledgements: its requests then
// wait for their answer or the timeout, never repeated elsewhere.
//
// Payloads are v8-serialized values (members run the same package and trust
// one another: they share the database), base64 in the NOTIFY's text, which
// PostgreSQL bounds at 8000 bytes.

const v8 = require('node:v8');
const { createHash } = require('node:crypto');
const { makeError } = require('./errors');

const PAYLOAD_MAX = 7999; // PostgreSQL's NOTIFY payload limit is 8000 bytes
const RECONNECT_MS = 500;
const ACK_MS = 500;
const SERVED_KEPT_MS = 120000; // how long a served request's answer is kept for its repeats

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
    this.#wakeChannel = wakeChannelOf(o.schema);
    this.#onRequest = o.onRequest;
    this.#onWake = o.onWake;
    this.#onError = o.onError;
  }

  /** Connects the listening session (LISTEN on its channels). */
  async start() {
    await this.#listen();
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
      // Served only once its acknowledgement is committed (so delivered to
      // the asker, which listens): a request the asker saw no ack for was run
      // by no one, and may go to another holder. Repeats of an id this
      // member took get the first one's answer.
      const key = `${msg.from} ${msg.id}`;
      const acked = this.#notify(msg.from, encode({ t: 'ack', id: msg.id }));
      let answer = this.#served.get(key);
      if (!answer) {
        answer = acked.then(() => this.#serve(msg));
        this.#served.set(key, answer);
        setTimeout(() => this.#served.delete(key), SERVED_KEPT_MS).unref();
      }
      answer.then((text) => this.#notify(msg.from, text)).catch((e) => this.#onError(e));
    }
  }

  // Serves a request: the text of its answer.
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
    return text;
  }

  // Notifications made in one loop turn go in one statement (one round trip,
  // one transaction: delivered in this order; PostgreSQL folds identical ones,
  // which here are only repeats).
  #notify(channel, text) {
    return new Promise((resolve, reject) => {
      this.#outbox.push({ channel, text, resolve, reject });
      if (this.#outbox.length === 1) setImmediate(() => this.#flush());
    });
  }

  #outbox = [];

  async #flush() {
    const batch = this.#outbox.splice(0);
    try {
      await this.#pool.query('SELECT pg_notify(c, p) FROM unnest($1::text[], $2::text[]) AS t(c, p)', [
        batch.map((n) => n.channel),
        batch.map((n) => n.text),
      ]);
      for (const n of batch) n.resolve();
    } catch (e) {
      for (const n of batch) n.reject(e);
    }
  }

  /** A new request id: one per operation, kept by its repeats. */
  newId() {
    return ++this.#seq;
  }

  /**
   * Sends a request to the member with store id `to`; `id` (from newId())
   * is the operation's, the same for each time it is sent.
   * @returns {Promise<{ value?: *, error?: object, moved?: true, unreached?: true }>}
   *   its answer; unreached: not acknowledged in time (nobody served it)
   * @throws ERR_FLEET_TIMEOUT when acknowledged but not answered within `timeoutMs`
   */
  async request(to, body, timeoutMs, id) {
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
            { name: body.name, op: body.op },
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
    try {
      await this.#notify(channelOf(to), text);
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
