// SPDX-License-Identifier: MIT
// Loads the native addon built by scripts/build.js (once per environment).
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { makeError } = require('./errors');
const boundary = require('./runtime/boundary');

let binding;
try {
  // In a source checkout (it has test/), LUA_TASKS_BUILD_DIR selects another
  // build: the sanitizers', another Node major's. An installed package loads
  // only the addon it built: no environment variable points it at other code.
  const own = path.join(__dirname, '..', 'build');
  const checkout = fs.existsSync(path.join(__dirname, '..', 'test', 'js'));
  const dir = (checkout && process.env.LUA_TASKS_BUILD_DIR) || own;
  binding = require(path.join(dir, 'lua_tasks.node'));
} catch (e) {
  e.message = `lua-tasks: the native addon is not built (${e.message}). Run "npm install" (or "npm run build") in the package directory.`;
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
