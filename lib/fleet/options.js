// SPDX-License-Identifier: MIT
// Fleet.join's options: checked, with their defaults (docs/fleet.md's options table).
'use strict';

const { makeError, typeName } = require('../errors');
const { checkNumber } = require('../validate');
const { checkTelemetry } = require('../telemetry/fleet');

const DEFAULTS = {
  leaseMs: 10000,
  idleMs: 60000,
  wakeAheadMs: 1000,
  routeTimeoutMs: 15000,
  balanceMs: 5000,
};
function positiveInt(options, key, min = 0) {
  const v = options[key] === undefined ? DEFAULTS[key] : options[key];
  return checkNumber(`options.${key}`, v, { unit: 'milliseconds', min, max: 2 ** 31 - 1, integer: true });
}

function checkJoin(options) {
  if (options === null || typeof options !== 'object') {
    throw makeError(
      'ERR_INVALID_ARG_TYPE',
      `The "options" argument must be an object { connectionString, runtime }. Received ${typeName(options)}.`,
    );
  }
  const known = [
    'connectionString',
    'schema',
    'leaseMs',
    'runtime',
    'idleMs',
    'wakeAheadMs',
    'pollMs',
    'routeTimeoutMs',
    'balanceMs',
    'max',
    'telemetry',
  ];
  for (const k of Object.keys(options)) {
    if (!known.includes(k)) {
      throw makeError('ERR_INVALID_ARG_VALUE', `"${k}" is not an option of Fleet.join. Options: ${known.join(', ')}.`);
    }
  }
  const { runtime = {} } = options;
  if (typeof runtime !== 'function' && (runtime === null || typeof runtime !== 'object')) {
    throw makeError(
      'ERR_INVALID_ARG_TYPE',
      `The "options.runtime" option must be Runtime.open's options without name and store, or a function (name) => those options. Received ${typeName(runtime)}.`,
    );
  }
  const leaseMs = positiveInt(options, 'leaseMs', 100);
  const o = {
    connectionString: options.connectionString,
    schema: options.schema,
    max: options.max,
    telemetry: checkTelemetry(options.telemetry),
    runtime,
    leaseMs,
    idleMs: positiveInt(options, 'idleMs'),
    wakeAheadMs: positiveInt(options, 'wakeAheadMs'),
    routeTimeoutMs: positiveInt(options, 'routeTimeoutMs', 1),
    balanceMs: positiveInt(options, 'balanceMs'),
    pollMs: options.pollMs === undefined ? Math.max(50, Math.min(1000, Math.floor(leaseMs / 4))) : undefined,
  };
  if (o.pollMs === undefined) o.pollMs = positiveInt(options, 'pollMs', 10);
  if (typeof o.connectionString !== 'string' || o.connectionString === '') {
    throw makeError(
      'ERR_INVALID_ARG_TYPE',
      `The "options.connectionString" option must be a non-empty string (postgres://user:password@host:port/database). Received ${typeName(o.connectionString)}.`,
    );
  }
  return o;
}

module.exports = { checkJoin, DEFAULTS };
