// SPDX-License-Identifier: MIT
// Without @opentelemetry/api the package loads and runs, and the telemetry option turns into one warning.
'use strict';
const { execFile } = require('node:child_process');
const { promisify } = require('node:util');
const { fixture } = require('../helpers');
const { Runtime } = require('../../..');

test('with the API unresolvable, runtimes run; the option warns once and looks for the API once', async () => {
  const { stdout } = await promisify(execFile)(process.execPath, [fixture('otel-absent.js')]);
  const seen = JSON.parse(stdout);
  expect(seen.error).toBeUndefined();
  expect(seen.before).toEqual({ value: 3, looked: 0 }); // never looked for without the option
  expect(seen.values).toEqual([5, 5]);
  expect(seen.looked).toBe(1);
  expect(seen.warnings).toEqual(['LUA_TASKS_TELEMETRY']);
});

test('a bad telemetry option is refused naming what is allowed', () => {
  expect(() => new Runtime({ telemetry: 'yes' })).toThrow(
    /"options.telemetry" argument must be true, false or \{ meterProvider\?, tracerProvider\? \}. Received the string/,
  );
  expect(() => new Runtime({ telemetry: { meter: {} } })).toThrow(
    /The key "meter" is not part of the "options.telemetry" option. Keys: meterProvider, tracerProvider./,
  );
  expect(() => new Runtime({ telemetry: { tracerProvider: {} } })).toThrow(
    /"options.telemetry.tracerProvider" argument must be an OpenTelemetry tracerProvider \(an object with getTracer\(\)\)/,
  );
  expect(() => new Runtime({ telemetry: false }).closeSync()).not.toThrow();
});
