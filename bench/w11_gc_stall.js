// SPDX-License-Identifier: MIT
// W11: loop stalls from Lua's garbage collector with many tasks alive. 100,000
// tasks wait INDEFINITELY while one task makes garbage (3,000 rounds of 1,000
// small tables, an IMMEDIATE yield after each round) and a setInterval(…, 1)
// records the gaps between its calls. Run once with the collector in each
// mode, set by collectgarbage() after the tasks start: a generational minor
// collection re-traverses every live coroutine, so with this many alive each
// minor one costs as much as a full cycle. This is why a runtime switches to
// incremental mode once 10,000 tasks are alive (docs/performance.md, "Garbage
// collection"). Each mode runs in its own child process, so neither inherits
// the other's heap.
'use strict';

const { nowMs, nodeChild, percentile, check, intervalGaps } = require('./harness');

const TASKS = 100000;
const ROUNDS = 3000;

const LUA = `
function park() coroutine.yield("INDEFINITELY") end
function churn(rounds)
  local keep = {}
  for r = 1, rounds do
    for i = 1, 1000 do keep[i % 100 + 1] = { i, tostring(i) } end
    coroutine.yield()
  end
  return rounds
end`;

async function child(mode) {
  const { Runtime } = require('..');
  const rt = new Runtime();
  rt.load(LUA);
  rt.load(`for i = 1, ${TASKS} do tasks.start(park) end collectgarbage("${mode}") collectgarbage()`);
  const { gaps, stop } = intervalGaps(1);
  const t = nowMs();
  const rounds = await rt.call('churn', ROUNDS);
  const ms = nowMs() - t;
  stop();
  check(`${mode} rounds`, rounds, ROUNDS);
  check(`${mode} tasks waiting`, rt.stats().tasks, TASKS);
  rt.closeSync();
  require('fs').writeSync(
    1,
    `${JSON.stringify({ ms, max: Math.max(...gaps), p99: percentile(gaps, 99), n: gaps.length })}\n`,
  );
  process.exit(0);
}

function run() {
  const rows = [];
  const kase = `${TASKS.toLocaleString('en')} tasks waiting, one making garbage`;
  const inc = nodeChild(__filename, ['incremental'], { timeoutMs: 60000 });
  const gen = nodeChild(__filename, ['generational'], { timeoutMs: 60000 });
  rows.push({
    case: `${kase}: loop stall max`,
    impl: 'lua-tasks, incremental (the mode past 10,000 tasks)',
    value: inc.max,
    unit: 'ms',
    ratio: 1,
    note: `setInterval(…, 1) gaps; p99 ${inc.p99.toFixed(1)} ms; ${ROUNDS} rounds took ${inc.ms.toFixed(0)} ms`,
  });
  rows.push({
    case: `${kase}: loop stall max`,
    impl: 'lua-tasks, generational',
    value: gen.max,
    unit: 'ms',
    ratio: gen.max / inc.max,
    note: `p99 ${gen.p99.toFixed(1)} ms; ${ROUNDS} rounds took ${gen.ms.toFixed(0)} ms`,
  });
  return rows;
}

module.exports = {
  id: 'w11',
  title: `W11: loop stalls from the collector with ${TASKS.toLocaleString('en')} tasks alive, by collector mode`,
  run,
};

if (require.main === module) {
  const [mode] = process.argv.slice(2);
  if (mode === 'incremental' || mode === 'generational') {
    child(mode).catch((err) => {
      console.error(err);
      process.exit(1);
    });
  }
}
