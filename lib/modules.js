// SPDX-License-Identifier: MIT
// The Lua modules a runtime can require: those shipped in lib/lua/, and .lua files under modulePaths.
'use strict';

const fs = require('node:fs');
const path = require('node:path');

// Modules shipped with the package, required by name from Lua.
const SHIPPED = { 'util.async': path.join(__dirname, 'lua', 'util', 'async.lua') };

// util.async inside a runtime: next ticks and sleeps run on the loop as
// tasks, and wait_for also takes JS Promises (which have no :next in Lua):
// a task awaits the promise with tasks.await and then wakes the waiter, so
// the item goes on inside a task (task waits such as tasks.sleep or another
// Promise work after it), as a next tick would. Only what any script has is
// used here: no internal module exists for user code to require.
const ASYNC_HOOKS = `
local tasks, pcall, type = require "tasks", pcall, type
local start, await = tasks.start, tasks.await
async.set_nexttick(function(f)
  start(function() coroutine.yield() f() end)
end)
async.set_schedule_function(function(seconds, f)
  start(function() tasks.sleep(seconds) f() end)
end)
local lua_wait_for = async.wait_for
local function wait_for(p)
  if type(p) ~= "userdata" then return lua_wait_for(p) end
  local wait, done = async.waiter()
  local ok, value
  start(function()
    ok, value = pcall(await, p)
    done()
  end)
  wait()
  if ok then return value end
  return nil, value
end
async.wait_for = wait_for
async.wait = wait_for
`;

// The shipped module's source, with the host hooks for util.async. The
// prefix shares the module's first line, so its line numbers stay right.
function shippedSource(name, file) {
  const src = fs.readFileSync(file, 'utf8');
  if (name !== 'util.async') return src;
  return `local async = (function(...) ${src}\nend)(...)\n${ASYNC_HOOKS}\nreturn async\n`;
}

// require("a.b") -> <root>/a/b.lua or <root>/a/b/init.lua, first root first.
function findModule(roots, name) {
  // Dot-separated parts, none empty: "a." would have found <root>/a/.lua.
  if (typeof name !== 'string' || !/^[A-Za-z0-9_][A-Za-z0-9_-]*(\.[A-Za-z0-9_][A-Za-z0-9_-]*)*$/.test(name)) return undefined;
  const rel = name.split('.').join(path.sep);
  for (const root of roots) {
    for (const candidate of [path.join(root, `${rel}.lua`), path.join(root, rel, 'init.lua')]) {
      const src = readInRoots([root], candidate);
      if (src !== undefined) return [src, `@${candidate}`];
    }
  }
  return undefined;
}

// Reads a file only if its real path lies inside one of the roots (no
// escape through "..", absolute paths or symlinks). Returns the source, or
// undefined with a message, as Lua's loadfile does.
function readInRoots(roots, file) {
  if (typeof file !== 'string') return undefined;
  for (const root of roots) {
    let real;
    try {
      real = fs.realpathSync(path.resolve(root, file));
    } catch {
      continue;
    }
    if (real === root || !real.startsWith(root + path.sep)) continue;
    try {
      return fs.readFileSync(real); // bytes, as Lua reads a file (a Buffer crosses as a byte string)
    } catch {
      continue;
    }
  }
  return undefined;
}

module.exports = { SHIPPED, shippedSource, findModule, readInRoots };
