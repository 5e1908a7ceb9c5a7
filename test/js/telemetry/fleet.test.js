// SPDX-License-Identifier: MIT
// A fleet's metrics and spans: operations by name, routed requests carrying their trace context, activations.
'use strict';
const api = require('@opentelemetry/api');
const { Fleet } = require('../../..');
const { describePg, createDatabase } = require('../pg-helpers');
const { FLEET_LUA } = require('../fixtures/fleet-lua');
const { setupOtel, parentOf, point } = require('./otel-sdk');

describePg('fleet telemetry on PostgreSQL', () => {
  let db;
  let otel;
  let schema;
  const members = [];
  beforeAll(async () => {
    db = await createDatabase();
  });
  afterAll(async () => {
    if (db) await db.drop();
  });
  beforeEach(() => {
    otel = setupOtel();
    schema = 'otel';
  });
  afterEach(async () => {
    await Promise.all(members.splice(0).map((m) => m.leave()));
    await otel.shutdown();
  });
  const join = async (extra = {}) => {
    const m = await Fleet.join({
      connectionString: db.url,
      schema,
      leaseMs: 1000,
      idleMs: 0,
      runtime: { setup: (rt) => rt.load(FLEET_LUA) },
      telemetry: { meterProvider: otel.meterProvider, tracerProvider: otel.tracerProvider },
      ...extra,
    });
    members.push(m);
    return m;
  };
  // Resolves when pred() holds; fails naming what it waited for.
  const until = async (pred, what, ms = 10000) => {
    const end = Date.now() + ms;
    while (!(await pred())) {
      if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  const inCaller = (fn) =>
    otel.tracer.startActiveSpan('caller', async (span) => {
      try {
        return [await fn(), span.spanContext()];
      } finally {
        span.end();
      }
    });

  test('a routed operation carries its trace to the member that serves it, whose task is a child of it', async () => {
    const a = await join();
    const b = await join();
    await a.spawn('room', 'counter', { key: 'first', args: [1] }); // activates "room" on a
    const [id, caller] = await inCaller(() => b.spawn('room', 'counter', { key: 'second', args: [1] }));
    const spans = otel.spans();
    const op = spans.find((s) => s.name === 'lua_tasks.fleet.spawn' && parentOf(s) === caller.spanId);
    expect(op.attributes).toMatchObject({ 'lua_tasks.runtime': 'room', 'lua_tasks.op': 'spawn' });
    // Sent once, or again if its first send went unheard: each a client span of the operation.
    const routes = spans.filter((s) => s.name === 'lua_tasks.fleet.route' && parentOf(s) === op.spanContext().spanId);
    expect(routes.length).toBeGreaterThanOrEqual(1);
    for (const route of routes) {
      expect(route.kind).toBe(api.SpanKind.CLIENT);
      expect(route.attributes['lua_tasks.fleet.member']).toBe(a.id);
    }
    const routeIds = new Set(routes.map((r) => r.spanContext().spanId));
    const serve = spans.find((s) => s.name === 'lua_tasks.fleet.serve' && routeIds.has(parentOf(s)));
    expect(serve.kind).toBe(api.SpanKind.SERVER);
    expect(serve.spanContext().traceId).toBe(caller.traceId);
    // The task started there: open while it waits for its message; its
    // parent chain reaches the caller once it ends.
    expect(await b.send('room', id, 7)).toBe(true);
    const until = Date.now() + 10000;
    let task;
    while (
      !(task = otel.spans().find((s) => s.name === 'lua_tasks.task' && s.attributes['lua_tasks.task.id'] === id))
    ) {
      if (Date.now() > until) throw new Error('the routed task did not end');
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(parentOf(task)).toBe(serve.spanContext().spanId);
    expect(task.spanContext().traceId).toBe(caller.traceId);
    expect(task.attributes).toMatchObject({ 'lua_tasks.runtime': 'room', 'lua_tasks.entry': 'counter' });

    const m = await otel.metrics();
    const route_ = m.get('lua_tasks.fleet.route.duration');
    expect(route_.descriptor.unit).toBe('s');
    expect(point(route_, { 'lua_tasks.runtime': 'room', 'lua_tasks.op': 'spawn' }).value.count).toBe(1);
    expect(point(route_, { 'lua_tasks.runtime': 'room', 'lua_tasks.op': 'send' }).value.count).toBe(1);
    const activations = m.get('lua_tasks.fleet.activations');
    expect(activations.descriptor.unit).toBe('{activation}');
    expect(point(activations, { 'lua_tasks.runtime': 'room', 'lua_tasks.reason': 'call' }).value).toBe(1);
    const ended = point(m.get('lua_tasks.task.ended'), {
      'lua_tasks.runtime': 'room',
      'lua_tasks.entry': 'counter',
      'lua_tasks.outcome': 'done',
    });
    expect(ended.value).toBe(1);
  });

  test('hibernations, takeovers and activations are counted by runtime and reason', async () => {
    schema = 'otel_moves';
    const a = await join({ idleMs: 150 });
    const b = await join();
    let hibernated = false;
    a.on('hibernate', () => (hibernated = true));
    await a.spawn('inbox', 'counter', { args: [2] });
    await until(() => hibernated, 'the hibernation of "inbox"');
    await a.spawn('moving', 'sleeper', { args: [0.6, 'm'] }); // a timer too near to hibernate
    await a.leave();
    await until(() => b.hosted().includes('moving'), 'the takeover of "moving"');
    const m = await otel.metrics();
    const hibernations = m.get('lua_tasks.fleet.hibernations');
    expect(hibernations.descriptor.unit).toBe('{hibernation}');
    expect(point(hibernations, { 'lua_tasks.runtime': 'inbox' }).value).toBe(1);
    const activations = m.get('lua_tasks.fleet.activations');
    expect(point(activations, { 'lua_tasks.runtime': 'moving', 'lua_tasks.reason': 'call' }).value).toBe(1);
    expect(point(activations, { 'lua_tasks.runtime': 'moving', 'lua_tasks.reason': 'takeover' }).value).toBe(1);
    const takeovers = m.get('lua_tasks.fleet.takeovers');
    expect(takeovers.descriptor.unit).toBe('{takeover}');
    expect(point(takeovers, { 'lua_tasks.runtime': 'moving' }).value).toBe(1);
    expect(takeovers.dataPoints).toHaveLength(1);
  });
});
