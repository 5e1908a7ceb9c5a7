#!/usr/bin/env node
// SPDX-License-Identifier: MIT
// Builds the addon with plain CMake against the running Node's own headers.
'use strict';
const { execFileSync, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const buildDir = process.env.LUA_TASKS_BUILD_DIR || path.join(root, 'build');

function fail(line) {
  console.error(`lua-tasks: ${line}`);
  process.exit(1);
}

function have(cmd, args) {
  return spawnSync(cmd, args, { stdio: 'ignore' }).status === 0;
}

if (!have('cmake', ['--version'])) {
  fail(
    'cmake not found. Install it: Debian/Ubuntu: sudo apt-get install cmake g++ pkg-config; macOS: brew install cmake pkg-config',
  );
}
if (!have('pkg-config', ['--exists', 'lua5.4'])) {
  fail(
    'Lua 5.4 headers not found (pkg-config lua5.4). Install them: Debian/Ubuntu: sudo apt-get install liblua5.4-dev libhowardhinnant-date-dev libisal-dev libsqlite3-dev pkg-config; macOS: brew install lua howard-hinnant-date isa-l sqlite pkg-config',
  );
}
if (!have('pkg-config', ['--exists', 'libisal'])) {
  fail(
    'ISA-L not found (pkg-config libisal); it checksums state snapshots. Install it: Debian/Ubuntu: sudo apt-get install libisal-dev; macOS: brew install isa-l',
  );
}
if (!have('pkg-config', ['--exists', 'sqlite3'])) {
  fail(
    'SQLite not found (pkg-config sqlite3); the directory store keeps its data in it. Install it: Debian/Ubuntu: sudo apt-get install libsqlite3-dev; macOS: brew install sqlite',
  );
}

// Node's own headers (uv.h included), never downloaded.
const nodeInclude = process.env.NODE_INCLUDE_DIR || path.resolve(process.execPath, '../../include/node');
const uvVersionFile = path.join(nodeInclude, 'uv', 'version.h');
if (!fs.existsSync(path.join(nodeInclude, 'node_api.h')) || !fs.existsSync(uvVersionFile)) {
  fail(`Node headers not found in ${nodeInclude}. Set NODE_INCLUDE_DIR to the directory holding node_api.h and uv.h.`);
}
const uvh = fs.readFileSync(uvVersionFile, 'utf8');
const part = (n) => (uvh.match(new RegExp(`#define UV_VERSION_${n}\\s+(\\d+)`)) || [])[1];
const headerUv = `${part('MAJOR')}.${part('MINOR')}.${part('PATCH')}`;
if (headerUv !== process.versions.uv) {
  fail(
    `libuv headers in ${nodeInclude} are ${headerUv} but this Node runs libuv ${process.versions.uv}. Point NODE_INCLUDE_DIR at this Node's headers.`,
  );
}

const napiDir = path.dirname(require.resolve('node-addon-api/package.json', { paths: [root] }));
// LUA_TASKS_PREBUILT=1 (scripts/prebuilt.js): the binary the package ships,
// linked to run without a compiler or -dev package, and with no test hooks.
const prebuilt = process.env.LUA_TASKS_PREBUILT === '1';
const withTests = !prebuilt && fs.existsSync(path.join(root, 'test', 'cpp')) && process.env.LUA_TASKS_TESTS !== '0';
const testHooks = !prebuilt && fs.existsSync(path.join(root, 'test', 'js'));

const configure = [
  '-S',
  root,
  '-B',
  buildDir,
  `-DNODE_INCLUDE_DIR=${nodeInclude}`,
  `-DNODE_ADDON_API_DIR=${napiDir}`,
  `-DLUA_TASKS_TESTS=${withTests ? 'ON' : 'OFF'}`,
  `-DLUA_TASKS_TEST_HOOKS=${testHooks ? 'ON' : 'OFF'}`,
  `-DLUA_TASKS_PREBUILT=${prebuilt ? 'ON' : 'OFF'}`,
  `-DCMAKE_BUILD_TYPE=${process.env.LUA_TASKS_BUILD_TYPE || 'Release'}`,
];
if (process.env.LUA_TASKS_SANITIZE === '1') configure.push('-DLUA_TASKS_SANITIZE=ON');
// With ccache (CMakeLists.txt uses it when installed), paths under the
// checkout are hashed relative to it, so a fresh clone (CI's next run)
// finds the objects of the last one.
const quiet = { stdio: ['ignore', 'inherit', 'inherit'], env: { CCACHE_BASEDIR: root, ...process.env } };
try {
  execFileSync('cmake', configure, quiet);
  execFileSync(
    'cmake',
    ['--build', buildDir, '--parallel', String(require('node:os').availableParallelism?.() || 2)],
    quiet,
  );
} catch (e) {
  fail(`build failed (cmake exited with ${e.status}); see the output above.`);
}

// Installed as a dependency (no tests to build): keep only the addon, not the
// CMake tree (a few MB of objects nobody will rebuild from).
if (!withTests && !process.env.LUA_TASKS_BUILD_DIR) {
  for (const entry of fs.readdirSync(buildDir)) {
    if (entry !== 'lua_tasks.node') fs.rmSync(path.join(buildDir, entry), { recursive: true, force: true });
  }
}
