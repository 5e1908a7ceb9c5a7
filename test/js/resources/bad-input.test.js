// SPDX-License-Identifier: MIT
// Bad input to resources gives a clear error, and leaves nothing half-created.
'use strict';
const { Resources, Runtime } = require('../../..');
const { tempDir, openResources, caller } = require('./fixtures');

test.each([
  ['an unknown module', () => ['nope', 'a'], /unknown module "nope"; the modules given to Resources.open are: counter/],
  ['a path with an empty segment', () => ['counter', 'a//b'], /has an empty segment/],
  ['a path that starts with "/"', () => ['counter', '/a'], /has an empty segment/],
  ['a path with a "*"', () => ['counter', 'a/*'], /only a list pattern/],
  ['a path too long', () => ['counter', 'x'.repeat(501)], /at most 500/],
  ['a path that is not a string', () => ['counter', 42], /must be a string/],
  ['a function argument', () => ['counter', 'a', () => 1], /cannot persist/],
  ['a class instance argument', () => ['counter', 'a', new Date()], /class Date/],
])('create with %s is refused and nothing is created', async (_, args, message) => {
  const res = await openResources(tempDir());
  await expect(res.create(...args())).rejects.toThrow(message);
  expect(await res.stats()).toMatchObject({ resources: 0 });
  expect(await res.list('*')).toEqual({});
});

test.each([
  ['not a string', 42, /"resource.invoke: the request id" argument must be a string. Received number 42/],
  ['empty', '', /the request id must be 1 to 200 bytes. Received 0 bytes/],
  ['too long', 'r'.repeat(201), /the request id must be 1 to 200 bytes. Received 201 bytes/],
])('invokeOnce with a request id %s is refused, and nothing runs', async (_, rid, message) => {
  const res = await openResources(tempDir());
  const { id } = await res.create('counter', 'c');
  await expect(res.invokeOnce(rid, id, 'add')).rejects.toThrow(message);
  expect(await res.invoke(id, 'get')).toEqual({ result: 0, code: 'OK' });
});

test('an init that fails leaves no resource and frees the path', async () => {
  const res = await openResources(tempDir(), {
    modules: { bad: 'return { init = function() error("cannot start") end }', counter: 'return {}' },
  });
  await expect(res.create('bad', 'a')).rejects.toThrow(/cannot start/);
  expect((await res.stats()).resources).toBe(0);
  expect((await res.create('counter', 'a')).code).toBe('OK');
});

test('a method that is not a function is a clear error', async () => {
  const res = await openResources(tempDir());
  const { id } = await res.create('counter', 'a');
  await expect(res.invoke(id, 'not_a_method')).rejects.toThrow(
    /"not_a_method" of module "counter" is a number, not a function/,
  );
});

test('a result that cannot persist is a clear error', async () => {
  const res = await openResources(tempDir());
  const { id } = await res.create('counter', 'a');
  await expect(res.invoke(id, 'give_function')).rejects.toThrow(/the result of give_function is a function/);
});

test.each([
  ['a pattern with an empty segment', 'a//*', /empty segment/],
  ['a pattern with a partial "*"', 'a/b*', /not a whole segment/],
  ['a pattern that is not a string', 7, /must be a string/],
])('list with %s is refused', async (_, pattern, message) => {
  const res = await openResources(tempDir());
  await expect(res.list(pattern)).rejects.toThrow(message);
});

test('from Lua, bad input raises a clear error in the calling task', async () => {
  const res = await openResources(tempDir());
  const rt = caller(res);
  rt.load(`
    function try(f, ...) local ok, e = pcall(f, ...) return tostring(e.message or e) end
    function bad()
      local resource, index = require("resource"), require("index")
      return {
        try(resource.create, "nope", "a"),
        try(resource.create, "counter", "a//b"),
        try(resource.create, "counter", "a", function() end),
        try(index.list, "a/b*"),
        try(index.link, "id", ""),
      }
    end
  `);
  const out = await rt.call('bad');
  expect(out[0]).toMatch(/unknown module "nope"/);
  expect(out[1]).toMatch(/empty segment/);
  expect(out[2]).toMatch(/cannot persist/);
  expect(out[3]).toMatch(/not a whole segment/);
  expect(out[4]).toMatch(/empty segment/);
  expect((await res.stats()).resources).toBe(0);
});

test('options are checked', async () => {
  const dir = tempDir();
  await expect(Resources.open(dir, {})).rejects.toThrow(/options.modules/);
  await expect(Resources.open(dir, { modules: { a: 1 } })).rejects.toThrow(/must be Lua source/);
  await expect(Resources.open(dir, { modules: { a: '' }, idleMs: -1 })).rejects.toThrow(/idleMs/);
  await expect(Resources.open(dir, { modules: { a: '' }, idel: 1 })).rejects.toThrow(
    /The option "idel" is not a Resources.open option\. Options: modules, idleMs/,
  );
  await expect(Resources.open(dir, { modules: { a: '' }, runtime: { name: 'x' } })).rejects.toThrow(/runtime.name/);
  expect(() => new Runtime({ resources: {} })).toThrow(/a Resources object/);
  const res = await openResources(dir);
  expect(() => new Runtime({ resources: res, modules: { index: 'return 1' } })).toThrow(/resources' own/);
});

test('values past maxValueBytes are refused at the call: create and invoke arguments, a result (ERR_STORE_LIMIT)', async () => {
  const res = await openResources(tempDir(), { maxValueBytes: 1000 });
  const big = 'x'.repeat(2000);
  await expect(res.create('counter', 'a', big)).rejects.toMatchObject({ code: 'ERR_STORE_LIMIT' });
  expect((await res.stats()).resources).toBe(0);
  const { id } = await res.create('counter', 'a', 1);
  await expect(res.invoke(id, 'echo', big)).rejects.toMatchObject({ code: 'ERR_STORE_LIMIT' });
  const rt = caller(res);
  rt.load(`function grow(id) return require("resource").invoke(id, "echo", string.rep("y", 2000)) end`);
  await expect(rt.call('grow', id)).rejects.toThrow(/maxValueBytes/);
  // One long string repeated is counted once, as it is written once.
  const s = 'z'.repeat(500);
  expect((await res.invoke(id, 'echo', [s, s, s])).code).toBe('OK');
});
