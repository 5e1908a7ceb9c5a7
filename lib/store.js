// SPDX-License-Identifier: MIT
// DirectoryStore: the embedded store, one durable file per runtime name.
'use strict';

const crypto = require('node:crypto');
const fs = require('node:fs/promises');
const path = require('node:path');
const { makeError } = require('./errors');

// Names become file names: keep them to a safe, portable alphabet.
const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/**
 * Validates a runtime name for persistence.
 * @param {string} name
 * @throws {TypeError} ERR_INVALID_ARG_VALUE
 */
function checkName(name) {
  if (typeof name !== 'string' || !NAME_RE.test(name) || name.includes('..')) {
    throw makeError('ERR_INVALID_ARG_VALUE',
      `The "options.name" option must be 1-128 characters of letters, digits, ".", "_" or "-", starting with a letter or digit. Received ${JSON.stringify(name)}.`);
  }
}

/**
 * Stores each runtime's state in `<dir>/<name>.state`. A save is durable
 * before its promise resolves: the bytes go to a temporary file that is
 * fsynced, renamed over the old file, and the directory is fsynced, so a crash
 * at any moment leaves either the old snapshot or the new one, never a torn one.
 * All of it runs on libuv's thread pool: the event loop is not blocked.
 */
class DirectoryStore {
  /** @param {string} dir created if missing */
  constructor(dir) {
    if (typeof dir !== 'string' || dir === '') {
      throw makeError('ERR_INVALID_ARG_TYPE', `The store directory must be a non-empty string. Received ${typeof dir}.`);
    }
    this.dir = path.resolve(dir);
  }

  file(name) {
    checkName(name);
    return path.join(this.dir, `${name}.state`);
  }

  /** @returns {Promise<Buffer|null>} the last saved snapshot, or null */
  async load(name) {
    try {
      return await fs.readFile(this.file(name));
    } catch (e) {
      if (e.code === 'ENOENT') return null;
      throw e;
    }
  }

  /** @param {string} name @param {Buffer} bytes */
  async save(name, bytes) {
    const file = this.file(name);
    await fs.mkdir(this.dir, { recursive: true });
    // Unique across stores, Workers and processes: two runtimes saving under
    // the same name and directory wrote the same temp file at once (each
    // store counted from 1), and the renamed file mixed both snapshots. 'wx'
    // refuses a name that exists rather than writing into another's file.
    const tmp = `${file}.${process.pid}.${crypto.randomBytes(6).toString('hex')}.tmp`;
    const fh = await fs.open(tmp, 'wx', 0o600);
    try {
      await fh.writeFile(bytes);
      await fh.sync();
    } finally {
      await fh.close();
    }
    try {
      await fs.rename(tmp, file);
    } catch (e) {
      await fs.rm(tmp, { force: true });
      throw e;
    }
    const dh = await fs.open(this.dir, 'r');
    try {
      await dh.sync();
    } finally {
      await dh.close();
    }
  }
}

/**
 * A store option as given: a directory path, or an object with
 * load(name) -> Promise<Buffer|null> and save(name, Buffer) -> Promise.
 */
function toStore(store) {
  if (typeof store === 'string') return new DirectoryStore(store);
  if (store && typeof store.load === 'function' && typeof store.save === 'function') return store;
  throw makeError('ERR_INVALID_ARG_TYPE',
    'The "options.store" option must be a directory path or an object with load(name) and save(name, bytes) methods.');
}

module.exports = { DirectoryStore, toStore, checkName };
