// SPDX-License-Identifier: MIT
// The seed's fan-out (a coroutine per resource, then a loop until a counter is zero) runs its invocations concurrently.
'use strict';
const { tempDir, openResources, caller, COUNTER, ENDPOINT } = require('./fixtures');

test('five invocations of a method that sleeps all start before any ends, each applied once', async () => {
  const res = await openResources(tempDir(), { modules: { counter: COUNTER, endpoint: ENDPOINT } });
  const ids = [];
  for (let i = 0; i < 5; i++) ids.push((await res.create('counter', `resources/p1/r${i}`)).id);
  await res.create('counter', 'resources/p2/other');
  const rt = caller(res, { modules: { endpoint: ENDPOINT } });
  const log = await rt.call('endpoint.update_resources', 'p1', 1);
  expect(log).toBe([...Array(5).fill('start'), ...Array(5).fill('end OK')].join(','));
  for (const id of ids) expect(await res.invoke(id, 'get')).toEqual({ result: 1, code: 'OK' });
  expect((await res.invokePath('resources/p2/other', 'get')).result).toBe(0);
});

test('the same fan-out from inside a resource method', async () => {
  const res = await openResources(tempDir(), { modules: { counter: COUNTER, endpoint: ENDPOINT } });
  for (let i = 0; i < 3; i++) await res.create('counter', `resources/p1/r${i}`);
  const { id } = await res.create('endpoint', 'endpoints/main');
  const out = await res.invoke(id, 'update_resources', 'p1', 2);
  expect(out).toEqual({ result: 'start,start,start,end OK,end OK,end OK', code: 'OK' });
});

test('from a durable task, an invocation is journaled: a replay answers the recorded response without invoking again', async () => {
  const dir = tempDir();
  const res = await openResources(dir);
  const { id } = await res.create('counter', 'c');
  const { Runtime } = require('../../..');
  const src = `
    local resource = require("resource")
    function bump(id)
      local r, code = resource.invoke(id, "add", 1)
      tasks.sleep(3600)
      return r
    end
  `;
  const rt = await Runtime.open({ name: 'caller', store: `${dir}-caller`, resources: res });
  rt.load(src);
  const task = rt.spawn('bump', { durable: true, args: [id] });
  while ((await res.invoke(id, 'get')).result !== 1) await new Promise((r) => setTimeout(r, 5));
  await rt.commit();
  const taskId = task.id;
  await rt.close();
  // Reopened, the task replays to its sleep: the invocation's answer comes from the journal.
  const again = await Runtime.open({
    name: 'caller',
    store: `${dir}-caller`,
    resources: res,
    durableRestore: 'all',
    setup: (r) => r.load(src),
  });
  expect(again.task(taskId).status).toBe('waiting');
  expect(await res.invoke(id, 'get')).toEqual({ result: 1, code: 'OK' });
  again.resume(taskId);
  await again.close();
  require('node:fs').rmSync(`${dir}-caller`, { recursive: true, force: true });
});
