#!/usr/bin/env node
// SPDX-License-Identifier: MIT
// npm run build:prebuilt (and prepack): the binary the package ships in prebuilds/<platform>-<arch>/.
//
// One binary serves every Node major the package supports: it uses Node-API 8
// and the libuv 1.x handle types whose layout is the same in every Node from
// 20 on (docs/design.md#build has the evidence). It is built from this tree
// into build-prebuilt/ (LUA_TASKS_PREBUILT: libstdc++ linked in, no test
// hooks), then this script copies the addon and each library it needs that a
// system with Node may lack (Lua, SQLite, ISA-L, mimalloc, date-tz) beside it,
// and writes prebuilt.json: what the loader checks before it loads the binary
// (platform, libuv major, Node-API version) and the glibc it needs at least.
'use strict';
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const buildDir = path.join(root, 'build-prebuilt');
const target = `${process.platform}-${process.arch}`;
const out = path.join(root, 'prebuilds', target);

function fail(line) {
  console.error(`lua-tasks prebuilt: ${line}`);
  process.exit(1);
}

if (target !== 'linux-x64') {
  // npm pack elsewhere still packs: the tarball then builds from source everywhere.
  if (process.env.npm_lifecycle_event === 'prepack') {
    console.error(`lua-tasks prebuilt: none made on ${target} (linux-x64 only): the tarball has no prebuilt binary`);
    process.exit(0);
  }
  fail(`prebuilt binaries are made for linux-x64 only, not ${target}`);
}

// What every glibc system that runs Node's official binary has: Node itself
// links these, so they are never shipped.
const SYSTEM = new Set([
  'libc.so.6',
  'libm.so.6',
  'libdl.so.2',
  'libpthread.so.0',
  'librt.so.1',
  'libgcc_s.so.1',
  'libstdc++.so.6',
  'ld-linux-x86-64.so.2',
]);

const text = (cmd, args) => execFileSync(cmd, args, { encoding: 'utf8' });
const needed = (file) => [...text('objdump', ['-p', file]).matchAll(/^\s*NEEDED\s+(\S+)$/gm)].map((m) => m[1]);
// The newest symbol version of a family (GLIBC_, GLIBCXX_) a file asks for.
function newest(file, family) {
  const versions = [...text('objdump', ['-T', file]).matchAll(new RegExp(`\\b${family}_([0-9.]+)\\b`, 'g'))].map(
    (m) => m[1],
  );
  return versions.sort((a, b) => compareVersions(b, a))[0] || null;
}
function compareVersions(a, b) {
  const x = a.split('.').map(Number);
  const y = b.split('.').map(Number);
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    if ((x[i] || 0) !== (y[i] || 0)) return (x[i] || 0) - (y[i] || 0);
  }
  return 0;
}

// All output on stderr: npm pack --json (prepack) keeps stdout for its JSON.
execFileSync(process.execPath, [path.join(root, 'scripts', 'build.js')], {
  stdio: ['ignore', 2, 2],
  env: { ...process.env, LUA_TASKS_BUILD_DIR: buildDir, LUA_TASKS_PREBUILT: '1', LUA_TASKS_BUILD_TYPE: 'Release' },
});
const addon = path.join(buildDir, 'lua_tasks.node');

fs.rmSync(out, { recursive: true, force: true });
fs.mkdirSync(out, { recursive: true });
fs.copyFileSync(addon, path.join(out, 'lua_tasks.node'));

// Where the dynamic linker finds each library here (ldd), copied under its
// soname; the copies' own needs must be system libraries or copies too.
const resolved = new Map([...text('ldd', [addon]).matchAll(/^\s*(\S+) => (\/\S+)/gm)].map((m) => [m[1], m[2]]));
const shipped = [];
const queue = needed(addon);
while (queue.length) {
  const soname = queue.shift();
  if (SYSTEM.has(soname) || shipped.includes(soname)) continue;
  const from = resolved.get(soname);
  if (!from) fail(`the addon needs ${soname}, which ldd does not find`);
  fs.copyFileSync(from, path.join(out, soname));
  shipped.push(soname);
  licenseOf(fs.realpathSync(from), soname);
  queue.push(...needed(from));
}

// Each copied library's license as its Debian package states it (their
// licenses ask binary copies to carry the notice), and libstdc++'s, linked in.
function licenseOf(file, name) {
  const pkg = text('dpkg', ['-S', file]).split(':')[0];
  const dir = path.join(out, 'licenses');
  fs.mkdirSync(dir, { recursive: true });
  fs.copyFileSync(`/usr/share/doc/${pkg}/copyright`, path.join(dir, `${name}.copyright`));
}
licenseOf(fs.realpathSync(text('g++', ['-print-file-name=libstdc++.so']).trim()), 'libstdc++');

const files = ['lua_tasks.node', ...shipped];
let glibc = '2.2.5';
let glibcxx = null;
for (const f of files) {
  const g = newest(path.join(out, f), 'GLIBC');
  if (g && compareVersions(g, glibc) > 0) glibc = g;
  const gx = newest(path.join(out, f), 'GLIBCXX');
  if (gx && (!glibcxx || compareVersions(gx, glibcxx) > 0)) glibcxx = gx;
}
if (needed(addon).includes('libstdc++.so.6')) {
  fail('the addon links libstdc++ dynamically (LUA_TASKS_PREBUILT is off?)');
}
const runpath = /^\s*(?:RUNPATH|RPATH)\s+(\S+)$/m.exec(text('objdump', ['-p', addon]));
if (!runpath || runpath[1] !== '$ORIGIN') fail(`the addon's rpath is ${runpath && runpath[1]}, not $ORIGIN`);

const manifest = {
  platform: process.platform,
  arch: process.arch,
  libc: 'glibc',
  glibc, // the newest GLIBC_ symbol version any shipped file asks for
  glibcxx, // the same for the system libstdc++ (only libdate-tz uses it)
  napi: 8,
  uv: Number(process.versions.uv.split('.')[0]),
  builtWith: { node: process.version, uv: process.versions.uv },
  files,
};
fs.writeFileSync(path.join(out, 'prebuilt.json'), `${JSON.stringify(manifest, null, 2)}\n`);
console.error(
  `lua-tasks prebuilt: ${path.relative(root, out)}: ${files.join(', ')}; needs glibc >= ${glibc}` +
    (glibcxx ? `, libstdc++ >= GLIBCXX_${glibcxx}` : ''),
);
