// SPDX-License-Identifier: MIT
// hello: load Lua, call functions both ways, run a task that sleeps.
'use strict';
const { Runtime } = require('..');

async function main() {
  const rt = new Runtime();
  rt.set('shout', (s) => `${s.toUpperCase()}!`); // a JS function Lua can call
  rt.load(`
    function greet(name) return "hello, " .. shout(name) end
    function slow_sum(n)
      local s = 0
      for i = 1, n do
        s = s + i
        coroutine.yield("FOR", 10, "MILLISECONDS")  -- Node keeps serving meanwhile
      end
      return s
    end
  `);
  const greet = rt.get('greet'); // a Lua function JS can call
  console.log(greet('lua'));
  console.log('sum of squares from Lua:', rt.load('local s = 0 for i = 1, 10 do s = s + i * i end return s')[0]);
  console.log('slow_sum(5) as a task:', await rt.call('slow_sum', 5));
  await rt.close();
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
