'use strict';
// Exactly-once invocations under SIGKILL at random instants
// (docs/resources.md#exactly-once): a durable fan-out calls each of 4
// resources' `add` 12 times, sequentially per resource, and is killed
// anywhere: between a request's COMMIT and its delivery, while the method
// runs, between its end and the caller's record of the answer. The
// resources count every call they ran; the caller every answer, in steps.
// Each call ran once, each answer was recorded once, and call j of a
// resource was its j-th (no call ran twice, none was lost).
const fs = require('node:fs');
const path = require('node:path');
const { killRounds } = require('../helpers');
const { Resources } = require('../../..');

const CHILD = path.join(__dirname, '..', 'fixtures', 'resource-once-child.js');
const { ITEM, onceCounts } = require(CHILD);
const KILLS = Number(process.env.LUA_TASKS_ONCE_KILLS || 12);
const RESOURCES = 4;
const PER = 12;

async function setup(store) {
  fs.mkdirSync(store, { recursive: true });
  const res = await Resources.open(path.join(store, 'res'), { modules: { item: ITEM } });
  for (let i = 1; i <= RESOURCES; i++) await res.create('item', `items/${i}`);
  await res.close();
}

async function check(store) {
  const res = await Resources.open(path.join(store, 'res'), { modules: { item: ITEM } });
  try {
    const ids = Object.values(await res.list('items/*')).sort();
    const { got, want } = await onceCounts(res, path.join(store, 'caller'), ids, PER);
    expect(got).toEqual(want);
  } finally {
    await res.close();
  }
}

for (const restore of ['lazy', 'all']) {
  test(`durable invocations of ${RESOURCES} resources survive ${KILLS} SIGKILLs (durableRestore: '${restore}'): each call runs once`, async () => {
    const { kills, rounds } = await killRounds({
      script: CHILD,
      args: (store, logFile) => [store, PER, logFile, restore],
      kills: KILLS,
      killWithinMs: 300,
      fresh: setup,
      check,
    });
    console.log(`exactly-once invocation kill test (${restore}): ${kills} SIGKILLs in ${rounds} runs`);
  }, 600000);
}
