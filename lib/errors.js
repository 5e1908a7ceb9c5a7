// SPDX-License-Identifier: MIT
// Error classes and the codes they carry: every code lua-tasks throws is here.
'use strict';

/** Every `err.code` this package produces (docs/design.md#errors), plus Node's argument codes. */
const codes = Object.freeze({
  ERR_LUA_SYNTAX: 'ERR_LUA_SYNTAX',
  ERR_LUA_RUNTIME: 'ERR_LUA_RUNTIME',
  ERR_TASK_CANCELLED: 'ERR_TASK_CANCELLED',
  ERR_TASK_TIMEOUT: 'ERR_TASK_TIMEOUT',
  ERR_MEMORY_LIMIT: 'ERR_MEMORY_LIMIT',
  ERR_BAD_YIELD: 'ERR_BAD_YIELD',
  ERR_CRON_SYNTAX: 'ERR_CRON_SYNTAX',
  ERR_CONVERSION: 'ERR_CONVERSION',
  ERR_NOT_IN_TASK: 'ERR_NOT_IN_TASK',
  ERR_RUNTIME_CLOSED: 'ERR_RUNTIME_CLOSED',
  ERR_COMMIT_FAILED: 'ERR_COMMIT_FAILED',
  ERR_NONDETERMINISM: 'ERR_NONDETERMINISM', // a durable task's replay met code that did something else
  ERR_STORE_LOCKED: 'ERR_STORE_LOCKED', // the name is open elsewhere (err.holder says where)
  ERR_STORE_CORRUPT: 'ERR_STORE_CORRUPT', // the saved snapshot does not read (checksum, truncation, format)
  ERR_STORE_TIMEOUT: 'ERR_STORE_TIMEOUT', // the store did not answer within storeTimeout
  ERR_STORE_LIMIT: 'ERR_STORE_LIMIT', // a write past a persistence limit (maxValueBytes, maxPendingBytes, maxJournalBytes, the store's limits)
  ERR_MAILBOX_FULL: 'ERR_MAILBOX_FULL', // rt.send: the task's mailbox holds mailboxLimit messages
  ERR_FLEET_TIMEOUT: 'ERR_FLEET_TIMEOUT', // a fleet operation by name found no member that answered in time
  ERR_INVALID_ARG_TYPE: 'ERR_INVALID_ARG_TYPE',
  ERR_INVALID_ARG_VALUE: 'ERR_INVALID_ARG_VALUE',
  ERR_OUT_OF_RANGE: 'ERR_OUT_OF_RANGE',
  ABORT_ERR: 'ABORT_ERR', // Node's code for an AbortError: a task's AbortSignal fired
});

/** Base class for failures of lua-tasks itself (not of Lua code). */
class LuaTasksError extends Error {
  constructor(code, message, props) {
    super(message);
    this.code = code;
    if (props) Object.assign(this, props);
  }
}

/**
 * An error raised by Lua code, or a Lua syntax or memory error.
 * Fields: `code` (ERR_LUA_SYNTAX | ERR_LUA_RUNTIME | ERR_MEMORY_LIMIT | ...),
 * `luaStack` (the Lua traceback, when there is one), `value` (the original
 * Lua error value when it was not a string), `source` and `line` (where the
 * error was raised, when Lua's message names them).
 */
class LuaError extends LuaTasksError {}

/** A cron expression that does not parse, or has no next time. */
class CronSyntaxError extends LuaTasksError {}

/** A value that cannot cross between JavaScript and Lua. */
class ConversionError extends LuaTasksError {}

/** A call on a runtime that was closed. */
class RuntimeClosedError extends LuaTasksError {}

/** A task that was cancelled, timed out or could not commit. */
class TaskError extends LuaTasksError {}

/** A store that refuses: the name is owned elsewhere, the snapshot is corrupt, or the store does not answer. */
class StoreError extends LuaTasksError {}

/** A fleet operation by name that no member answered in time. */
class FleetError extends LuaTasksError {}

/**
 * A task stopped through its AbortSignal, shaped as Node's own AbortError:
 * `name` 'AbortError', `code` 'ABORT_ERR', `cause` the signal's reason. Not a
 * LuaTasksError: code that handles Node's aborts handles these unchanged.
 */
class AbortError extends Error {
  constructor(message, options, props) {
    super(message, options);
    this.code = 'ABORT_ERR';
    if (props) Object.assign(this, props);
  }
}

// `name` is a data property of each prototype, not a getter: Lua reads an
// error's name without running code of it (docs/security.md), and a getter
// would read as nil there.
// Every error class, once: the package exports these (lib/index.js).
const classes = {
  LuaTasksError,
  LuaError,
  CronSyntaxError,
  ConversionError,
  RuntimeClosedError,
  TaskError,
  StoreError,
  FleetError,
  AbortError,
};
for (const Cls of Object.values(classes)) {
  Object.defineProperty(Cls.prototype, 'name', {
    value: Cls.name,
    writable: true,
    configurable: true,
    enumerable: false,
  });
}

const byCode = {
  ERR_LUA_SYNTAX: LuaError,
  ERR_LUA_RUNTIME: LuaError,
  ERR_MEMORY_LIMIT: LuaError,
  ERR_BAD_YIELD: LuaError,
  ERR_NOT_IN_TASK: LuaError,
  ERR_CRON_SYNTAX: CronSyntaxError,
  ERR_CONVERSION: ConversionError,
  ERR_RUNTIME_CLOSED: RuntimeClosedError,
  ERR_TASK_CANCELLED: TaskError,
  ERR_TASK_TIMEOUT: TaskError,
  ERR_COMMIT_FAILED: TaskError,
  ERR_NONDETERMINISM: TaskError,
  ERR_STORE_LOCKED: StoreError,
  ERR_STORE_CORRUPT: StoreError,
  ERR_STORE_TIMEOUT: StoreError,
  ERR_FLEET_TIMEOUT: FleetError,
  ERR_STORE_LIMIT: StoreError,
};

// "[string \"x\"]:3: msg" or "name:3: msg" -> { source, line }
const locationRe = /^(\[string "(?:[^"\\]|\\.)*"\]|[^:\n]+):(\d+): /;

/**
 * Builds the error for a code. The native addon calls this for every error it
 * raises, so JS and C++ produce the same classes.
 * @param {string} code one of `codes`
 * @param {string} message
 * @param {object} [props] extra fields (luaStack, value, ...)
 * @returns {Error}
 */
function makeError(code, message, props) {
  if (code === 'ERR_INVALID_ARG_TYPE') return Object.assign(new TypeError(message), { code });
  if (code === 'ERR_OUT_OF_RANGE') return Object.assign(new RangeError(message), { code });
  if (code === 'ERR_INVALID_ARG_VALUE') return Object.assign(new TypeError(message), { code });
  const Cls = byCode[code] || LuaTasksError;
  const err = new Cls(code, message, props);
  // Where a Lua error was raised, read from its message; so too for a
  // failure of another class raised in Lua (ERR_COMMIT_FAILED at a task's
  // COMMIT: it has a luaStack). A line given wins: ERR_TASK_TIMEOUT brings
  // where the task was.
  if (
    (Cls === LuaError || (props && props.luaStack !== undefined)) &&
    typeof message === 'string' &&
    !(props && props.line !== undefined)
  ) {
    const m = locationRe.exec(message);
    if (m) {
      err.source = m[1];
      err.line = Number(m[2]);
    }
  }
  return err;
}

// How an argument error names what it received (Node's wording).

// A string as a message quotes it: JSON-escaped, cut at 40 characters.
function quote(s) {
  return JSON.stringify(s.length > 40 ? `${s.slice(0, 40)}...` : s);
}

// What a message says it received: 'the string "x"', 'number 5', 'an array'...
function typeName(v) {
  if (v === null || v === undefined) return String(v);
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'string') return `the string ${quote(v)}`;
  if (typeof v === 'object') return 'an object';
  if (typeof v === 'function') return 'a function';
  return `${typeof v} ${String(v)}`;
}

function invalidType(name, expected, value) {
  return makeError('ERR_INVALID_ARG_TYPE', `The "${name}" argument must be ${expected}. Received ${typeName(value)}.`);
}

module.exports = {
  codes,
  makeError,
  quote,
  typeName,
  invalidType,
  classes,
  ...classes,
};
