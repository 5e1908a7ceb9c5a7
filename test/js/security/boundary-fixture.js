// SPDX-License-Identifier: MIT
// What the capability boundary's tests share: the limits their runtimes run under, and the canary of an escape.
'use strict';

const LIMITS = { memoryLimit: 64 * 1024 * 1024, taskTimeout: 1000, timeSlice: 10 };

// Lua code that reached Function would run Function("return 4242")() and
// return this: an attempt that returns it escaped.
const CANARY = 4242;

module.exports = { LIMITS, CANARY };
