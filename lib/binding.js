// SPDX-License-Identifier: MIT
// Loads the native addon (once per environment): a source build, else the prebuilt binary.
'use strict';
const { addonPath } = require('./addon_path');
const { makeError } = require('./errors');
const boundary = require('./runtime/boundary');

let binding;
const addon = addonPath();
try {
  binding = require(addon.file);
} catch (e) {
  const prebuiltWhy = addon.why ? ` ${addon.why[0].toUpperCase()}${addon.why.slice(1)}.` : '';
  e.message =
    `lua-tasks: the native addon does not load (${e.message}).${prebuiltWhy} ` +
    'Build it from source: "npm rebuild lua-tasks --build-from-source" in your project ("npm run build" in a clone).';
  throw e;
}
// Subscribes a task waiting on `promise`; settle(key, token, ok, value) wakes it.
function awaitPromise(promise, settle, key, token) {
  // Promise.prototype.then, not promise.then: a subclass's then may call
  // back at once, before the task has begun to wait, and its answer was lost.
  Promise.prototype.then.call(
    promise,
    (v) => settle(key, token, true, v),
    (e) => settle(key, token, false, e),
  );
}

// A failure no Runtime can hear any more (its Runtime was collected or
// closed while a Lua callback ran): a warning, never dropped.
function warnUnheard(err) {
  process.emitWarning(`lua-tasks: a Lua callback failed: ${err && err.message}`, { code: 'LUA_TASK_FAILED' });
}

binding.init({
  makeError,
  awaitPromise,
  warnUnheard,
  receiver: boundary.RECEIVER,
  classify: boundary.classify,
  readOwn: boundary.readOwn,
  errorField: boundary.errorField,
  errorText: boundary.errorText,
  unwrapThrown: boundary.unwrapThrown,
  addWhere: boundary.addWhere,
});

module.exports = binding;
