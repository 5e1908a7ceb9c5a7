// SPDX-License-Identifier: MIT
// RuntimeTelemetry: one runtime's metrics and spans (tasks, waits, store writes), made only with the telemetry option.
'use strict';

const { performance } = require('node:perf_hooks');
const { END, END_NAMES, WAIT_KINDS } = require('../runtime/task_codes');
const { ATTR, SPAN, instrumentsOf } = require('./instruments');
const { telemetryOf } = require('./api');

const ORIGIN = performance.timeOrigin; // read once: its getter showed in a task start's profile
const CLOSED = 'closed'; // a span's outcome when its runtime closed before the task ended
const FUNCTION_ENTRY = '(function)'; // a task started from a Lua function: no name to count it by

// Bytes a batch's writes carry: each key and value.
function bytesOf(writes) {
  let n = 0;
  if (writes === null) return 0;
  for (const w of writes) n += Buffer.byteLength(w.key) + (w.value ? w.value.length : 0);
  return n;
}

/**
 * What a runtime reports through OpenTelemetry. The Runtime tells it when a
 * task it started begins and ends; its CommitQueue, when a store write
 * begins and settles. Waits and restore failures are read from the runtime
 * only when the meter collects.
 */
class RuntimeTelemetry {
  #api;
  #tracer;
  #i; // the meter's instruments
  // Task -> { span, set (its attributes), t0, key } of a task started and not yet ended:
  // weak, as a Task holds its Runtime, which the meter must not keep alive.
  #live = new WeakMap();
  #byKey = new Map(); // task key -> the same record: a COMMIT's task found by its key; what close() ends
  // entry -> its frozen attributes: [started, then ended by END kind], so no
  // attributes object is made per task.
  #attrs = new Map();
  #base;
  #observe;
  #meter;

  /**
   * @param {{ api: object, meter: object, tracer: object }} t from telemetryOf
   * @param {object} rt the Runtime (held weakly: read for stats() when collected)
   * @param {object} native its native object (held weakly: read for waits() when collected)
   * @param {string|null} name the runtime's name (null: a runtime without a store)
   */
  constructor(t, rt, native, name) {
    this.#api = t.api;
    this.#tracer = t.tracer;
    this.#meter = t.meter;
    this.#i = instrumentsOf(t.meter);
    this.#base = name === null ? {} : { [ATTR.runtime]: name };
    // Weak: an unclosed runtime nothing else references can still be collected.
    const rtRef = new WeakRef(rt);
    const nativeRef = new WeakRef(native);
    const i = this.#i;
    this.#observe = (result) => {
      const r = rtRef.deref();
      const n = nativeRef.deref();
      if (r === undefined || n === undefined) {
        this.close(true);
        return;
      }
      let waits;
      let stats;
      try {
        waits = n.waits(); // [count per wait code..., oldest wait's age in ms or -1]
        stats = r.stats();
      } catch {
        return; // closed meanwhile
      }
      for (let code = 1; code < WAIT_KINDS.length; code++) {
        result.observe(i.waiting, waits[code], { ...this.#base, [ATTR.instruction]: WAIT_KINDS[code] });
      }
      const age = waits[WAIT_KINDS.length];
      result.observe(i.oldestWait, age < 0 ? 0 : age / 1000, this.#base);
      result.observe(i.restoreFailures, stats.restoreFailures, this.#base);
    };
    t.meter.addBatchObservableCallback(this.#observe, [i.waiting, i.oldestWait, i.restoreFailures]);
  }

  /**
   * The telemetry of a runtime given the (checked) `telemetry` option, or
   * null: the option is off, or the API is absent.
   * @returns {RuntimeTelemetry|null}
   */
  static of(option, rt, native, name) {
    const t = telemetryOf(option);
    return t === null ? null : new RuntimeTelemetry(t, rt, native, name);
  }

  #attributes(entry) {
    let a = this.#attrs.get(entry);
    if (a === undefined) {
      const started = Object.freeze({ ...this.#base, [ATTR.entry]: entry });
      a = [started];
      for (const kind of [END.done, END.failed, END.cancelled]) {
        a[kind + 1] = Object.freeze({ ...started, [ATTR.outcome]: END_NAMES[kind] });
      }
      if (this.#attrs.size < 1024) this.#attrs.set(entry, a); // entries are few; a bound all the same
    }
    return a;
  }

  /** A time to pass to started(): taken before the task's first run. */
  now() {
    return ORIGIN + performance.now();
  }

  /**
   * A task started from JS (or restored). Its span's parent is the context
   * active now: the JS caller's.
   * @param {number} key
   * @param {object} task the Task
   * @param {string|Function} fn its entry
   * @param {object|undefined} durable
   * @param {number} t0 from now(), taken before it first ran
   */
  started(key, task, fn, durable, t0) {
    const entry = typeof fn === 'string' ? fn : FUNCTION_ENTRY;
    const set = this.#attributes(entry);
    const attrs = set[0];
    this.#i.started.add(1, attrs);
    const span = this.#tracer.startSpan(
      SPAN.task,
      { startTime: t0, attributes: { ...attrs, [ATTR.taskId]: task.id, [ATTR.durable]: durable !== undefined } },
      this.#api.context.active(),
    );
    const rec = { span, set, t0, key, durable: durable !== undefined, closed: false };
    this.#live.set(task, rec);
    this.#byKey.set(key, rec);
  }

  /**
   * A task started() told of ended.
   * @param {object} task
   * @param {number} kind END.done, END.failed or END.cancelled
   * @param {*} value its error when it failed
   */
  ended(task, kind, value) {
    const rec = this.#live.get(task);
    if (rec === undefined) return;
    this.#live.delete(task);
    if (!rec.closed) this.#end(rec, kind, value);
  }

  #end(rec, kind, value) {
    this.#byKey.delete(rec.key);
    const outcome = END_NAMES[kind];
    const end = this.now();
    const attrs = rec.set[kind + 1];
    this.#i.ended.add(1, attrs);
    this.#i.duration.record((end - rec.t0) / 1000, attrs);
    const span = rec.span;
    span.setAttribute(ATTR.outcome, outcome);
    if (kind === END.failed) {
      const message = value && typeof value.message === 'string' ? value.message : String(value);
      if (value instanceof Error) span.recordException(value);
      span.setStatus({ code: this.#api.SpanStatusCode.ERROR, message });
    }
    span.end(end);
  }

  /**
   * A store write begins for `group` (CommitQueue's requests): its span's
   * parent is the first committing task's span (the others are linked), or
   * for rt.commit() the caller's context.
   * @param {{ task?: { key: number } }[]} group
   * @returns {{ span: object, t0: number }}
   */
  commitBegin(group) {
    let parent = null;
    const links = [];
    for (const m of group) {
      const rec = m.task ? this.#byKey.get(m.task.key) : undefined;
      if (rec === undefined) continue;
      if (parent === null) parent = rec.span;
      else links.push({ context: rec.span.spanContext() });
    }
    const { context, trace } = this.#api;
    const ctx = parent === null ? context.active() : trace.setSpan(context.active(), parent);
    const attributes = { ...this.#base, [ATTR.requests]: group.length };
    return { span: this.#tracer.startSpan(SPAN.commit, { attributes, links }, ctx), t0: performance.now() };
  }

  /**
   * The write commitBegin() began settled.
   * @param {{ span: object, t0: number }} begun
   * @param {Buffer|null} state the tasks.state snapshot it carried, if any
   * @param {object[]|null} keyed tasks.store's writes
   * @param {number|null} journal the bytes of durable tasks' records (keys and values), or null for none
   * @param {Error|null} error
   */
  commitEnd(begun, state, keyed, journal, error) {
    const seconds = (performance.now() - begun.t0) / 1000;
    const stateBytes = state === null ? 0 : state.length;
    const journalBytes = journal ?? 0;
    const attrs = error === null ? this.#base : { ...this.#base, [ATTR.errorType]: error.code || 'Error' };
    this.#i.commitDuration.record(seconds, attrs);
    this.#i.commitSize.record(stateBytes + bytesOf(keyed) + journalBytes, attrs);
    if (journal !== null) {
      this.#i.journalDuration.record(seconds, attrs);
      this.#i.journalSize.record(journalBytes, attrs);
    }
    const span = begun.span;
    span.setAttribute(ATTR.stateBytes, stateBytes);
    span.setAttribute(ATTR.journalBytes, journalBytes);
    if (error !== null) {
      span.recordException(error);
      span.setStatus({ code: this.#api.SpanStatusCode.ERROR, message: error.message });
    }
    span.end();
  }

  /**
   * The runtime is closing (before its tasks are cancelled): no more
   * collection from it. A durable task live now did not end: it goes on at
   * the next open (in a span of that run), so its span ends with the
   * outcome 'closed' and it is not counted as ended. The other tasks end
   * as the close cancels them. `all`: the runtime was collected, unclosed:
   * every span still open ends as 'closed'.
   * @param {boolean} [all]
   */
  close(all = false) {
    if (this.#observe === null) return;
    this.#meter.removeBatchObservableCallback(this.#observe, [
      this.#i.waiting,
      this.#i.oldestWait,
      this.#i.restoreFailures,
    ]);
    this.#observe = null;
    for (const rec of [...this.#byKey.values()]) {
      if (!rec.durable && !all) continue;
      rec.closed = true;
      this.#byKey.delete(rec.key);
      rec.span.setAttribute(ATTR.outcome, CLOSED);
      rec.span.end();
    }
  }
}

module.exports = { RuntimeTelemetry };
