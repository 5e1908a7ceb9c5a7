// SPDX-License-Identifier: MIT
// The dashboard's handler over HTTP: its routes, its JSON, its guard on actions, its options.
'use strict';

const http = require('node:http');
const { Runtime, createDashboard } = require('../../..');
const { closeAfterTest } = require('../helpers');

function makeGame() {
  const rt = closeAfterTest(new Runtime());
  rt.load('function waiter() coroutine.yield("INDEFINITELY") return "woken" end function boom() error("kaboom") end', {
    name: 'g.lua',
  });
  return rt;
}

async function serve(handler) {
  const server = http.createServer((req, res) => handler(req, res));
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${server.address().port}`;
  return { base, close: () => new Promise((resolve) => server.close(resolve)) };
}

const servers = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.close();
});

async function mount(options) {
  const dashboard = createDashboard(options);
  const s = await serve(dashboard);
  servers.push({ close: () => (dashboard.close(), s.close()) });
  return s.base;
}

const ACTION = { 'Content-Type': 'application/json', 'X-Lua-Tasks-Dashboard': '1' };

async function post(url, body, headers = ACTION) {
  const r = await fetch(url, { method: 'POST', headers, body: JSON.stringify(body) });
  return { status: r.status, body: await r.json() };
}

test('serves the page under a Content-Security-Policy that allows only its own script', async () => {
  const base = await mount({ runtimes: [makeGame()], prefix: '/ops' });
  const r = await fetch(`${base}/ops/`);
  expect(r.status).toBe(200);
  expect(r.headers.get('content-security-policy')).toContain("script-src 'self'");
  expect(r.headers.get('x-frame-options')).toBe('DENY');
  expect(await r.text()).toContain('<script src="page.js"');
  expect((await fetch(`${base}/ops/page.js`)).headers.get('content-type')).toMatch(/^text\/javascript/);
  // The mount path without its slash goes to it with one (the page's links are relative).
  const bare = await fetch(`${base}/ops`, { redirect: 'manual' });
  expect([bare.status, bare.headers.get('location')]).toEqual([308, '/ops/']);
  expect((await fetch(`${base}/elsewhere`)).status).toBe(404);
});

test('the overview lists the live tasks with their waits and a meta only summarised, and recent failures', async () => {
  const rt = makeGame();
  const secret = { token: 'x'.repeat(500), nested: { deep: true } };
  const task = rt.spawn('waiter', { name: 'w', meta: secret });
  const base = await mount({ runtimes: { game: rt } });
  // process.emitWarning, watched (Jest's process object does not emit 'warning').
  const spy = jest.spyOn(process, 'emitWarning').mockImplementation(() => {});
  try {
    rt.spawn('boom').result.catch(() => {}); // held: its result says it, no warning
    rt.load('tasks.start(boom)'); // started from Lua: nobody holds it
    await new Promise((r) => setImmediate(r));
    // The dashboard hears failures without silencing them: with no other listener the warning still comes.
    expect(spy.mock.calls.map(([m, o]) => [/kaboom/.test(m), o.code])).toEqual([[true, 'LUA_TASK_FAILED']]);
  } finally {
    spy.mockRestore();
  }
  const o = await (await fetch(`${base}/api/overview`)).json();
  expect(o.allowActions).toBe(false);
  expect(o.runtimes[0].label).toBe('game');
  const shown = o.runtimes[0].tasks.find((t) => t.id === task.id);
  expect(shown).toMatchObject({ name: 'w', status: 'waiting', waiting: { instruction: 'INDEFINITELY' } });
  expect(typeof shown.meta).toBe('string');
  expect(shown.meta.length).toBeLessThan(200);
  expect(o.failures).toHaveLength(2);
  expect(o.failures[0]).toMatchObject({ runtime: 'game', message: expect.stringContaining('kaboom') });
  const detail = await (await fetch(`${base}/api/task?runtime=game&id=${task.id}`)).json();
  expect(detail.where.traceback).toContain('g.lua:1');
  expect((await fetch(`${base}/api/task?runtime=game&id=nope`)).status).toBe(404);
  expect((await fetch(`${base}/api/task?runtime=other&id=${task.id}`)).status).toBe(404);
});

test('actions are refused unless enabled, and then need the header, the same origin and a JSON body', async () => {
  const rt = makeGame();
  const task = rt.spawn('waiter');
  const ro = await mount({ runtimes: { game: rt } });
  expect((await post(`${ro}/api/resume`, { runtime: 'game', id: task.id })).status).toBe(403);
  expect((await post(`${ro}/api/cancel`, { runtime: 'game', id: task.id })).status).toBe(403);
  expect(rt.task(task.id).status).toBe('waiting');

  const rw = await mount({ runtimes: { game: rt }, allowActions: true });
  const body = { runtime: 'game', id: task.id };
  // A form post from another page (no custom header): the CSRF case.
  const form = await post(`${rw}/api/resume`, body, { 'Content-Type': 'text/plain' });
  expect(form.status).toBe(403);
  expect(form.body.error).toContain('x-lua-tasks-dashboard');
  expect((await post(`${rw}/api/resume`, body, { ...ACTION, Origin: 'https://evil.example' })).status).toBe(403);
  expect((await post(`${rw}/api/resume`, body, { ...ACTION, 'Sec-Fetch-Site': 'cross-site' })).status).toBe(403);
  expect(
    (await post(`${rw}/api/resume`, body, { 'X-Lua-Tasks-Dashboard': '1', 'Content-Type': 'text/plain' })).status,
  ).toBe(415);
  expect((await post(`${rw}/api/resume`, { id: task.id })).status).toBe(400);
  expect((await fetch(`${rw}/api/resume`)).status).toBe(405);
  expect(rt.task(task.id).status).toBe('waiting');
  expect(await post(`${rw}/api/resume`, body)).toEqual({ status: 200, body: { ok: true } });
  await expect(task.result).resolves.toBe('woken');
  expect(await post(`${rw}/api/resume`, body)).toEqual({ status: 200, body: { ok: false } });
  const other = rt.spawn('waiter');
  expect(await post(`${rw}/api/cancel`, { runtime: 'game', id: other.id })).toEqual({
    status: 200,
    body: { ok: true },
  });
  await expect(other.result).rejects.toMatchObject({ code: 'ERR_TASK_CANCELLED' });
});

test('Express-style mounting: a path not its own goes to next()', async () => {
  const dashboard = createDashboard({ runtimes: [makeGame()] });
  let nexted = 0;
  const server = http.createServer((req, res) => {
    dashboard(req, res, () => {
      nexted++;
      res.end('next');
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push({ close: () => (dashboard.close(), new Promise((r) => server.close(r))) });
  const base = `http://127.0.0.1:${server.address().port}`;
  expect(await (await fetch(`${base}/nothing-here`)).text()).toBe('next');
  expect(nexted).toBe(1);
});

test.each([
  [undefined, 'ERR_INVALID_ARG_TYPE'],
  [{}, 'ERR_INVALID_ARG_VALUE'],
  [{ runtimes: 5 }, 'ERR_INVALID_ARG_TYPE'],
  [{ runtimes: { a: {} } }, 'ERR_INVALID_ARG_TYPE'],
  [{ runtimes: [], allowAction: true }, 'ERR_INVALID_ARG_VALUE'],
  [{ store: {} }, 'ERR_INVALID_ARG_TYPE'],
  [{ fleet: {} }, 'ERR_INVALID_ARG_TYPE'],
  [{ runtimes: [], store: undefined, allowActions: 'yes' }, 'ERR_INVALID_ARG_TYPE'],
  [{ runtimes: [], prefix: 'ops/' }, 'ERR_INVALID_ARG_TYPE'],
])('createDashboard(%j) is refused with %s', (options, code) => {
  expect(() => createDashboard(options)).toThrow(expect.objectContaining({ code }));
});
