// SPDX-License-Identifier: MIT
// The telemetry option: OpenTelemetry's API, resolved once and only when asked for, and the meter and tracer it gives.
'use strict';

// How and why (docs/operations.md#metrics-and-traces):
// - @opentelemetry/api is an optional peer dependency. Nothing requires it
//   while the package loads: the first runtime or fleet member given the
//   `telemetry` option looks for it, once per process (or Worker), and a
//   missing or broken API turns the option into nothing, with one warning.
// - Telemetry is opt-in: without the option no code of this folder runs, so
//   a runtime without it pays one null check per task start and end.
// - `telemetry: true` uses the providers registered globally (an SDK's
//   start()); `{ meterProvider, tracerProvider }` uses those, either one
//   defaulting to the global one.

const { invalidType, makeError } = require('../errors');
const { version } = require('../../package.json');

const SCOPE = 'lua-tasks';
const OPTION_KEYS = ['meterProvider', 'tracerProvider'];

let api; // undefined: not looked for yet; null: absent (why in #missing)
let missing = null;
let warned = false;

/**
 * `@opentelemetry/api`, or null when the application does not have it.
 * Resolved on the first call only.
 * @returns {object|null}
 */
function otelApi() {
  if (api === undefined) {
    try {
      api = require('@opentelemetry/api');
    } catch (e) {
      api = null;
      missing = e;
    }
  }
  return api;
}

function checkProvider(name, value, method) {
  if (value === undefined) return;
  if (value === null || typeof value !== 'object' || typeof value[method] !== 'function') {
    throw invalidType(`options.telemetry.${name}`, `an OpenTelemetry ${name} (an object with ${method}())`, value);
  }
}

/**
 * The `telemetry` option checked: false or undefined (off), true, or
 * `{ meterProvider?, tracerProvider? }`. Nothing is resolved here.
 * @param {unknown} value
 * @param {string} [where] how the message names the option
 * @returns {undefined|true|{ meterProvider?: object, tracerProvider?: object }}
 * @throws {TypeError} for anything else
 */
function checkTelemetry(value, where = 'options.telemetry') {
  if (value === undefined || value === false) return undefined;
  if (value === true) return true;
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw invalidType(where, 'true, false or { meterProvider?, tracerProvider? }', value);
  }
  for (const key of Object.keys(value)) {
    if (!OPTION_KEYS.includes(key)) {
      throw makeError(
        'ERR_INVALID_ARG_VALUE',
        `The key ${JSON.stringify(key)} is not part of the "${where}" option. Keys: ${OPTION_KEYS.join(', ')}.`,
      );
    }
  }
  checkProvider('meterProvider', value.meterProvider, 'getMeter');
  checkProvider('tracerProvider', value.tracerProvider, 'getTracer');
  return value;
}

/**
 * What a checked `telemetry` option gives: `{ api, meter, tracer }`, or null
 * when it is off or the API is absent (said once, as a process warning).
 * @param {ReturnType<typeof checkTelemetry>} option
 * @returns {{ api: object, meter: object, tracer: object } | null}
 */
function telemetryOf(option) {
  if (option === undefined) return null;
  const otel = otelApi();
  if (otel === null) {
    if (!warned) {
      warned = true;
      process.emitWarning(
        `lua-tasks: the "telemetry" option is set but @opentelemetry/api could not be loaded (${missing && missing.message}); no metrics or traces are made. Install it beside lua-tasks.`,
        { code: 'LUA_TASKS_TELEMETRY' },
      );
    }
    return null;
  }
  const given = option === true ? {} : option;
  const meterProvider = given.meterProvider || otel.metrics.getMeterProvider();
  const tracerProvider = given.tracerProvider || otel.trace.getTracerProvider();
  return {
    api: otel,
    meter: meterProvider.getMeter(SCOPE, version),
    tracer: tracerProvider.getTracer(SCOPE, version),
  };
}

module.exports = { otelApi, checkTelemetry, telemetryOf };
