// SPDX-License-Identifier: MIT
// Task codes: the names and numbers the addon defines (native/addon/runtime/task_codes.hpp), and its packed codes unpacked.
'use strict';

const binding = require('../binding');

// NativeRuntime.constants is the only definition: nothing here is written
// out again, and test/js/types.test.js checks index.d.ts against it.
const C = binding.NativeRuntime.constants;

/** Task statuses by code: 'running', 'waiting', 'done', 'failed', 'cancelled'. */
const TASK_STATUS = Object.freeze([...C.status]);
/** Wait kinds by code: 'NONE', then what `waiting.instruction` shows ('IMMEDIATE', 'FOR', ...). */
const WAIT_KINDS = Object.freeze([...C.wait]);
/** The yield instructions (Lua's tasks.instruction). */
const INSTRUCTIONS = Object.freeze([...C.instruction]);
/** The time units (Lua's tasks.unit). */
const UNITS = Object.freeze([...C.unit]);
/** What the end listener hears: END.done, END.failed, END.cancelled, END.callbackFailed. */
const END = Object.freeze(Object.fromEntries(C.end.map((name, code) => [name, code])));
/** End kinds by code: a task's are the status it ended with. */
const END_NAMES = Object.freeze([...C.end]);
/** A task id ends in its key in this many base-36 digits (Scheduler::kIdKeyDigits). */
const ID_KEY_DIGITS = C.idKeyDigits;
/** Outcomes of ended tasks the native side keeps (Scheduler::kFinishedKept). */
const ENDED_KEPT = C.finishedKept;

/** What native resume(), send() and cancel() answer for a task being read from the store: the call follows its restore. */
const AFTER_RESTORE = C.afterRestore;
/** The key of a durable index's own entry, its mark (kIndexMarkKey): '<' sorts just before it. */
const INDEX_MARK_KEY = C.indexMarkKey;
/** The mark's payload when it names no holder (kIndexMarkDefault). */
const INDEX_MARK_DEFAULT = C.indexMark;

const START_SLOTS = C.startSlots;
const STATE_WAIT_SHIFT = C.stateWaitShift;
const STATE_STATUS_MASK = (1 << STATE_WAIT_SHIFT) - 1;

// Native start() returns key × START_SLOTS + (end kind + 1) (PackStart):
/** @returns {number} the started task's key */
function startKey(code) {
  return Math.floor(code / START_SLOTS);
}
/** @returns {number} the END kind it ended with inside the call, or -1 if it runs on */
function startEnd(code) {
  return (code % START_SLOTS) - 1;
}

// Native taskState() and tasks() give status | wait << STATE_WAIT_SHIFT (PackState):
/** @returns {string} the status name */
function stateStatus(code) {
  return TASK_STATUS[code & STATE_STATUS_MASK];
}
/** @returns {string} the wait kind name ('NONE' unless waiting) */
function stateWait(code) {
  return WAIT_KINDS[code >> STATE_WAIT_SHIFT];
}

module.exports = {
  TASK_STATUS,
  WAIT_KINDS,
  INSTRUCTIONS,
  UNITS,
  END,
  END_NAMES,
  ID_KEY_DIGITS,
  ENDED_KEPT,
  AFTER_RESTORE,
  INDEX_MARK_KEY,
  INDEX_MARK_DEFAULT,
  startKey,
  startEnd,
  stateStatus,
  stateWait,
};
