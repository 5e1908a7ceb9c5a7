// SPDX-License-Identifier: MIT
// A runtime's metrics and spans through OpenTelemetry (the telemetry option), read from the SDK's in-memory exporters.
'use strict';
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const api = require('@opentelemetry/api');
const { Runtime } = require('../../..');
const { closeAfterTest, until } = require('../helpers');
const { setupOtel, parentOf, point } = require('./otel-sdk');

const LUA = `
function add(a, b) return a + b end
function boom() error("boom") end
function forever() coroutine.yield("INDEFINITELY") end
function inbox() return tasks.receive() end
`;

let otel;
beforeEach(() => {
  otel = setupOtel();
});
afterEach(async () => {
  await otel.shutdown();
});

function telemetry() {
  return { meterProvider: otel.meterProvider, tracerProvider: otel.tracerProvider };
}

// Runs fn inside an active span named 'caller'; resolves to that span's id.
function inCaller(fn) {
  return otel.tracer.startActiveSpan('caller', (span) => {
    try {
      fn();
    } finally {
      span.end();
    }
    return span.spanContext().spanId;
  });
}

test('tasks started from JS are counted by entry and by outcome, and their waits by instruction', async () => {
  const rt = closeAfterTest(new Runtime({ telemetry: telemetry() }));
  rt.load(LUA);
  let inbox;
  let forever;
  let sum;
  inCaller(() => {
    sum = rt.call('add', 1, 2);
    rt.start('boom').result.catch(() => {});
    inbox = rt.start('inbox');
    forever = rt.start('forever');
    forever.result.catch(() => {});
  });
  await expect(sum).resolves.toBe(3);
  let m = await otel.metrics();
  const started = m.get('lua_tasks.task.started');
  expect(started.descriptor.unit).toBe('{task}');
  for (const entry of ['add', 'boom', 'inbox', 'forever']) {
    expect(point(started, { 'lua_tasks.entry': entry }).value).toBe(1);
  }
  // A runtime without a store has no name: no runtime attribute.
  expect(started.dataPoints.every((p) => !('lua_tasks.runtime' in p.attributes))).toBe(true);
  const waiting = m.get('lua_tasks.task.waiting');
  expect(waiting.descriptor.unit).toBe('{task}');
  expect(point(waiting, { 'lua_tasks.instruction': 'RECEIVE' }).value).toBe(1);
  expect(point(waiting, { 'lua_tasks.instruction': 'INDEFINITELY' }).value).toBe(1);
  expect(point(waiting, { 'lua_tasks.instruction': 'FOR' }).value).toBe(0);
  expect(point(waiting, { 'lua_tasks.instruction': 'NONE' })).toBeUndefined();
  const oldest = m.get('lua_tasks.task.oldest_wait');
  expect(oldest.descriptor.unit).toBe('s');
  expect(oldest.dataPoints[0].value).toBeGreaterThanOrEqual(0);
  expect(m.get('lua_tasks.restore.failures').dataPoints[0].value).toBe(0);

  rt.send(inbox.id, 'hi');
  await expect(inbox.result).resolves.toBe('hi');
  forever.cancel('enough');
  await expect(forever.result).rejects.toMatchObject({ code: 'ERR_TASK_CANCELLED' });
  m = await otel.metrics();
  const ended = m.get('lua_tasks.task.ended');
  expect(ended.descriptor.unit).toBe('{task}');
  expect(point(ended, { 'lua_tasks.entry': 'add', 'lua_tasks.outcome': 'done' }).value).toBe(1);
  expect(point(ended, { 'lua_tasks.entry': 'boom', 'lua_tasks.outcome': 'failed' }).value).toBe(1);
  expect(point(ended, { 'lua_tasks.entry': 'inbox', 'lua_tasks.outcome': 'done' }).value).toBe(1);
  expect(point(ended, { 'lua_tasks.entry': 'forever', 'lua_tasks.outcome': 'cancelled' }).value).toBe(1);
  expect(ended.dataPoints).toHaveLength(4);
  const duration = m.get('lua_tasks.task.duration');
  expect(duration.descriptor.unit).toBe('s');
  expect(point(duration, { 'lua_tasks.entry': 'inbox', 'lua_tasks.outcome': 'done' }).value.count).toBe(1);
  expect(point(m.get('lua_tasks.task.waiting'), { 'lua_tasks.instruction': 'RECEIVE' }).value).toBe(0);
});

test('a task run is a span, child of the context active where JS started it, with an error status on failure', async () => {
  const rt = closeAfterTest(new Runtime({ telemetry: telemetry() }));
  rt.load(LUA);
  let ids;
  const caller = inCaller(() => {
    ids = [rt.start('add', 2, 3).id, rt.start('boom').id];
  });
  rt.start('add', 4, 5); // no active span: a trace of its own
  const spans = otel.spans().filter((s) => s.name === 'lua_tasks.task');
  expect(spans).toHaveLength(3);
  const [add, boom, alone] = spans;
  expect(parentOf(add)).toBe(caller);
  expect(parentOf(boom)).toBe(caller);
  expect(parentOf(alone)).toBeUndefined();
  expect(add.attributes).toMatchObject({
    'lua_tasks.task.id': ids[0],
    'lua_tasks.entry': 'add',
    'lua_tasks.outcome': 'done',
    'lua_tasks.task.durable': false,
  });
  expect(add.status.code).toBe(api.SpanStatusCode.UNSET);
  expect(boom.attributes).toMatchObject({ 'lua_tasks.task.id': ids[1], 'lua_tasks.outcome': 'failed' });
  expect(boom.status.code).toBe(api.SpanStatusCode.ERROR);
  expect(boom.status.message).toMatch(/boom/);
});

test('a task cancelled by close ends its span as cancelled', async () => {
  const rt = new Runtime({ telemetry: telemetry() });
  rt.load(LUA);
  rt.start('forever').result.catch(() => {});
  await rt.close();
  const [span] = otel.spans();
  expect(span.attributes['lua_tasks.outcome']).toBe('cancelled');
  // Closed: its waits are no longer collected.
  const m = await otel.metrics();
  const waiting = m.get('lua_tasks.task.waiting');
  expect(waiting === undefined || waiting.dataPoints.length === 0).toBe(true);
});

describe('with a store', () => {
  const dirs = [];
  afterAll(() => {
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });
  const open = (extra) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lua-tasks-otel-'));
    dirs.push(dir);
    return Runtime.open({
      name: 'shop',
      store: dir,
      telemetry: telemetry(),
      setup: (r) =>
        r.load(`
          function buy(item)
            tasks.state[item] = (tasks.state[item] or 0) + 1
            coroutine.yield("COMMIT")
            return tasks.state[item]
          end
          function hold() coroutine.yield("INDEFINITELY") end
          function quest()
            tasks.step(function() return "found" end)
            return tasks.receive()
          end
        `),
      ...extra,
    });
  };

  test('a COMMIT is a store write: its latency and bytes are measured, its span a child of the task', async () => {
    const rt = closeAfterTest(await open());
    const task = rt.start('buy', 'sword');
    await expect(task.result).resolves.toBe(1);
    const m = await otel.metrics();
    const d = m.get('lua_tasks.commit.duration');
    expect(d.descriptor.unit).toBe('s');
    const p = point(d, { 'lua_tasks.runtime': 'shop' });
    expect(p.value.count).toBe(1);
    const size = m.get('lua_tasks.commit.size');
    expect(size.descriptor.unit).toBe('By');
    expect(point(size, { 'lua_tasks.runtime': 'shop' }).value.sum).toBeGreaterThan(0);
    expect(
      point(m.get('lua_tasks.task.started'), { 'lua_tasks.runtime': 'shop', 'lua_tasks.entry': 'buy' }).value,
    ).toBe(1);
    const spans = otel.spans();
    const taskSpan = spans.find((s) => s.name === 'lua_tasks.task');
    const commit = spans.find((s) => s.name === 'lua_tasks.commit');
    expect(parentOf(commit)).toBe(taskSpan.spanContext().spanId);
    expect(commit.spanContext().traceId).toBe(taskSpan.spanContext().traceId);
    expect(commit.attributes).toMatchObject({ 'lua_tasks.runtime': 'shop', 'lua_tasks.commit.requests': 1 });
    expect(commit.attributes['lua_tasks.commit.state_bytes']).toBeGreaterThan(0);
  });

  test("a durable task's journal batches are measured apart, and rt.commit() is a child of its caller", async () => {
    const rt = closeAfterTest(await open());
    const task = rt.spawn('quest', { durable: true });
    await until(() => task.waiting && task.waiting.instruction === 'RECEIVE');
    await rt.commit(); // its journal written; then no write is in flight when the caller commits
    await new Promise((r) => setImmediate(r));
    const caller = await otel.tracer.startActiveSpan('caller', async (span) => {
      await rt.commit();
      span.end();
      return span.spanContext().spanId;
    });
    const m = await otel.metrics();
    expect(m.get('lua_tasks.journal.duration').descriptor.unit).toBe('s');
    const journal = point(m.get('lua_tasks.journal.size'), { 'lua_tasks.runtime': 'shop' });
    expect(journal.value.count).toBeGreaterThanOrEqual(1);
    expect(journal.value.sum).toBeGreaterThan(0);
    const commits = otel.spans().filter((s) => s.name === 'lua_tasks.commit');
    expect(commits.some((s) => parentOf(s) === caller)).toBe(true);
    expect(otel.spans().some((s) => s.name === 'lua_tasks.task')).toBe(false); // the quest's span is open while it runs
  });

  test('a durable task that fails at its restore is counted in restore failures', async () => {
    const first = await open();
    const dir = dirs[dirs.length - 1];
    first.spawn('quest', { durable: true });
    await first.close();
    const errors = [];
    const rt = closeAfterTest(
      await Runtime.open({
        name: 'shop',
        store: dir,
        telemetry: telemetry(),
        durableRestore: 'all', // replayed at open, where it fails
        setup: (r) => r.on('taskerror', (t, e) => errors.push(e)), // quest is gone from the code
      }),
    );
    await until(() => errors.length > 0);
    const m = await otel.metrics();
    const failures = m.get('lua_tasks.restore.failures');
    expect(failures.descriptor.unit).toBe('{task}');
    expect(point(failures, { 'lua_tasks.runtime': 'shop' }).value).toBe(1);
    expect(rt.stats().restoreFailures).toBe(1);
  });

  test("closing ends a durable task's span as 'closed', not counted as ended; other tasks are cancelled", async () => {
    const rt = await open();
    const quest = rt.spawn('quest', { durable: true });
    rt.start('hold').result.catch(() => {});
    await until(() => quest.status === 'waiting');
    await rt.close();
    const spans = otel.spans().filter((s) => s.name === 'lua_tasks.task');
    const outcome = (entry) =>
      spans.find((s) => s.attributes['lua_tasks.entry'] === entry).attributes['lua_tasks.outcome'];
    expect(outcome('quest')).toBe('closed');
    expect(outcome('hold')).toBe('cancelled');
    const ended = (await otel.metrics()).get('lua_tasks.task.ended');
    expect(point(ended, { 'lua_tasks.entry': 'hold', 'lua_tasks.outcome': 'cancelled' }).value).toBe(1);
    expect(point(ended, { 'lua_tasks.entry': 'quest' })).toBeUndefined();
  });
});
