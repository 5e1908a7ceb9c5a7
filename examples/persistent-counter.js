// SPDX-License-Identifier: MIT
// persistent-counter: a Lua task counts and commits; the count survives kill and restart.
//   node examples/persistent-counter.js [dir] [ticks]
'use strict';
const os = require('node:os');
const path = require('node:path');
const { Runtime } = require('..');

async function main() {
  const dir = process.argv[2] || path.join(os.tmpdir(), 'lua-tasks-counter');
  const ticks = Number(process.argv[3] || 5);
  const rt = await Runtime.open({ name: 'counter', store: dir });
  rt.load(`function count(ticks)
    local s = tasks.state
    s.count = s.count or 0
    for _ = 1, ticks do
      s.count = s.count + 1
      coroutine.yield("COMMIT")              -- durably on disk before we go on
      coroutine.yield("FOR", 50, "MILLISECONDS")
    end
    return s.count
  end`);
  const before = rt.load('return tasks.state.count or 0')[0];
  const after = await rt.call('count', ticks);
  console.log(`count was ${before}, now ${after} (state in ${dir})`);
  await rt.close();
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
