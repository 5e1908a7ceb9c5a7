// SPDX-License-Identifier: MIT
// Compiled with tsc --noEmit --strict by types.test.js: the public API as a user writes it.
import {
  Runtime,
  Task,
  LuaError,
  DirectoryStore,
  PostgresStore,
  Resources,
  ResourceCode,
  Fleet,
  cron,
  AbortError,
  TaskError,
  SpawnOptions,
  listTasks,
  ListedTask,
  createDashboard,
  DashboardHandler,
} from 'lua-tasks';
import { createServer } from 'node:http';

async function main(): Promise<void> {
  const rt = new Runtime({
    libs: 'safe',
    memoryLimit: 1 << 20,
    conversionLimit: 4 << 20,
    print: (line: string) => console.log(line),
    timeSlice: 5,
  });
  const values: unknown[] = rt.load('return 1, 2', { name: 'chunk' });
  rt.set('add', (a: number, b: number) => a + b);
  const g: unknown = rt.get('add');
  const task: Task = rt.start('fn', 1, 'two');
  const id: string = task.id;
  const status: 'running' | 'waiting' | 'done' | 'failed' | 'cancelled' = task.status;
  const result: unknown = await task.result;
  const r2: unknown = await rt.call('fn');
  const n: number = await rt.call<number>('fn');
  const typed: Task<string> = rt.start<string>('fn');
  const text: string = await typed.result;
  const zoned = new Runtime({
    timeZone: 'Europe/Paris',
    modulePaths: ['/tmp'],
    taskTimeout: 100,
    keepAlive: false,
    trustedObjects: false,
  });
  zoned.closeSync();
  console.log(n, text);
  const opened = await Runtime.open({ name: 'n', store: '/tmp/x', storeTimeout: 1000 });
  await opened.close();
  const resumed: boolean = rt.resume(id, 1, 2);
  const sent: boolean = task.send('event', 1) && rt.send(id, 'event');
  console.log(sent);
  const cancelled: boolean = rt.cancel(id, 'why');
  const info = rt.task(id);
  if (info && info.waiting) console.log(info.waiting.instruction, info.waiting.until?.toISOString());
  rt.tasks().forEach((t) => console.log(t.id, t.status));
  rt.on('taskerror', (t, err: Error) => console.log(t.id, err.message));
  rt.on('taskdone', (t, value) => console.log(t.id, value));
  const ac = new AbortController();
  const spawned: Task<number, { owner: string }> = rt.spawn<number, { owner: string }>('fn', {
    args: [1, 'two'],
    signal: ac.signal,
    name: 'job',
    meta: { owner: 'me' },
  });
  const owner: string | undefined = spawned.meta?.owner;
  const label: string | undefined = spawned.name;
  const sum: number = await spawned.result;
  const plain: Task = rt.spawn('fn');
  const opts: SpawnOptions = { args: [], name: 'x' };
  rt.spawn('fn', opts).cancel('why');
  const again: boolean = plain.resume(1, 'two') || plain.cancel();
  const snap = rt.task(spawned.id);
  console.log(owner, label, sum, again, snap?.name, snap?.meta, rt.tasks()[0]?.name);
  rt.on('taskcancel', (t: Task, err: TaskError | AbortError) => {
    if (err instanceof AbortError) console.log(t.id, err.code, err.cause);
    else console.log(t.id, err.code, err.reason);
  });
  rt.ref().unref();
  const s = rt.stats();
  console.log(
    s.memoryUsed + s.memoryPeak + s.memoryLimit + s.conversionLimit + s.tasks + s.preemptions,
    values,
    g,
    status,
    result,
    r2,
    resumed,
    cancelled,
  );
  await rt.commit();
  await rt.close();
  rt.closeSync();
  const pg = new PostgresStore({ connectionString: 'postgres://u@127.0.0.1/db', leaseMs: 5000 });
  const pgStats: number = pg.stats().transactions;
  void pgStats;
  const p = await Runtime.open({ name: 'n', store: new DirectoryStore('/tmp/x') });
  await Runtime.open({ name: 'n', store: { load: async () => null, save: async () => {} } });
  p.closeSync();
  try {
    rt.load('x');
  } catch (e) {
    if (e instanceof LuaError) console.log(e.code, e.luaStack, e.line, e.source, e.code === 'ERR_LUA_SYNTAX');
  }
}
const times: Date[] = cron.next('0 0 12 ? * MON-FRI', { from: new Date(), tz: 'UTC', count: 3 });
const check: { ok: boolean; error?: string } = cron.validate('*/5 * * * *');
const fields: number[] = cron.describe('*/15 * * * *').minutes;
console.log(times, check, fields);
void main;

async function observe(rt: Runtime) {
  const store = new DirectoryStore('/tmp/x');
  const page = await listTasks(store, { name: 'game', status: 'waiting', label: 'quest 7', limit: 10 });
  const first: ListedTask | undefined = page.tasks[0];
  const next: string | null = page.next;
  console.log(first && first.waiting && first.waiting.instruction, first && first.name, next);
  const dashboard: DashboardHandler = createDashboard({ runtimes: { game: rt }, store, allowActions: false });
  createServer(dashboard).close();
  dashboard.close();
}
void observe;

async function fleet(): Promise<void> {
  const member = await Fleet.join({ connectionString: 'postgres://localhost/app', schema: 'game' });
  const id: string = await member.spawn('room-7', 'room', { key: 'main' });
  const out: unknown = await member.run('room-7', 'grant', { key: 'grant:ada:1', args: ['ada', 10], name: 'grant' });
  const woke: boolean = await member.resume(`${id}@room-7`, 'hi');
  console.log(id, out, woke, await member.resume('room-7', id, 'hi'));
  await member.leave();
}

async function resources(): Promise<void> {
  const res = await Resources.open('./state', {
    modules: { item: 'return {}' },
    idleMs: 1000,
    maxResources: 100,
    maxPaths: 400,
  });
  const made: { id: string | null; code: ResourceCode } = await res.create('item', 'resources/ada/sword', 'sword');
  if (made.id !== null) {
    const { result, code } = await res.invoke(made.id, 'update_resource', { level: 2 });
    const once: ResourceCode = (await res.invokeOnce('req-1', made.id, 'update_resource', { level: 3 })).code;
    console.log(once, await res.resume('t1-0000000000001@lua-tasks.r.0', 1));
    const linked: ResourceCode = await res.link(made.id, 'best/sword');
    console.log(result, code, linked, await res.list('resources/ada/*'), (await res.unlink('best/sword')).removed);
    const s: { resources: number; paths: number } = await res.stats();
    const page = await res.tasks('resources/ada/*', { status: 'waiting', limit: 10 });
    console.log(
      page.tasks.map((t) => `${t.path} ${t.resource} ${t.id}`),
      page.next,
    );
    console.log(s);
  }
  const rt = new Runtime({ resources: res });
  await rt.close();
  await res.close();
}
void resources;
void fleet;
