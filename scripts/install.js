#!/usr/bin/env node
// SPDX-License-Identifier: MIT
// npm's install step: nothing to do when the prebuilt binary loads; otherwise the source build.
//
// The source build (scripts/build.js) runs when
//   - this is a source checkout (a contributor's npm install builds build/),
//   - the user asked for it (npm install --build-from-source), or
//   - the package has no prebuilt binary for this process, or it does not
//     load here (another libc, an older glibc).
'use strict';
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { prebuilt } = require('../lib/addon_path');

const root = path.resolve(__dirname, '..');
const fromSource = /^(true|1|)$/.test(process.env.npm_config_build_from_source ?? 'false');

function why() {
  if (fs.existsSync(path.join(root, 'test', 'js'))) return null; // a checkout: build quietly, as before
  if (fromSource) return 'building from source (--build-from-source)';
  const fit = prebuilt();
  if (!fit.file) return `${fit.why}: building from source`;
  try {
    require(fit.file);
    return undefined;
  } catch (e) {
    return `the prebuilt binary does not load here (${e.message.split('\n')[0]}): building from source`;
  }
}

const reason = why();
if (reason !== undefined) {
  if (reason) console.error(`lua-tasks: ${reason}`);
  try {
    execFileSync(process.execPath, [path.join(root, 'scripts', 'build.js')], { stdio: 'inherit' });
  } catch (e) {
    process.exit(e.status || 1); // build.js said what went wrong
  }
}
