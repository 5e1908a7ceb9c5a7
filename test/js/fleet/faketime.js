// SPDX-License-Identifier: MIT
// libfaketime for the fleet's tests: a member process whose wall clock is off by a few seconds.
'use strict';

const fs = require('node:fs');
const { execFileSync } = require('node:child_process');

// libfaketime from Debian (the thread-safe build: Node has threads), or null.
function findFaketime() {
  const candidates = [];
  try {
    const listed = execFileSync('dpkg', ['-L', 'libfaketime'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    candidates.push(...listed.split('\n').filter((p) => /libfaketimeMT\.so\.1$/.test(p)));
  } catch {
    // not a Debian system, or not installed: the usual place, else none
  }
  candidates.push('/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1');
  return candidates.find((p) => fs.existsSync(p)) || null;
}

const FAKETIME = findFaketime();

// Why a skewed member cannot run here, or null: libfaketime missing, or the
// sanitizer runtime preloaded (npm run test:asan), beside which libfaketime's
// start deadlocks (a Node under both hangs before its first line).
function skewUnavailable() {
  if (/libasan/.test(process.env.LD_PRELOAD || '')) {
    return 'the sanitizer runtime is preloaded, and libfaketime deadlocks beside it';
  }
  return FAKETIME ? null : 'libfaketime is not installed (apt-get install faketime libfaketime)';
}
// Missing where it was required (LUA_TASKS_REQUIRE_PG=1): a failure, not a skip.
const SKEW_REQUIRED_MISSING = FAKETIME === null && process.env.LUA_TASKS_REQUIRE_PG === '1';

// A member's environment: its wall clock `skew` ("+4s", "-4s") off. A
// sanitizer run's runtime, preloaded, must stay first; libfaketime follows.
function skewedEnv(skew, base = process.env) {
  const env = { ...base };
  const kept = (env.LD_PRELOAD || '').split(/[\s:]+/).filter((p) => p && !/faketime/.test(p));
  env.LD_PRELOAD = [...kept, FAKETIME].join(' ');
  env.FAKETIME = skew;
  env.FAKETIME_DONT_FAKE_MONOTONIC = '1'; // timers keep real time; only the wall clock is off
  env.FAKETIME_NO_CACHE = '1';
  return env;
}

module.exports = { FAKETIME, SKEW_REQUIRED_MISSING, skewUnavailable, skewedEnv };
