#!/usr/bin/env node
// SPDX-License-Identifier: MIT
// npm run test:asan: the GoogleTest suite (with LeakSanitizer) and the Jest suite
// under AddressSanitizer + UndefinedBehaviorSanitizer.
//   npm run test:asan -- <paths>: only the Jest files under those paths (CI
//   names the native-heavy suites: .ci/run says which and why).
'use strict';
const { execFileSync } = require('node:child_process');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const build = path.join(root, 'build-asan');
const run = (cmd, args, env = {}) =>
  execFileSync(cmd, args, { stdio: 'inherit', cwd: root, env: { ...process.env, ...env } });

run(process.execPath, [path.join(root, 'scripts', 'build.js')], {
  LUA_TASKS_BUILD_DIR: build,
  LUA_TASKS_SANITIZE: '1',
  LUA_TASKS_BUILD_TYPE: 'RelWithDebInfo',
});
run(path.join(build, 'core_tests'), [], {
  ASAN_OPTIONS: 'detect_leaks=1:abort_on_error=1',
  UBSAN_OPTIONS: 'print_stacktrace=1:halt_on_error=1',
});
// Node itself is not built with ASan: preload the runtime, and leave leak
// detection off (V8 keeps memory until exit by design).
const libasan = execFileSync('gcc', ['-print-file-name=libasan.so'], { encoding: 'utf8' }).trim();
// pack.test.js installs the packed tarball as a user would: the prebuilt
// binary and a source build of its own, neither under the sanitizers.
run(
  process.execPath,
  // The paths first: --testPathIgnorePatterns takes every argument after it.
  [
    require.resolve('jest/bin/jest'),
    '--runInBand',
    ...process.argv.slice(2),
    '--testPathIgnorePatterns',
    '/test/js/pack\\.test\\.js$',
  ],
  {
    LD_PRELOAD: libasan,
    ASAN_OPTIONS: 'detect_leaks=0:abort_on_error=1:verify_asan_link_order=0',
    UBSAN_OPTIONS: 'print_stacktrace=1:halt_on_error=1',
    LUA_TASKS_BUILD_DIR: build,
    LUA_TASKS_CRASH_KILLS: '20',
  },
);
