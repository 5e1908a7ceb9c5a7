// SPDX-License-Identifier: MIT
// DirectoryStore: the embedded store, one SQLite database per directory and one OS lock per runtime name.
'use strict';

// How and why (docs/persistence.md, The directory store):
//   <dir>/lua-tasks.sqlite (+ -wal, -shm)  every name's data: tasks.state
//                                    snapshots, keyed values, owners' tokens
//   <dir>/lua-tasks.mark             the count of transactions acknowledged,
//                                    outside the WAL (native/core/store/store_mark.hpp):
//                                    an open whose database is behind it fails
//   <dir>/<name>.lock                the owner's OS lock (flock, native/core/store/file_lock.hpp)
//                                    and its record {"pid","host","thread","since","token"}
//   <dir>/<name>.state               a snapshot of the store before v2: imported
//                                    into the database on acquire or load, then
//                                    renamed <name>.state.migrated
// The lock belongs to the open file, so it conflicts within one process and
// across Workers and processes, and it dies with its process: there is never
// a stale lock, and the lock file is never deleted (deleting it would let two
// owners in). acquire() records the lock's token in the database too; every
// batch is written only if its token is still the one recorded (fencing).
//
// Writes go to a NativeStore (native/addon/store/native_store.*): the batches
// written in one loop turn, by every runtime sharing this store object, land
// in one SQLite transaction and one fsync, on a thread of its own. Keyed
// reads are synchronous, on a read-only connection of this thread.

const fs = require('node:fs/promises');
const fsSync = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { threadId } = require('node:worker_threads');
const binding = require('../binding');
const { makeError } = require('../errors');
const {
  SPACE_LIST,
  NATIVE_SCAN,
  NATIVE_JOURNAL,
  checkName,
  checkScan,
  checkNames,
  checkBatch,
  snapshotBatch,
} = require('./contract');

// The database's file name in the directory (native/core/store/store_db.hpp).
const DB_FILE = 'lua-tasks.sqlite';
// What a snapshot file of the store before v2 starts with: "LTST" and its
// format version (native/core/codec/state_format.hpp: 2, no checksum; 3,
// checksummed; 4, with string references).
const SNAPSHOT_MAGIC = Buffer.from('LTST', 'latin1');
const SNAPSHOT_VERSIONS = [2, 3, 4];

// The lock file's record, or null when it is empty or unreadable (its holder
// has not written it yet). A record is one line of JSON.
function parseRecord(text) {
  const end = text.indexOf('\n');
  try {
    const r = JSON.parse(end < 0 ? text : text.slice(0, end));
    return r !== null && typeof r === 'object' ? r : null;
  } catch {
    return null;
  }
}

function lockedError(name, lockPath, record) {
  const tail =
    'The OS releases the lock when that runtime closes or its process exits: there is no lock file to delete.';
  if (!record) {
    return makeError(
      'ERR_STORE_LOCKED',
      `Runtime "${name}" is already open elsewhere: ${lockPath} is locked, and its holder has not written its record yet. Close it there first (rt.close()), or open another name. ${tail}`,
      { holder: null, path: lockPath },
    );
  }
  const holder = { pid: record.pid, host: record.host, since: record.since, thread: record.thread };
  let where;
  if (holder.pid === process.pid && holder.host === os.hostname()) {
    let thread;
    if (holder.thread === threadId) thread = 'on this thread';
    else if (holder.thread === 0) thread = 'on the main thread';
    else thread = `in Worker thread ${holder.thread}`;
    where = `in this process (another Runtime ${thread}, not yet closed; since ${holder.since}), holding ${lockPath}. Close it first (await rt.close())`;
  } else {
    where = `in process ${holder.pid} on host ${JSON.stringify(holder.host)} (since ${holder.since}), holding ${lockPath}. Close it there first (rt.close())`;
  }
  return makeError('ERR_STORE_LOCKED', `Runtime "${name}" is already open ${where}, or open another name. ${tail}`, {
    holder,
    path: lockPath,
  });
}

/**
 * @typedef {object} StoreLease
 * @property {number} token grows with every acquire of the name (it is kept in
 *   the lock file, so it grows across restarts too, and recorded in the
 *   database, which fences every batch by it); pass it to write() and save()
 * @property {() => Promise<void>} release gives the name up: its writes in
 *   flight land first, later ones under this token are refused. Idempotent.
 *   Keep the lease referenced while you own the name: one that nothing
 *   references is released when it is collected (the GC is a backstop).
 */

// Whether `bytes` start as a snapshot of the store before v2 does.
function looksLikeSnapshot(bytes) {
  return bytes.length >= 5 && bytes.subarray(0, 4).equals(SNAPSHOT_MAGIC) && SNAPSHOT_VERSIONS.includes(bytes[4]);
}

// DirectoryStore.prototype.limits.
const DIRECTORY_LIMITS = Object.freeze({
  maxKeyBytes: 64 * 1024,
  maxValueBytes: 256 * 1024 * 1024,
  maxBatchBytes: 768 * 1024 * 1024,
  keyForbidsNul: false,
});

// (store) -> its NativeStore, opened: for the tests' fault injection only.
let nativeOf;

// The stores whose NativeStore is open on this thread, closed at exit: a
// process that ends with process.exit() runs no finalizer, and without a
// close its last transactions would live in the -wal only (a lost -wal
// would then lose them). close() checkpoints the -wal into the database.
const live = new Set(); // WeakRef<DirectoryStore>
const forget = new FinalizationRegistry((ref) => live.delete(ref));
let closeAtExit;
process.once('exit', () => {
  for (const ref of live) {
    const store = ref.deref();
    if (store) closeAtExit(store);
  }
});

/**
 * Stores every runtime's state of a directory in `<dir>/lua-tasks.sqlite`,
 * one owner per name.
 *
 * A runtime calls `acquire(name)` before `load(name)` (one owner per name:
 * ERR_STORE_LOCKED otherwise), then `write(batch)` (or `save(name, bytes,
 * { token, seq })`), and the lease's `release()` once its writes have
 * settled. `reader(name)` reads keyed values synchronously. `file(name)` and
 * `locate(name)` say where a name's state lives, for messages.
 *
 * A write is durable before its promise resolves: it is one SQLite
 * transaction (WAL, synchronous=FULL) shared by every batch written in the
 * same loop turn through this store object, run on a thread of its own. A
 * crash at any moment leaves each batch wholly written or not at all.
 */
class DirectoryStore {
  /** The key spaces this store keeps (docs/design.md#the-store-interface): tasks.store, journals, inboxes. */
  get spaces() {
    return [...SPACE_LIST];
  }

  /** A runtime's durable records reach the writer thread natively (contract.js NATIVE_JOURNAL). */
  get [NATIVE_JOURNAL]() {
    return true;
  }

  /**
   * What one write may carry (docs/persistence.md#store-limits): SQLite
   * keeps any bytes in a key (NUL too) and up to 1e9 bytes in a value
   * (SQLITE_MAX_LENGTH); the bounds here leave room under that for the
   * record's header and keep one write's copies (the writer thread's, the
   * WAL's) well inside memory.
   * @returns {{ maxKeyBytes: number, maxValueBytes: number, maxBatchBytes: number, keyForbidsNul: boolean }}
   */
  get limits() {
    return DIRECTORY_LIMITS;
  }

  #leases = new Map(); // name -> { token, handle, lastSeq, newest, inflight, released }: names this store owns
  #native = null; // the NativeStore, opened at first use (the directory exists then)
  #closed = false;
  #ref = new WeakRef(this); // this store's entry in `live` while its NativeStore is open

  static {
    nativeOf = (store) => store.#open();
    closeAtExit = (store) => store.#native && store.#native.close();
  }

  /** @param {string} dir created if missing */
  constructor(dir) {
    if (typeof dir !== 'string' || dir === '') {
      throw makeError(
        'ERR_INVALID_ARG_TYPE',
        `The store directory must be a non-empty string. Received ${typeof dir}.`,
      );
    }
    this.dir = path.resolve(dir);
  }

  /**
   * @param {string} name
   * @returns {string} the path of the database that keeps the name's state
   * @throws {TypeError} ERR_INVALID_ARG_VALUE for a bad name
   */
  file(name) {
    checkName(name);
    return path.join(this.dir, DB_FILE);
  }

  /**
   * Where a name's state lives, said for a person: the database's path.
   * @param {string} name
   * @returns {string}
   */
  locate(name) {
    return this.file(name);
  }

  #lockPath(name) {
    checkName(name);
    return path.join(this.dir, `${name}.lock`);
  }

  // The NativeStore, opened (with the directory) at first use. `name`: the
  // runtime whose use opened it, named by an ERR_STORE_CORRUPT of the open.
  #open(name) {
    if (this.#closed) {
      throw makeError(
        'ERR_INVALID_STATE',
        `The store of ${this.dir} is closed (its close() was called): make a new DirectoryStore for that directory.`,
      );
    }
    if (!this.#native) {
      fsSync.mkdirSync(this.dir, { recursive: true });
      try {
        this.#native = new binding.NativeStore(this.dir);
      } catch (e) {
        if (e && e.code === 'ERR_STORE_CORRUPT' && name !== undefined) {
          throw makeError('ERR_STORE_CORRUPT', `Runtime "${name}" cannot be opened from ${this.dir}: ${e.message}`, {
            path: e.path,
            cause: e,
          });
        }
        throw e;
      }
      live.add(this.#ref);
      forget.register(this, this.#ref, this.#ref);
    }
    return this.#native;
  }

  /**
   * Takes ownership of a name (creating the directory if missing), records
   * its token in the database, and migrates a `<name>.state` file of the
   * store before v2. Other names' files are never touched.
   * @param {string} name
   * @returns {Promise<StoreLease>}
   * @throws ERR_STORE_LOCKED when the name is open elsewhere (this process
   *   included); `err.holder` is `{ pid, host, since, thread }`, or null when
   *   the holder has not written its record yet; `err.path` is the lock file.
   *   ERR_STORE_CORRUPT when `<name>.state` is not a snapshot (it is left as
   *   it was), or when the database is behind its high-water mark
   *   (`lua-tasks.mark`: acknowledged transactions are missing, its -wal was
   *   lost); the message names the name, what is missing and how to proceed.
   *   A system error (code, syscall, path) when a file cannot be used.
   */
  async acquire(name) {
    const lockPath = this.#lockPath(name);
    await fs.mkdir(this.dir, { recursive: true });
    // The token continues from the record the last owner left. The record is
    // not fsynced: after an OS crash (or if it is unreadable) the count may
    // start again. Here the OS lock, not the token, keeps a second owner out;
    // the database records whichever token the holder has.
    let token = 0;
    const taken = binding.lockFile(lockPath, (previous) => {
      const before = parseRecord(previous);
      token = (before && Number.isSafeInteger(before.token) && before.token > 0 ? before.token : 0) + 1;
      const record = {
        pid: process.pid,
        host: os.hostname(),
        thread: threadId,
        since: new Date().toISOString(),
        token,
      };
      return `${JSON.stringify(record)}\n`;
    });
    if (!taken.ok) throw lockedError(name, lockPath, parseRecord(taken.holder));
    const lease = {
      token,
      handle: taken.handle,
      lastSeq: -Infinity,
      newest: null,
      inflight: new Set(),
      released: null,
    };
    this.#leases.set(name, lease);
    const release = () => this.#release(name, lease);
    try {
      await this.#open(name).claim(name, token);
      await this.#migrate(name, { quiet: true });
    } catch (e) {
      await release();
      throw e;
    }
    return { token, release };
  }

  #release(name, lease) {
    if (lease.released) return lease.released;
    if (this.#leases.get(name) === lease) this.#leases.delete(name);
    // Writes already handed over land first: the next owner never has one
    // of them land over its own (its token would refuse them anyway).
    lease.released = Promise.allSettled([...lease.inflight]).then(() => {
      lease.handle.release();
      // The store's last runtime closed: its -wal into the database, so a
      // -wal lost from now on loses nothing. A failed checkpoint leaves the
      // data in the -wal, durable and guarded by the mark: nothing to report.
      if (this.#leases.size === 0 && this.#native && !this.#closed) {
        return this.#native.checkpoint().catch(() => {});
      }
      return undefined;
    });
    return lease.released;
  }

  // Imports <name>.state into the database (unless the name has a snapshot
  // there: the database wins), then renames it <name>.state.migrated.
  // `quiet`: a file that cannot be read is left for load() to report.
  async #migrate(name, { quiet = false } = {}) {
    const file = path.join(this.dir, `${name}.state`);
    let bytes;
    try {
      bytes = await fs.readFile(file);
    } catch (e) {
      if (e.code === 'ENOENT' || quiet) return;
      throw Object.assign(new Error(`Cannot read ${file} to migrate it into ${this.file(name)}: ${e.message}`), {
        code: e.code,
        cause: e,
        path: file,
      });
    }
    if (!looksLikeSnapshot(bytes)) {
      throw makeError(
        'ERR_STORE_CORRUPT',
        `Cannot migrate the saved state of runtime "${name}" from ${file}: not a lua-tasks state snapshot (bad magic). It was left as it was.`,
        { path: file },
      );
    }
    await this.#open(name).importSnapshot(name, bytes);
    try {
      await fs.rename(file, `${file}.migrated`);
    } catch (e) {
      if (e.code !== 'ENOENT') throw e; // another store of this directory migrated it meanwhile
    }
  }

  /**
   * @param {string} name
   * @returns {Promise<Buffer|null>} the last tasks.state snapshot written, or null when there is none
   */
  async load(name) {
    checkName(name);
    await this.#migrate(name);
    return this.#open(name).load(name);
  }

  /**
   * Saves a tasks.state snapshot durably: a batch with only `state` (the store interface v1).
   * @param {string} name
   * @param {Uint8Array} bytes read by the writer thread, not copied: leave them
   *   unchanged until the promise settles (as with fs.write's buffer)
   * @param {{ token?: number, seq?: number }} [info] as for write()
   * @returns {Promise<void>}
   */
  async save(name, bytes, info) {
    return this.write(snapshotBatch(name, bytes, info));
  }

  /**
   * Writes a batch all or nothing, durably.
   * @param {{ name: string, token?: number, seq?: number, state?: Uint8Array,
   *   writes?: { space?: 1|2|3, key: string, value: Uint8Array|null }[] }} batch
   *   `token`: from acquire(); the batch is refused (ERR_STORE_LOCKED) if this
   *   store no longer holds that lease, or the database records another
   *   owner's token. `seq`: grows with each batch under one lease; a batch
   *   whose seq is lower than one already written is dropped, as superseded,
   *   and settles as the newer one does. `value: null` deletes the key.
   *   `state` is read by the writer thread, not copied: leave it unchanged
   *   until the promise settles (the values of `writes` are copied).
   * @returns {Promise<void>}
   * @throws ERR_STORE_LOCKED (refused: nothing of it written); the cause of a
   *   failed transaction (its code: EIO, ENOSPC, ... or SQLite's; ENOENT when
   *   the directory or its database was removed while open): nothing of it written.
   */
  async write(batch) {
    const b = checkBatch(batch);
    const { name, token, seq } = b;
    const lease = token === undefined ? undefined : this.#leases.get(name);
    if (token !== undefined && (!lease || lease.token !== token)) {
      throw makeError(
        'ERR_STORE_LOCKED',
        `The batch of "${name}" was not written: this store no longer holds the lock of "${name}" under token ${token} (it was released). ${this.file(name)} was left as it was.`,
        { path: this.file(name) },
      );
    }
    if (lease && seq !== undefined && seq < lease.lastSeq) return lease.newest;
    const written = this.#open(name)
      .write({ ...b, token: token ?? 0, journal: batch[NATIVE_JOURNAL] })
      .catch((e) => {
        if (e && e.code === 'ERR_STORE_LOCKED') {
          throw makeError(
            'ERR_STORE_LOCKED',
            `The batch of "${name}" was not written: ${this.file(name)} records another owner of "${name}" than token ${token}.`,
            { path: this.file(name), cause: e },
          );
        }
        throw e;
      });
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

  /**
   * Synchronous keyed reads of a name's values (tasks.store), on this thread.
   * They see what was committed; they throw on an I/O error, and with
   * ERR_STORE_CORRUPT for a value whose checksum fails, naming the name and key.
   * @param {string} name
   * `space` (default 1, tasks.store; 2: durable tasks' journals) picks the key space.
   * @returns {{ get(key: string, space?: number): Buffer|null,
   *   keys(prefix?: string, after?: string, limit?: number, space?: number): string[] }}
   */
  reader(name) {
    checkName(name);
    // (the key spaces it keeps are DirectoryStore.prototype.spaces)
    const native = () => this.#open(name);
    return {
      get: (key, space = 1) => native().get(name, key, space),
      keys: (prefix = '', after = '', limit = -1, space = 1) =>
        native().keys(name, prefix, after ?? '', limit ?? -1, space),
      [NATIVE_SCAN]: () => [native(), name],
    };
  }

  /**
   * A page of a name's committed records in `space`: the keys that sort
   * after `after` (bytewise), at most `limit`, and their values.
   * @param {string} name
   * @param {number} space
   * @param {string} after
   * @param {number} limit
   * @returns {Promise<{ keys: string[], values: Buffer[] }>}
   */
  async scan(name, space, after, limit) {
    checkName(name);
    const page = checkScan(space, after, limit);
    const native = this.#open(name);
    const keys = native.keys(name, '', page.after, page.limit, space);
    return { keys, values: keys.map((k) => native.get(name, k, space)) };
  }

  /**
   * The runtime names this directory's database holds (a snapshot, a keyed
   * value, or an owner's token), in bytewise order: those matching
   * `pattern` (`*`: any run of characters within a name) after `after`, at
   * most `limit`. Takes no lease: names open elsewhere are listed too.
   * @param {string} [pattern='*']
   * @param {string} [after='']
   * @param {number} [limit=1000] 1 to 10000
   * @returns {Promise<string[]>}
   */
  async names(pattern, after, limit) {
    const q = checkNames(pattern, after, limit);
    return this.#open().names(q.pattern, q.after, q.limit);
  }

  /**
   * Counts of what this store object committed.
   * @returns {{ transactions: number, batches: number }} transactions: one fsync each
   */
  stats() {
    return this.#native ? this.#native.stats() : { transactions: 0, batches: 0 };
  }

  /**
   * Finishes the writes handed over, checkpoints the -wal into the database
   * and closes the database connections. (The last lease's release
   * checkpoints too, and process exit closes every store still open.)
   * Idempotent. Release the leases first; the GC closes a store nothing
   * references, this closes it now.
   * @returns {Promise<void>}
   */
  async close() {
    if (this.#closed) return;
    const inflight = [...this.#leases.values()].flatMap((l) => [...l.inflight]);
    await Promise.allSettled(inflight);
    this.#closed = true;
    live.delete(this.#ref);
    forget.unregister(this.#ref);
    if (this.#native) this.#native.close(); // checkpoints the -wal into the database
  }
}

// One DirectoryStore per directory on this thread for the `store` option
// given as a path, so the runtimes sharing a directory share its writer
// (their batches of one loop turn go out in one transaction).
const byDir = new Map(); // resolved dir -> WeakRef<DirectoryStore>

function directoryStore(dir) {
  const key = path.resolve(dir);
  const ref = byDir.get(key);
  const known = ref && ref.deref();
  if (known) return known;
  const store = new DirectoryStore(key);
  byDir.set(key, new WeakRef(store));
  return store;
}

/**
 * A store option as given: a directory path, or an object with
 * load(name) -> Promise<Buffer|null>, save(name, Buffer, { token, seq }) -> Promise,
 * and optionally acquire(name) -> Promise<{ token, release() }> for one owner per name.
 */
function toStore(store) {
  if (typeof store === 'string') return directoryStore(store);
  if (store && typeof store.load === 'function' && typeof store.save === 'function') return store;
  throw makeError(
    'ERR_INVALID_ARG_TYPE',
    'The "options.store" option must be a directory path or an object with load(name) and save(name, bytes) methods.',
  );
}

module.exports = { DirectoryStore, toStore, testing: { nativeOf } };
