// SPDX-License-Identifier: MIT
// Types of the public lua-tasks API.
/// <reference types="node" />
import { EventEmitter } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';

export type LibName = 'base' | 'coroutine' | 'string' | 'table' | 'math' | 'utf8' | 'os' | 'io' | 'debug' | 'package';

export interface RuntimeOptions {
  /** Which standard libraries Lua can use. @default 'safe' */
  libs?: 'safe' | 'all' | LibName[];
  /** Bytes the Lua state may hold; 0 = no limit. @default 0 */
  memoryLimit?: number;
  /**
   * Bytes one conversion between JS and Lua may produce (a value, an argument
   * list or a call's results); past it ERR_CONVERSION. 0 = no cap.
   * @default 4 × memoryLimit, or a quarter of V8's heap limit without one
   */
  conversionLimit?: number;
  /** Receives each line Lua prints. @default writes to stdout */
  print?: (line: string) => void;
  /** Whether timed waits keep the process alive. @default true */
  keepAlive?: boolean;
  /**
   * Lua reads fields of by-reference JS objects as JS does (getters, the
   * prototype chain, `constructor`), instead of own data properties only.
   * Only for Lua code trusted as much as the host's JavaScript: getters run
   * on Lua's behalf and reads reach whatever prototypes reach
   * (docs/security.md). @default false
   */
  trustedObjects?: boolean;
  /** Modules for `require`: Lua source, or a value. */
  modules?: Record<string, string | object>;
  /** Directories `require` (and, in 'safe', dofile/loadfile) may read .lua files from. */
  modulePaths?: string[];
  /** The runtime's Lua code may require `resource`, `index` and `namazu.response` (also as `namazu.resource`, `namazu.index`), over these resources (docs/resources.md). */
  resources?: Resources;
  /** Milliseconds a task may run before it is made to yield. */
  timeSlice?: number;
  /** CPU milliseconds a task (or a call from JS) may use before it is killed. */
  taskTimeout?: number;
  /** IANA zone for UNTIL_NEXT without a zone of its own. @default the process's ($TZ, else /etc/localtime) */
  timeZone?: string;
  /** Messages a task's mailbox holds before rt.send throws ERR_MAILBOX_FULL (tasks.send raises). @default 1000 */
  mailboxLimit?: number;
  /** Milliseconds added to this process's wall clock for UNTIL_TIME, UNTIL_NEXT, durable deadlines, task.waiting.until and os.time (a fleet member sets PostgreSQL's clock's; rt.setClockOffset changes it). @default 0 */
  clockOffsetMs?: number;
  /** Largest encoded value a script may persist (a tasks.store value, tasks.state, a journal record, a message); past it ERR_STORE_LIMIT. @default memoryLimit, else 2^30 */
  maxValueBytes?: number;
  /** tasks.store writes (keys and values) that may wait for a COMMIT; past it tasks.store.set raises ERR_STORE_LIMIT. @default memoryLimit, else no bound */
  maxPendingBytes?: number;
  /** Bytes one run of a durable task's journal may hold (payloads, 32 bytes a record besides); past it ERR_STORE_LIMIT (use tasks.continue_as_new). @default memoryLimit, else 64 MiB */
  maxJournalBytes?: number;
  /**
   * Metrics and spans through OpenTelemetry's API (@opentelemetry/api, an optional peer): true uses the
   * globally registered providers; an object gives providers (each defaulting to the global one). Without
   * the API installed, one process warning and nothing else (docs/operations.md#metrics-and-traces). @default false
   */
  telemetry?: boolean | TelemetryProviders;
}

/** The providers the telemetry option takes: any OpenTelemetry MeterProvider and TracerProvider. */
export interface TelemetryProviders {
  meterProvider?: { getMeter(name: string, version?: string): unknown };
  tracerProvider?: { getTracer(name: string, version?: string): unknown };
}

export type TaskStatus = 'running' | 'waiting' | 'done' | 'failed' | 'cancelled';

export interface TaskWaiting {
  instruction:
    | 'IMMEDIATE'
    | 'FOR'
    | 'UNTIL_TIME'
    | 'UNTIL_NEXT'
    | 'INDEFINITELY'
    | 'COMMIT'
    | 'JOIN'
    | 'PROMISE'
    | 'RECEIVE'
    | 'RESTORE';
  /** When a timed wait ends (FOR, tasks.sleep, UNTIL_TIME, UNTIL_NEXT); a FOR's is read on the wall clock at the query. */
  until?: Date;
}

export interface TaskInfo<M = unknown> {
  id: string;
  status: TaskStatus;
  waiting?: TaskWaiting;
  /** The label the task was spawned with (only tasks started by rt.spawn with one). */
  name?: string;
  /** The value the task was spawned with, the very same (only tasks started by rt.spawn with one). */
  meta?: M;
}

/** The options of rt.inspect; any other key is refused (ERR_INVALID_ARG_VALUE, naming the nearest). */
export interface InspectOptions {
  /** A durable task's journal, read from the store and decoded record by record. @default false */
  history?: boolean;
  /** A live task's Lua traceback, read without resuming it. @default false */
  where?: boolean;
}

/** One record of a durable task's journal, as rt.inspect's `history` shows it; values are summaries. */
export interface HistoryRecord {
  seq: number;
  kind:
    | 'start'
    | 'yield'
    | 'in'
    | 'call'
    | 'step'
    | 'value'
    | 'message'
    | 'end'
    | 'patch'
    | 'commitFailed'
    | 'damaged'
    | 'unknown';
  /** What it is, in words: "a yield (FOR)", "a JS call to grant", "tasks.step \"pay\"". */
  what?: string;
  /** start: the entry. */
  entry?: string;
  /** call, step: the function's or step's name; patch: the patch's. */
  name?: string;
  /** start, end: the idempotency key, or null. */
  key?: string | null;
  /** start: its arguments, summarised. */
  args?: string[];
  /** The values it holds, summarised (a call's are ok, then its value or error message). */
  values?: string[];
  /** yield: the wait, when it began and its deadline (timed waits). */
  instruction?: string;
  start?: Date;
  deadline?: Date;
  /** end: how it ended, and when. */
  status?: 'done' | 'failed' | 'cancelled';
  ended?: Date;
  /** commitFailed: COMMITs that landed before it. */
  landed?: number;
  /** A record that does not read: why. */
  error?: string;
}

/** What rt.inspect answers: rt.task's snapshot and what is read on demand. */
export interface TaskDetails<M = unknown> extends TaskInfo<M> {
  durable: boolean;
  /** The global name or 'mod.fn' path it was started with, or "function <source>:<line>". */
  entry?: string;
  /** A durable task's idempotency key, or null. */
  key?: string | null;
  /** Its arguments, summarised (a short string each, about 1 KiB in all). */
  args?: string[];
  where?: { traceback: string; source?: string; line?: number } | { error: string };
  history?: HistoryRecord[];
  /** Records left out of `history` between its first and the latest 999. */
  historySkipped?: number;
}

/** A Lua coroutine running as a task; `T` is what its result resolves to (unchecked: Lua decides). */
export class Task<T = unknown, M = unknown> {
  readonly id: string;
  readonly status: TaskStatus;
  readonly waiting: TaskWaiting | undefined;
  /** The task's first return value; rejects with its error (an AbortError if its signal aborted it). */
  readonly result: Promise<T>;
  /** The label given to rt.spawn, else undefined. */
  readonly name: string | undefined;
  /** The value given to rt.spawn (kept in JS, never converted to Lua), else undefined. */
  readonly meta: M | undefined;
  /** rt.cancel(task.id, reason): true if a live task was cancelled. */
  cancel(reason?: unknown): boolean;
  /** rt.resume(task.id, ...values): true if a task waiting on a yield instruction was resumed. */
  resume(...values: unknown[]): boolean;
  /** rt.send(task.id, ...values): a message for its tasks.receive. @throws ERR_MAILBOX_FULL */
  send(first: unknown, ...values: unknown[]): boolean;
  /** rt.inspect(task.id, options). */
  inspect(options?: InspectOptions): Promise<TaskDetails<M> | undefined>;
}

/** The options of rt.spawn; any other key is refused (ERR_INVALID_ARG_VALUE, naming the nearest). */
export interface SpawnOptions<M = unknown> {
  /** The task's arguments (an AbortSignal among them is an argument like any other). @default [] */
  args?: readonly unknown[];
  /** Cancels the task when aborted: its result rejects with an AbortError (cause: the signal's reason). */
  signal?: AbortSignal;
  /** A label, shown as task.name and in rt.task(id) / rt.tasks(). */
  name?: string;
  /** Any value, kept in JS (never converted to Lua), shown as task.meta and in rt.task(id) / rt.tasks(). */
  meta?: M;
  /** A durable task (docs/durable.md): survives restarts with its id; fn must be a name, args must persist. @default false */
  durable?: boolean;
  /** With durable: an idempotency key; while a task with it lives or is retained, that Task is returned. */
  key?: string;
}

/** What the runtime passes with each save (docs/persistence.md). */
export interface SaveInfo {
  /** Grows with every save: a store drops a save lower than one it already applied under the same token. */
  seq?: number;
  /** The lease's token, when the store gave one: the fencing token. */
  token?: number;
}

/** Ownership of a name in a store, from `acquire(name)`. */
export interface StoreLease {
  /** Grows with every acquire of the name, across restarts: the fencing token passed to save(). */
  readonly token: number;
  /** Gives the name up; writes in flight land first, later saves under this token are refused. Idempotent. */
  release(): void | Promise<void>;
}

export interface Store {
  /** The last snapshot saved for `name`, or null. */
  load(name: string): Promise<Buffer | Uint8Array | null>;
  /**
   * Durable before it resolves. A rejection means the previous snapshot stands,
   * unless the error has `replaced: true` (the new one is in place, not confirmed durable).
   */
  save(name: string, bytes: Buffer, info?: SaveInfo): Promise<void>;
  /** One owner per name: rejects with ERR_STORE_LOCKED (and `holder`) while another holds it. */
  acquire?(name: string): Promise<StoreLease>;
  /** Where `name` is kept, for error messages. */
  locate?(name: string): string;
  /** The key spaces a keyed store keeps: durable tasks need 2 (journals) and 3 (inboxes). */
  readonly spaces?: readonly number[];
  /** What one write may carry; a write outside it is refused alone (ERR_STORE_LIMIT). */
  readonly limits?: StoreLimits;
}

/** What one write to a store may carry (docs/persistence.md#store-limits). */
export interface StoreLimits {
  /** UTF-8 bytes of a key. */
  readonly maxKeyBytes: number;
  /** Bytes of one value (and of the tasks.state snapshot). */
  readonly maxValueBytes: number;
  /** Bytes of one batch: snapshot, keys and values together. */
  readonly maxBatchBytes: number;
  /** Whether a key may not hold a NUL character (PostgreSQL text). */
  readonly keyForbidsNul: boolean;
}

/** The runtime's store writes fail transiently (ok false), or land again (ok true). */
export interface StoreHealth {
  ok: boolean;
  /** The last failure (ok false). */
  error?: Error;
  /** When the writes began to fail (ms since the epoch). */
  since: number;
  /** How long they failed (ok true). */
  downMs?: number;
}

/** A batch of `DirectoryStore.write`: everything one COMMIT makes durable, all or nothing. */
export interface StoreBatch {
  name: string;
  /** The lease's token: the batch is refused (ERR_STORE_LOCKED) unless it is the owner's. */
  token?: number;
  /** Grows with every batch under one lease: an older one arriving late is dropped as superseded. */
  seq?: number;
  /** The tasks.state snapshot, when it changed. */
  state?: Uint8Array;
  /** Keyed writes (space 1: tasks.store, 2: journals, 3: inboxes); `value: null` deletes the key. */
  writes?: { space?: 1 | 2 | 3; key: string; value: Uint8Array | null }[];
}

/**
 * A store that keeps keyed values (tasks.store, durable tasks' journals and
 * inboxes) as well as snapshots: what Runtime.open needs for them. Both
 * stores shipped implement it; a store of your own may (docs/persistence.md).
 */
export interface KeyedStore extends Store {
  readonly spaces: readonly number[];
  /** Durable before it resolves; all or nothing; refused (ERR_STORE_LOCKED) unless `batch.token` is the owner's. */
  write(batch: StoreBatch): Promise<void>;
  /** Synchronous reads of one held name's committed keyed values. */
  reader(name: string): StoreReader;
  /** A page of a name's committed records in `space` whose keys sort after `after` (bytewise), at most `limit`. */
  scan?(name: string, space: number, after?: string, limit?: number): Promise<{ keys: string[]; values: Buffer[] }>;
}

/** Synchronous keyed reads of one name's values; they see what was committed. */
export interface StoreReader {
  /** The value's bytes (a codec snapshot), or null. Throws ERR_STORE_CORRUPT for a value whose checksum fails. */
  get(key: string, space?: number): Buffer | null;
  /** Keys starting with `prefix`, after `after`, at most `limit`, in bytewise order; `space` defaults to 1. */
  keys(prefix?: string, after?: string, limit?: number, space?: number): string[];
}

/**
 * The embedded store: every runtime's state of a directory in one SQLite
 * database (`<dir>/lua-tasks.sqlite`), and one owner per name (an OS lock on
 * `<name>.lock`). The batches written in one loop turn through one store
 * object share one transaction and one fsync.
 */
export class DirectoryStore implements KeyedStore {
  constructor(dir: string);
  readonly dir: string;
  /** [1, 2, 3]: tasks.store, durable tasks' journals and inboxes. */
  readonly spaces: readonly number[];
  /** Keys up to 65,536 bytes (NUL allowed), values up to 256 MiB, batches up to 768 MiB. */
  readonly limits: StoreLimits;
  /** Takes the name (ERR_STORE_LOCKED with `holder` and `path` if it is open elsewhere) and migrates a `<name>.state` file. */
  acquire(name: string): Promise<StoreLease>;
  load(name: string): Promise<Buffer | null>;
  /** A batch with only `state`. Rejects with the cause of a failed transaction: nothing of it was written. */
  save(name: string, bytes: Uint8Array, info?: SaveInfo): Promise<void>;
  /** Durable before it resolves; all or nothing. */
  write(batch: StoreBatch): Promise<void>;
  reader(name: string): StoreReader;
  scan(name: string, space: number, after?: string, limit?: number): Promise<{ keys: string[]; values: Buffer[] }>;
  /** Runtime names it holds matching `pattern` (`*`: any run of characters), after `after`, at most `limit` (1-10000, default 1000). No lease. */
  names(pattern?: string, after?: string, limit?: number): Promise<string[]>;
  /** Transactions (one fsync each) and batches this store object committed. */
  stats(): { transactions: number; batches: number };
  /** Finishes the writes in flight and closes the database. Idempotent. */
  close(): Promise<void>;
  /** The path of the database. */
  file(name: string): string;
  /** Where the name's state lives, for messages: here the database's path. */
  locate(name: string): string;
}

/** Options of `new PostgresStore(options)`: exactly one of `connectionString` and `pool`. */
export interface PostgresStoreOptions {
  /** postgres://user:password@host:port/database: the store makes (and close() ends) a pg.Pool. */
  connectionString?: string;
  /** A pg.Pool of yours; close() leaves it open. */
  pool?: { connect(): Promise<unknown>; options?: object };
  /** How long a lease lasts unless renewed (every third of it); a vanished holder is taken over after it. @default 10000 */
  leaseMs?: number;
  /** The schema of the lua_tasks_* tables, created at first use. @default 'public' */
  schema?: string;
  /** Connections of the pool the store makes. @default 10 */
  max?: number;
}

/**
 * The store on PostgreSQL (the optional peer dependency `pg`): one owner per
 * name through a lease with a fencing token, checked on every write; the
 * batches written in one loop turn share one transaction. Readers answer from
 * the name's keyed rows loaded at acquire, so a held name's keyed data is in memory.
 */
export class PostgresStore implements KeyedStore {
  constructor(options: PostgresStoreOptions);
  /** [1, 2, 3]: tasks.store, durable tasks' journals and inboxes. */
  readonly spaces: readonly number[];
  /** Keys up to 2,048 bytes without NUL, values up to 64 MiB, batches up to 512 MiB. */
  readonly limits: StoreLimits;
  /** Takes the name's lease (ERR_STORE_LOCKED with `holder` and `expiresAt` while another holder's runs). */
  acquire(name: string): Promise<StoreLease>;
  load(name: string): Promise<Buffer | null>;
  /** A batch with only `state`. */
  save(name: string, bytes: Uint8Array, info?: SaveInfo): Promise<void>;
  /** Durable before it resolves (PostgreSQL committed it); all or nothing; any key space. */
  write(
    batch:
      | StoreBatch
      | (Omit<StoreBatch, 'writes'> & { writes?: { space?: number; key: string; value: Uint8Array | null }[] }),
  ): Promise<void>;
  /** Reads of tasks.store's values (space 1 only) of a name this store holds, from memory. */
  reader(name: string): StoreReader;
  /** Journals and inboxes (any space), a page at a time, from PostgreSQL. */
  scan(name: string, space: number, after?: string, limit?: number): Promise<{ keys: string[]; values: Buffer[] }>;
  /** Every record of a name's `space` as PostgreSQL's binary COPY rows of (key, value) in key order, each chunk to `onChunk` as it arrives (a throw of it ends the copy and rejects with it). */
  copySpace(name: string, space: number, onChunk: (chunk: Buffer) => void): Promise<void>;
  /** The journals (and, with `inbox`, the inboxes) of the durable tasks `ids`, in one query, each in key order. */
  readTasks(
    name: string,
    ids: string[],
    inbox: boolean,
  ): Promise<{ journal: { keys: string[]; values: Buffer[] }; inbox: { keys: string[]; values: Buffer[] } }>;
  /** Runtime names it holds matching `pattern` (`*`: any run of characters), after `after`, at most `limit` (1-10000, default 1000). No lease. */
  names(pattern?: string, after?: string, limit?: number): Promise<string[]>;
  /** Transactions (one WAL flush each) and batches this store object committed. */
  stats(): { transactions: number; batches: number };
  /** Finishes the writes in flight, ends the lock session and the pool it made. Idempotent. */
  close(): Promise<void>;
  /** Where the name's state lives, for messages: server, database, table. */
  locate(name: string): string;
  /** Checks the schema and makes its tables if missing (acquire does it too). */
  ready(): Promise<void>;
  /** This store object's id: its leases' holder records (`err.holder.store`) carry it. */
  readonly id: string;
  readonly schema: string;
  readonly leaseMs: number;
  /** The lease held on a name as this store knows it; null when not held. */
  lease(name: string): { token: number; expiresAt: Date; validUntil: number; lost: boolean } | null;
}

/** Options of `Fleet.join(options)` (docs/fleet.md). */
export interface FleetOptions {
  /** postgres://user:password@host:port/database: every member of a fleet names the same database and schema. */
  connectionString: string;
  /** @default 'public' */
  schema?: string;
  /** A name's lease: a member that died loses its names after it (at once if its PostgreSQL session ended). @default 10000 */
  leaseMs?: number;
  /** Runtime.open's options without name and store, or a function of the name giving them. */
  runtime?:
    | Omit<OpenOptions, 'name' | 'store'>
    | ((name: string) => Omit<OpenOptions, 'name' | 'store'> | Promise<Omit<OpenOptions, 'name' | 'store'>>);
  /** A runtime unused this long whose live tasks all sleep durably is hibernated; 0 = never. @default 60000 */
  idleMs?: number;
  /** A hibernated runtime is woken this long before its earliest timer (and not hibernated if a timer is nearer). @default 1000 */
  wakeAheadMs?: number;
  /** How often the member looks for due names and lost leases. @default leaseMs / 4, within 50..1000 */
  pollMs?: number;
  /** How long an operation by name may take to find and reach the name's holder. @default 15000 */
  routeTimeoutMs?: number;
  /** How often the member compares its load with the others' and, hosting two names more than the least loaded, gives it one (docs/fleet.md#balance); 0 = never. @default 5000 */
  balanceMs?: number;
  /** Connections of the member's pool. @default 10 */
  max?: number;
  /** The member's metrics and spans (routing, activations) and its runtimes' default telemetry option. @default false */
  telemetry?: boolean | TelemetryProviders;
}

/** A fleet member: hosts named runtimes on PostgreSQL and serves operations by name for the whole fleet. */
export class Member extends EventEmitter {
  private constructor();
  /** Its store's id (the holder records of its leases carry it). */
  readonly id: string;
  /** Starts a durable task in runtime `name` wherever it is; resolves with its id once its start is durable. */
  spawn(name: string, entry: string, options?: { key?: string; args?: unknown[] }): Promise<string>;
  /**
   * Starts a durable task in runtime `name` wherever it is, or finds the one `key` names there (live, or ended
   * and retained), and resolves with its result (rejects with its error); run again with the same key after a
   * timeout or a crash, it answers the same task's outcome. Rejects with ERR_FLEET_TIMEOUT when not answered
   * (no member answered in time, or the holder could not write the task's end): run it again.
   */
  run(name: string, entry: string, options: { key: string; args?: unknown[]; name?: string }): Promise<unknown>;
  /** rt.sendDurable there: true once the message is durable; false for an unknown or ended task. */
  sendDurable(name: string, id: string, first: unknown, ...values: unknown[]): Promise<boolean>;
  /** Alias of sendDurable. */
  send(name: string, id: string, first: unknown, ...values: unknown[]): Promise<boolean>;
  /** rt.resumeDurable there: true once the wake is written. */
  resume(name: string, id: string, ...values: unknown[]): Promise<boolean>;
  /** The task a task address ("<id>@<name>": rt.address, tasks.address) names, resumed where it is hosted. */
  resume(address: `${string}@${string}`, ...values: unknown[]): Promise<boolean>;
  /** rt.cancel there, durable before it resolves. */
  cancel(name: string, id: string, reason?: unknown): Promise<boolean>;
  /** rt.call(fn, ...args) there. */
  call(name: string, fn: string, ...args: unknown[]): Promise<unknown>;
  task(name: string, id: string): Promise<TaskInfo | undefined>;
  /** The runtime `name` hosted here, activated here if no member holds it. @throws ERR_STORE_LOCKED */
  runtime(name: string): Promise<Runtime>;
  /** The names hosted here now. */
  hosted(): string[];
  /** Now on the fleet's clock (PostgreSQL's), in ms since the epoch like Date.now() (docs/fleet.md#one-clock). */
  now(): number;
  stats(): {
    id: string;
    hosted: number;
    leases: Record<string, number>;
    activations: number;
    hibernations: number;
    lost: number;
    routed: number;
    served: number;
    takeovers: number;
    /** Names given to another member to balance the fleet (docs/fleet.md#balance). */
    handovers: number;
    /** Routed requests received and not run here: another member had claimed them (docs/fleet.md#at-most-once). */
    claimsLost: number;
    /** This process's wall clock's offset to PostgreSQL's (ms), and the round trip it was measured over. */
    clock: { offsetMs: number; rttMs: number };
    routeLatencyMs: { p50: number | null; p99: number | null; samples: number };
  };
  /** Closes every runtime hosted here and hands the names to the other members. Idempotent. */
  leave(): Promise<void>;
  /** A name became hosted here: an operation asked for it, its timer was due, its holder was gone, or its holder gave it here to balance the fleet. */
  on(
    event: 'activate',
    listener: (e: { name: string; token: number; reason: 'call' | 'due' | 'takeover' | 'balance'; ms: number }) => void,
  ): this;
  /** A hosted name was given to member `to` (its id) to balance the fleet; its runtime was closed here. */
  on(event: 'handover', listener: (e: { name: string; to: string }) => void): this;
  /** A hosted name was closed until its next timer or operation (wakeAt: ms since the epoch, or null). */
  on(event: 'hibernate', listener: (e: { name: string; wakeAt: number | null }) => void): this;
  /** A hosted name's lease was lost (another member took it over); its runtime was closed. */
  on(event: 'lost', listener: (e: { name: string; token: number }) => void): this;
  /** A request this member routed was answered by the holder. */
  on(event: 'route', listener: (e: { name: string; op: string; ms: number }) => void): this;
  /** A hosted name's store writes began to fail transiently, or landed again. */
  on(event: 'storehealth', listener: (e: StoreHealth & { name: string }) => void): this;
  /** A failure in the background (a process warning without a listener). */
  on(event: 'error', listener: (error: Error) => void): this;
  on(event: string | symbol, listener: (...args: any[]) => void): this;
}

/** A response code of the resource and index calls (namazu.response.code in Lua). */
export type ResourceCode =
  'OK' | 'RESOURCE_NOT_FOUND' | 'METHOD_NOT_FOUND' | 'DUPLICATE_RESOURCE' | 'METHOD_FAILED' | 'UNKNOWN';

export interface ResourcesOptions {
  /** Module name -> Lua source: what resources are made from; every resource can require them. */
  modules: Record<string, string>;
  /** Milliseconds a resource with no call and no task stays active before it hibernates. @default 30000 */
  idleMs?: number;
  /** Bound on the encoded values of one call (arguments, a result); past it ERR_STORE_LIMIT. @default the store's limit, at most 64 MiB */
  maxValueBytes?: number;
  /** How many resources the store may hold; a create past it fails ERR_STORE_LIMIT. @default 10000 */
  maxResources?: number;
  /** How many paths (links included) the store may hold; a create or link past it fails ERR_STORE_LIMIT. @default 50000 */
  maxPaths?: number;
  /** Further Runtime options of each resource's runtime (not name, store, modules, resources, setup); memoryLimit defaults to 64 MiB. */
  runtime?: RuntimeOptions;
}

/** Persisted instances of Lua modules, addressed by id and by path, invoked by method name (docs/resources.md). */
export class Resources {
  private constructor();
  /** Opens the resources of a store (one Resources per store), or of the fleet a member is in. @throws ERR_STORE_LOCKED */
  static open(where: string | DirectoryStore | Member, options: ResourcesOptions): Promise<Resources>;
  /** A resource of `module` at `path`; its module's `init(...args)`, if any, runs first. */
  create(module: string, path: string, ...args: unknown[]): Promise<{ id: string | null; code: ResourceCode }>;
  /** Runs `module[method](...args)` as a task of the resource; its first return value is `result`. */
  invoke(
    id: string,
    method: string,
    ...args: unknown[]
  ): Promise<{ result: unknown; code: ResourceCode; error?: Error }>;
  invokePath(
    path: string,
    method: string,
    ...args: unknown[]
  ): Promise<{ result: unknown; code: ResourceCode; error?: Error }>;
  /** invoke(), run once per `requestId` (1 to 200 bytes) on that resource: a repeat answers the first's outcome. */
  invokeOnce(
    requestId: string,
    id: string,
    method: string,
    ...args: unknown[]
  ): Promise<{ result: unknown; code: ResourceCode; error?: Error }>;
  /** Resumes the task a task address names in a resource's runtime: true once the wake is written. */
  resume(address: string, ...values: unknown[]): Promise<boolean>;
  destroy(id: string): Promise<{ ok: boolean; code: ResourceCode }>;
  /** Paths matching `pattern` (`*`: one segment) and their ids. */
  list(pattern: string): Promise<Record<string, string>>;
  /**
   * The durable tasks of the resources at the paths matching `pattern`, read
   * from the store without activating any: in path order, `limit` in all
   * (default 100), `next` to pass as `after` for the rest.
   */
  tasks(
    pattern: string,
    options?: Omit<ListTasksOptions, 'name'>,
  ): Promise<{ tasks: Array<ListedTask & { path: string; resource: string }>; next: string | null }>;
  link(id: string, alias: string): Promise<ResourceCode>;
  linkPath(path: string, alias: string): Promise<ResourceCode>;
  /** Removes a path; `removed` when it was the resource's last (the resource is destroyed). */
  unlink(path: string): Promise<{ id: string | null; removed: boolean; code: ResourceCode }>;
  /** Resources and paths in the registry; runtimes active here, activations and hibernations here. */
  stats(): Promise<{ resources: number; paths: number; active: number; activations: number; hibernations: number }>;
  close(): Promise<void>;
}

export const Fleet: {
  /** Joins the fleet of a PostgreSQL database and schema. */
  join(options: FleetOptions): Promise<Member>;
};

export interface OpenOptions extends RuntimeOptions {
  /** The runtime's persistent identity: letters, digits, ".", "_", "-". */
  name: string;
  /** A directory path (the embedded store) or a store object. */
  store: string | Store;
  /** ms a store's acquire, load or save may take before it fails (ERR_STORE_TIMEOUT); 0 = no bound. @default 30000 */
  storeTimeout?: number;
  /** Bytes of committed tasks.store values kept in memory (least recently used dropped first); 0 = none. @default 16777216 */
  storeCacheBytes?: number;
  /** Runs after tasks.state is restored and before the store's durable tasks are: load their code here. */
  setup?: (rt: Runtime) => void | Promise<void>;
  /** ms a finished durable task stays known (its key returns it); 0 = its records go when it ends. @default 604800000 */
  durableRetention?: number;
  /** The most finished durable tasks kept (within durableRetention); past it the oldest is forgotten first (its key starts anew). @default 100000 */
  durableRetainedMax?: number;
  /** An UNTIL_NEXT instant a durable task missed while closed: fires once at open, or is skipped. @default 'once' */
  durableCatchUp?: 'once' | 'skip';
  /** 'lazy' (default): durable tasks waiting on a far deadline, INDEFINITELY or in tasks.receive stay in a directory store until needed; 'all': every one is replayed at open. */
  durableRestore?: 'lazy' | 'all';
}

export class Runtime extends EventEmitter {
  constructor(options?: RuntimeOptions);
  /**
   * Creates a runtime whose tasks.state is restored from the store; it owns the name until closed.
   * Rejects with ERR_STORE_LOCKED, ERR_STORE_CORRUPT, ERR_STORE_TIMEOUT or ERR_COMMIT_FAILED.
   */
  static open(options: OpenOptions): Promise<Runtime>;
  /** Saves tasks.state durably; no task runs until it is written. Concurrent calls share one write. */
  commit(): Promise<void>;
  load(source: string, options?: { name?: string }): unknown[];
  set(name: string, value: unknown): void;
  get(name: string): unknown;
  /** An AbortSignal as the last argument is taken as the task's signal (see spawn for no sniffing). @throws AbortError if it is already aborted */
  start<T = unknown>(fn: string | ((...args: any[]) => unknown), ...args: unknown[]): Task<T>;
  /** Starts a task with its arguments and signal given as options. @throws AbortError if the signal is already aborted */
  spawn<T = unknown, M = unknown>(fn: string | ((...args: any[]) => unknown), options?: SpawnOptions<M>): Task<T, M>;
  call<T = unknown>(fn: string | ((...args: any[]) => unknown), ...args: unknown[]): Promise<T>;
  resume(id: string, ...values: unknown[]): boolean;
  /** The address of task `id` ("<id>@<name>"): names it from any runtime. @throws ERR_INVALID_STATE without a name */
  address(id: string): string;
  /** resume(), resolved once the wake is written: a crash after it resolves true never loses it. */
  resumeDurable(id: string, ...values: unknown[]): Promise<boolean>;
  /** Queues a message (first value not null/undefined) for tasks.receive; false for an unknown or ended task. @throws ERR_MAILBOX_FULL */
  send(id: string, first: unknown, ...values: unknown[]): boolean;
  /** send(), resolved once the message is written: a durable task keeps it until received, across restarts. */
  sendDurable(id: string, first: unknown, ...values: unknown[]): Promise<boolean>;
  cancel(id: string, reason?: unknown): boolean;
  task(id: string): TaskInfo | undefined;
  tasks(): TaskInfo[];
  /** A task's details read now: entry, arguments, where it waits, a durable task's history. */
  inspect(id: string, options?: InspectOptions): Promise<TaskDetails | undefined>;
  ref(): this;
  unref(): this;
  /** Sets the clockOffsetMs option's offset: armed wall-clock waits follow it. */
  setClockOffset(ms: number): this;
  stats(): {
    memoryUsed: number;
    memoryPeak: number;
    memoryLimit: number;
    conversionLimit: number;
    tasks: number;
    /** Live durable tasks (of `tasks`). */
    durableTasks: number;
    /** Durable tasks left in the store at open (docs/durable.md#restore-at-open), not counted in tasks. */
    dormantTasks: number;
    preemptions: number;
    /** Restored durable tasks that failed (a replay that met changed code) or could not be restored. */
    restoreFailures: number;
  };
  /** Writes the commits asked for before it, then cancels every task and frees the state. */
  close(): Promise<void>;
  /** Frees the state at once; a write in flight goes on, and the name stays owned until it settles. */
  closeSync(): void;
  on(event: 'taskdone', listener: (task: Task, value: unknown) => void): this;
  /** The store's writes fail transiently (durable tasks' COMMITs wait and retry), or land again. */
  on(event: 'storehealth', listener: (health: StoreHealth) => void): this;
  /**
   * A task started from JS was cancelled (rt.cancel, task.cancel, its signal,
   * tasks.cancel in Lua, close); `error` is what its result rejects with:
   * ERR_TASK_CANCELLED, or an AbortError for a signal.
   */
  on(event: 'taskcancel', listener: (task: Task, error: TaskError | AbortError) => void): this;
  /**
   * A task failed, or a Lua function handed to JS as a callback failed when JS
   * called it from the loop (then the first argument is `{ id: null, callback: true }`).
   */
  on(
    event: 'taskerror',
    listener: (task: Task | { id: string } | { id: null; callback: true }, error: Error) => void,
  ): this;
  on(event: string | symbol, listener: (...args: any[]) => void): this;
}

export class LuaTasksError extends Error {
  code: string;
}
export class LuaError extends LuaTasksError {
  luaStack?: string;
  value?: unknown;
  source?: string;
  line?: number;
}
export class CronSyntaxError extends LuaTasksError {}
export class ConversionError extends LuaTasksError {}
export class RuntimeClosedError extends LuaTasksError {}
export class TaskError extends LuaTasksError {
  reason?: unknown;
  /** ERR_TASK_CANCELLED during a COMMIT: whether its snapshot was written. */
  committed?: boolean;
  /** ERR_COMMIT_FAILED: the new snapshot is in place but not confirmed durable. */
  replaced?: boolean;
  /** ERR_TASK_TIMEOUT, and ERR_COMMIT_FAILED at a task's COMMIT: where the task was. */
  luaStack?: string;
  source?: string;
  line?: number;
}
/**
 * A task stopped through its AbortSignal, shaped as Node's own: `name`
 * 'AbortError', `code` 'ABORT_ERR', `cause` the signal's reason. Not a LuaTasksError.
 */
export class AbortError extends Error {
  constructor(message?: string, options?: { cause?: unknown });
  code: 'ABORT_ERR';
  /** Aborted during a COMMIT: whether its snapshot was written. */
  committed?: boolean;
}
/** ERR_STORE_LOCKED, ERR_STORE_CORRUPT, ERR_STORE_TIMEOUT. */
export class StoreError extends LuaTasksError {
  /** ERR_STORE_LOCKED: who holds the name. */
  holder?: { pid: number; host: string; since?: string };
}
/** A fleet operation by name that no member answered in time (ERR_FLEET_TIMEOUT). */
export class FleetError extends LuaTasksError {
  /** The runtime's name the operation was for. */
  runtime: string;
  /** The operation: 'spawn', 'run', 'send', 'resume', 'cancel', 'call' or 'task'. */
  op: string;
}
export interface CronNextOptions {
  /** Times strictly after this (sub-seconds dropped). @default new Date() */
  from?: Date | number;
  /**
   * IANA zone; a CRON_TZ= prefix in the expression wins over it.
   * @default the process's zone ($TZ, else /etc/localtime), as Date's and UNTIL_NEXT's
   */
  tz?: string;
  /** 1-10000. @default 1 */
  count?: number;
}

/** The expanded fields of an expression (days of week: 0 = Sunday). */
export interface CronDescription {
  dialect: 'quartz' | 'vixie';
  seconds: number[];
  minutes: number[];
  hours: number[];
  daysOfMonth: number[];
  months: number[];
  daysOfWeek: number[];
  years: number[];
  everyDayOfMonth: boolean;
  everyDayOfWeek: boolean;
  lastDayOffsets: number[];
  nearestWeekdays: number[];
  lastWeekdayOffsets: number[];
  lastDaysOfWeek: number[];
  nthDaysOfWeek: { dayOfWeek: number; nth: number }[];
  dayOr: boolean;
  interval: boolean;
}

export namespace cron {
  /** The next times the expression fires; fewer than `count` (even none) when it runs out. @throws CronSyntaxError */
  function next(expr: string, options?: CronNextOptions): Date[];
  function validate(expr: string): { ok: boolean; error?: string };
  /** @throws CronSyntaxError */
  function describe(expr: string): CronDescription;
}

/** The options of listTasks; any other key is refused (ERR_INVALID_ARG_VALUE, naming the nearest). */
export interface ListTasksOptions {
  /** The runtime name whose durable tasks are listed. */
  name: string;
  /** Only tasks in this state. */
  status?: TaskStatus;
  /** Only tasks started from this global name or 'mod.fn' path. */
  entry?: string;
  /** Only tasks spawned with this name (rt.spawn's `name`). */
  label?: string;
  /** The `next` of the page before. @default '' */
  after?: string;
  /** Tasks at most, 1 to 1,000. @default 100 */
  limit?: number;
}

/** A durable task as listTasks reads it from the store. */
export interface ListedTask {
  id: string;
  status: TaskStatus;
  waiting?: TaskWaiting;
  /** The name it was spawned with, kept across restarts. */
  name?: string;
  /** Its entry (none for a finished task: its end record does not keep it). */
  entry?: string;
  key: string | null;
  /** Its arguments, summarised. */
  args?: string[];
  /** When it finished. */
  ended?: Date;
  /** A record that does not read: why. */
  error?: string;
}

/**
 * A runtime name's durable tasks as a store holds them, without activating
 * any: a page in id order, filtered; `next` is null after the last page.
 */
export function listTasks(
  store: DirectoryStore | PostgresStore | KeyedStore,
  options: ListTasksOptions,
): Promise<{ tasks: ListedTask[]; next: string | null }>;

export interface DashboardOptions {
  /** Runtimes of this process, by the label the page shows. */
  runtimes?: Record<string, Runtime> | Map<string, Runtime> | Runtime[];
  /** A fleet member: the runtimes it hosts now. */
  fleet?: Member;
  /** A store: its names and their durable tasks, read without activating any. */
  store?: DirectoryStore | PostgresStore;
  /** Offer cancel and resume (POSTs with the X-Lua-Tasks-Dashboard header). @default false */
  allowActions?: boolean;
  /** The mount path when the server does not strip it (node:http); '' when it does (Express). @default '' */
  prefix?: string;
}

/** A request handler for node:http, Express (it calls `next` for a path not its own) or Fastify (req.raw, reply.raw). */
export interface DashboardHandler {
  (req: IncomingMessage, res: ServerResponse, next?: () => void): void;
  /** Stops keeping the runtimes' failures (removes its 'taskerror' listeners). */
  close(): void;
}

/** A dashboard of what runs, to mount in the embedder's own server; read-only unless allowActions. */
export function createDashboard(options: DashboardOptions): DashboardHandler;
