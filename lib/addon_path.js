// SPDX-License-Identifier: MIT
// Which native addon file the package loads: its own source build, else the prebuilt binary that fits.
//
// The order: in a source checkout, $LUA_TASKS_BUILD_DIR (the sanitizers'
// build, a test's); then build/ (a source build: a contributor's, or an
// install with --build-from-source or where no prebuilt fits); then
// prebuilds/<platform>-<arch>/, when its prebuilt.json matches this process.
// Shared by lib/binding.js and scripts/install.js, so the install decides to
// build from source by the same rule the loader uses.
'use strict';
const fs = require('node:fs');
const path = require('node:path');

const root = path.join(__dirname, '..');
const ADDON = 'lua_tasks.node';

/**
 * The prebuilt binary for this process, or why there is none.
 * @returns {{ file: string } | { why: string }}
 */
function prebuilt() {
  const target = `${process.platform}-${process.arch}`;
  const dir = path.join(root, 'prebuilds', target);
  let manifest;
  try {
    manifest = JSON.parse(fs.readFileSync(path.join(dir, 'prebuilt.json'), 'utf8'));
  } catch {
    return { why: `no prebuilt binary for ${target} in this package` };
  }
  // The addon embeds libuv handles: their layout holds within a libuv major.
  const uv = Number(process.versions.uv.split('.')[0]);
  if (manifest.uv !== uv) {
    return { why: `the prebuilt binary is for libuv ${manifest.uv}.x, this Node runs libuv ${process.versions.uv}` };
  }
  const napi = Number(process.versions.napi);
  if (!(napi >= manifest.napi)) {
    return { why: `the prebuilt binary needs Node-API ${manifest.napi}, this Node has ${process.versions.napi}` };
  }
  return { file: path.join(dir, ADDON) };
}

/**
 * The addon file to load.
 * @returns {{ file: string, why?: string }} why: set when the prebuilt does not fit (file is then the source build's)
 */
function addonPath() {
  const checkout = fs.existsSync(path.join(root, 'test', 'js'));
  // Only a source checkout obeys the environment: an installed package loads
  // no code another variable points at.
  if (checkout && process.env.LUA_TASKS_BUILD_DIR) return { file: path.join(process.env.LUA_TASKS_BUILD_DIR, ADDON) };
  const built = path.join(root, 'build', ADDON);
  if (fs.existsSync(built)) return { file: built };
  const fit = prebuilt();
  return fit.file ? fit : { file: built, why: fit.why };
}

module.exports = { addonPath, prebuilt };
