// SPDX-License-Identifier: MIT
// W9: the state codec (serialize / restore MB/s of a 100,000-entry state) and COMMIT latency.
//
// Serialize and restore go through the addon directly (snapshot / restore of
// tasks.state), so the figures are the codec's, without any file I/O. COMMIT
// latency is a task's coroutine.yield("COMMIT") with the directory store on
// this disk (temp file, fsync, rename, fsync of the directory), beside a bare
// fs.writeFileSync + fsync of the same bytes.
'use strict';

const fs = require('fs');
const os = require('os');
const path = require('path');
const binding = require('../lib/binding');
const { Runtime } = require('..');
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

function percentile(xs, p) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}

async function run() {
  const rows = [];
  const native = new binding.NativeRuntime({ libs: 'safe', hasStore: true }, () => {}, () => {}, {}, () => {});
  check('fill', native.load(FILL)[0], ENTRIES);
  const enc = [];
  const dec = [];
  let bytes;
  for (let i = 0; i < 7; i++) {
    let t = nowMs();
    bytes = native.snapshot();
    enc.push(nowMs() - t);
    const other = new binding.NativeRuntime({ libs: 'safe', hasStore: true }, () => {}, () => {}, {}, () => {});
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
  rows.push({ case: `serialize ${ENTRIES} entries (${mb.toFixed(1)} MB)`, impl: 'lua-tasks', value: mb / (encMs / 1000), unit: 'MB/s', target: '≥ 200 MB/s', ok: mb / (encMs / 1000) >= 200, note: `${encMs.toFixed(1)} ms` });
  rows.push({ case: `restore ${ENTRIES} entries (${mb.toFixed(1)} MB)`, impl: 'lua-tasks', value: mb / (decMs / 1000), unit: 'MB/s', target: '≥ 200 MB/s', ok: mb / (decMs / 1000) >= 200, note: `${decMs.toFixed(1)} ms` });

  // COMMIT latency on this disk, small state (a counter), 100 commits.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lua-tasks-bench-'));
  const rt = await Runtime.open({ name: 'bench', store: dir });
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
  const lat = await rt.call('commits', 100);
  rt.closeSync();
  const small = fs.readFileSync(path.join(dir, 'bench.state'));
  const raw = [];
  for (let i = 0; i < 100; i++) {
    const t = nowMs();
    const fd = fs.openSync(path.join(dir, 'raw'), 'w');
    fs.writeSync(fd, small);
    fs.fsyncSync(fd);
    fs.closeSync(fd);
    raw.push(nowMs() - t);
  }
  fs.rmSync(dir, { recursive: true, force: true });
  rows.push({ case: 'COMMIT latency p50', impl: 'lua-tasks', value: percentile(lat, 50), unit: 'ms', note: 'temp file + fsync + rename + dir fsync, off the loop' });
  rows.push({ case: 'COMMIT latency p99', impl: 'lua-tasks', value: percentile(lat, 99), unit: 'ms' });
  rows.push({ case: 'COMMIT latency p50', impl: 'fs.writeFileSync + fsync', value: percentile(raw, 50), unit: 'ms', note: 'same bytes, no rename, blocks the loop' });
  rows.push({ case: 'COMMIT latency p99', impl: 'fs.writeFileSync + fsync', value: percentile(raw, 99), unit: 'ms' });
  return rows;
}

module.exports = { id: 'w9', title: 'W9: state codec throughput and COMMIT latency', run };
