// SPDX-License-Identifier: MIT
// async-dns: a util.async runner looks up A and AAAA records of localhost concurrently with waiter(2).
'use strict';
const dns = require('node:dns');
const { Runtime } = require('..');

const rt = new Runtime();
// Node's callback API, handed to Lua as is: Lua functions become the callbacks.
rt.set('lookup', (host, family, cb) => {
  dns.lookup(host, { family, all: true }, (err, addresses) => {
    cb(err ? err.code : null, addresses ? addresses.map((a) => a.address).join(' ') : null);
  });
});
rt.set('report', (line) => console.log(line));

rt.load(
  `
  local async = require "util.async"
  local resolver = async.runner(function(host)
    local wait, done = async.waiter(2)
    local a, aaaa
    lookup(host, 4, function(err, addrs) a = addrs or ("error " .. err) done() end)
    lookup(host, 6, function(err, addrs) aaaa = addrs or ("error " .. err) done() end)
    wait()   -- both lookups run at once; the runner continues when both are done
    report(host .. " A: " .. a)
    report(host .. " AAAA: " .. aaaa)
  end)
  resolver:run("localhost")
`,
  { name: 'async-dns' },
);
