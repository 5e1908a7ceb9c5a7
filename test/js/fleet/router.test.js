// SPDX-License-Identifier: MIT
// FleetRouter: what a failing PostgreSQL makes of its requests reaches a handler and never crashes the member.
'use strict';
const path = require('node:path');
const { execFile } = require('node:child_process');

const CHILD = path.join(__dirname, '..', 'fixtures', 'router-unheard.js');

// The router in a process of its own: an unhandled rejection ends it.
function run(mode) {
  return new Promise((resolve) => {
    execFile(process.execPath, [CHILD, mode], { timeout: 20000 }, (err, stdout, stderr) =>
      resolve({ code: err ? err.code : 0, lines: stdout.split('\n').filter(Boolean), stderr }),
    );
  });
}

// Both crashed members of the fleet chaos test while its PostgreSQL restarted.
test("old bug: a request whose timeout passes while its NOTIFY is still being written rejects to its caller, and the write's failure is the reason", async () => {
  const r = await run('request');
  expect(r).toMatchObject({ code: 0, lines: ['settled 57P03', 'end'] });
});

test("old bug: a request heard twice while its acknowledgements cannot be written: each failure is reported as the router's error", async () => {
  const r = await run('repeat');
  expect(r).toMatchObject({ code: 0, lines: ['settled errors 57P03', 'end'] });
});
