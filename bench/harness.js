// SPDX-License-Identifier: MIT
// Benchmark plumbing shared by the workloads: interleaved sampling, medians, the machine.
//
// Workloads measure several implementations in one process. Samples are taken
// round-robin (one rep of A, one of B, ...), not all of A then all of B, so a
// slow drift of the machine (a noisy neighbour on a VM, thermal limits) lands
// on every implementation alike instead of on whichever ran last.
'use strict';

const { execFileSync, fork, spawnSync } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');

/** Milliseconds since an arbitrary origin, from the monotonic clock. */
function nowMs() {
  return Number(process.hrtime.bigint()) / 1e6;
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/**
 * Samples every implementation round-robin.
 * @param {Array<{ name: string, warmup?: number, reps: number,
 *   once: () => (object|Promise<object>) }>} impls  once() runs one rep and
 *   returns an object of numeric measures, e.g. { loopMs, wallMs }; it throws
 *   if the rep computed a wrong result.
 * @returns {Promise<Map<string, object>>} per implementation, per measure:
 *   { median, min, max, n, samples } (samples in the order taken, so two
 *   implementations with equal warmup and reps can be compared round by round)
 */
async function sample(impls) {
  const samples = new Map(impls.map((i) => [i.name, []]));
  const warm = new Map(impls.map((i) => [i.name, i.warmup || 0]));
  for (;;) {
    let busy = false;
    for (const impl of impls) {
      const left = warm.get(impl.name);
      if (left > 0) {
        await impl.once();
        warm.set(impl.name, left - 1);
        busy = true;
      } else if (samples.get(impl.name).length < impl.reps) {
        samples.get(impl.name).push(await impl.once());
        busy = true;
      }
    }
    if (!busy) break;
  }
  const out = new Map();
  for (const [name, reps] of samples) {
    const stats = {};
    for (const key of Object.keys(reps[0])) {
      const xs = reps.map((r) => r[key]);
      stats[key] = { median: median(xs), min: Math.min(...xs), max: Math.max(...xs), n: xs.length, samples: xs };
    }
    out.set(name, stats);
  }
  return out;
}

/** Throws unless `got` equals `want` (compared as BigInt when either is one). */
function check(what, got, want) {
  const same = typeof got === 'bigint' || typeof want === 'bigint' ? BigInt(got) === BigInt(want) : got === want;
  if (!same) throw new Error(`${what}: wrong result ${String(got)}, expected ${String(want)}.`);
}

/** The p-th percentile (0..100) of xs, nearest rank. */
function percentile(xs, p) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
}

/**
 * Runs `node [nodeArgs] file args` in a child process and returns the JSON
 * object it printed on its last stdout line. For workloads too heavy, or too
 * likely to crash or hang (a peer's failure mode), to share the bench's
 * process. A child may end itself with SIGKILL once it has printed (to skip a
 * teardown that is not being measured); any other failure throws.
 */
/**
 * Records the gaps between calls of a setInterval(…, everyMs), counted from
 * its first call. Returns { gaps, stop() }.
 */
function intervalGaps(everyMs) {
  const gaps = [];
  let last = null;
  const iv = setInterval(() => {
    const now = nowMs();
    if (last !== null) gaps.push(now - last);
    last = now;
  }, everyMs);
  return { gaps, stop: () => clearInterval(iv) };
}

function nodeChild(file, args, { nodeArgs = [], timeoutMs = 120000 } = {}) {
  const p = spawnSync(process.execPath, [...nodeArgs, file, ...args.map(String)], {
    encoding: 'utf8',
    timeout: timeoutMs,
    killSignal: 'SIGKILL',
    maxBuffer: 64 << 20,
  });
  const last = (p.stdout || '').trim().split('\n').pop();
  if (last && last.startsWith('{')) return JSON.parse(last);
  const why = p.error ? p.error.message : p.signal ? `signal ${p.signal}` : `exit ${p.status}`;
  throw new Error(`${path.basename(file)} ${args.join(' ')}: ${why}: ${(p.stderr || '').trim().slice(-500)}`);
}

/**
 * Touches `gib` GiB in a throwaway child and lets it exit. On a VM that hands
 * freed memory back to its host within seconds (virtio free page reporting),
 * the first touch of each page costs several µs in the host: a child started
 * after a quiet spell pays that on every page it faults in, one started right
 * after another has freed memory does not. Calling this right before each
 * memory-heavy child puts every implementation on the same footing.
 */
function warmMemory(gib) {
  const src = `const keep = []; for (let i = 0; i < ${gib}; i++) keep.push(Buffer.alloc(2 ** 30, 1));`;
  const p = spawnSync(process.execPath, ['-e', src], { stdio: 'ignore', timeout: 120000 });
  if (p.status !== 0) throw new Error(`warmMemory(${gib}): the child failed (${p.error || p.signal || p.status})`);
}

/**
 * Runs programs (the floor, the lua5.4 CLI) from a small helper process
 * (spawner.js), forked once when made, never from the bench's own process:
 * a fork marks every page of the forking process copy-on-write, and its next
 * write to each page faults. Beside a runtime holding 100,000 waiting tasks
 * (200 MB) that fault storm was what W8 measured after each run of a child:
 * a start cost 10 µs instead of 0.6. Make it before the workload's runtimes
 * (the one fork then costs little) and close() it at the end.
 */
class Spawner {
  constructor() {
    this.child = fork(path.join(__dirname, 'spawner.js'), [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    this.pending = new Map();
    this.next = 0;
    this.child.on('message', (m) => {
      const done = this.pending.get(m.id);
      this.pending.delete(m.id);
      done(m);
    });
  }

  /**
   * Runs `file args` to its end in the helper.
   * @returns {Promise<{ status: number|null, signal: string|null, error: string|null,
   *   stdout: string, stderr: string, wallMs: number }>} wallMs: spawn to exit
   */
  run(file, args = [], timeoutMs = 120000) {
    const id = this.next++;
    return new Promise((resolve) => {
      this.pending.set(id, resolve);
      this.child.send({ id, file, args, timeoutMs });
    });
  }

  close() {
    this.child.disconnect();
  }
}

/**
 * runLuaCli's chunk run through a Spawner: resolves to { count, ms, wallMs }
 * as runLuaCli returns.
 */
async function runLuaCliIn(spawner, src) {
  const p = await spawner.run('lua5.4', ['-e', src]);
  if (p.status !== 0) throw new Error(`lua5.4 failed: ${p.stderr || p.error || p.signal}`);
  const [count, dt] = p.stdout.trim().split(' ');
  return { count, ms: Number(dt) * 1e3, wallMs: p.wallMs };
}

/**
 * The floor: bench/floor/floor.cpp, built beside the C++ tests (CMake target
 * bench_floor, in the build the addon is loaded from). It times, on the same
 * Lua library, what a task is made of: { yield, yield10k, spawn, c_to_lua,
 * lua_to_c } in ns per operation (see the program's header). Returns an
 * implementation for sample() whose once() runs the program through
 * `spawner`, or null when it was not built (a build without the C++ tests).
 */
function floorImpl(spawner, { warmup = 1, reps = 5 } = {}) {
  const root = path.join(__dirname, '..');
  const file = path.join(process.env.LUA_TASKS_BUILD_DIR || path.join(root, 'build'), 'bench_floor');
  if (!fs.existsSync(file)) return null;
  return {
    name: 'floor',
    warmup,
    reps,
    async once() {
      const p = await spawner.run(file);
      if (p.status !== 0) {
        throw new Error(`bench_floor failed: ${String(p.stderr || p.error || p.signal).trim()}`);
      }
      const ns = JSON.parse(p.stdout.trim().split('\n').pop());
      delete ns.lua; // the library's version, not a measure
      return ns;
    },
  };
}

/**
 * A row for one floor measure beside lua-tasks's `value` (same unit): the
 * "× lua-tasks" column is floor ÷ lua-tasks as for any row, and the note says
 * lua-tasks's multiple of the floor. `maxRatio`, if given, is the target for
 * that multiple. With no floor built, the row says so.
 */
function floorRow(stats, measure, { kase, impl, unit, value, note, maxRatio }) {
  const f = stats && stats.get('floor');
  if (!f) {
    return { case: kase, impl, value: NaN, unit, note: 'bench_floor not built (it is built with the C++ tests)' };
  }
  const m = f[measure];
  const times = value / m.median;
  const row = {
    case: kase,
    impl,
    value: m.median,
    min: m.min,
    unit,
    ratio: m.median / value,
    note: `${note}; lua-tasks ${times.toFixed(2)}× this`,
  };
  if (maxRatio !== undefined) {
    row.target = `lua-tasks ≤ ${maxRatio}× this`;
    row.ok = times <= maxRatio;
  }
  return row;
}

/** Whether the lua5.4 CLI can be run here (it is a baseline, not a requirement). */
function haveLuaCli() {
  const p = spawnSync('lua5.4', ['-v'], { encoding: 'utf8' });
  return !p.error && p.status === 0;
}

/**
 * Runs a chunk in the lua5.4 CLI. The chunk prints one line "<count> <seconds>"
 * (what it computed, and its own os.clock() timing); returns
 * { count: the string, ms, wallMs: spawn to exit }.
 */
function runLuaCli(src) {
  const t = nowMs();
  const p = spawnSync('lua5.4', ['-e', src], { encoding: 'utf8' });
  const wallMs = nowMs() - t;
  if (p.status !== 0) throw new Error(`lua5.4 failed: ${p.stderr || p.error}`);
  const [count, dt] = p.stdout.trim().split(' ');
  return { count, ms: Number(dt) * 1e3, wallMs };
}

function tryExec(file, args) {
  try {
    return execFileSync(file, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
  } catch {
    return null;
  }
}

function packageVersion(name) {
  try {
    return require(path.join(name, 'package.json')).version;
  } catch {
    return null;
  }
}

/** What the numbers were measured on. */
function machine() {
  let cpu = os.cpus()[0] ? os.cpus()[0].model : 'unknown';
  try {
    const m = /^model name\s*:\s*(.*)$/m.exec(fs.readFileSync('/proc/cpuinfo', 'utf8'));
    if (m) cpu = m[1].trim();
  } catch {
    // not Linux: os.cpus() it is
  }
  const luaCli = tryExec('lua5.4', ['-v']);
  const liblua = tryExec('dpkg-query', ['-W', '-f=${Version}', 'liblua5.4-0']);
  return {
    cpu,
    cores: os.cpus().length,
    memory: `${Math.round(os.totalmem() / 2 ** 30)} GiB`,
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    node: process.version,
    lua: luaCli ? luaCli.replace(/\s+Copyright.*$/, '') : 'lua5.4 CLI not found',
    liblua: liblua ? `liblua5.4-0 ${liblua}` : 'unknown',
    wasmoon: packageVersion('wasmoon'),
    fengari: packageVersion('fengari'),
  };
}

/**
 * A database of the run's own on the PostgreSQL server of `url` (its role
 * may CREATEDB): `{ url, name, drop() }`; drop() ends any session left in it.
 * `tag` goes in its name (which workload made it).
 */
async function pgDatabase(url, tag) {
  const { Client } = require('pg');
  const name = `lua_tasks_bench_${tag}_${process.pid}_${Date.now()}`;
  const admin = async (sql) => {
    const c = new Client({ connectionString: url });
    await c.connect();
    try {
      await c.query(sql);
    } finally {
      await c.end();
    }
  };
  await admin(`CREATE DATABASE ${name}`);
  const u = new URL(url);
  u.pathname = `/${name}`;
  return { url: u.href, name, drop: () => admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) };
}

/** A number with thousands separators and `digits` decimals, for notes. */
const fmt = (n, digits = 0) =>
  n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

/** Runs `measure(spawner)` with a Spawner made before its runtimes (see Spawner), closed after. */
async function withSpawner(measure) {
  const spawner = new Spawner();
  try {
    return await measure(spawner);
  } finally {
    spawner.close();
  }
}

module.exports = {
  fmt,
  withSpawner,
  pgDatabase,
  nowMs,
  median,
  percentile,
  sample,
  check,
  nodeChild,
  warmMemory,
  intervalGaps,
  machine,
  Spawner,
  runLuaCliIn,
  floorImpl,
  floorRow,
  haveLuaCli,
  runLuaCli,
};
