// SPDX-License-Identifier: MIT
// W9: the state codec, COMMIT latency, group commit, and the loop's worst stall during big COMMITs and restores.
//
// Serialize and restore go through the addon directly (one-shot snapshot /
// restore of tasks.state), so the figures are the codec's, without any file
// I/O. COMMIT latency is a task's coroutine.yield("COMMIT") with the
// directory store on this disk (one SQLite transaction, WAL, synchronous=FULL,
// on the store's writer thread), for a 1 KB and a 10 MB state, beside a bare
// fs.writeFileSync + fsync of the same bytes (which blocks the loop). Group
// commit: 100 rt.commit() calls at once, counting the store's saves (one
// transaction each). Stall: the longest gap between two turns of the loop (a
// setImmediate chain) while a 50 MB state is committed and restored.
'use strict';

const fs = require('fs');
const os = require('os');
const path = require('path');
const binding = require('../lib/binding');
const { Runtime, DirectoryStore } = require('..');
const { nowMs, median, check } = require('./harness');

const ENTRIES = 100000;
const FILL = `
  local s = {}
  for i = 1, ${ENTRIES} do
    s[i] = { name = "player" .. i, score = i * 1.5, level = i % 60, tags = { "a", "b" } }
  end
  tasks.state = s
  return #s
`;
// About `mb` MB of state in 1,000-byte strings, so the size is what it says.
const fillBytes = (kb) =>
  `local s = {} for i = 1, ${kb} do s[i] = string.rep(string.char(65 + i % 26), 1000) end tasks.state = s`;

function percentile(xs, p) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}

/** Runs fn while a setImmediate chain measures the loop; returns [fn's result, the longest turn in ms]. */
async function withStallProbe(fn) {
  let worst = 0;
  let last = nowMs();
  let on = true;
  const tick = () => {
    const t = nowMs();
    worst = Math.max(worst, t - last);
    last = t;
    if (on) setImmediate(tick);
  };
  setImmediate(tick);
  const start = nowMs();
  const result = await fn();
  const wall = nowMs() - start;
  on = false;
  worst = Math.max(worst, nowMs() - last);
  return [result, worst, wall];
}

async function commitLatency(dir, name, kb, n) {
  const rt = await Runtime.open({ name, store: dir });
  rt.load(fillBytes(kb));
  rt.set('stamp', () => nowMs());
  rt.load(`function commits(n)
    local lat = {}
    for i = 1, n do
      tasks.state.i = i
      local t = stamp()
      coroutine.yield("COMMIT")
      lat[i] = stamp() - t
    end
    return lat
  end`);
  const lat = await rt.call('commits', n);
  await rt.close();
  // The snapshot as the store keeps it (a row of its SQLite database).
  const store = new DirectoryStore(dir);
  const bytes = await store.load(name);
  await store.close();
  const raw = [];
  for (let i = 0; i < n; i++) {
    const t = nowMs();
    const fd = fs.openSync(path.join(dir, 'raw'), 'w');
    fs.writeSync(fd, bytes);
    fs.fsyncSync(fd);
    fs.closeSync(fd);
    raw.push(nowMs() - t);
  }
  return { lat, raw, size: bytes.length };
}

async function run() {
  const rows = [];
  const native = new binding.NativeRuntime(
    { libs: 'safe', hasStore: true },
    () => {},
    () => {},
    {},
    () => {},
  );
  check('fill', native.load(FILL)[0], ENTRIES);
  const enc = [];
  const dec = [];
  let bytes;
  for (let i = 0; i < 7; i++) {
    let t = nowMs();
    bytes = native.snapshot();
    enc.push(nowMs() - t);
    const other = new binding.NativeRuntime(
      { libs: 'safe', hasStore: true },
      () => {},
      () => {},
      {},
      () => {},
    );
    t = nowMs();
    other.restore(bytes);
    dec.push(nowMs() - t);
    check('restored entries', other.load('return #tasks.state, tasks.state[77].name')[1], 'player77');
    other.close();
  }
  native.close();
  const mb = bytes.length / 1e6;
  const encMs = median(enc.slice(2));
  const decMs = median(dec.slice(2));
  rows.push({
    case: `serialize ${ENTRIES} entries (${mb.toFixed(1)} MB)`,
    impl: 'lua-tasks',
    value: mb / (encMs / 1000),
    unit: 'MB/s',
    target: '≥ 200 MB/s',
    ok: mb / (encMs / 1000) >= 200,
    note: `${encMs.toFixed(1)} ms`,
  });
  rows.push({
    case: `restore ${ENTRIES} entries (${mb.toFixed(1)} MB)`,
    impl: 'lua-tasks',
    value: mb / (decMs / 1000),
    unit: 'MB/s',
    target: '≥ 200 MB/s',
    ok: mb / (decMs / 1000) >= 200,
    note: `${decMs.toFixed(1)} ms`,
  });

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lua-tasks-bench-'));
  try {
    for (const [label, kb, n] of [
      ['1 KB', 1, 100],
      ['10 MB', 10000, 20],
    ]) {
      const { lat, raw } = await commitLatency(dir, `lat${kb}`, kb, n);
      rows.push({
        case: `COMMIT latency p50, ${label} state`,
        impl: 'lua-tasks',
        value: percentile(lat, 50),
        unit: 'ms',
        note: `${n} COMMITs: temp file + fsync + rename + dir fsync, off the loop`,
      });
      rows.push({
        case: `COMMIT latency p99, ${label} state`,
        impl: 'lua-tasks',
        value: percentile(lat, 99),
        unit: 'ms',
      });
      rows.push({
        case: `COMMIT latency p50, ${label} state`,
        impl: 'fs.writeFileSync + fsync',
        value: percentile(raw, 50),
        unit: 'ms',
        note: 'same bytes, no rename, blocks the loop',
      });
      rows.push({
        case: `COMMIT latency p99, ${label} state`,
        impl: 'fs.writeFileSync + fsync',
        value: percentile(raw, 99),
        unit: 'ms',
      });
    }

    // Group commit: 100 rt.commit() at once.
    const inner = new DirectoryStore(dir);
    let saves = 0;
    const counting = {
      acquire: (n) => inner.acquire(n),
      load: (n) => inner.load(n),
      save: (...a) => {
        saves++;
        return inner.save(...a);
      },
    };
    const rt = await Runtime.open({ name: 'group', store: counting });
    rt.load(fillBytes(1));
    const t = nowMs();
    const all = [];
    for (let i = 0; i < 100; i++) all.push(rt.commit());
    await Promise.all(all);
    const wall = nowMs() - t;
    await rt.close();
    rows.push({
      case: '100 concurrent rt.commit(), 1 KB state',
      impl: 'lua-tasks',
      value: wall,
      unit: 'ms',
      note: `${saves} saves (one transaction each)`,
    });
    const t1 = nowMs();
    for (let i = 0; i < 100; i++) {
      const fd = fs.openSync(path.join(dir, 'raw'), 'w');
      fs.writeSync(fd, Buffer.alloc(1000));
      fs.fsyncSync(fd);
      fs.closeSync(fd);
    }
    rows.push({
      case: '100 concurrent rt.commit(), 1 KB state',
      impl: 'fs.writeFileSync + fsync ×100',
      value: nowMs() - t1,
      unit: 'ms',
      note: '100 fsyncs, blocks the loop',
    });

    // The loop's worst turn during a 50 MB COMMIT and its restore.
    const big = await Runtime.open({ name: 'big', store: dir });
    big.load(fillBytes(50000));
    const [, commitStall, commitWall] = await withStallProbe(() => big.commit());
    await big.close();
    const [again, restoreStall, restoreWall] = await withStallProbe(() => Runtime.open({ name: 'big', store: dir }));
    check('restored 50 MB', again.load('return #tasks.state')[0], 50000);
    await again.close();
    rows.push({
      case: 'worst loop turn during a 50 MB COMMIT',
      impl: 'lua-tasks',
      value: commitStall,
      unit: 'ms',
      target: '≤ 10 ms',
      ok: commitStall <= 10,
      note: `COMMIT took ${commitWall.toFixed(0)} ms`,
    });
    rows.push({
      case: 'worst loop turn during a 50 MB restore (Runtime.open)',
      impl: 'lua-tasks',
      value: restoreStall,
      unit: 'ms',
      target: '≤ 10 ms',
      ok: restoreStall <= 10,
      note: `open took ${restoreWall.toFixed(0)} ms`,
    });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  return rows;
}

module.exports = { id: 'w9', title: 'W9: state codec, COMMIT latency, group commit and loop stalls', run };
