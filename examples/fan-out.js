// SPDX-License-Identifier: MIT
// fan-out: a task starts one task per item with tasks.start, they wait concurrently, it joins them.
'use strict';
const { Runtime } = require('..');

async function main() {
  const rt = new Runtime();
  // A JS "service" Lua calls: each call takes 50-150 ms (a Promise: the calling task waits).
  rt.set('fetch_price', (item) => new Promise((r) => setTimeout(() => r(item.length * 10), 50 + Math.random() * 100)));
  rt.load(`
    function quote(items)
      local ids = {}
      for i, item in ipairs(items) do
        ids[i] = tasks.start(function() return fetch_price(item) end)
      end
      local total = 0
      for _, id in ipairs(ids) do total = total + tasks.wait(id) end
      return total
    end
  `);
  const t0 = Date.now();
  const total = await rt.call('quote', ['apple', 'kiwi', 'banana', 'fig']);
  console.log(
    `total ${total} in ${Date.now() - t0 < 400 ? 'well under' : 'over'} the 4 x 150 ms a sequential version would take`,
  );
  await rt.close();
}

main();
