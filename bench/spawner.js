// SPDX-License-Identifier: MIT
// The helper process of harness.js's Spawner: runs the programs it is sent and answers with their output.
'use strict';

const { spawnSync } = require('child_process');

process.on('message', ({ id, file, args, timeoutMs }) => {
  const t = process.hrtime.bigint();
  const p = spawnSync(file, args, { encoding: 'utf8', timeout: timeoutMs, maxBuffer: 64 << 20 });
  const wallMs = Number(process.hrtime.bigint() - t) / 1e6;
  process.send({
    id,
    status: p.status,
    signal: p.signal,
    error: p.error ? p.error.message : null,
    stdout: p.stdout,
    stderr: p.stderr,
    wallMs,
  });
});
