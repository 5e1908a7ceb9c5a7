// SPDX-License-Identifier: MIT
// Where resources run on a fleet: each resource's runtime and the registry are names of the fleet, reached through a member.
'use strict';
//
// The registry (REGISTRY_NAME) and each slot's runtime are runtimes of the
// fleet's PostgreSQL store: hosted by one member at a time, activated on
// demand and hibernated when idle by the members themselves (lib/fleet),
// and reached by name with member.call, routed to their holder. Every
// member that may host them opens Resources with the same modules: the
// member gives the runtimes Resources own their options ([RESOURCES]), so a
// resource's runtime has the modules, the dispatch function and this
// member's Resources (its Lua calls resources in turn); the registry's has
// its Lua. Values cross members in the router's request rows (lib/fleet/router.js).

const { RESOURCES } = require('../fleet/member');
const { ROUTE_MAX } = require('../fleet/router');
const { makeError } = require('../errors');
const { isTransient } = require('../store/postgres/faults');
const { Registry, REGISTRY_NAME, setupRegistry, isSlotName } = require('./registry');
const { checkOptions } = require('./options');
const { emptyName } = require('./slots');
const { DISPATCH_FN, loadDispatch, requestKey, dispatchArgs, answerOf } = require('./dispatch');
/**
 * The largest values of one call on a fleet (as checkValues counts them): a
 * quarter of the router's bound on an encoded request or answer (ROUTE_MAX,
 * 64 MiB), as v8 writes a string holding any character past Latin-1 at two
 * bytes a character (twice its UTF-8 size when it is mostly ASCII), with room
 * for the operation around them.
 */
const FLEET_MAX_VALUE_BYTES = ROUTE_MAX / 4;

/**
 * Whether a fleet call's failure is no answer (it may have run there, or
 * not), not the outcome of what it ran: no member answered in time, or a run
 * whose end was not written (ERR_FLEET_TIMEOUT); the runtime closed under
 * it; a session to PostgreSQL ended or failed under the request, or under
 * the activation of the name here (its error's cause). A method of a
 * resource raises Lua errors, never these.
 * @param {unknown} e
 * @returns {boolean}
 */
function unanswered(e) {
  if (!e || typeof e !== 'object') return false;
  if (e.code === 'ERR_FLEET_TIMEOUT' || e.code === 'ERR_RUNTIME_CLOSED') return true;
  return isTransient(e) || (e.code === 'ERR_COMMIT_FAILED' && isTransient(e.cause));
}

class FleetHost {
  #member;
  #store;
  #counts = { activations: 0, hibernations: 0 };
  #listeners;

  /** Invocations are routed: each is run once by its request id (Resources gives every one an id). */
  get routed() {
    return true;
  }

  /** The store the resources' runtimes are kept in (Resources.tasks reads it). */
  get store() {
    return this.#store;
  }

  constructor(member, options) {
    this.#member = member;
    const resource = { ...options, setup: loadDispatch };
    const registry = { setup: setupRegistry };
    this.#store = member[RESOURCES]((name) => {
      if (name === REGISTRY_NAME) return registry;
      return isSlotName(name) ? resource : null;
    });
    this.#listeners = {
      activate: (e) => isSlotName(e.name) && this.#counts.activations++,
      hibernate: (e) => isSlotName(e.name) && this.#counts.hibernations++,
    };
    for (const [ev, fn] of Object.entries(this.#listeners)) member.on(ev, fn);
  }

  /**
   * Empties the slot `name` for a new resource.
   * @throws ERR_STORE_LOCKED when a member (this one too) still hosts its runtime: the caller takes another slot
   */
  async prepare(name) {
    if (this.#member.hosted().includes(name)) {
      throw makeError('ERR_STORE_LOCKED', `The slot "${name}" is still hosted here.`, { holder: null });
    }
    await emptyName(this.#store, name);
  }

  /**
   * Runs a method in the resource at slot `name`, wherever it is hosted
   * (see LocalHost.run): with `rid`, as the durable task of that request
   * (member.run), found again by a repeat wherever the slot is hosted then.
   */
  async run(name, id, module, method, args, reset = false, rid = undefined) {
    const a = dispatchArgs(reset, id, module, method, args);
    let out;
    try {
      out =
        rid === undefined
          ? await this.#member.call(name, DISPATCH_FN, ...a)
          : await this.#member.run(name, DISPATCH_FN, { key: requestKey(rid), args: a, name: method });
    } catch (e) {
      // Values the router cannot carry (they do not serialize, or are past its bound): the caller's error.
      if (e && (e.code === 'ERR_INVALID_ARG_VALUE' || e.code === 'ERR_STORE_LIMIT') && /routed/.test(e.message)) {
        throw e;
      }
      // Not answered: it may have run there, or not (docs/resources.md#on-a-fleet).
      if (unanswered(e)) return { failed: e, transport: true };
      return { failed: e };
    }
    return answerOf(out);
  }

  /** rt.resumeDurable(id, ...values) in the runtime `name`, wherever the fleet hosts it. */
  resume(name, id, values) {
    return this.#member.resume(name, id, ...values);
  }

  async created() {}

  /** A destroyed resource's runtime hibernates where it is once idle; its slot is emptied when reused. */
  async drop() {}

  /** { active (slots hosted by this member), activations, hibernations (here) }. */
  stats() {
    const active = this.#member.hosted().filter(isSlotName).length;
    return { active, ...this.#counts };
  }

  async close() {
    this.#member[RESOURCES](null);
    for (const [ev, fn] of Object.entries(this.#listeners)) this.#member.off(ev, fn);
  }
}

/**
 * Resources over a fleet member.
 * @param {object} member a fleet Member
 * @param {object} options as Resources.open
 * @param {(registry, makeHost, opts) => object} make the Resources constructor's
 * @returns {Promise<object>} the Resources
 */
async function openOnFleet(member, options, make) {
  const opts = checkOptions(options, { maxValueBytes: FLEET_MAX_VALUE_BYTES });
  return make(Registry.onFleet(member), (o) => new FleetHost(member, o), opts);
}

module.exports = { openOnFleet, unanswered, FLEET_MAX_VALUE_BYTES };
