// SPDX-License-Identifier: MIT
// sandbox: run scripts you did not write, with memory and CPU limits, and see each one contained.
'use strict';
const { Runtime } = require('..');

const scripts = {
  'reads a file': 'return io.open("/etc/passwd"):read("a")',
  'runs a command': 'return os.execute("echo pwned")',
  'eats memory': 'local t = {} for i = 1, 1e6 do t[i] = ("x"):rep(1e6) .. i end',
  'spins forever': 'while true do pcall(function() while true do end end) end',
  'loads bytecode': 'return load(string.dump(function() return 1 end))()',
  behaves: 'local s = 0 for i = 1, 100 do s = s + i end return s',
};

async function main() {
  for (const [what, source] of Object.entries(scripts)) {
    const rt = new Runtime({ memoryLimit: 8 * 1024 * 1024, taskTimeout: 200, timeSlice: 10 });
    rt.set('__user', source);
    const [fn, err] = rt.load('return load(__user, "=user", "t")');
    try {
      const value = await rt.call(fn || 'error', err);
      console.log(`${what}: returned ${value}`);
    } catch (e) {
      console.log(`${what}: stopped (${e.code}) ${e.message.split('\n')[0]}`);
    }
    await rt.close();
  }
}

main();
