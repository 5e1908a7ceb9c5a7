// SPDX-License-Identifier: MIT
// Resources: persisted instances of Lua modules, addressed by id and by paths, invoked by method name (docs/resources.md).
'use strict';
//
// A resource is a named runtime of the store (its slot's: registry.js) that
// has the embedder's modules; its module is one of them. The registry says
// which ids exist, their module, slot and paths, and counts them against
// maxResources and maxPaths. Where resources run is the host's: LocalHost
// (embedded) or FleetHost (on a fleet); a method runs as a task of the
// resource (lib/lua/resource_dispatch.lua).

const crypto = require('node:crypto');
const { toStore } = require('../store/directory');
const { makeError, invalidType } = require('../errors');
const { CODES } = require('./codes');
const { checkPath, patternMatcher } = require('./paths');
const { checkValues } = require('./values');
const { Registry, slotName } = require('./registry');
const { registerHost } = require('./bridge');
const { LocalHost } = require('./local_host');
const { openOnFleet, unanswered } = require('./fleet_host');
const { Member } = require('../fleet/member');
const { OPTIONS, checkOptions } = require('./options');
const { listTasks, listOptions } = require('../runtime/task_list');
const { checkTelemetry, telemetryOf } = require('../telemetry/api');
const { ATTR, SPAN } = require('../telemetry/instruments');
const { parseAddress } = require('../runtime/address');

// A request with an id not answered is sent again after RETRY_MS, doubling to RETRY_MAX_MS.
const RETRY_MS = 100;
const RETRY_MAX_MS = 5000;
// The longest request id: it is a durable task's key in the resource's runtime.
const MAX_REQUEST_ID = 200;

// Tries of a create whose free slot turned out to be still in use (its last
// runtime closing, or held by a member that has not let it go).
const SLOT_TRIES = 8;

function checkString(fn, what, v) {
  if (typeof v !== 'string') throw invalidType(`${fn}: the ${what}`, 'a string', v);
  return v;
}

function checkRequestId(fn, v) {
  checkString(fn, 'request id', v);
  const n = Buffer.byteLength(v);
  if (n === 0 || n > MAX_REQUEST_ID) {
    throw makeError(
      'ERR_OUT_OF_RANGE',
      `${fn}: the request id must be 1 to ${MAX_REQUEST_ID} bytes. Received ${n} bytes.`,
    );
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// The cursor of the path after `path` in `paths` (sorted entries), or null.
function nextPath(paths, path) {
  const i = paths.findIndex(([p]) => p === path);
  return i + 1 < paths.length ? `${paths[i + 1][0]}\n` : null;
}

class Resources {
  #registry;
  #host; // where resources run: LocalHost (embedded), FleetHost (lib/resources/fleet_host.js)
  #modules; // name -> Lua source, the embedder's list
  #o; // the checked options
  #closed = false;
  #tel; // { api, tracer } when the resources' runtimes have the telemetry option, else null

  constructor(token, registry, makeHost, opts) {
    if (token !== OPTIONS) throw new TypeError('Resources are opened with await Resources.open(store, options).');
    this.#registry = registry;
    this.#modules = opts.modules;
    this.#o = opts;
    this.#tel = telemetryOf(checkTelemetry(opts.runtime.telemetry, 'options.runtime.telemetry'));
    // What Lua gets: each answer as a list (lib/lua/resources.lua unpacks it).
    registerHost(this, {
      create: (m, p, ...a) => this.create(m, p, ...a).then((o) => [o.id, o.code]),
      invoke: (id, m, ...a) => this.invoke(id, m, ...a).then(luaAnswer),
      invokePath: (p, m, ...a) => this.invokePath(p, m, ...a).then(luaAnswer),
      invokeOnce: (rid, id, m, ...a) => this.invokeOnce(rid, id, m, ...a).then(luaAnswer),
      resolve: (p) => this.#resolve(p),
      resumeAt: (name, id, ...values) => this.#resumeAt(name, id, values),
      destroy: (id) => this.destroy(id).then((o) => [o.ok, o.code]),
      list: (pattern) => this.list(pattern).then((o) => [new Map(Object.entries(o)), CODES.OK]),
      link: (id, alias) => this.link(id, alias),
      linkPath: (p, alias) => this.linkPath(p, alias),
      unlink: (p) => this.unlink(p).then((o) => [o.id, o.removed, o.code]),
    });
    // Each resource's runtime has the modules and can call resources itself.
    this.#host = makeHost({ ...opts.runtime, modules: opts.modules, resources: this });
  }

  /**
   * Opens the resources of a store: its registry and its lease (one
   * Resources per store at a time); or, given a fleet member, the fleet's
   * (docs/resources.md#on-a-fleet).
   * @param {string|object} where a directory path, a store (DirectoryStore), or a fleet Member
   * @param {{ modules: Record<string, string>, idleMs?: number, maxValueBytes?: number,
   *   maxResources?: number, maxPaths?: number, runtime?: object }} options
   *   modules: name -> Lua source, the modules resources are made from (and
   *   that every resource can require); idleMs (default 30000): how long a
   *   resource with no call and no task stays active; maxValueBytes (default
   *   the store's limit, at most 64 MiB): the bound on the values of one
   *   call; maxResources (default 10000) and maxPaths (default 50000): how
   *   many resources and paths (links included) the store may hold; runtime:
   *   further options of each resource's runtime
   * @returns {Promise<Resources>}
   * @throws ERR_STORE_LOCKED when another Resources holds the store's registry; a TypeError for a bad option
   */
  static async open(where, options) {
    if (where instanceof Member) {
      return openOnFleet(
        where,
        options,
        (registry, makeHost, opts) => new Resources(OPTIONS, registry, makeHost, opts),
      );
    }
    const s = toStore(where);
    const opts = checkOptions(options, s.limits);
    const registry = await Registry.open(s);
    return new Resources(OPTIONS, registry, (o) => new LocalHost(s, o, opts.idleMs), opts);
  }

  #check() {
    if (this.#closed) {
      throw makeError('ERR_INVALID_STATE', 'The Resources object is closed (its close() was called).');
    }
  }

  /**
   * Creates a resource of `module` at `path`: its slot's runtime is emptied
   * and opened, the module's `init(...)` (if it has one) runs with `args` as
   * a task, and its state and the registry entry are written before this resolves.
   * @returns {Promise<{ id: string|null, code: string }>} code OK, or DUPLICATE_RESOURCE (path taken; id null)
   * @throws ERR_INVALID_ARG_VALUE (unknown module, a bad path, values that
   *   cannot persist), ERR_STORE_LIMIT (values too large; maxResources or
   *   maxPaths reached: nothing created), the init's error (nothing is created then)
   */
  async create(module, path, ...args) {
    this.#check();
    checkString('resource.create', 'module', module);
    if (!Object.hasOwn(this.#modules, module)) {
      throw makeError(
        'ERR_INVALID_ARG_VALUE',
        `resource.create: unknown module ${JSON.stringify(module)}; the modules given to Resources.open are: ${Object.keys(this.#modules).join(', ')}.`,
      );
    }
    checkPath('resource.create', path);
    checkValues('resource.create', 'the arguments', args, this.#o.maxValueBytes);
    const busy = [];
    for (let tries = 0; ; tries++) {
      const nonce = crypto.randomBytes(8).toString('hex');
      const r = await this.#registry.reserve(module, path, this.#o.maxResources, this.#o.maxPaths, nonce, busy);
      if (r.code === 'DUPLICATE_RESOURCE') return { id: null, code: CODES.DUPLICATE_RESOURCE };
      if (r.code === 'LIMIT') throw limitError('resource.create', r);
      if (r.code === 'BUSY') throw slotsBusy(busy.length);
      const name = slotName(r.slot);
      try {
        await this.#host.prepare(name);
      } catch (e) {
        await this.#registry.finish(r.id, module, path, false);
        if (!e || e.code !== 'ERR_STORE_LOCKED' || tries + 1 >= SLOT_TRIES) throw e;
        busy.push(r.slot);
        continue;
      }
      let ok = false;
      try {
        const out = await this.#host.run(name, r.id, module, 'init', args, true);
        if (out.failed) throw out.failed;
        if (out.status === 'notfunction') throw notFunction('resource.create', module, 'init', out.type);
        await this.#registry.finish(r.id, module, path, true);
        ok = true;
      } finally {
        if (!ok) await this.#registry.finish(r.id, module, path, false).catch(() => {});
        await this.#host.created(name, ok);
      }
      return { id: r.id, code: CODES.OK };
    }
  }

  /**
   * Invokes a method of a resource: runs `module[method](...args)` as a task
   * of the resource and answers its first return value.
   * @returns {Promise<{ result: unknown, code: string, error?: Error }>} code OK,
   *   RESOURCE_NOT_FOUND, METHOD_NOT_FOUND, or METHOD_FAILED with the method's error
   * @throws ERR_INVALID_ARG_VALUE (a field that is not a function, values
   *   that cannot persist), ERR_STORE_LIMIT
   */
  async invoke(id, method, ...args) {
    this.#check();
    checkString('resource.invoke', 'resource id', id);
    checkString('resource.invoke', 'method', method);
    checkValues('resource.invoke', 'the arguments', args, this.#o.maxValueBytes);
    const r = await this.#untilAnswered(() => this.#registry.get(id));
    return this.#invoke(r && { id, ...r }, method, args);
  }

  /**
   * invoke(), run once per `requestId` on that resource: the method runs as
   * a durable task of the resource that the request id names, so a repeat
   * (after a timeout, a crash of the caller, of the resource's process or of
   * its member) answers that task's outcome and runs nothing again; one not
   * answered (its member died, or did not answer in time) is tried again
   * until it is (docs/resources.md#exactly-once).
   * @param {string} requestId at most 200 bytes, unique per request (a UUID)
   * @returns {Promise<{ result: unknown, code: string, error?: Error }>} as invoke()
   */
  async invokeOnce(requestId, id, method, ...args) {
    this.#check();
    checkRequestId('resource.invoke', requestId);
    checkString('resource.invoke', 'resource id', id);
    checkString('resource.invoke', 'method', method);
    checkValues('resource.invoke', 'the arguments', args, this.#o.maxValueBytes);
    const r = await this.#untilAnswered(() => this.#registry.get(id));
    return this.#invoke(r && { id, ...r }, method, args, requestId);
  }

  /**
   * Resumes the task an address names (rt.address, tasks.address,
   * namazu.coroutine.current_task_id in a resource) with `values`, in its
   * resource's runtime: true once the wake is written (docs/api.md#task-addresses).
   * @param {string} address "<task id>@<runtime name>"
   * @returns {Promise<boolean>} false for a task that is unknown, ended, or not waiting
   */
  async resume(address, ...values) {
    this.#check();
    const a = parseAddress(address);
    if (!a) throw invalidType('res.resume: the address', 'a task address "<id>@<runtime name>"', address);
    return this.#resumeAt(a.name, a.id, values);
  }

  async #resumeAt(name, id, values) {
    this.#check();
    checkValues('tasks.resume', 'the values', values, this.#o.maxValueBytes);
    return this.#host.resume(name, id, values);
  }

  // A registry read of an invocation. On a fleet the registry is a name
  // whose member may be away (killed, paused, being taken over): the read is
  // sent again until answered, as the invocation itself is (embedded, it is
  // this process's and always answers).
  async #untilAnswered(read) {
    for (let delay = RETRY_MS; ; delay = Math.min(delay * 2, RETRY_MAX_MS)) {
      try {
        return await read();
      } catch (e) {
        // Not ERR_RUNTIME_CLOSED: that is this member having left.
        if (!unanswered(e) || e.code === 'ERR_RUNTIME_CLOSED' || this.#closed) throw e;
      }
      await sleep(delay);
    }
  }

  // The id of the resource at `path`, or null (a durable caller journals it
  // before it invokes by id: a replay invokes the resource it invoked then).
  async #resolve(path) {
    this.#check();
    checkPath('resource.invoke_path', path);
    const r = await this.#untilAnswered(() => this.#registry.resolve(path));
    return r ? r.id : null;
  }

  // With telemetry, an invocation is a span, and the context the method's
  // task starts in: its task's span (and a routed call's) are its children.
  async #invoke(r, method, args, rid) {
    if (this.#tel === null) return this.#run(r, method, args, rid);
    const { api, tracer } = this.#tel;
    const attributes = { [ATTR.method]: method };
    if (r) Object.assign(attributes, { [ATTR.resourceId]: r.id, [ATTR.resourceModule]: r.module });
    const span = tracer.startSpan(SPAN.invoke, { attributes }, api.context.active());
    try {
      const out = await api.context.with(api.trace.setSpan(api.context.active(), span), () =>
        this.#run(r, method, args, rid),
      );
      span.setAttribute(ATTR.code, out.code);
      if (out.code !== CODES.OK) span.setStatus({ code: api.SpanStatusCode.ERROR, message: out.code });
      return out;
    } catch (e) {
      span.recordException(e);
      span.setStatus({ code: api.SpanStatusCode.ERROR, message: e.message });
      throw e;
    } finally {
      span.end();
    }
  }

  async #run(r, method, args, rid) {
    if (!r) return { result: null, code: CODES.RESOURCE_NOT_FOUND };
    const name = slotName(r.slot);
    // Routed, an invocation may go unanswered (its member died or paused):
    // each gets an id, and is sent again until answered, running once.
    if (rid === undefined && this.#host.routed) rid = crypto.randomUUID();
    let out = await this.#host.run(name, r.id, r.module, method, args, false, rid);
    // Not answered: a request with an id is sent again (its durable task
    // runs once, wherever the slot is hosted by then) while the resource exists.
    for (let delay = RETRY_MS; out && out.transport && rid !== undefined && !this.#closed;) {
      await sleep(delay);
      delay = Math.min(delay * 2, RETRY_MAX_MS);
      const still = await this.#registry.get(r.id).catch((e) => {
        if (unanswered(e)) return r; // the registry's member is away too: try again
        throw e;
      });
      if (!still) return { result: null, code: CODES.RESOURCE_NOT_FOUND };
      out = await this.#host.run(name, r.id, r.module, method, args, false, rid);
    }
    if (out === null || out.status === 'gone') return { result: null, code: CODES.RESOURCE_NOT_FOUND };
    if (out.transport) return { result: null, code: CODES.UNKNOWN, error: out.failed };
    if (out.failed) {
      const gone = !(await this.#untilAnswered(() => this.#registry.get(r.id)));
      return gone
        ? { result: null, code: CODES.RESOURCE_NOT_FOUND }
        : { result: null, code: CODES.METHOD_FAILED, error: out.failed };
    }
    if (out.status === 'missing') return { result: null, code: CODES.METHOD_NOT_FOUND };
    if (out.status === 'notfunction') throw notFunction('resource.invoke', r.module, method, out.type);
    checkValues('resource.invoke', `the result of ${method}`, [out.result], this.#o.maxValueBytes);
    return { result: out.result ?? null, code: CODES.OK };
  }

  /** invoke() on the resource at `path`. @returns {Promise<{ result: unknown, code: string, error?: Error }>} */
  async invokePath(path, method, ...args) {
    this.#check();
    checkPath('resource.invoke_path', path);
    checkString('resource.invoke_path', 'method', method);
    checkValues('resource.invoke_path', 'the arguments', args, this.#o.maxValueBytes);
    return this.#invoke(await this.#untilAnswered(() => this.#registry.resolve(path)), method, args);
  }

  /**
   * Destroys a resource: its registry entry and paths go, its runtime is
   * closed (its tasks cancelled); its slot is emptied when a create takes it.
   * @returns {Promise<{ ok: boolean, code: string }>} OK, or RESOURCE_NOT_FOUND (unknown or already destroyed)
   */
  async destroy(id) {
    this.#check();
    checkString('resource.destroy', 'resource id', id);
    const o = await this.#registry.destroy(id);
    if (!o.ok) return { ok: false, code: CODES.RESOURCE_NOT_FOUND };
    await this.#host.drop(slotName(o.slot));
    return { ok: true, code: CODES.OK };
  }

  /**
   * The paths matching `pattern` (`*` matches one segment) and their resources' ids.
   * @returns {Promise<Record<string, string>>}
   */
  async list(pattern) {
    this.#check();
    patternMatcher('index.list', pattern);
    return this.#registry.list(pattern);
  }

  /**
   * The durable tasks of the resources at the paths matching `pattern`,
   * read from the store without activating any (listTasks, by resource):
   * in path order, at most `limit` (default 100, at most 1000) in all, then
   * `next` to pass as `after` for the rest.
   * @param {string} pattern as for list()
   * @param {{ status?: string, entry?: string, label?: string, after?: string, limit?: number }} [options]
   * @returns {Promise<{ tasks: object[], next: string | null }>} each task as listTasks gives it, with its `path` and `resource` (id)
   */
  async tasks(pattern, options = {}) {
    this.#check();
    patternMatcher('Resources.tasks', pattern);
    // The filters are listTasks' (checked by its one validator; `name` is each resource's).
    const { after, limit, ...filters } = listOptions({ ...options, name: 'lua-tasks.resources' });
    delete filters.name;
    // `after`: "<path>\n<listTasks cursor>", as `next` gives it.
    const cut = typeof after === 'string' ? after.indexOf('\n') : -1;
    const [fromPath, fromTask] = cut < 0 ? ['', ''] : [after.slice(0, cut), after.slice(cut + 1)];
    const paths = Object.entries(await this.#registry.list(pattern)).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    const out = [];
    for (const [path, id] of paths) {
      if (path < fromPath) continue;
      const r = await this.#registry.get(id);
      if (!r) continue; // destroyed meanwhile
      let cursor = path === fromPath ? fromTask : '';
      do {
        const page = await listTasks(this.#host.store, {
          ...filters,
          name: slotName(r.slot),
          after: cursor,
          limit: Math.min(limit - out.length, 1000) || 1,
        });
        for (const t of page.tasks) out.push({ path, resource: id, ...t });
        cursor = page.next;
        if (out.length >= limit) {
          return { tasks: out, next: cursor === null ? nextPath(paths, path) : `${path}\n${cursor}` };
        }
      } while (cursor !== null);
    }
    return { tasks: out, next: null };
  }

  /** Adds `alias` as a path of resource `id`. @returns {Promise<string>} OK, RESOURCE_NOT_FOUND or DUPLICATE_RESOURCE */
  async link(id, alias) {
    this.#check();
    checkString('index.link', 'resource id', id);
    checkPath('index.link', alias, 'alias');
    const o = await this.#registry.link(id, null, alias, this.#o.maxPaths);
    if (o.code === 'LIMIT') throw limitError('index.link', o);
    return o.code;
  }

  /** Adds `alias` as a path of the resource at `path`. @returns {Promise<string>} */
  async linkPath(path, alias) {
    this.#check();
    checkPath('index.link_path', path);
    checkPath('index.link_path', alias, 'alias');
    const o = await this.#registry.link(null, path, alias, this.#o.maxPaths);
    if (o.code === 'LIMIT') throw limitError('index.link_path', o);
    return o.code;
  }

  /**
   * Removes a path; removing a resource's last path destroys it.
   * @returns {Promise<{ id: string|null, removed: boolean, code: string }>} removed: whether the resource was destroyed
   */
  async unlink(path) {
    this.#check();
    checkPath('index.unlink', path);
    const o = await this.#registry.unlink(path);
    if (!o.id) return { id: null, removed: false, code: CODES.RESOURCE_NOT_FOUND };
    if (o.removed) await this.#host.drop(slotName(o.slot));
    return { id: o.id, removed: o.removed, code: CODES.OK };
  }

  /**
   * Counts: resources and paths in the registry, runtimes active here now, activations and hibernations here so far.
   * @returns {Promise<{ resources: number, paths: number, active: number, activations: number, hibernations: number }>}
   */
  async stats() {
    const c = await this.#registry.count();
    return { resources: c.resources, paths: c.paths, ...this.#host.stats() };
  }

  /** Closes every resource active here and gives back the registry's lease. Idempotent. @returns {Promise<void>} */
  async close() {
    if (this.#closed) return;
    this.#closed = true;
    await this.#host.close();
    await this.#registry.close();
  }
}

// The registry refused a create or a link: the count it would pass.
function limitError(fn, r) {
  const option = r.what === 'resources' ? 'maxResources' : 'maxPaths';
  const what = r.what === 'resources' ? 'resources (with those being created)' : 'paths (links included)';
  return makeError(
    'ERR_STORE_LIMIT',
    `${fn}: the store holds ${r.count} ${what}, the most its ${option} (${r.max}) allows; nothing was created. Destroy or unlink some first, or open Resources with a larger ${option}.`,
    { limit: option, max: r.max },
  );
}

function slotsBusy(n) {
  return makeError(
    'ERR_STORE_LOCKED',
    `resource.create: every free slot (${n} tried) is still held by the runtime of a destroyed resource; try again once they close.`,
    { holder: null },
  );
}

function notFunction(fn, module, method, type) {
  return makeError(
    'ERR_INVALID_ARG_VALUE',
    `${fn}: ${JSON.stringify(method)} of module ${JSON.stringify(module)} is a ${type}, not a function; a method is a function of the module's table.`,
  );
}

// An invoke's answer as Lua gets it: result, code (and the error's message).
function luaAnswer(o) {
  if (o.error) return [null, o.code, String((o.error && o.error.message) || o.error)];
  return [o.result, o.code];
}

module.exports = { Resources };
