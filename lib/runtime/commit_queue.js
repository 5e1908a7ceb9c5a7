// SPDX-License-Identifier: MIT
// CommitQueue: a runtime's snapshots on their way to the store, one write at a time.
'use strict';

const { inspect } = require('node:util');
const { makeError } = require('../errors');
const { SOCKET_ERRORS } = require('../store/faults');
const { NATIVE_JOURNAL } = require('../store/contract');

// Longest a snapshot's encode runs on the loop before it lets Node's other
// work in (docs/design.md: no COMMIT stalls the loop more than ~10 ms).
const SLICE_MS = 4;

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

// A durable committer held back by a transient failure is tried again after
// RETRY_MIN_MS, doubling up to RETRY_MAX_MS (with up to a quarter of jitter,
// so the runtimes of a member that lost PostgreSQL do not come back at once).
const RETRY_MIN_MS = 50;
const RETRY_MAX_MS = 2000;

// The largest snapshot kept to tell an unchanged tasks.state from a changed
// one byte for byte (a batch then carries none). A larger one is written
// with every batch: keeping it would double its memory, and a checksum
// alone could take a changed state for the same.
const KEEP_STATE_MAX = 1 << 20;

/**
 * Whether a store's failure is transient: the same write may land later (the
 * store says so with `err.transient`, or it is a timeout or a socket error).
 * A limit (`ERR_STORE_LIMIT`), a fenced write (`ERR_STORE_LOCKED`) or any
 * other error is permanent.
 * @param {*} e the store's error
 * @returns {boolean}
 */
function isTransient(e) {
  if (!e || typeof e !== 'object') return false;
  if (typeof e.transient === 'boolean') return e.transient;
  return e.code === 'ERR_STORE_TIMEOUT' || SOCKET_ERRORS.has(e.code);
}

// The writes a store refused for good (err.refused, as PostgresStore gives
// them): "space/key" of each, or null when the error names none.
function refusedKeys(e) {
  if (!e || typeof e !== 'object' || !Array.isArray(e.refused)) return null;
  const out = new Set();
  for (const r of e.refused) if (r && typeof r.key === 'string') out.add(`${r.space ?? 1}/${r.key}`);
  return out;
}

/**
 * tasks.store's writes as the batch carries them, from native.takeWrites()'s
 * packed form ([keys, bytes, ends]: the values one after another in one
 * Buffer, ends[i] the end of value i or -1 for a delete), or null for none.
 * Made here rather than through Node-API: a record and a Buffer a write cost
 * the loop ~2 µs there.
 * @param {[string[], Buffer, Float64Array] | null} packed
 * @returns {{ space: 1, key: string, value: Buffer|null }[] | null}
 */
function unpackWrites(packed) {
  if (packed === null) return null;
  const [keys, bytes, ends] = packed;
  const out = new Array(keys.length);
  let start = 0;
  for (let i = 0; i < keys.length; i++) {
    const end = ends[i];
    if (end < 0) {
      out[i] = { space: 1, key: keys[i], value: null };
    } else {
      out[i] = { space: 1, key: keys[i], value: bytes.subarray(start, end) };
      start = end;
    }
  }
  return out;
}

/**
 * A rejection reason as a message: an Error's message, else the value
 * itself, shown as Node shows it ("undefined" only when it was undefined).
 * @param {*} reason
 * @returns {string}
 */
function reasonText(reason) {
  if (reason instanceof Error) return reason.message || reason.name || 'Error';
  if (typeof reason === 'string') return reason;
  const text = inspect(reason, { depth: 1, breakLength: Infinity });
  return text.length > 200 ? `${text.slice(0, 200)}...` : text;
}

/**
 * Settles `promise`, or rejects with ERR_STORE_TIMEOUT once `ms` pass (0: no
 * bound). The timer keeps the process alive meanwhile: a write or a load in
 * progress is work in progress.
 * @param {Promise<*>} promise
 * @param {number} ms
 * @param {() => string} describe what did not finish, for the message
 * @returns {Promise<*>}
 */
function withTimeout(promise, ms, describe) {
  if (!ms) return promise;
  // One promise and one reaction: a durable step + COMMIT pays this once a
  // step (Promise.race and finally made three more).
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      reject(
        makeError('ERR_STORE_TIMEOUT', `${describe()} did not finish within ${ms} ms (the "storeTimeout" option).`),
      );
    }, ms);
    Promise.resolve(promise).then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (e) => {
        clearTimeout(timer);
        reject(e);
      },
    );
  });
}

/**
 * Every COMMIT (a task's yield) and rt.commit() of one runtime goes through
 * here. One write is in flight at a time. The runtime's lock is held only
 * while its snapshot is taken (no task runs; the snapshot is the state when
 * the write began); during the store's I/O the tasks run, committers
 * excepted. Requests that arrive meanwhile wait together and share the next
 * write (group commit, across tasks): their snapshot is taken when it
 * begins, which is no earlier than any of them asked. The next write starts
 * a loop turn after the last one ends, so tasks and timers that became ready
 * run first (fair handover).
 */
class CommitQueue {
  #native;
  #store;
  #name;
  #timeout;
  #lease;
  #pending = []; // requests waiting for the next write
  #writing = null; // the write in flight (a Promise), or null
  #seq = 0; // grows with every save: the store can drop one that lands late
  #next = null; // the setImmediate that starts the next write
  #soon = false; // a microtask will start a write for the tasks' COMMITs
  #closed = false;
  #outcomes = new Map(); // task key -> its request, until its write has settled (outcomeOf)
  #keepOutcomes = false;
  #flushAsked = false; // flushSoon: a microtask will ask for a write
  #retry = null; // flushSoon after a failed write: the timer of its next try
  #held = []; // durable committers whose write failed transiently: asked again when #heldTimer fires
  #heldTimer = null;
  #backoff = 0; // ms before the held committers are asked again (0: none failed since the last success)
  #down = null; // { since, error } while writes fail transiently
  #onHealth; // (event) => void: the store's writes failing transiently, or working again
  #telemetry; // RuntimeTelemetry told of each write, or null
  // The tasks.state snapshot the store confirmed last, { bytes, token }, or
  // null when unknown: none yet, or a write failed (it may still land). A
  // batch whose snapshot equals it carries none (sameAsWritten).
  #written = null;

  /**
   * @param {object} native the runtime's native object (lock, unlock, snapshotBegin/Step/Abort)
   * @param {{ save(name: string, bytes: Buffer, info?: object): Promise<void> }} store
   * @param {string} name the runtime's name in the store
   * @param {number} timeout ms a save may take (0: unbounded)
   * @param {{ token?: * } | null} lease the store's lease on the name, if it gives one
   * @param {(event: { ok: boolean, error?: Error, since: number, downMs?: number }) => void} [onHealth]
   *   told when writes begin to fail transiently (ok false) and when one lands again (ok true)
   * @param {object|null} [telemetry] the runtime's RuntimeTelemetry (lib/telemetry/runtime.js)
   */
  constructor(native, store, name, timeout, lease, onHealth, telemetry = null) {
    this.#telemetry = telemetry;
    this.#onHealth = onHealth || (() => {});
    this.#native = native;
    this.#store = store;
    this.#name = name;
    this.#timeout = timeout;
    this.#lease = lease;
  }

  /** Whether the store keeps keyed writes (write(), store interface v2). */
  get keyed() {
    return typeof this.#store.write === 'function';
  }

  /** Whether no write is in flight or waiting. */
  get idle() {
    return this.#writing === null && this.#pending.length === 0;
  }

  /**
   * Asks for a durable snapshot. `task`: { settle, key, token, durable } for a
   * task's COMMIT (told through settle), or undefined for rt.commit(). A
   * durable task's COMMIT whose write fails transiently is not told: it is
   * asked again, with backoff, until a write lands or fails for good.
   * @returns {Promise<void>|undefined} for rt.commit(): resolves once
   *   written, or rejects ERR_COMMIT_FAILED; for a task, nothing (settle tells it)
   */
  request(task) {
    // A task's request makes no promise: W13's 10,000 COMMITs a second made
    // three each, for the rare task cancelled while its write is in flight
    // (outcomeOf makes that one's when asked).
    const member = { task, resolve: null, reject: null, ok: undefined, outcome: null };
    let done;
    if (task) {
      this.#outcomes.set(task.key, member);
    } else {
      done = new Promise((resolve, reject) => {
        member.resolve = resolve;
        member.reject = reject;
      });
      done.catch(() => {}); // rt.commit() hands it to its caller: never unhandled here
    }
    this.#pending.push(member);
    if (this.#writing === null && this.#next === null) {
      if (!task) {
        this.#write(); // rt.commit(): the snapshot is the state as of the call
      } else if (!this.#soon) {
        // A task's COMMIT: the tasks that run in the same stretch (a batch of
        // the scheduler, the committers a write let go) commit into the same
        // write; its snapshot is still taken after every one of them asked.
        this.#soon = true;
        queueMicrotask(() => {
          this.#soon = false;
          if (this.#pending.length > 0 && !this.#closed && this.#writing === null && this.#next === null) {
            this.#write();
          }
        });
      }
    }
    return done;
  }

  /**
   * Durable tasks journaled records (docs/durable.md): they go out with the
   * next write, which is asked for in a microtask (never inside the Lua run
   * that wrote them). A failed write put them back: tried again 100 ms on.
   */
  flushSoon() {
    if (this.#closed || this.#flushAsked || this.#retry) return;
    this.#flushAsked = true;
    queueMicrotask(() => {
      this.#flushAsked = false;
      if (this.#closed) return;
      this.request().catch(() => {
        if (this.#closed || this.#retry) return;
        this.#retry = setTimeout(() => {
          this.#retry = null;
          this.flushSoon();
        }, 100);
        this.#retry.unref();
      });
    });
  }

  /**
   * For a task cancelled while its COMMIT was in flight: a Promise of
   * whether its snapshot was written, else undefined.
   * @param {number} key
   */
  outcomeOf(key) {
    const m = this.#outcomes.get(key);
    if (!m) return undefined;
    if (m.ok !== undefined) return Promise.resolve(m.ok);
    if (!m.outcome) {
      m.outcome = new Promise((resolve) => {
        m.resolve = () => resolve(true);
        m.reject = () => resolve(false);
      });
    }
    return m.outcome;
  }

  // Tells a request its write's outcome (error null: written).
  static #settled(m, error) {
    m.ok = error === null;
    if (m.resolve === null) return;
    if (error === null) m.resolve();
    else m.reject(error);
  }

  /**
   * Resolves once every request made so far is written (or failed). Outcomes
   * stay known meanwhile, for the tasks close() cancels after.
   * @returns {Promise<void>}
   */
  async drain() {
    this.#keepOutcomes = true;
    while (!this.idle) {
      if (this.#writing) await this.#writing;
      else await nextTurn();
    }
  }

  /**
   * The runtime is closed (closeSync): requests whose snapshot was not taken
   * yet fail; the write in flight goes on. Resolves when it has settled.
   * @returns {Promise<void>}
   */
  close() {
    this.#closed = true;
    if (this.#retry) clearTimeout(this.#retry);
    this.#retry = null;
    if (this.#next) clearImmediate(this.#next);
    this.#next = null;
    const err = makeError(
      'ERR_RUNTIME_CLOSED',
      `The runtime "${this.#name}" was closed before this commit's snapshot was taken: nothing was written for it.`,
    );
    if (this.#heldTimer) clearTimeout(this.#heldTimer);
    this.#heldTimer = null;
    // Held durable committers: their journal goes on at the next open.
    for (const m of [...this.#pending.splice(0), ...this.#held.splice(0)]) CommitQueue.#settled(m, err);
    this.#outcomes.clear();
    return this.#writing ? this.#writing : Promise.resolve();
  }

  #write() {
    const group = this.#pending.splice(0);
    this.#writing = this.#run(group).finally(() => {
      this.#writing = null;
      if (this.#pending.length > 0 && !this.#closed) {
        // One loop turn first: what became ready during this write runs
        // before the next one takes the snapshot lock.
        this.#next = setImmediate(() => {
          this.#next = null;
          if (this.#pending.length > 0 && !this.#closed && this.#writing === null) this.#write();
        });
      }
    });
  }

  #locked = false; // the snapshot lock is held (#run)
  #afterUnlock = [];

  /**
   * Runs `fn` once the snapshot lock is let go (now if it is not held):
   * what the lock deferred has run by then.
   * @param {() => void} fn
   */
  afterUnlock(fn) {
    if (this.#locked) this.#afterUnlock.push(fn);
    else fn();
  }

  async #run(group) {
    const native = this.#native;
    // The snapshot lock: held while the snapshot is taken, so no task changes
    // the state under the encoder, and let go before the store's I/O, so the
    // runtime's tasks run meanwhile and their COMMITs gather for the next
    // write (group commit across tasks).
    native.lock();
    let locked = true;
    this.#locked = true;
    const unlock = () => {
      if (!locked) return;
      locked = false;
      this.#locked = false;
      if (!this.#closed) native.unlock();
      const after = this.#afterUnlock.splice(0);
      for (const fn of after) fn();
    };
    let error = null;
    // tasks.store's writes since the last batch, taken at the instant the
    // snapshot begins: the batch is the runtime as of one moment.
    const keyed = unpackWrites(native.takeWrites());
    // Durable tasks' journal, inbox and index records (spaces 2-4) of the
    // same moment, as one opaque batch: a store that takes it natively gets
    // it as it is; any other, as records in `writes`.
    const journal = native.takeJournal();
    const handOver = journal !== null && this.#store[NATIVE_JOURNAL] === true;
    const records = journal === null || handOver ? null : native.journalRecords(journal);
    const writes = records ? (keyed ? keyed.concat(records) : records) : keyed;
    const observed = this.#telemetry === null ? null : this.#telemetry.commitBegin(group);
    let sent = null; // the snapshot the write carried
    try {
      if ((writes || journal) && typeof this.#store.write !== 'function') {
        throw makeError(
          'ERR_COMMIT_FAILED',
          `COMMIT failed: this store keeps only whole snapshots, so the tasks.store writes of "${this.#name}" cannot be saved (it needs write() and reader(), store interface v2).`,
        );
      }
      const bytes = await this.#encode();
      unlock();
      const seq = ++this.#seq;
      const token = this.#lease && this.#lease.token !== undefined ? this.#lease.token : undefined;
      const store = this.#store;
      const name = this.#name;
      const keyedStore = typeof store.write === 'function';
      const state = keyedStore && this.#sameAsWritten(bytes, token) ? null : bytes;
      sent = state;
      // Nothing changed since the last write the store confirmed (writes run
      // one at a time): this one is written already, and costs no transaction.
      const nothing = state === null && !handOver && (writes === null || writes.length === 0);
      if (!nothing) {
        const batch = { name, token, seq, state, writes: writes || [] };
        if (handOver) batch[NATIVE_JOURNAL] = journal;
        const write = keyedStore
          ? () => store.write(batch)
          : () => store.save(name, bytes, token === undefined ? { seq } : { seq, token });
        // Until this write settles, what the store holds is not known.
        const before = this.#written;
        this.#written = null;
        await withTimeout(Promise.resolve().then(write), this.#timeout, () =>
          keyedStore ? `The store's write("${name}")` : `The store's save("${name}")`,
        ).catch((e) => {
          throw this.#saveFailed(e);
        });
        this.#written = state === null ? before : bytes.length <= KEEP_STATE_MAX ? { bytes, token } : null;
      }
    } catch (e) {
      error = e;
    }
    unlock();
    if (observed !== null) {
      this.#telemetry.commitEnd(observed, sent, keyed, journal === null ? null : native.journalBytes(journal), error);
    }
    const cause = error === null ? null : error.cause !== undefined ? error.cause : error;
    const transient = error !== null && isTransient(cause);
    // A failed batch's writes go into the next COMMIT's, unless set again
    // since; those the store refused for good are dropped (they would fail
    // every later COMMIT of the runtime), and the refusal says which.
    const refused = error === null ? null : refusedKeys(cause);
    const kept = (list) => (refused === null ? list : list.filter((w) => !refused.has(`${w.space ?? 1}/${w.key}`)));
    if (keyed && !this.#closed) {
      if (error === null) native.confirmWrites();
      else native.putBackWrites(kept(keyed));
    }
    if (journal !== null && error !== null && !this.#closed) {
      native.putBackJournal(refused === null ? journal : kept(records ?? native.journalRecords(journal)));
    }
    this.#health(error, transient);
    for (const m of group) {
      if (transient && m.task && m.task.durable && !this.#closed) {
        this.#held.push(m); // its task stays at its COMMIT (or wait): asked again soon
        continue;
      }
      if (m.task && !this.#closed) {
        m.task.settle(m.task.key, m.task.token, error === null, error === null ? undefined : error);
      }
      CommitQueue.#settled(m, error);
    }
    if (this.#held.length > 0) this.#askHeldAgain();
    if (!this.#keepOutcomes) {
      // Let the outcome promises settle first; a task that is cancelled
      // after this point was told its COMMIT's result already.
      await null;
      for (const m of group) if (m.task && m.ok !== undefined) this.#outcomes.delete(m.task.key);
    }
  }

  /**
   * Whether `bytes` is the snapshot the store last confirmed under `token`,
   * byte for byte. A failed write cleared what was confirmed: it may land
   * later, so the next snapshot goes whatever it is.
   * @param {Buffer} bytes
   * @param {*} token
   * @returns {boolean}
   */
  #sameAsWritten(bytes, token) {
    const w = this.#written;
    return w !== null && w.token === token && w.bytes.length === bytes.length && w.bytes.equals(bytes);
  }

  // Writes failing transiently, and working again, are told once each.
  #health(error, transient) {
    if (error === null) {
      this.#backoff = 0;
      if (this.#down === null) return;
      const { since } = this.#down;
      this.#down = null;
      this.#onHealth({ ok: true, since, downMs: Date.now() - since });
    } else if (transient && this.#down === null) {
      this.#down = { since: Date.now(), error };
      this.#onHealth({ ok: false, error, since: this.#down.since });
    } else if (transient) {
      this.#down.error = error;
    }
  }

  // The held committers are asked again after the backoff (a timer that
  // keeps the process alive: they are work in progress).
  #askHeldAgain() {
    if (this.#heldTimer || this.#closed) return;
    this.#backoff = Math.min(this.#backoff === 0 ? RETRY_MIN_MS : this.#backoff * 2, RETRY_MAX_MS);
    const ms = this.#backoff + Math.floor(Math.random() * (this.#backoff / 4));
    this.#heldTimer = setTimeout(() => {
      this.#heldTimer = null;
      if (this.#closed || this.#held.length === 0) return;
      this.#pending.push(...this.#held.splice(0));
      if (this.#writing === null && this.#next === null) this.#write();
    }, ms);
  }

  // The snapshot, encoded a slice at a time while the lock is held.
  async #encode() {
    const native = this.#native;
    native.snapshotBegin();
    for (;;) {
      if (this.#closed) {
        throw makeError(
          'ERR_RUNTIME_CLOSED',
          `The runtime "${this.#name}" was closed while its snapshot was being taken: nothing was written.`,
        );
      }
      const bytes = native.snapshotStep(SLICE_MS);
      if (bytes !== undefined) return bytes;
      await nextTurn();
    }
  }

  #saveFailed(e) {
    const name = this.#name;
    if (e && e.code === 'ERR_STORE_TIMEOUT') {
      return makeError(
        'ERR_COMMIT_FAILED',
        `COMMIT failed: ${e.message} The previous snapshot of "${name}" stands unless that write still lands; a later COMMIT supersedes it.`,
        { cause: e },
      );
    }
    if (e && e.code === 'ERR_STORE_LIMIT') {
      // The refused writes are dropped (docs/persistence.md#store-limits): the
      // runtime's later COMMITs do not carry them.
      return makeError(
        'ERR_STORE_LIMIT',
        `COMMIT failed: ${reasonText(e).replace(/\.$/, '')}. The refused writes were dropped; the others of "${name}" go with its next COMMIT.`,
        { cause: e, refused: e.refused },
      );
    }
    if (e && e.replaced === true) {
      // The store's own error may say all this already: its cause is the news.
      const text = reasonText(e.cause !== undefined ? e.cause : e);
      return makeError(
        'ERR_COMMIT_FAILED',
        `COMMIT failed: the new snapshot of "${name}" is in place, but the store could not confirm it is durable: ${text}. It may not survive a crash.`,
        { cause: e, replaced: true },
      );
    }
    return makeError(
      'ERR_COMMIT_FAILED',
      `COMMIT failed: the store could not save the state of "${name}": ${reasonText(e).replace(/\.$/, '')}. The previous snapshot is intact.`,
      { cause: e },
    );
  }
}

module.exports = { CommitQueue, withTimeout, reasonText, nextTurn, isTransient, SLICE_MS };
