// SPDX-License-Identifier: MIT
// A resource invocation's span (the telemetry option of the resources' runtimes), read from the SDK's in-memory exporter.
'use strict';
const { Resources } = require('../../..');
const { tempDir, COUNTER } = require('../resources/fixtures');
const { setupOtel, parentOf } = require('./otel-sdk');

let otel;
let res;
beforeEach(() => {
  otel = setupOtel();
});
afterEach(async () => {
  if (res) await res.close();
  res = null;
  await otel.shutdown();
});

test("an invocation is a span in its caller's context, and the method's task is its child", async () => {
  const telemetry = { meterProvider: otel.meterProvider, tracerProvider: otel.tracerProvider };
  res = await Resources.open(tempDir(), { modules: { counter: COUNTER }, runtime: { telemetry } });
  const { id } = await res.create('counter', 'resources/ada/sword', 1);
  const callerId = await otel.tracer.startActiveSpan('caller', async (span) => {
    expect(await res.invoke(id, 'add', 2)).toEqual({ result: 3, code: 'OK' });
    expect((await res.invokePath('resources/none', 'add')).code).toBe('RESOURCE_NOT_FOUND');
    span.end();
    return span.spanContext().spanId;
  });
  const spans = otel.spans();
  const invokes = spans.filter((s) => s.name === 'lua_tasks.resource.invoke');
  expect(invokes).toHaveLength(2);
  const [ok, missing] = invokes;
  expect(parentOf(ok)).toBe(callerId);
  expect(ok.attributes).toEqual(
    expect.objectContaining({
      'lua_tasks.resource.id': id,
      'lua_tasks.resource.module': 'counter',
      'lua_tasks.resource.method': 'add',
      'lua_tasks.resource.code': 'OK',
    }),
  );
  expect(missing.attributes['lua_tasks.resource.code']).toBe('RESOURCE_NOT_FOUND');
  expect(missing.status.code).toBe(2); // ERROR
  const method = spans.find((s) => s.name === 'lua_tasks.task' && parentOf(s) === ok.spanContext().spanId);
  expect(method).toBeDefined();
  expect(method.spanContext().traceId).toBe(ok.spanContext().traceId);
});

test('without the option no span is made', async () => {
  res = await Resources.open(tempDir(), { modules: { counter: COUNTER } });
  const { id } = await res.create('counter', 'x');
  await res.invoke(id, 'add');
  expect(otel.spans().filter((s) => s.name.startsWith('lua_tasks.'))).toEqual([]);
});
