// SPDX-License-Identifier: MIT
// tasks.resume from Lua in a runtime without a name and in a named one (whose tasks.resume also takes task addresses).
//
//   node bench/resume_address.js [n]
//
// The cost a plain id pays for the address check of a named runtime
// (lib/lua/addresses.lua): n calls of tasks.resume on an ended task's id
// (answered nil at once), alternating rounds, ns a call.
'use strict';

const fs = require('fs');
const os = require('os');
const path = require('path');
const { Runtime } = require('..');

const SRC = `function spin(id, n) local r = tasks.resume for i = 1, n do r(id) end end
function done() end`;

async function main() {
  const n = Number(process.argv[2]) || 1e6;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lua-tasks-resume-address-'));
  const named = await Runtime.open({ name: 'n', store: dir });
  const plain = new Runtime();
  const rows = { plain: [], named: [] };
  try {
    for (let round = 0; round < 3; round++) {
      for (const [kind, rt] of [
        ['plain', plain],
        ['named', named],
      ]) {
        if (round === 0) rt.load(SRC);
        const id = rt.start('done').id;
        const t0 = process.hrtime.bigint();
        await rt.call('spin', id, n);
        rows[kind].push(Number(process.hrtime.bigint() - t0) / n);
      }
    }
  } finally {
    await named.close();
    plain.closeSync();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  for (const [kind, xs] of Object.entries(rows)) {
    console.log(`${kind}: ${xs.map((x) => x.toFixed(1)).join(', ')} ns a tasks.resume`);
  }
}

main();
