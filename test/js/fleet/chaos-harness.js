// SPDX-License-Identifier: MIT
// The fleet chaos test's settings (its LUA_TASKS_CHAOS_* knobs, the faults' schedule, the skewed member) and its driver's helpers.
'use strict';

const path = require('node:path');

const MEMBER = path.join(__dirname, '..', 'fixtures', 'fleet-chaos-member.js');
const TASKS = envInt('LUA_TASKS_CHAOS_TASKS', 2000);
const SECONDS = envInt('LUA_TASKS_CHAOS_SECONDS', 20);
const SEED = envInt('LUA_TASKS_CHAOS_SEED', Math.floor(Math.random() * 2 ** 31));
const MEMBERS = 3;
const PER_NAME = 50;
const NAMES = Math.ceil(TASKS / PER_NAME);
const LEASE_MS = 1000;
const IDLE_MS = 1000; // names idle between their bursts of messages hibernate
const WAKE_AHEAD_MS = 300;
const ROUTE_TIMEOUT_MS = 5000;
const KILL_EVERY_MS = [2000, 4000];
const PAUSE_MS = [1500, 3000]; // longer than a lease
const IN_FLIGHT = 32; // operations the driver has outstanding at once
const BURSTS = 3; // per name: the moments its messages are sent around
const SETTLE_MS = 90000; // after the chaos: everything finishes within this
const REQUEST_TIMEOUT_MS = 30000; // a member's answer to the driver (routing gives up after ROUTE_TIMEOUT_MS)
const SCHEMA = 'chaos';
const VERBOSE = process.env.LUA_TASKS_CHAOS_VERBOSE === '1';

// ------------------------------------------------------------ database and mid-acknowledgement faults
// When, as fractions of the chaos: restarts of the server, and pauses of a holder mid-acknowledgement.
const RESTARTS = [
  { at: 0.3, mode: 'fast' },
  { at: 0.75, mode: 'immediate' },
];
const TERMINATE_EVERY_MS = [3000, 5000];
const MID_ACK_AT = [0.2, 0.45, 0.6];
const MID_ACK_SENDS = 4; // messages held back for the paused holder's names, sent at once
const MID_ACK_PAUSE_MS = [1500, 2500]; // past a lease: the askers take its names over
const MID_ACK_SESSION_END_MS = 200; // the requests are out, unacknowledged (the router waits 500 ms)
const MAX_CONNECTIONS = 200; // members' pools, a paused member's and a killed one's sessions not yet ended
// The sessions of member `label` (or of every member) carry this application_name.
const appOf = (label) => `chaos_${label.replace('.', '_')}`;

// ------------------------------------------------------------ a skewed member
// One member slot runs with its wall clock SKEW ahead (libfaketime), in every
// generation: it records deadlines, fires others', takes names over. Every
// cron and timer check of the test holds on the fleet's clock (PostgreSQL's); the
// member must have measured its offset as about -SKEW.
const { skewUnavailable } = require('./faketime');
const SKEWED = skewUnavailable() === null; // else the chaos runs without it (the reason is printed)
const SKEWED_SLOT = 2;
const SKEW_MS = 3000;
const SKEW_TOLERANCE_MS = 500; // the offset is measured over a loaded machine's round trips

function envInt(key, dflt) {
  const v = process.env[key];
  if (v === undefined || v === '') return dflt;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${key} must be a positive integer, not ${JSON.stringify(v)}`);
  return n;
}

// A seeded generator (mulberry32): a failing run can be replayed by its seed
// (the kills' timing still varies).
function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function percentile(values, p) {
  if (!values.length) return null;
  const s = [...values].sort((x, y) => x - y);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))];
}

// At most n functions running at once, started in the order they came.
function gate(n) {
  let running = 0;
  const waiting = [];
  return async (fn) => {
    if (running < n) running++;
    else await new Promise((resolve) => waiting.push(resolve)); // the slot is handed over
    try {
      return await fn();
    } finally {
      if (waiting.length) waiting.shift()();
      else running--;
    }
  };
}

module.exports = {
  MEMBER,
  TASKS,
  SECONDS,
  SEED,
  MEMBERS,
  NAMES,
  LEASE_MS,
  IDLE_MS,
  WAKE_AHEAD_MS,
  ROUTE_TIMEOUT_MS,
  KILL_EVERY_MS,
  PAUSE_MS,
  IN_FLIGHT,
  BURSTS,
  SETTLE_MS,
  REQUEST_TIMEOUT_MS,
  SCHEMA,
  VERBOSE,
  RESTARTS,
  TERMINATE_EVERY_MS,
  MID_ACK_AT,
  MID_ACK_SENDS,
  MID_ACK_PAUSE_MS,
  MID_ACK_SESSION_END_MS,
  MAX_CONNECTIONS,
  appOf,
  SKEWED,
  SKEWED_SLOT,
  SKEW_MS,
  SKEW_TOLERANCE_MS,
  prng,
  percentile,
  gate,
};
