#!/usr/bin/env node
// SPDX-License-Identifier: MIT
// npm run fuzz: builds every libFuzzer target with clang and runs each for a while.
//   FUZZ_SECONDS=60 (default) per target; FUZZ_TARGETS=a,b to pick some.
'use strict';
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const build = path.join(root, 'build-fuzz');
const seconds = Number(process.env.FUZZ_SECONDS || 60);
const env = { ...process.env, CC: 'clang', CXX: 'clang++' };
const run = (cmd, args, opts = {}) => execFileSync(cmd, args, { stdio: 'inherit', env, ...opts });

run('cmake', [
  '-S',
  root,
  '-B',
  build,
  '-DCMAKE_BUILD_TYPE=RelWithDebInfo',
  '-DLUA_TASKS_ADDON=OFF',
  '-DLUA_TASKS_TESTS=OFF',
  '-DLUA_TASKS_FUZZ=ON',
]);
let targets = fs
  .readdirSync(path.join(root, 'test', 'fuzz'))
  .filter((f) => f.endsWith('_fuzz.cpp'))
  .map((f) => f.slice(0, -4));
if (process.env.FUZZ_TARGETS) {
  const wanted = process.env.FUZZ_TARGETS.split(',');
  const unknown = wanted.filter((t) => !targets.includes(t));
  if (unknown.length > 0) {
    console.error(`fuzz: no target named ${unknown.join(', ')} (targets: ${targets.join(', ')})`);
    process.exit(1);
  }
  targets = targets.filter((t) => wanted.includes(t));
}
run('cmake', ['--build', build, '--parallel', '2', '--target', ...targets]);
for (const t of targets) {
  const corpus = path.join(build, 'corpus', t);
  const artifacts = path.join(build, 'artifacts');
  fs.mkdirSync(corpus, { recursive: true });
  fs.mkdirSync(artifacts, { recursive: true });
  console.log(`fuzz: ${t} for ${seconds} s`);
  // Crash inputs go to build-fuzz/artifacts/<target>-crash-<sha1>, not the working directory.
  run(path.join(build, t), [
    corpus,
    `-max_total_time=${seconds}`,
    '-timeout=2',
    '-rss_limit_mb=2048',
    '-print_final_stats=1',
    `-artifact_prefix=${path.join(artifacts, `${t}-`)}`,
  ]);
}
console.log(`fuzz: ${targets.length} targets ran clean`);
