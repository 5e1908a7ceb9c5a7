// SPDX-License-Identifier: MIT
// The function a resource's runtime runs a method with (lib/lua/resource_dispatch.lua), under one global name.
'use strict';
//
// A global name, set by the runtime's setup: an invocation with a request id
// runs it as a durable task (its entry must be found again by a restart,
// before the store's durable tasks are restored), the others as a plain task.

const fs = require('node:fs');
const path = require('node:path');

const SOURCE = fs.readFileSync(path.join(__dirname, '..', 'lua', 'resource_dispatch.lua'), 'utf8');
/** The global the dispatch function is set as in every resource's runtime. */
const DISPATCH_FN = 'lua_tasks_resource_dispatch';

/** A Runtime `setup` that sets the dispatch function. */
function loadDispatch(rt) {
  const [f] = rt.load(SOURCE, { name: '=resource_dispatch' });
  rt.set(DISPATCH_FN, f);
}

/**
 * The key of the durable task an invocation with request id `rid` runs as:
 * a repeat of the request finds it (running, or ended and retained).
 */
function requestKey(rid) {
  return `rq:${rid}`;
}

/**
 * How one method runs in a hosted resource's runtime `rt`: a durable task
 * keyed by its request id when it has one, else a plain task.
 * @returns {Promise<{ status: string, result?: unknown, type?: string } | { failed: unknown, transport?: true }>}
 *   status "gone": the slot holds another resource than `id`
 *   transport: not answered (its end could not be written)
 */
async function runMethod(rt, reset, id, module, method, args, rid) {
  const options = { args: dispatchArgs(reset, id, module, method, args) };
  if (rid !== undefined) Object.assign(options, { durable: true, key: requestKey(rid), name: method });
  let out;
  let failed = null;
  try {
    out = await rt.spawn(DISPATCH_FN, options).result;
  } catch (e) {
    failed = { failed: e };
  }
  if (rid !== undefined) {
    // Run once, its end (and what it changed) is written before the answer;
    // not written, it is no answer: the request is sent again.
    try {
      await rt.commit();
    } catch (e) {
      return { failed: e, transport: true };
    }
  }
  return failed || answerOf(out);
}

/** The dispatch function's arguments: method `method` of resource `id` (of `module`), with `args`. */
function dispatchArgs(reset, id, module, method, args) {
  return [reset, id, module, method, ...args];
}

/** The dispatch function's answer ({ "ok", result } ...) as the hosts give it. */
function answerOf(out) {
  return { status: out[0], result: out[1], type: out[1] };
}

module.exports = { DISPATCH_FN, loadDispatch, requestKey, runMethod, dispatchArgs, answerOf };
