// SPDX-License-Identifier: MIT
// DirectoryStore: the embedded store, one durable file and one OS lock per runtime name.
'use strict';

// How and why:
// A name has three kinds of file in the directory:
//   <name>.state                     the last snapshot, only ever replaced whole (rename)
//   <name>.state.<pid>.<hex>.tmp     a snapshot being written: removed on every failure,
//                                    and swept by the next owner (a crash leaves one)
//   <name>.lock                      the owner's OS lock (flock, native/core/file_lock.hpp)
//                                    and its record {"pid","host","thread","since","token"}
// The lock belongs to the open file, so it conflicts within one process and
// across Workers and processes, and it dies with its process: there is never
// a stale lock, and the lock file is never deleted (deleting it would let two
// owners in). Whoever holds it owns the name, so a temp file of that name it
// did not write itself was left by a dead writer.
//
// Saves write their temp files in parallel; the rename is one step per name,
// in order, so a save that lost its lease or was overtaken by a newer one
// (the runtime gives up on a hung save and goes on) never lands over it.

const crypto = require('node:crypto');
const fs = require('node:fs/promises');
const os = require('node:os');
const path = require('node:path');
const { threadId } = require('node:worker_threads');
const binding = require('./binding');
const { makeError } = require('./errors');

// Names become file names: keep them to a safe, portable alphabet.
const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

// A snapshot that keeps changing size while it is read is given up on after this many reads.
const LOAD_TRIES = 3;
// fh.read takes at most 2 GiB - 1 bytes at a time.
const READ_CHUNK = 1 << 30;

/**
 * Validates a runtime name for persistence.
 * @param {string} name
 * @throws {TypeError} ERR_INVALID_ARG_VALUE
 */
function checkName(name) {
  if (typeof name !== 'string' || !NAME_RE.test(name) || name.includes('..')) {
    throw makeError(
      'ERR_INVALID_ARG_VALUE',
      `The "options.name" option must be 1-128 characters of letters, digits, ".", "_" or "-", starting with a letter or digit. Received ${JSON.stringify(name)}.`,
    );
  }
}

// { token, seq } of save(name, bytes, info), checked.
function checkInfo(info) {
  if (info === undefined || info === null) return {};
  if (typeof info !== 'object') {
    throw makeError('ERR_INVALID_ARG_TYPE', `The save info must be an object { token, seq }. Received ${typeof info}.`);
  }
  const { token, seq } = info;
  if (token !== undefined && !(Number.isSafeInteger(token) && token > 0)) {
    throw makeError(
      'ERR_INVALID_ARG_TYPE',
      `The save info's "token" must be a positive integer from acquire(). Received ${String(token)}.`,
    );
  }
  if (seq !== undefined && !Number.isFinite(seq)) {
    throw makeError('ERR_INVALID_ARG_TYPE', `The save info's "seq" must be a finite number. Received ${String(seq)}.`);
  }
  return { token, seq };
}

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

// Unlinks a temp file whose write failed. A failure here is not reported over
// the one that got us here (that one wins); the name's next owner sweeps it.
async function removeTemp(tmp) {
  try {
    await fs.unlink(tmp);
  } catch {
    // swept at the next acquire
  }
}

// Writes `bytes` to the new file `tmp` and fsyncs it; on any failure the file is gone.
async function writeTemp(tmp, bytes) {
  let fh;
  try {
    fh = await fs.open(tmp, 'wx', 0o600);
  } catch (e) {
    // EEXIST: the file is another writer's; anything else created nothing,
    // unless a file system says otherwise.
    if (e.code !== 'EEXIST') await removeTemp(tmp);
    throw e;
  }
  try {
    for (let off = 0; off < bytes.length;) {
      const { bytesWritten } = await fh.write(bytes, off, bytes.length - off, off);
      off += bytesWritten;
    }
    await fh.sync();
  } catch (e) {
    await fh.close().catch(() => {});
    await removeTemp(tmp);
    throw e;
  }
  try {
    await fh.close();
  } catch (e) {
    await removeTemp(tmp);
    throw e;
  }
}

// fsync of the directory: what makes a rename durable.
async function syncDir(dir) {
  const dh = await fs.open(dir, 'r');
  try {
    await dh.sync();
  } catch (e) {
    await dh.close().catch(() => {});
    throw e;
  }
  await dh.close();
}

// Reads all of an open file: one buffer of the size stat gives, filled by
// reads on the thread pool (no concat of chunks on the loop). A file that
// changed size meanwhile is read again.
async function readWhole(fh, file) {
  const probe = Buffer.alloc(1);
  for (let attempt = 1; ; attempt++) {
    const { size } = await fh.stat();
    const buf = Buffer.allocUnsafe(size);
    let off = 0;
    while (off < size) {
      const { bytesRead } = await fh.read(buf, off, Math.min(size - off, READ_CHUNK), off);
      if (bytesRead === 0) break; // shorter than it was
      off += bytesRead;
    }
    const { bytesRead: more } = await fh.read(probe, 0, 1, off); // longer than it was?
    if (off === size && more === 0) return buf;
    if (attempt === LOAD_TRIES) {
      throw makeError(
        'ERR_STORE_CORRUPT',
        `The snapshot ${file} changed size while it was read (${LOAD_TRIES} times): something other than this store writes into it.`,
        { path: file },
      );
    }
  }
}

/**
 * @typedef {object} StoreLease
 * @property {number} token grows with every acquire of the name (it is kept in
 *   the lock file, so it grows across restarts too); pass it to save()
 * @property {() => Promise<void>} release gives the name up: a rename of it in
 *   progress lands first, later saves under this token are refused. Idempotent.
 *   Keep the lease referenced while you own the name: one that nothing
 *   references is released when it is collected (the GC is a backstop).
 */

/**
 * Stores each runtime's state in `<dir>/<name>.state`, one owner per name.
 *
 * A runtime calls `acquire(name)` before `load(name)` (one owner per name:
 * ERR_STORE_LOCKED otherwise), then `save(name, bytes, { token, seq })`, and
 * the lease's `release()` once its saves have settled. `file(name)` and
 * `locate(name)` say where a name's snapshot lives, for messages.
 *
 * A save is durable before its promise resolves: the bytes go to a temporary
 * file that is fsynced, renamed over the old file, and the directory is
 * fsynced, so a crash at any moment leaves either the old snapshot or the new
 * one, never a torn one. All of it runs on libuv's thread pool.
 */
class DirectoryStore {
  #leases = new Map(); // name -> { token, handle, lastSeq, synced, released }: names this store owns
  #renames = new Map(); // name -> promise of the last rename step queued (never rejects)

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
   * @returns {string} the path of the name's snapshot
   * @throws {TypeError} ERR_INVALID_ARG_VALUE for a bad name
   */
  file(name) {
    checkName(name);
    return path.join(this.dir, `${name}.state`);
  }

  /**
   * Where a name's state lives, said for a person: here the snapshot's path.
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

  /**
   * Takes ownership of a name (creating the directory if missing), then
   * removes the temp files of that name left by dead writers. Other names'
   * files are never touched.
   * @param {string} name
   * @returns {Promise<StoreLease>}
   * @throws ERR_STORE_LOCKED when the name is open elsewhere (this process
   *   included); `err.holder` is `{ pid, host, since, thread }`, or null when
   *   the holder has not written its record yet; `err.path` is the lock file.
   *   A system error (code, syscall, path) when the lock file cannot be used.
   */
  async acquire(name) {
    const lockPath = this.#lockPath(name);
    await fs.mkdir(this.dir, { recursive: true });
    // The token continues from the record the last owner left. The record is
    // not fsynced: after an OS crash (or if it is unreadable) the count may
    // start again. Here the OS lock, not the token, keeps a second owner out.
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
    const lease = { token, handle: taken.handle, lastSeq: -Infinity, synced: null, released: null };
    this.#leases.set(name, lease);
    const release = () => this.#release(name, lease);
    try {
      await this.#sweep(name);
    } catch (e) {
      await release();
      throw e;
    }
    return { token, release };
  }

  #release(name, lease) {
    if (lease.released) return lease.released;
    if (this.#leases.get(name) === lease) this.#leases.delete(name);
    const renaming = this.#renames.get(name);
    if (!renaming) {
      lease.handle.release();
      lease.released = Promise.resolve();
    } else {
      lease.released = renaming.then(() => lease.handle.release());
    }
    return lease.released;
  }

  // Removes <name>.state.<pid>.<hex>.tmp (and the older <pid>.<n> form). Only
  // exact matches: "a.state.1" is a name of its own, and its temp files
  // ("a.state.1.state.<pid>.<hex>.tmp") do not match the pattern of "a".
  async #sweep(name) {
    const re = new RegExp(`^${name.replace(/\./g, '\\.')}\\.state\\.\\d+\\.[0-9a-f]+\\.tmp$`);
    for (const entry of await fs.readdir(this.dir)) {
      if (!re.test(entry)) continue;
      try {
        await fs.unlink(path.join(this.dir, entry));
      } catch (e) {
        if (e.code !== 'ENOENT') throw e;
      }
    }
  }

  /**
   * @param {string} name
   * @returns {Promise<Buffer|null>} the last saved snapshot, or null when there is none
   */
  async load(name) {
    const file = this.file(name);
    let fh;
    try {
      fh = await fs.open(file, 'r');
    } catch (e) {
      if (e.code === 'ENOENT') return null;
      throw e;
    }
    try {
      return await readWhole(fh, file);
    } finally {
      // Closing a descriptor that was only read loses nothing; a failure to
      // read is what the caller must hear.
      await fh.close().catch(() => {});
    }
  }

  /**
   * Saves a snapshot durably. No temp file outlives a failure.
   * @param {string} name
   * @param {Uint8Array} bytes
   * @param {{ token?: number, seq?: number }} [info] `token`: from acquire();
   *   the save is refused (ERR_STORE_LOCKED) if this store no longer holds
   *   that lease. `seq`: grows with each save under one lease; a save whose
   *   seq is lower than one already renamed is dropped, as superseded, and
   *   resolves when the newer one is durable.
   * @returns {Promise<void>}
   * @throws the cause (ENOSPC, EIO, ...) of a failure before the rename: the
   *   previous snapshot is intact. An error with `replaced: true` (its `code`
   *   and `cause` the cause's) for a failure after it: the new snapshot is in
   *   place but not confirmed durable.
   */
  async save(name, bytes, info) {
    const file = this.file(name);
    if (!(bytes instanceof Uint8Array)) {
      throw makeError(
        'ERR_INVALID_ARG_TYPE',
        `The snapshot of "${name}" must be a Buffer or Uint8Array. Received ${typeof bytes}.`,
      );
    }
    const { token, seq } = checkInfo(info);
    await fs.mkdir(this.dir, { recursive: true });
    // Unique across stores, Workers and processes: two writers never share a temp file.
    const tmp = `${file}.${process.pid}.${crypto.randomBytes(6).toString('hex')}.tmp`;
    await writeTemp(tmp, bytes);
    const { synced } = await this.#land(name, tmp, file, token, seq);
    await synced;
  }

  // The rename step, one at a time per name. Resolves to { synced }: the
  // promise of the directory fsync that makes the snapshot in place durable
  // (for a superseded save, the newer one's).
  #land(name, tmp, file, token, seq) {
    const step = (this.#renames.get(name) || Promise.resolve()).then(async () => {
      const lease = token === undefined ? undefined : this.#leases.get(name);
      if (token !== undefined && (!lease || lease.token !== token)) {
        await removeTemp(tmp);
        throw makeError(
          'ERR_STORE_LOCKED',
          `The snapshot of "${name}" was not saved: this store no longer holds the lock of "${name}" under token ${token} (it was released). ${file} was left as it was.`,
          { path: file },
        );
      }
      if (lease && seq !== undefined && seq < lease.lastSeq) {
        await removeTemp(tmp);
        return { synced: lease.synced };
      }
      try {
        await fs.rename(tmp, file);
      } catch (e) {
        await removeTemp(tmp);
        throw e;
      }
      const synced = syncDir(this.dir).catch((e) => {
        throw Object.assign(
          new Error(
            `The new snapshot of "${name}" is in place (${file}) but not confirmed durable: syncing the directory failed: ${e && e.message}. A crash now may bring back the previous snapshot.`,
          ),
          { code: e && e.code, cause: e, replaced: true, path: file },
        );
      });
      synced.catch(() => {}); // heard by whoever awaits it; never unhandled meanwhile
      if (lease && seq !== undefined) {
        lease.lastSeq = seq;
        lease.synced = synced;
      }
      return { synced };
    });
    const done = step.then(
      () => {},
      () => {},
    );
    this.#renames.set(name, done);
    done.then(() => {
      if (this.#renames.get(name) === done) this.#renames.delete(name);
    });
    return step;
  }
}

/**
 * A store option as given: a directory path, or an object with
 * load(name) -> Promise<Buffer|null>, save(name, Buffer, { token, seq }) -> Promise,
 * and optionally acquire(name) -> Promise<{ token, release() }> for one owner per name.
 */
function toStore(store) {
  if (typeof store === 'string') return new DirectoryStore(store);
  if (store && typeof store.load === 'function' && typeof store.save === 'function') return store;
  throw makeError(
    'ERR_INVALID_ARG_TYPE',
    'The "options.store" option must be a directory path or an object with load(name) and save(name, bytes) methods.',
  );
}

module.exports = { DirectoryStore, toStore, checkName };
