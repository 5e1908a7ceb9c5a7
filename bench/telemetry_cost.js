// SPDX-License-Identifier: MIT
// What the telemetry option costs a task started from JS (W8's "from JS" case), in CPU ns per task start + end.
//
// `node bench/telemetry_cost.js [package dir]`: in a child process per
// measurement, rt.start('f') 100,000 times a round, 15 rounds, the best
// round kept; children alternate between a runtime without the option and
// one with `telemetry: true` and no SDK registered (the API's no-ops), 6 of
// each, and the median of their bests is printed. With a package dir
// (another checkout, say the one before a change), its Runtime without the
// option alternates with them, for a before/after. CPU time
// (process.cpuUsage), not wall time: on a shared machine other processes
// stretch wall time, not this one's CPU time. One variant a process: a
// loop calling two Runtime classes would measure a polymorphic call site.
'use strict';

const path = require('node:path');
const { execFileSync } = require('node:child_process');

const N = 1e5;
const ROUNDS = 15;
const CHILDREN = 6;

function child(variant, dir) {
  const { Runtime } = require(dir);
  const rt = new Runtime(variant === 'on' ? { telemetry: true } : {});
  rt.load('count = 0 function f() count = count + 1 end');
  let best = Infinity;
  for (let r = 0; r < ROUNDS; r++) {
    const c0 = process.cpuUsage();
    for (let i = 0; i < N; i++) rt.start('f');
    const c = process.cpuUsage(c0);
    best = Math.min(best, ((c.user + c.system) * 1000) / N);
  }
  rt.closeSync();
  process.stdout.write(String(best));
}

function main() {
  const here = path.resolve(__dirname, '..');
  const variants = [
    ['telemetry off', 'off', here],
    ['telemetry: true, no SDK', 'on', here],
  ];
  if (process.argv[2]) variants.push([`${process.argv[2]}, no option`, 'off', path.resolve(process.argv[2])]);
  const bests = variants.map(() => []);
  for (let k = 0; k < CHILDREN; k++) {
    variants.forEach(([, variant, dir], i) => {
      const out = execFileSync(process.execPath, [__filename, '--child', variant, dir], { encoding: 'utf8' });
      bests[i].push(Number(out));
    });
  }
  variants.forEach(([name], i) => {
    const b = bests[i].sort((x, y) => x - y);
    const median = (b[(CHILDREN - 1) >> 1] + b[CHILDREN >> 1]) / 2;
    console.log(`${name.padEnd(40)} ${median.toFixed(0)} ns per task (bests ${b.map((x) => x.toFixed(0)).join(' ')})`);
  });
}

if (process.argv[2] === '--child') child(process.argv[3], process.argv[4]);
else main();
