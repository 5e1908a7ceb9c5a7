// SPDX-License-Identifier: MIT
// block-awake: one task blocks INDEFINITELY, another finds it by id and wakes it (the seed's pair).
'use strict';
const { Runtime } = require('..');

const rt = new Runtime({
  modules: {
    test_coroutine: `
      local coroutine = require "coroutine"
      local namazu_coroutine = require "namazu.coroutine"
      local test_coroutine = {}
      local task_id = nil

      function test_coroutine.block()
        task_id = namazu_coroutine.current_task_id()
        print("Blocking coroutine " .. tostring(task_id) .. " indefinitely.")
        coroutine.yield("INDEFINITELY")
        print("Got wake signal.  Exiting.")
        return "OK"
      end

      function test_coroutine.awake()
        while task_id == nil do
          print("No corresponding task.  Waiting ...")
          coroutine.yield("FOR", 50, "MILLISECONDS")
        end
        print("Waking up " .. tostring(task_id))
        namazu_coroutine.resume(task_id)
        return "OK"
      end

      return test_coroutine`,
  },
});

async function main() {
  const awake = rt.start('test_coroutine.awake');
  await new Promise((r) => setTimeout(r, 120));
  const block = rt.start('test_coroutine.block');
  console.log('awake:', await awake.result, 'block:', await block.result);
  await rt.close();
}

main();
