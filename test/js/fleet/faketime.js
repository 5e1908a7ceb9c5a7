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

module.exports = { FAKETIME, skewedEnv };
