// SPDX-License-Identifier: MIT
// The Lua modules a runtime can require: those shipped in lib/lua/, and .lua files under modulePaths.
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const { makeError } = require('../errors');
const { installResources } = require('../resources/bridge');

// Modules shipped with the package, required by name from Lua.
const SHIPPED = { 'util.async': path.join(__dirname, '..', 'lua', 'util', 'async.lua') };

// util.async's host hooks inside a runtime (lib/lua/util/async_hooks.lua),
// read once, as the package is loaded.
const ASYNC_HOOKS = fs.readFileSync(path.join(__dirname, '..', 'lua', 'util', 'async_hooks.lua'), 'utf8');

// The shipped module's source; util.async's is followed by its host hooks,
// run on the module's table in the same chunk. The module comes first and
// shares its first line with the prefix, so its line numbers stay right
// (the hooks' lines follow the module's).
function shippedSource(name, file) {
  const src = fs.readFileSync(file, 'utf8');
  if (name !== 'util.async') return src;
  return `local async = (function(...) ${src}\nend)(...)\nreturn (function(...) ${ASYNC_HOOKS}\nend)(async)\n`;
}

// require("a.b") -> <root>/a/b.lua or <root>/a/b/init.lua, first root first.
function findModule(roots, name) {
  // Dot-separated parts, none empty: "a." would have found <root>/a/.lua.
  if (typeof name !== 'string' || !/^[A-Za-z0-9_][A-Za-z0-9_-]*(\.[A-Za-z0-9_][A-Za-z0-9_-]*)*$/.test(name)) {
    return undefined;
  }
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

/**
 * Gives a new runtime its modules: the shipped ones, a finder for
 * modulePaths, options.modules, and with options.resources the resource
 * and index modules. A module named as a built-in one is refused, and the
 * runtime closed.
 * @param {object} native the runtime's NativeRuntime
 * @param {object} opts the normalized options
 * @throws {TypeError} ERR_INVALID_ARG_VALUE for a module named as a built-in one
 */
function installModules(native, opts) {
  for (const [name, file] of Object.entries(SHIPPED)) {
    if (fs.existsSync(file)) native.preload(name, shippedSource(name, file));
  }
  if (opts.modulePaths) {
    const roots = opts.modulePaths;
    native.modulePaths(
      (name) => findModule(roots, name),
      (file) => readInRoots(roots, file),
      opts.libs !== 'all',
    );
  }
  if (opts.modules) {
    for (const [name, mod] of Object.entries(opts.modules)) {
      // A library the profile opened, or one of the runtime's own modules:
      // require() answers it first, and the module would be ignored.
      if (native.isLoaded(name)) {
        native.close();
        throw makeError(
          'ERR_INVALID_ARG_VALUE',
          `The module "${name}" in "options.modules" is built in: require("${name}") always returns the runtime's own. Give your module another name.`,
        );
      }
      native.preload(name, mod);
    }
  }
  if (opts.resources) {
    try {
      installResources(native, opts.resources, opts.modules);
    } catch (e) {
      native.close();
      throw e;
    }
  }
}

module.exports = { installModules };
