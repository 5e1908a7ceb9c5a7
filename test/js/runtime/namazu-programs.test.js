// SPDX-License-Identifier: MIT
// Whole programs written for the namazu.coroutine API (a yield tour, a block/awake pair, a fan-out endpoint) run as written.
//
// The programs are written out below in their original shape (require
// "namazu.coroutine", print, module tables), run on lua-tasks and checked by
// what they print and return.
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { makeRuntimeWithLines, sleep } = require('../helpers');

let rt;
let lines;

function runtime(modules) {
  ({ rt, lines } = makeRuntimeWithLines({ modules }));
  return rt;
}

// print(reason, " yielded for ", elapsed, " ", units) -> [reason, elapsed, units]
function parseYielded(line) {
  const parts = line.split('\t');
  expect(parts).toHaveLength(5);
  expect(parts[1]).toBe(' yielded for ');
  expect(parts[3]).toBe(' ');
  return [parts[0], Number(parts[2]), parts[4]];
}

test('the yield tour prints the reason, the elapsed time and the unit of each wait', async () => {
  runtime();
  rt.load(fs.readFileSync(path.join(__dirname, '..', 'fixtures', 'yield-tour.lua'), 'utf8'), { name: 'tour.lua' });
  const t0 = Date.now();
  await rt.call('tour');
  const total = (Date.now() - t0) / 1000;

  expect(lines).toHaveLength(8);
  expect(lines[0]).toBe('Yielding immediately');
  const [r1, e1, u1] = parseYielded(lines[1]);
  expect([r1, u1]).toEqual(['SCHEDULER', 'SECONDS']);
  expect(e1).toBeGreaterThanOrEqual(0);
  expect(e1).toBeLessThan(0.5);

  expect(lines[2]).toBe('Yielding for one second');
  const [r2, e2, u2] = parseYielded(lines[3]);
  expect([r2, u2]).toEqual(['SCHEDULER', 'SECONDS']);
  expect(e2).toBeGreaterThanOrEqual(1);
  expect(e2).toBeLessThan(1.5);

  const until = lines[4].split('\t');
  expect(until[0]).toBe('Yielding until ');
  expect(until[2]).toBe(' (in seconds)');
  const at = Number(until[1]);
  expect(Number.isInteger(at)).toBe(true);
  const [r3, e3, u3] = parseYielded(lines[5]);
  expect([r3, u3]).toEqual(['SCHEDULER', 'SECONDS']);
  expect(e3).toBeGreaterThan(0);
  expect(e3).toBeLessThanOrEqual(1.5);
  expect(Date.now()).toBeGreaterThanOrEqual(at * 1000 - 20);

  expect(lines[6]).toBe('Yielding until cron next cron for "* * * ? * *" (once every second)');
  const [r4, e4, u4] = parseYielded(lines[7]);
  expect([r4, u4]).toEqual(['SCHEDULER', 'SECONDS']);
  expect(e4).toBeGreaterThan(0);
  expect(e4).toBeLessThanOrEqual(1.5);

  expect(total).toBeGreaterThanOrEqual(1);
  expect(total).toBeLessThan(5);
});

// A test_coroutine module: block waits INDEFINITELY under its task id, awake
// polls for that id and resumes it.
const TEST_COROUTINE = `
local test_coroutine = {}

local coroutine = require "coroutine"
local namazu_coroutine = require "namazu.coroutine"

local task_id = nil

function test_coroutine.block()

    task_id = namazu_coroutine.current_task_id()

    print ("Blocking coroutine " .. tostring(task_id) .. " indefinitely.")
    coroutine.yield("INDEFINITELY")

    print ("Got wake signal.  Exiting.")
    return "OK"

end

function test_coroutine.awake()

    while task_id == nil do
        print("No corresponding task.  Waiting ...")
        coroutine.yield("FOR", 1, "SECONDS")
    end

    print ("Waking up " .. tostring(task_id))
    namazu_coroutine.resume(task_id)

    return "OK"

end

return test_coroutine
`;

describe('the block/awake pair', () => {
  beforeEach(() => {
    runtime({ test_coroutine: TEST_COROUTINE });
    // Required up front (a module.fn path would also require it on its first
    // start: task-lifecycle.test.js checks that).
    rt.load('require "test_coroutine"');
  });

  test('awake polls with FOR until block has recorded its id, then resumes it', async () => {
    const t0 = Date.now();
    const awake = rt.start('test_coroutine.awake');
    expect(awake.waiting).toEqual({ instruction: 'FOR', until: expect.anything() });
    await sleep(50);
    const block = rt.start('test_coroutine.block');
    expect(block.waiting).toEqual({ instruction: 'INDEFINITELY' });
    expect(await awake.result).toBe('OK');
    expect(await block.result).toBe('OK');
    expect(Date.now() - t0).toBeGreaterThanOrEqual(950); // one FOR 1 SECONDS poll
    expect(lines).toEqual([
      'No corresponding task.  Waiting ...',
      `Blocking coroutine ${block.id} indefinitely.`,
      `Waking up ${block.id}`,
      'Got wake signal.  Exiting.',
    ]);
  });

  test('awake started after block resumes it at once without polling', async () => {
    const block = rt.start('test_coroutine.block');
    const awake = rt.start('test_coroutine.awake');
    expect(awake.status).toBe('done');
    expect(block.status).toBe('done');
    expect(await block.result).toBe('OK');
    expect(lines).toEqual([
      `Blocking coroutine ${block.id} indefinitely.`,
      `Waking up ${block.id}`,
      'Got wake signal.  Exiting.',
    ]);
  });
});

// Fakes of the backend modules the fan-out example uses.
const FAKES = {
  'namazu.index': `
    return {
      list = function(pattern)
        print("index.list " .. pattern)
        local prefix = pattern:gsub("%*$", "")
        local out = {}
        for i = 1, 5 do out[prefix .. "r" .. i] = "res-" .. i end
        return out
      end,
    }`,
  'namazu.resource': `
    updated = {}
    return {
      invoke = function(resource_id, method, info)
        -- A backend call takes a while: the coroutine waits on the scheduler.
        coroutine.yield("FOR", 5 + #updated * 5, "MILLISECONDS")
        updated[#updated + 1] = resource_id .. " " .. method .. " " .. info.color
        return { ok = true }, 200
      end,
    }`,
  'namazu.elements.auth': 'return { profile = function() return { id = "profile-7", name = "ann" } end }',
  'namazu.response': 'return { formulate = function(code, body) return { code = code, body = body } end }',
};

// A fan-out endpoint: one coroutine per resource updates it through a backend
// call that waits, and the endpoint polls until none is left; {{CREATE}} is
// how each coroutine is made.
const ENDPOINT = `
local index = require ("namazu.index")
local resource = require ("namazu.resource")
local auth = require ("namazu.elements.auth")
local namazu_response = require ("namazu.response")
local namazu_coroutine = require "namazu.coroutine"

local test_endpoints = {}

function test_endpoints.update_resources(payload, request, session)

    -- In this example, this is an authenticated request, so we can use auth
    -- to get the profile info of the requestor.

    local profile = auth.profile()
    local profile_id = profile.id

    local update_info = payload

    -- This would be the path to all of the resources pertaining to the current
    -- profile id of the user making this request.
    -- Wildcards are useful for searching the entire contents of a directory.

    local resources_path = string.format("resources/%s/*", profile_id)
    local resource_listings = index.list(resources_path)
    local active_tasks = 0

    for path, resource_id in pairs(resource_listings) do

        -- Creates a coroutine to update each resource asynchronously

        local co = {{CREATE}}(function ()

            -- Coroutines accept upvalues, which can be very useful!

            active_tasks = active_tasks + 1

            local result, code = resource.invoke(resource_id, "update_resource", update_info)

            active_tasks = active_tasks - 1

        end)

        namazu_coroutine.start(co)

    end

    while(active_tasks > 0) do
        coroutine.yield("FOR", 5, "MILLISECONDS")
    end

    -- Just return okay for the purpose of this example

    return namazu_response.formulate(200)

end

return test_endpoints
`;

async function fanOut(create) {
  runtime({ ...FAKES, test_endpoints: ENDPOINT.replace('{{CREATE}}', create) });
  rt.load('require "test_endpoints"');
  const task = rt.start('test_endpoints.update_resources', { color: 'blue' }, { path: '/update' }, { user: 'ann' });
  const response = await task.result;
  expect(response).toEqual({ code: 200 });
  expect(lines).toEqual(['index.list resources/profile-7/*']);
  expect(rt.load('return updated')[0].sort()).toEqual([1, 2, 3, 4, 5].map((i) => `res-${i} update_resource blue`));
  expect(rt.tasks()).toEqual([]);
}

// Regression: namazu_coroutine.start used to refuse every coroutine made by
// coroutine.create ("coroutine already started, running or a task").
test('the fan-out endpoint updates every resource through coroutine.create + namazu_coroutine.start', async () => {
  await fanOut('coroutine.create');
});

test('the fan-out endpoint works with the function itself given to namazu_coroutine.start', async () => {
  await fanOut('');
});

// The seed's own idiom: each coroutine started with coroutine.resume, the
// endpoint polling with a bare coroutine.yield(). A resource.invoke that waits
// with an API wait (here tasks.sleep; a JS Promise alike) detaches its
// coroutine, so the five invocations wait side by side: all five start before
// any of them is done.
test('the fan-out endpoint as the seed writes it (coroutine.resume, coroutine.yield()) invokes concurrently', async () => {
  const waiting = {
    ...FAKES,
    'namazu.resource': `
      updated, calls = {}, {}
      return {
        invoke = function(resource_id, method, info)
          calls[#calls + 1] = "start " .. resource_id
          tasks.sleep(0.02)
          calls[#calls + 1] = "end " .. resource_id
          updated[#updated + 1] = resource_id .. " " .. method .. " " .. info.color
          return { ok = true }, 200
        end,
      }`,
    test_endpoints: ENDPOINT.replace('{{CREATE}}', 'coroutine.create')
      .replace('namazu_coroutine.start(co)', 'coroutine.resume(co)')
      .replace('coroutine.yield("FOR", 5, "MILLISECONDS")', 'coroutine.yield()'),
  };
  expect(waiting.test_endpoints).toMatch(/coroutine\.resume\(co\)[^]*coroutine\.yield\(\)/);
  expect(waiting.test_endpoints).not.toMatch(/namazu_coroutine\.start|"FOR"/);
  runtime(waiting);
  rt.load('require "test_endpoints"');
  const task = rt.start('test_endpoints.update_resources', { color: 'blue' }, { path: '/update' }, { user: 'ann' });
  expect(await task.result).toEqual({ code: 200 });
  const calls = rt.load('return calls')[0];
  expect(calls).toHaveLength(10);
  expect(calls.slice(0, 5).every((c) => c.startsWith('start'))).toBe(true);
  expect(rt.load('return updated')[0].sort()).toEqual([1, 2, 3, 4, 5].map((i) => `res-${i} update_resource blue`));
  expect(rt.tasks()).toEqual([]);
});
