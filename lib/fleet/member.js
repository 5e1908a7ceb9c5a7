// SPDX-License-Identifier: MIT
// Fleet members: processes (or Worker threads) sharing a PostgreSQL store, each name active on one of them.
'use strict';

// How and why (docs/fleet.md):
// - Hosting. A member hosts a name by opening its runtime on the shared
//   PostgresStore: the store's lease (token checked on every write) is what
//   makes a name active on at most one member at a time.
// - Operations by name (spawn, run, send, resume, cancel, call, task) run
//   where the name is: here if this member hosts it, else at its holder (the
//   lease row names the holder's store id; FleetRouter writes the request as
//   a row and wakes it by NOTIFY), else the name is activated here. A request
//   that was sent runs at most once: whoever runs it (the holder, or this
//   member after a takeover) claims its row in PostgreSQL first (FleetRouter).
// - The wake index (WakeIndex) says which names must run: active ones, and
//   hibernated ones from their earliest timer on. Every member polls it and
//   claims what is due and unheld (SKIP LOCKED): a hibernated name whose
//   timer is due, and the names of a member that died (after its lease, or
//   at once when its PostgreSQL session ended).
// - Hibernation. A runtime idle for idleMs whose live tasks are all durable
//   and waiting (on a timer past wakeAheadMs, INDEFINITELY, a message or
//   another task) is closed: everything of it is already durable.
// - One clock (FleetClock): every member measures its wall clock's offset
//   to PostgreSQL's and sets it on the runtimes it hosts, so the deadlines
//   one member records and another checks are on the same clock; the wake
//   index compares with PostgreSQL's now() itself.
// - Balance (Balancer). A member hosting two names more than the least
//   loaded one gives that member one name a round (balanceMs): it reserves
//   the name's wake row for it, closes the runtime and tells the fleet to
//   poll; only that member claims it until the reservation lapses.
// - leave() (SIGTERM) closes every runtime (their writes finish first) and
//   asks the other members to poll at once: they take the names over
//   without waiting for a lease to lapse.

const { EventEmitter } = require('node:events');
const { Runtime } = require('../runtime/runtime');
const { PostgresStore, isTransient, hearPool } = require('../store/postgres');
const { FleetRouter } = require('./router');
const { WakeIndex } = require('./wake_index');
const { FleetClock } = require('./clock');
const { Balancer } = require('./balance');
const { checkJoin } = require('./options');
const { makeError, typeName } = require('../errors');
const { checkName } = require('../store/contract');
const { checkOp, badEntry, unclaimable, execute, rebuild } = require('./operations');
const { ROUTE, parseAddress } = require('../runtime/address');
const { MemberTelemetry } = require('../telemetry/fleet');

const JOIN = Symbol('join');
// Resources on a fleet (lib/resources/fleet_host.js) give the runtimes they
// own their options, and empty a slot through this member's store.
const RESOURCES = Symbol('lua-tasks.fleet.resources');
const START = Symbol('start');
const CLAIM_BATCH = 16;
const LATENCY_KEPT = 1024; // routed requests whose latency stats() reports
// Waits a hibernated runtime can be closed at: a timer (woken by the index),
// or something only an operation by name ends.
const SLEEPING = new Set(['FOR', 'UNTIL_TIME', 'UNTIL_NEXT', 'INDEFINITELY', 'RECEIVE', 'JOIN']);

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * A member of a fleet: hosts named runtimes on a shared PostgreSQL store and
 * serves operations by name for the whole fleet. Made by Fleet.join().
 * Events: 'activate' { name, token, reason, ms }, 'hibernate' { name, wakeAt },
 * 'lost' { name, token }, 'handover' { name, to } (given to another member to
 * balance the fleet), 'route' { name, op, ms }, 'storehealth' { name, ok, error?,
 * since, downMs? } (a hosted runtime's writes fail transiently, or work again:
 * docs/fleet.md#faults), 'error' (a background failure, an outage's first
 * failed write included; without a listener it becomes a process warning).
 */
class Member extends EventEmitter {
  #o;
  #pg;
  #pool;
  #store;
  #router;
  #wake;
  #balance;
  #clock = new FleetClock();
  // name -> { rt, token, state, settled, lastUsed, offsetMs (its clock's, as last set),
  //   since (when it became active here), busy (operations running on it) }
  #hosted = new Map();
  #routes = new Map(); // name -> store id of its holder, as last seen
  #poll = null;
  #polling = null;
  #pollAgain = false;
  #left = null;
  #stats = { activations: 0, hibernations: 0, lost: 0, routed: 0, served: 0, takeovers: 0, handovers: 0 };
  #latencies = [];
  #tel = null; // MemberTelemetry with the telemetry option (docs/operations.md#metrics-and-traces)
  #owned = null; // (name) => Runtime options of a runtime Resources own, or null: [RESOURCES]

  constructor(o, token) {
    super();
    if (token !== JOIN) throw new TypeError('Use Fleet.join(options) to make a fleet member.');
    this.#o = o;
  }

  /**
   * Now on the fleet's clock (PostgreSQL's), in ms since the epoch as
   * Date.now(): what a hosted runtime's os.time and deadlines read
   * (docs/fleet.md#one-clock).
   * @returns {number}
   */
  now() {
    return this.#clock.now();
  }

  /** This member's id (its store's: the holder records of its leases carry it). */
  get id() {
    return this.#store.id;
  }

  async [START]() {
    const o = this.#o;
    this.#tel = MemberTelemetry.of(o.telemetry, this);
    this.#pg = require('pg');
    this.#pool = new this.#pg.Pool({ connectionString: o.connectionString, max: o.max || 10, allowExitOnIdle: true });
    hearPool(this.#pool); // its clients' errors too: an unheard one kills the process
    this.#store = new PostgresStore({ pool: this.#pool, schema: o.schema, leaseMs: o.leaseMs });
    // The store's schema and leases table, then the wake index beside them.
    await this.#store.ready();
    await this.#clock.measure(this.#pool); // before anything is hosted: every runtime opens on it
    this.#wake = new WakeIndex(this.#store.schema);
    await this.#wake.create(this.#pool);
    this.#balance = new Balancer({
      schema: this.#store.schema,
      id: this.#store.id,
      everyMs: o.balanceMs,
      leaseMs: o.leaseMs,
    });
    await this.#balance.create(this.#pool);
    this.#router = new FleetRouter({
      pg: this.#pg,
      pool: this.#pool,
      connection: { connectionString: o.connectionString },
      storeId: this.#store.id,
      schema: this.#store.schema,
      onRequest: (req) => this.#serve(req),
      onWake: () => {
        this.#routes.clear(); // a member left: the names it held move
        this.#pollSoon();
      },
      onError: (e) => this.#report(e),
    });
    await this.#router.start();
    this.#poll = setInterval(() => this.#pollSoon(), o.pollMs);
    this.#poll.unref();
    this.#pollSoon();
  }

  #report(e) {
    if (this.listenerCount('error') > 0) this.emit('error', e);
    else process.emitWarning(`lua-tasks fleet member: ${e && e.message}`, { code: 'LUA_TASKS_FLEET' });
  }

  #checkOpen() {
    if (this.#left) throw makeError('ERR_RUNTIME_CLOSED', 'This fleet member left (member.leave()).');
  }

  // ------------------------------------------------------------ operations

  /**
   * Starts a durable task in the runtime `name`, wherever it is hosted;
   * resolves once its start is durable. With `key`, a second spawn of the
   * same key in that runtime returns the first task's id.
   * @returns {Promise<string>} the task's id
   */
  spawn(name, entry, options = {}) {
    if (typeof entry !== 'string') return Promise.reject(badEntry(entry));
    if (options === null || typeof options !== 'object') {
      return Promise.reject(
        makeError(
          'ERR_INVALID_ARG_TYPE',
          `The "options" argument of member.spawn must be an object { key?, args? }. Received ${typeName(options)}.`,
        ),
      );
    }
    return this.#op(name, 'spawn', { entry, key: options.key, args: options.args || [] });
  }

  /**
   * Starts a durable task in the runtime `name`, wherever it is hosted, or
   * finds the one `key` names there (live, or ended and retained), and
   * resolves with its result (rejects with its error). Run again with the
   * same key, after a timeout or a crash of either side, it answers the
   * same task's outcome: the task runs once (docs/fleet.md#run-once).
   * @param {string} name
   * @param {string} entry a global name or a "module.fn" path
   * @param {{ key: string, args?: unknown[], name?: string }} options
   * @returns {Promise<unknown[]>} the task's return values
   * @throws ERR_FLEET_TIMEOUT when not answered: no member answered in time,
   *   or the holder could not write the task's end (run it again); else the task's error
   */
  run(name, entry, options) {
    if (typeof entry !== 'string') return Promise.reject(badEntry(entry));
    if (options === null || typeof options !== 'object' || typeof options.key !== 'string') {
      return Promise.reject(
        makeError(
          'ERR_INVALID_ARG_TYPE',
          `The "options" argument of member.run must be an object { key, args?, name? } with a string key (the task a repeat finds). Received ${options && typeof options === 'object' ? `key ${typeName(options.key)}` : typeName(options)}.`,
        ),
      );
    }
    return this.#op(name, 'run', { entry, key: options.key, args: options.args || [], label: options.name });
  }

  /** rt.sendDurable in the runtime `name`: resolves true once the message is durable. */
  sendDurable(name, id, ...values) {
    return this.#op(name, 'send', { id, values });
  }

  /** Alias of sendDurable. */
  send(name, id, ...values) {
    return this.sendDurable(name, id, ...values);
  }

  /**
   * rt.resumeDurable in the runtime `name`: true once the wake is written.
   * Given an address ("<id>@<name>": rt.address, tasks.address) in place of
   * `name` and `id`, the task it names: member.resume(address, ...values).
   */
  resume(name, ...rest) {
    const a = parseAddress(name);
    if (a) return this.#op(a.name, 'resume', { id: a.id, values: rest });
    const [id, ...values] = rest;
    return this.#op(name, 'resume', { id, values });
  }

  /** rt.cancel in the runtime `name`; resolves once the cancellation is durable. */
  cancel(name, id, reason) {
    return this.#op(name, 'cancel', { id, reason });
  }

  /** rt.call(fn, ...args) in the runtime `name` (fn: a global name or "module.fn"). */
  call(name, fn, ...args) {
    if (typeof fn !== 'string') {
      return Promise.reject(
        makeError(
          'ERR_INVALID_ARG_TYPE',
          `A fleet call names its Lua function by a global name or a "module.fn" path. Received ${typeName(fn)}.`,
        ),
      );
    }
    return this.#op(name, 'call', { fn, args });
  }

  /** rt.task(id) in the runtime `name`. */
  task(name, id) {
    return this.#op(name, 'task', { id });
  }

  /**
   * The runtime `name`, hosted here: activated here if no member holds it.
   * @returns {Promise<Runtime>}
   * @throws ERR_STORE_LOCKED if another member holds it
   */
  async runtime(name) {
    checkName(name);
    this.#checkOpen();
    for (;;) {
      const h = this.#hosted.get(name);
      if (h && h.state === 'active') {
        h.lastUsed = Date.now();
        return h.rt;
      }
      if (h) await h.settled;
      else await this.#activate(name, 'call');
    }
  }

  /**
   * For Resources on this member: `options(name)` answers the Runtime
   * options of the runtimes they own (null for others); null unsets it.
   * @returns {object} this member's store
   */
  [RESOURCES](options) {
    this.#owned = options;
    return this.#store;
  }

  // An operation by name; with telemetry, in a span of its own.
  #op(name, op, args) {
    if (this.#tel === null) return this.#route(name, op, args);
    return this.#tel.operation(name, op, () => this.#route(name, op, args));
  }

  // router.request; with telemetry, in a client span whose context the request carries.
  #request(to, body, ms, id, first) {
    if (this.#tel === null) return this.#router.request(to, body, ms, id, first);
    return this.#tel.send(to, body, (traced) => this.#router.request(to, traced, ms, id, first));
  }

  // Runs an operation where the name is. Once it has been sent to another
  // member, its request row exists and whoever runs it claims it first: so
  // does this member before running it itself (docs/fleet.md#at-most-once).
  async #route(name, op, args) {
    checkOp(name, op);
    this.#checkOpen();
    const deadline = Date.now() + this.#o.routeTimeoutMs;
    const requestId = this.#router.newId(); // each time it is sent: served once
    let sent = false; // its request row exists
    let claimedBy = null; // the member that claimed it: only its answer counts
    let delay = 10;
    for (;;) {
      let holder = claimedBy;
      let ownLease = false; // its lease names this member, which hosts no runtime of it
      if (!holder) {
        const h = this.#hosted.get(name);
        if (h && h.state === 'active') {
          if (sent) {
            const c = await this.#router.claim(requestId);
            if (!c.ok) {
              if (!c.by) throw unclaimable(name, op);
              claimedBy = c.by;
              continue;
            }
          }
          h.lastUsed = Date.now();
          const r = await this.#run(name, h, op, args);
          if (!r.moved) return r.value;
          if (sent) await this.#router.unclaim(requestId); // not run: whoever hosts it now claims it
          continue;
        }
        if (h) {
          await h.settled;
          continue;
        }
        holder = this.#routes.get(name);
        if (holder === undefined) {
          try {
            await this.#activate(name, 'call');
            continue;
          } catch (e) {
            if (!e || e.code !== 'ERR_STORE_LOCKED') throw e;
            // A lease naming this member, which hosts no runtime of the name
            // (one closing here whose last write has not settled, or a
            // release that did not land: the row lapses within leaseMs), is
            // waited out, never sent to: this member claims as one, serving
            // or asking, so its serving side and the fallback below would
            // both run the request.
            const by = e.holder && e.holder.store;
            ownLease = by === this.id;
            holder = ownLease ? null : by;
          }
        }
      }
      const left = deadline - Date.now();
      if (holder && left > 0) {
        const start = Date.now();
        let answer;
        try {
          answer = await this.#request(holder, { name, op, args }, left, requestId, !sent);
          sent = true;
        } catch (e) {
          this.#routes.delete(name);
          throw e;
        }
        if (!answer.unreached && !answer.moved) {
          if (!claimedBy) this.#routes.set(name, holder);
          this.#routed(name, op, Date.now() - start);
          if (answer.error) throw rebuild(answer.error);
          return answer.value;
        }
        // Not heard (the holder is gone, deaf or busy), or it no longer
        // hosts the name (hibernating, dropping it; it gave its claim back):
        // look again after a pause; the lease says who holds it by then.
        if (answer.moved) claimedBy = null;
        this.#routes.delete(name);
        if (Date.now() + delay < deadline) {
          await sleep(delay);
          delay = Math.min(delay * 2, 200);
        }
        continue;
      }
      this.#routes.delete(name);
      if (Date.now() + delay >= deadline) {
        throw makeError(
          'ERR_FLEET_TIMEOUT',
          claimedBy
            ? `The ${op} of "${name}" was claimed by another member (${claimedBy}), which did not answer within ${this.#o.routeTimeoutMs} ms: it may still be served there, and nowhere else.`
            : ownLease
              ? `"${name}" could not be activated within ${this.#o.routeTimeoutMs} ms: its lease still names this member, which hosts no runtime of it (one closing here whose last write has not settled, or a release that did not land: the lease lapses within leaseMs).`
              : `"${name}" could not be reached within ${this.#o.routeTimeoutMs} ms: it is held by a member that does not answer, or is being taken over.`,
          { runtime: name, op },
        );
      }
      await sleep(delay); // being taken over: its holder record is not there yet
      delay = Math.min(delay * 2, 200);
    }
  }

  #routed(name, op, ms) {
    this.#stats.routed++;
    this.#latencies.push(ms);
    if (this.#latencies.length > LATENCY_KEPT) this.#latencies.shift();
    if (this.listenerCount('route') > 0) this.emit('route', { name, op, ms });
  }

  // A request from another member: served if this member hosts the name,
  // else "moved" (the asker looks again).
  async #serve(req) {
    const h = this.#hosted.get(req.name);
    if (!h || this.#left) return { moved: true };
    if (h.state !== 'active') await h.settled;
    const now = this.#hosted.get(req.name);
    if (!now || now.state !== 'active') return { moved: true };
    now.lastUsed = Date.now();
    const run = () => this.#run(req.name, now, req.op, req.args);
    const r = await (this.#tel === null ? run() : this.#tel.serve(req, run));
    if (r.moved) return r;
    this.#stats.served++;
    return r.value;
  }

  // Runs an operation on a runtime hosted here: { value }, or { moved } when
  // the runtime turned out not to hold the name. An answer of "no such task"
  // (false, null) changes nothing, so no fence refuses it; a runtime whose
  // name was taken over before it knew (its lock session ended, the member
  // paused) would give it for a task the new holder started, and a send
  // answered false is a message lost. So the lease is read before such an
  // answer: not this token's any more, the runtime is dropped and the
  // operation goes where the name is now.
  async #run(name, h, op, args) {
    let value;
    h.busy++; // not handed over meanwhile
    try {
      value = await execute(name, h.rt, op, args);
    } catch (e) {
      // The runtime closed (dropped, handed over) before a send or resume
      // was made (sendDurable and resumeDurable reject so only then: while
      // its task was read from the store, or before the call): it goes
      // where the name is now.
      if (e && e.code === 'ERR_RUNTIME_CLOSED' && (op === 'send' || op === 'resume')) return { moved: true };
      throw e;
    } finally {
      h.busy--;
    }
    const none =
      op === 'task' ? value === null || value === undefined : value === false && op !== 'call' && op !== 'run';
    if (!none || (await this.#wake.holds(this.#pool, name, h.token))) return { value };
    if (this.#hosted.get(name) === h) this.#drop(name, h);
    return { moved: true };
  }

  // ------------------------------------------------------------ hosting

  // Opens the runtime of `name` here (the store's lease makes it ours).
  async #activate(name, reason) {
    this.#checkOpen();
    let settle;
    const entry = { rt: null, token: 0, state: 'activating', lastUsed: Date.now(), offsetMs: 0, since: 0, busy: 0 };
    entry.settled = new Promise((resolve) => {
      settle = resolve;
    });
    this.#hosted.set(name, entry);
    const start = Date.now();
    // Open and not yet active: closed if the activation fails, or its lease
    // would be renewed by the store for a runtime nobody here serves (every
    // request answered "moved", the name stuck until the member leaves).
    let opened = null;
    try {
      const owned = this.#owned && this.#owned(name);
      const extra = owned || (typeof this.#o.runtime === 'function' ? await this.#o.runtime(name) : this.#o.runtime);
      // Its Lua resumes a task of any runtime of the fleet by its address.
      const route = (to, id, ...values) => this.resume(to, id, ...values);
      const opts = { telemetry: this.#o.telemetry, ...extra, name, store: this.#store, [ROUTE]: route };
      const rt = await Runtime.open({ ...opts, clockOffsetMs: this.#clock.offsetMs });
      opened = rt;
      if (this.#left) {
        opened = null;
        await rt.close(); // left meanwhile: leave() saw this activation pending and waits for it
        this.#checkOpen();
      }
      // Its store's writes failing transiently (PostgreSQL unreachable):
      // told as the member's, once per outage and name.
      rt.on('storehealth', (e) => {
        if (this.listenerCount('storehealth') > 0) this.emit('storehealth', { name, ...e });
        if (!e.ok) this.#report(e.error);
      });
      const lease = this.#store.lease(name);
      entry.rt = rt;
      entry.token = lease ? lease.token : 0;
      if (!lease || !(await this.#wake.active(this.#pool, name, entry.token))) {
        // Taken over between the open and now: not ours after all.
        opened = null;
        rt.closeSync();
        throw makeError('ERR_STORE_LOCKED', `Runtime "${name}" was taken over while it was being activated here.`, {
          holder: null,
        });
      }
      entry.state = 'active';
      entry.since = Date.now();
      entry.offsetMs = this.#clock.offsetMs;
      rt.setClockOffset(entry.offsetMs); // measured again while it opened
      opened = null;
      this.#routes.delete(name);
      this.#stats.activations++;
      if (reason === 'takeover') this.#stats.takeovers++;
      this.emit('activate', { name, token: entry.token, reason, ms: Date.now() - start });
      return rt;
    } catch (e) {
      if (opened) opened.closeSync(); // its wake row's write failed (the server restarting, say)
      if (this.#hosted.get(name) === entry) this.#hosted.delete(name);
      throw e;
    } finally {
      settle();
    }
  }

  #pollSoon() {
    if (this.#left) return;
    if (this.#polling) {
      this.#pollAgain = true;
      return;
    }
    this.#polling = this.#pollOnce()
      .catch((e) => this.#report(e))
      .finally(() => {
        this.#polling = null;
        if (this.#pollAgain) {
          this.#pollAgain = false;
          this.#pollSoon();
        }
      });
  }

  // One look: the clock, leases lost, runtimes idle, names due.
  async #pollOnce() {
    if (this.#clock.due()) await this.#measureClock();
    const now = Date.now();
    for (const [name, h] of this.#hosted) {
      if (h.state !== 'active') continue;
      const lease = this.#store.lease(name);
      if (!lease || lease.lost || lease.token !== h.token || lease.validUntil <= now) {
        this.#drop(name, h);
        continue;
      }
      if (h.offsetMs !== this.#clock.offsetMs) {
        h.offsetMs = this.#clock.offsetMs;
        h.rt.setClockOffset(h.offsetMs);
      }
      if (this.#o.idleMs > 0 && now - h.lastUsed >= this.#o.idleMs) {
        await this.#hibernate(name, h);
      }
    }
    if (this.#left) return;
    await this.#router.prune();
    const due = await this.#wake.claimDue(this.#pool, CLAIM_BATCH, this.#o.leaseMs, this.id);
    await Promise.all(
      due.map(({ name, takeover, handed }) =>
        this.#hosted.has(name)
          ? null
          : this.#activate(name, handed ? 'balance' : takeover ? 'takeover' : 'due').catch((e) => {
              // Held elsewhere after all, or this member began to leave meanwhile.
              if (!e || (e.code !== 'ERR_STORE_LOCKED' && !this.#left)) this.#report(e);
            }),
      ),
    );
    if (due.length === CLAIM_BATCH) this.#pollAgain = true;
    if (this.#balance.due(Date.now())) await this.#balanceRound();
  }

  // ------------------------------------------------------------ balance

  // One round (docs/fleet.md#balance): this member's count written, and one
  // name given to the least loaded member if this one hosts two more.
  async #balanceRound() {
    let mine = 0;
    for (const h of this.#hosted.values()) if (h.state === 'active' || h.state === 'activating') mine++;
    const to = await this.#balance.round(this.#pool, mine, this.#wake.pendingFor('$1'));
    if (!to || this.#left) return;
    const name = this.#movable();
    if (name !== null) await this.#handOver(name, this.#hosted.get(name), to);
  }

  // The name to give away: the least recently used of those that may move.
  // Never one mid-activation, -hibernation or -handover, one running an
  // operation, one with an ephemeral task (closing would end it), nor one
  // that came here less than a round ago (no name bounces between members).
  #movable() {
    const now = Date.now();
    let best = null;
    for (const [name, h] of this.#hosted) {
      if (h.state !== 'active' || h.busy > 0 || now - h.since < this.#o.balanceMs) continue;
      const s = h.rt.stats();
      if (s.tasks !== s.durableTasks) continue;
      if (best === null || h.lastUsed < this.#hosted.get(best).lastUsed) best = name;
    }
    return best;
  }

  // Gives `name` to member `to`: its wake row reserved for `to` (under this
  // token), the runtime closed (its writes land first, then the lease is let
  // go), and the fleet told to poll now. Operations meanwhile wait for it,
  // then go where the name is.
  async #handOver(name, h, to) {
    let settle;
    h.state = 'moving';
    h.settled = new Promise((resolve) => {
      settle = resolve;
    });
    try {
      if (!(await this.#wake.reserve(this.#pool, name, h.token, to, this.#o.leaseMs))) {
        h.state = 'active';
        this.#drop(name, h); // its token no longer holds the name
        return;
      }
      await this.#balance.credit(this.#pool, to).catch((e) => this.#report(e));
      try {
        await h.rt.close();
      } finally {
        this.#hosted.delete(name);
      }
      this.#stats.handovers++;
      this.emit('handover', { name, to });
      await this.#router.wakeAll().catch((e) => this.#report(e));
    } catch (e) {
      if (this.#hosted.get(name) === h) h.state = 'active'; // not reserved: it stays here
      this.#report(e);
    } finally {
      settle();
    }
  }

  // Measures the clock's offset again (#pollOnce sets it on each runtime).
  // PostgreSQL out of reach: the last offset stays (the store's health says
  // so); anything else is reported.
  async #measureClock() {
    try {
      await this.#clock.measure(this.#pool);
    } catch (e) {
      if (!isTransient(e)) this.#report(e);
    }
  }

  // Its lease is gone: another member may hold the name now. Its runtime
  // stops at once (its writes would be refused anyway).
  #drop(name, h) {
    this.#hosted.delete(name);
    h.state = 'lost';
    this.#stats.lost++;
    h.rt.closeSync();
    this.emit('lost', { name, token: h.token });
  }

  // Closes an idle runtime whose live tasks all sleep durably; the wake index
  // wakes it at its earliest timer. Returns whether it did.
  async #hibernate(name, h) {
    const rt = h.rt;
    const s = rt.stats();
    if (s.tasks !== s.durableTasks) return false; // an ephemeral task would die
    let wakeAt = null;
    for (const t of rt.tasks()) {
      if (t.status !== 'waiting' || !SLEEPING.has(t.waiting.instruction)) return false;
      // Every deadline a waiting task has is its own wake time, whatever
      // it waits for (a tasks.receive(timeout) too).
      if (t.waiting.until) {
        const at = t.waiting.until.getTime();
        if (wakeAt === null || at < wakeAt) wakeAt = at;
      }
    }
    // until is on the runtime's clock, the fleet's: so is the index's wake_at.
    if (wakeAt !== null && wakeAt - this.#clock.now() < this.#o.wakeAheadMs) return false;
    let settle;
    h.state = 'hibernating';
    h.settled = new Promise((resolve) => {
      settle = resolve;
    });
    try {
      await rt.commit(); // every journal record written
      const at = wakeAt === null ? null : new Date(wakeAt - this.#o.wakeAheadMs / 2);
      const ours = await this.#wake.hibernate(this.#pool, name, h.token, at);
      if (ours) await rt.close();
      else rt.closeSync(); // not ours any more
      this.#hosted.delete(name);
      if (ours) {
        this.#stats.hibernations++;
        this.emit('hibernate', { name, wakeAt: at });
      }
      return true;
    } catch (e) {
      h.state = 'active';
      this.#report(e);
      return false;
    } finally {
      settle();
    }
  }

  // ------------------------------------------------------------ observing

  /** The names this member hosts now. */
  hosted() {
    return [...this.#hosted].filter(([, h]) => h.state === 'active').map(([name]) => name);
  }

  /**
   * What this member did: counts since it joined, the names it hosts with
   * their lease tokens, and the latency of its last routed requests.
   */
  stats() {
    const sorted = [...this.#latencies].sort((a, b) => a - b);
    const at = (p) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] : null);
    const leases = {};
    for (const [name, h] of this.#hosted) if (h.state === 'active') leases[name] = h.token;
    return {
      id: this.id,
      hosted: Object.keys(leases).length,
      leases,
      ...this.#stats,
      claimsLost: this.#router.claimsLost,
      clock: { offsetMs: this.#clock.offsetMs, rttMs: this.#clock.rttMs },
      routeLatencyMs: { p50: at(0.5), p99: at(0.99), samples: sorted.length },
    };
  }

  // ------------------------------------------------------------ leaving

  /**
   * Leaves the fleet (for SIGTERM): stops taking names, closes every runtime
   * it hosts (their writes finish; durable tasks stay in PostgreSQL), and
   * asks the other members to take them over now. Idempotent.
   * @returns {Promise<void>}
   */
  leave() {
    if (!this.#left) this.#left = this.#leave();
    return this.#left;
  }

  async #leave() {
    clearInterval(this.#poll);
    if (this.#polling) await this.#polling.catch(() => {});
    // A runtime that can hibernate does (it wakes at its timer, anywhere);
    // the others stay active in the index: another member takes them now.
    const closing = [];
    for (const [name, h] of [...this.#hosted]) {
      if (h.state !== 'active') await h.settled;
      const now = this.#hosted.get(name);
      if (!now || now.state !== 'active') continue;
      closing.push(
        this.#hibernate(name, now)
          .then((done) => done || now.rt.close())
          .catch((e) => this.#report(e)),
      );
    }
    await Promise.all(closing);
    this.#hosted.clear();
    if (this.#balance) await this.#balance.leave(this.#pool).catch(() => {});
    // What a join that failed half-way made is there to undo too.
    if (this.#router) {
      await this.#router.wakeAll().catch(() => {});
      await this.#router.close();
    }
    if (this.#store) await this.#store.close();
    if (this.#pool) await this.#pool.end();
  }
}

/** Fleet.join(options): a new member. */
const Fleet = {
  /**
   * Joins the fleet of a PostgreSQL database (schema): the tables are made
   * if missing, this member listens for routed requests and takes due names.
   * @param {{ connectionString: string, schema?: string, leaseMs?: number, runtime?: object|Function,
   *   idleMs?: number, wakeAheadMs?: number, pollMs?: number, routeTimeoutMs?: number, balanceMs?: number,
   *   max?: number, telemetry?: boolean|{ meterProvider?: object, tracerProvider?: object } }} options
   * @returns {Promise<Member>}
   */
  async join(options) {
    const o = checkJoin(options);
    const m = new Member(o, JOIN);
    try {
      await m[START]();
    } catch (e) {
      await m.leave().catch(() => {});
      throw e;
    }
    return m;
  },
};

module.exports = { Fleet, Member, RESOURCES };
