// SPDX-License-Identifier: MIT
// hello: load Lua, call functions both ways, print the results.
// Run from the repository root: node examples/hello.js
'use strict';
const { Runtime } = require('..');

async function main() {
  const rt = new Runtime();

  // Lua calls JS: a JS function set as a Lua global.
  rt.set('shout', (s) => `${s.toUpperCase()}!`);

  // Load a chunk: it defines Lua functions and returns values to JS.
  const [version, answer] = rt.load(
    `
    function greet(name) return "hello, " .. shout(name) end
    function stats(list)
      local sum = 0
      for _, v in ipairs(list) do sum = sum + v end
      return { n = #list, sum = sum, mean = sum / #list }
    end
    function countdown(n)
      for i = n, 1, -1 do
        coroutine.yield("FOR", 10, "MILLISECONDS")   -- Node keeps serving meanwhile
      end
      return "liftoff"
    end
    return _VERSION, 6 * 7
  `,
    { name: 'hello.lua' },
  );
  console.log('loaded:', version, 'answer =', answer);

  // JS calls Lua: Lua functions come back as JS functions.
  const greet = rt.get('greet');
  console.log('greet("lua") ->', greet('lua'));
  const { n, sum, mean } = rt.get('stats')([1, 2, 3, 4]); // a JS array in, a Lua table out
  console.log(`stats([1, 2, 3, 4]) -> n = ${n}, sum = ${sum}, mean = ${mean}`);

  // Lua calls JS from inside Lua code.
  console.log('Lua calling shout ->', rt.load('return shout("from lua")')[0]);

  // Integers stay exact: beyond 2^53 they come back as BigInt.
  console.log('math.maxinteger ->', rt.load('return math.maxinteger')[0]);

  // A Lua function can also run as a task that sleeps without blocking Node.
  console.log('countdown(3) as a task ->', await rt.call('countdown', 3));

  await rt.close(); // close what you open
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
