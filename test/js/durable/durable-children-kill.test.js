'use strict';
// Durable children under SIGKILL at random instants (docs/durable.md#children):
// a durable parent fans out with tasks.start and joins every child; the
// process is killed anywhere, also between a child's start and the write of
// the parent's record of it. Counted in the store, inside steps (exact):
// every child started once and ended once (never a second child for one
// start, never one lost), and the parent finished once with every result.
// Lazily restored, and with durableRestore: 'all'.
const path = require('node:path');
const { killRounds } = require('../helpers');
const { Runtime } = require('../../..');

const CHILD = path.join(__dirname, '..', 'fixtures', 'durable-children-child.js');
const KILLS = Number(process.env.LUA_TASKS_CHILDREN_KILLS || 15);
const KIDS = 24;

// The counts the steps left in the store.
async function counts(dir) {
  const rt = await Runtime.open({ name: 'kids', store: dir });
  const [values] = rt.load(`
    local out = { parent = tasks.store.get("parent"), sum = tasks.store.get("sum") }
    for i = 1, ${KIDS} do
      out["start/" .. i] = tasks.store.get("start/" .. i)
      out["end/" .. i] = tasks.store.get("end/" .. i)
    end
    return out`);
  await rt.close();
  return values;
}

for (const restore of ['lazy', 'all']) {
  test(`a durable fan-out of ${KIDS} children survives ${KILLS} SIGKILLs (durableRestore: '${restore}'): each child once`, async () => {
    const { kills, rounds } = await killRounds({
      script: CHILD,
      args: (store, logFile) => [store, KIDS, logFile, restore],
      kills: KILLS,
      killWithinMs: 250,
      check,
    });
    console.log(`durable children kill test (${restore}): ${kills} SIGKILLs in ${rounds} runs`);
  }, 600000);
}

async function check(dir) {
  const c = await counts(dir);
  const want = { parent: 1, sum: (10 * KIDS * (KIDS + 1)) / 2 };
  for (let i = 1; i <= KIDS; i++) {
    want[`start/${i}`] = 1;
    want[`end/${i}`] = 1;
  }
  expect(c).toEqual(want);
}
