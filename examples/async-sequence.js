// SPDX-License-Identifier: MIT
// async-sequence: sleep, then a DNS lookup, then an HTTP request, written as nested
// callbacks and then flat with util.async waiters; both print the same line.
'use strict';
const dns = require('node:dns');
const http = require('node:http');
const { Runtime } = require('..');

const server = http.createServer((req, res) => res.end(`hello from ${req.url}`));

server.listen(0, '127.0.0.1', () => {
  const { port } = server.address();
  const rt = new Runtime();
  // Braces: the Timeout setTimeout returns links to every timer in the process (docs/security.md).
  rt.set('set_timeout', (ms, cb) => {
    setTimeout(cb, ms);
  });
  rt.set('lookup', (host, cb) => dns.lookup(host, { family: 4 }, (err, address) => cb(err && err.code, address)));
  rt.set('http_get', (url, cb) => {
    http
      .get(url, (res) => {
        let body = '';
        res.on('data', (c) => {
          body += c;
        });
        res.on('end', () => cb(null, body));
      })
      .on('error', (e) => cb(e.code));
  });
  let pending = 2;
  rt.set('report', (style, line) => {
    console.log(`${style}: ${line}`);
    if (--pending === 0) {
      rt.closeSync();
      server.close();
    }
  });
  rt.set('PORT', port);

  rt.load(
    `
    -- 1. Nested callbacks.
    set_timeout(20, function()
      lookup("localhost", function(err, address)
        http_get("http://" .. address .. ":" .. PORT .. "/nested", function(err2, body)
          report("callbacks", address .. " -> " .. body:gsub("/nested", "/path"))
        end)
      end)
    end)

    -- 2. The same, flat, in a util.async runner.
    local async = require "util.async"
    local function call(fn, ...)          -- calls fn(..., callback) and waits for the callback
      local wait, done = async.waiter()
      local results
      local args = table.pack(...)
      args[args.n + 1] = function(...) results = table.pack(...) done() end
      fn(table.unpack(args, 1, args.n + 1))
      wait()
      return table.unpack(results, 1, results.n)
    end
    async.runner(function()
      async.sleep(0.02)
      local _, address = call(lookup, "localhost")
      local _, body = call(http_get, "http://" .. address .. ":" .. PORT .. "/flat")
      report("waiters", address .. " -> " .. body:gsub("/flat", "/path"))
    end):run("go")
  `,
    { name: 'async-sequence' },
  );
});
