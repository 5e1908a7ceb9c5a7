// SPDX-License-Identifier: MIT
// lua-tasks: the public JavaScript API.
'use strict';

const binding = require('./binding');
const errors = require('./errors');
const { makeError } = errors;

const LIB_NAMES = ['base', 'coroutine', 'string', 'table', 'math', 'utf8', 'os', 'io', 'debug', 'package'];

function typeName(v) {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'string') return `the string ${JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}...` : v)}`;
  if (typeof v === 'object') return 'an object';
  if (typeof v === 'function') return 'a function';
  return `${typeof v} ${String(v)}`;
}

function invalidType(name, expected, value) {
  return makeError('ERR_INVALID_ARG_TYPE', `The "${name}" argument must be ${expected}. Received ${typeName(value)}.`);
}

function defaultPrint(line) {
  process.stdout.write(`${line}\n`);
}

function normalizeOptions(options) {
  if (options === undefined) options = {};
  if (options === null || typeof options !== 'object') throw invalidType('options', 'an object', options);
  const out = {};
  const { libs = 'safe', memoryLimit, print } = options;
  if (libs === 'safe' || libs === 'all') {
    out.libs = libs;
  } else if (Array.isArray(libs)) {
    for (const name of libs) {
      if (!LIB_NAMES.includes(name)) {
        throw makeError('ERR_INVALID_ARG_VALUE',
          `The "options.libs" list holds an unknown library ${typeName(name)}. Allowed: ${LIB_NAMES.join(', ')}.`);
      }
    }
    out.libs = [...libs];
  } else {
    throw makeError('ERR_INVALID_ARG_VALUE',
      `The "options.libs" option must be 'safe', 'all' or an array of library names. Received ${typeName(libs)}.`);
  }
  if (memoryLimit !== undefined) {
    if (typeof memoryLimit !== 'number' || !Number.isInteger(memoryLimit) || memoryLimit < 0) {
      throw makeError('ERR_OUT_OF_RANGE',
        `The "options.memoryLimit" option must be a non-negative integer number of bytes (0 = no limit). Received ${typeName(memoryLimit)}.`);
    }
    out.memoryLimit = memoryLimit;
  }
  if (print !== undefined && typeof print !== 'function') throw invalidType('options.print', 'a function', print);
  out.print = print || defaultPrint;
  return out;
}

/**
 * One Lua 5.4 state on this thread's event loop. Runtimes share nothing.
 * Close what you open: `close()` frees the state at once; the garbage
 * collector only frees a runtime nothing can reach any more.
 */
class Runtime {
  #native;

  /**
   * @param {object} [options]
   * @param {'safe'|'all'|string[]} [options.libs='safe'] which standard libraries Lua can use
   * @param {number} [options.memoryLimit=0] bytes the Lua state may hold (0 = no limit)
   * @param {(line: string) => void} [options.print] receives each line Lua prints (default: stdout)
   * @throws {TypeError|RangeError} for a bad option
   */
  constructor(options) {
    const opts = normalizeOptions(options);
    this.#native = new binding.NativeRuntime(opts, opts.print);
  }

  /**
   * Runs a chunk of Lua source now.
   * @param {string} source Lua source text (binary chunks are refused)
   * @param {{ name?: string }} [options] name: the chunk name used in error messages
   * @returns {Array} the chunk's return values (nil inside the array is null)
   * @throws {LuaError} ERR_LUA_SYNTAX, ERR_LUA_RUNTIME, ERR_MEMORY_LIMIT
   */
  load(source, options) {
    if (typeof source !== 'string') throw invalidType('source', 'a string of Lua source', source);
    let name;
    if (options !== undefined) {
      if (options === null || typeof options !== 'object') throw invalidType('options', 'an object', options);
      name = options.name;
      if (name !== undefined && typeof name !== 'string') throw invalidType('options.name', 'a string', name);
    }
    return this.#native.load(source, name);
  }

  /**
   * Sets a Lua global. JS functions become Lua functions.
   * @param {string} name
   * @param {*} value
   * @throws {ConversionError} ERR_CONVERSION for a value that cannot cross
   */
  set(name, value) {
    if (typeof name !== 'string') throw invalidType('name', 'a string', name);
    this.#native.set(name, value);
  }

  /**
   * Reads a Lua global. Lua functions come back as JS functions.
   * @param {string} name
   * @returns {*}
   */
  get(name) {
    if (typeof name !== 'string') throw invalidType('name', 'a string', name);
    return this.#native.get(name);
  }

  /** Memory figures of the Lua state, in bytes. */
  stats() {
    return this.#native.stats();
  }

  /**
   * Frees the Lua state. Idempotent; afterwards every call (including calls
   * of Lua functions obtained from this runtime) throws ERR_RUNTIME_CLOSED.
   */
  close() {
    this.#native.close();
  }
}

module.exports = {
  Runtime,
  ...errors,
};
