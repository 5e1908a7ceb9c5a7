// SPDX-License-Identifier: MIT
// MemberTelemetry: a fleet member's metrics and spans (operations by name, routing, activations), made only with the telemetry option.
'use strict';

// A member's operation by name is a span (lua_tasks.fleet.<op>); each time
// it is sent to another member, a client span (lua_tasks.fleet.route) whose
// context travels in the request (the global propagator injects it: W3C
// trace context with an SDK's defaults); the member that serves it runs it
// under a server span (lua_tasks.fleet.serve) continuing that context, so
// the tasks it starts there are children of the caller's trace. Counts and
// routing latency come from the member's own events.

const { ATTR, SPAN, instrumentsOf } = require('./instruments');
const { telemetryOf, checkTelemetry } = require('./api');

class MemberTelemetry {
  #api;
  #tracer;

  /**
   * The telemetry of a member given the (checked) `telemetry` option, or null.
   * @param {ReturnType<typeof checkTelemetry>} option
   * @param {import('node:events').EventEmitter} member its 'activate', 'hibernate' and 'route' events are counted
   * @returns {MemberTelemetry|null}
   */
  static of(option, member) {
    const t = telemetryOf(option);
    return t === null ? null : new MemberTelemetry(t, member);
  }

  constructor(t, member) {
    this.#api = t.api;
    this.#tracer = t.tracer;
    const i = instrumentsOf(t.meter);
    member.on('activate', (e) => {
      i.activations.add(1, { [ATTR.runtime]: e.name, [ATTR.reason]: e.reason });
      if (e.reason === 'takeover') i.takeovers.add(1, { [ATTR.runtime]: e.name });
    });
    member.on('hibernate', (e) => i.hibernations.add(1, { [ATTR.runtime]: e.name }));
    member.on('route', (e) => i.routeDuration.record(e.ms / 1000, { [ATTR.runtime]: e.name, [ATTR.op]: e.op }));
  }

  // Runs fn() in a new active span; the span ends when its promise settles,
  // with an error status if it rejects.
  #inSpan(name, options, parent, fn) {
    const { SpanStatusCode } = this.#api;
    return this.#tracer.startActiveSpan(name, options, parent, async (span) => {
      try {
        return await fn();
      } catch (e) {
        if (e instanceof Error) span.recordException(e);
        span.setStatus({ code: SpanStatusCode.ERROR, message: e && e.message });
        throw e;
      } finally {
        span.end();
      }
    });
  }

  /**
   * An operation by name (spawn, send, resume, cancel, call, task), run by fn.
   * @returns {Promise<*>} what fn resolves to
   */
  operation(name, op, fn) {
    const attributes = { [ATTR.runtime]: name, [ATTR.op]: op };
    return this.#inSpan(SPAN.fleet(op), { attributes }, this.#api.context.active(), fn);
  }

  /**
   * Sends a request to member `to`: send(body) is called with the body
   * carrying the trace context (`tc`) of a client span around the send.
   * @returns {Promise<*>} what send resolves to
   */
  send(to, body, send) {
    const api = this.#api;
    const attributes = { [ATTR.runtime]: body.name, [ATTR.op]: body.op, [ATTR.member]: String(to) };
    const options = { kind: api.SpanKind.CLIENT, attributes };
    return this.#inSpan(SPAN.route, options, api.context.active(), () => {
      const tc = {};
      api.propagation.inject(api.context.active(), tc);
      return send({ ...body, tc });
    });
  }

  /**
   * Serves a routed request: run() under a server span continuing the
   * context the request carried (a request without one starts a trace).
   * @returns {Promise<*>} what run resolves to
   */
  serve(req, run) {
    const api = this.#api;
    const carried = req.tc !== null && typeof req.tc === 'object' ? req.tc : {};
    const parent = api.propagation.extract(api.ROOT_CONTEXT, carried);
    const attributes = { [ATTR.runtime]: req.name, [ATTR.op]: req.op };
    return this.#inSpan(SPAN.serve, { kind: api.SpanKind.SERVER, attributes }, parent, run);
  }
}

module.exports = { MemberTelemetry, checkTelemetry };
