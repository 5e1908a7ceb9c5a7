// SPDX-License-Identifier: MIT
// The metrics and span names lua-tasks reports, their units and attributes: the one list (docs/operations.md#metrics-and-traces).
'use strict';

// Units follow OpenTelemetry's conventions: durations in seconds ('s'),
// sizes in bytes ('By'), counts as an annotation in braces. Attributes are
// few-valued: the runtime's name, a task's entry, its outcome, a wait's
// instruction, a fleet operation, an activation's reason. A task's id is a
// span attribute only, never a metric's.

/** Attribute keys. */
const ATTR = Object.freeze({
  runtime: 'lua_tasks.runtime',
  entry: 'lua_tasks.entry',
  outcome: 'lua_tasks.outcome',
  instruction: 'lua_tasks.instruction',
  op: 'lua_tasks.op',
  reason: 'lua_tasks.reason',
  taskId: 'lua_tasks.task.id',
  durable: 'lua_tasks.task.durable',
  member: 'lua_tasks.fleet.member',
  requests: 'lua_tasks.commit.requests',
  stateBytes: 'lua_tasks.commit.state_bytes',
  journalBytes: 'lua_tasks.journal.bytes',
  errorType: 'error.type',
  resourceId: 'lua_tasks.resource.id',
  resourceModule: 'lua_tasks.resource.module',
  method: 'lua_tasks.resource.method',
  code: 'lua_tasks.resource.code',
});

/** Span names. */
const SPAN = Object.freeze({
  task: 'lua_tasks.task',
  commit: 'lua_tasks.commit',
  fleet: (op) => `lua_tasks.fleet.${op}`,
  route: 'lua_tasks.fleet.route',
  serve: 'lua_tasks.fleet.serve',
  invoke: 'lua_tasks.resource.invoke',
});

// name, kind, unit, description
const METRICS = Object.freeze({
  started: ['lua_tasks.task.started', 'counter', '{task}', 'Tasks started from JS (and durable tasks restored)'],
  ended: ['lua_tasks.task.ended', 'counter', '{task}', 'Tasks started from JS that ended, by outcome'],
  duration: ['lua_tasks.task.duration', 'histogram', 's', 'Time from a task start to its end'],
  waiting: ['lua_tasks.task.waiting', 'gauge', '{task}', 'Tasks waiting now, by instruction'],
  oldestWait: ['lua_tasks.task.oldest_wait', 'gauge', 's', 'How long the longest current wait has lasted'],
  restoreFailures: ['lua_tasks.restore.failures', 'observableCounter', '{task}', 'Restored durable tasks that failed'],
  commitDuration: ['lua_tasks.commit.duration', 'histogram', 's', 'A store write: snapshot taken to write settled'],
  commitSize: ['lua_tasks.commit.size', 'histogram', 'By', 'Bytes a store write carried'],
  journalDuration: ['lua_tasks.journal.duration', 'histogram', 's', 'A store write that carried journal records'],
  journalSize: ['lua_tasks.journal.size', 'histogram', 'By', 'Journal and inbox record bytes of a store write'],
  routeDuration: ['lua_tasks.fleet.route.duration', 'histogram', 's', 'A fleet operation sent to another member'],
  activations: ['lua_tasks.fleet.activations', 'counter', '{activation}', 'Runtimes a fleet member opened'],
  takeovers: ['lua_tasks.fleet.takeovers', 'counter', '{takeover}', 'Names taken over from a member that died'],
  hibernations: ['lua_tasks.fleet.hibernations', 'counter', '{hibernation}', 'Idle runtimes a fleet member closed'],
});

const made = new WeakMap(); // meter -> its instruments: made once, shared by every runtime on it

function make(meter, [name, kind, unit, description]) {
  const o = { unit, description };
  switch (kind) {
    case 'counter':
      return meter.createCounter(name, o);
    case 'histogram':
      return meter.createHistogram(name, o);
    case 'gauge':
      return meter.createObservableGauge(name, o);
    default:
      return meter.createObservableCounter(name, o);
  }
}

/**
 * The instruments of `meter`, by METRICS key.
 * @param {object} meter
 * @returns {Record<keyof typeof METRICS, object>}
 */
function instrumentsOf(meter) {
  let out = made.get(meter);
  if (!out) {
    out = {};
    for (const [key, spec] of Object.entries(METRICS)) out[key] = make(meter, spec);
    made.set(meter, out);
  }
  return out;
}

module.exports = { ATTR, SPAN, METRICS, instrumentsOf };
