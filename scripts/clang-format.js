#!/usr/bin/env node
// SPDX-License-Identifier: MIT
// The C++ sources against .clang-format: `node scripts/clang-format.js` checks
// (part of npm run lint), `--fix` rewrites them in place.
'use strict';
const { execFileSync } = require('node:child_process');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const fix = process.argv.includes('--fix');
const files = execFileSync('git', ['ls-files', '-z', '*.cpp', '*.hpp'], { cwd: root, encoding: 'utf8' })
  .split('\0')
  .filter(Boolean);
// Debian names the binary by its version; the unversioned name is a link it may not install.
const bin = ['clang-format-14', 'clang-format'].find((b) => {
  try {
    execFileSync(b, ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
});
if (!bin) {
  console.error(
    'clang-format: neither clang-format-14 nor clang-format is installed (Debian: apt install clang-format-14)',
  );
  process.exit(1);
}
const args = fix ? ['-i', ...files] : ['--dry-run', '--Werror', ...files];
try {
  execFileSync(bin, args, { cwd: root, stdio: 'inherit' });
} catch {
  console.error(
    `clang-format: the sources above differ from .clang-format; node scripts/clang-format.js --fix lays them out`,
  );
  process.exit(1);
}
