// SPDX-License-Identifier: MIT
// The dashboard in a real browser (headless Chromium): it lists a live task, shows its traceback, and its resume wakes it.
'use strict';

const http = require('node:http');
const { Runtime, DirectoryStore, createDashboard } = require('../../..');
const { closeAfterTest, tempDirs } = require('../helpers');
const { Browser, describeBrowser } = require('./browser');

jest.setTimeout(60000);

const LUA = `
function waiter(tag)
  local how = coroutine.yield("INDEFINITELY")
  woken = tag
  return "woken"
end
`;
// What an attacker may put in a label or an argument: none of it may run.
const XSS_NAME = '<img src=x onerror="window.__xss=1">';
const XSS_ARG = '</td><script>window.__xss=2</script>';

const tmpdir = tempDirs('lua-tasks-dashboard-');

async function openGame(dir) {
  return closeAfterTest(
    await Runtime.open({ name: 'game', store: dir, setup: (r) => r.load(LUA, { name: 'waiter.lua' }) }),
  );
}

// The handler on a server of its own, at /ops (node:http does not strip a mount path: prefix).
async function serve(handler) {
  const server = http.createServer(handler);
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${server.address().port}/ops/`;
  // The browser keeps its connections for reuse: closed here, or close() waits on them.
  const close = () =>
    new Promise((resolve) => {
      server.close(resolve);
      server.closeAllConnections();
    });
  return { url, close };
}

describeBrowser('the dashboard in Chromium', () => {
  let browser;
  beforeAll(async () => {
    browser = await Browser.launch();
  });
  afterAll(async () => {
    if (browser) await browser.close();
  });

  test('the page lists a live task, shows its traceback, and a resume clicked on the page wakes it', async () => {
    const dir = tmpdir();
    const rt = await openGame(dir);
    const live = rt.spawn('waiter', { name: XSS_NAME, args: ['live'] });
    const durable = rt.spawn('waiter', { durable: true, name: XSS_NAME, args: [XSS_ARG] });
    await rt.commit();
    const store = new DirectoryStore(dir);
    const dashboard = createDashboard({ runtimes: { game: rt }, store, allowActions: true, prefix: '/ops' });
    const server = await serve(dashboard);
    const page = await browser.newPage();
    try {
      await page.goto(server.url);
      await page.waitFor('document.body.dataset.loaded === "1"');
      expect(await page.evaluate('document.getElementById("mode").textContent')).toBe('actions enabled');
      // The live task's row, its label shown as text.
      const cells = await page.waitFor(
        `(() => { const tr = document.querySelector('tr[data-task="${live.id}"]');
          return tr && [...tr.cells].slice(0, 4).map((c) => c.textContent); })()`,
      );
      expect(cells).toEqual([live.id, XSS_NAME, 'waiting', 'INDEFINITELY']);
      // Its traceback.
      await page.click(`button[data-action="inspect"][data-id="${live.id}"]`);
      const where = await page.waitFor(
        `(() => { const t = document.getElementById('detail-where').textContent;
          return document.getElementById('detail-id').textContent === '${live.id}' && t; })()`,
      );
      expect(where).toContain('waiter.lua:3');
      // The store's durable task, its label and arguments as text.
      await page.click('button[data-action="name"]');
      const row = await page.waitFor(
        `(() => { const t = document.querySelector('table[data-name="game"]');
          const tr = t && [...t.rows].find((r) => r.cells[0].textContent === '${durable.id}');
          return tr && [...tr.cells].map((c) => c.textContent); })()`,
      );
      expect(row.slice(0, 3)).toEqual([durable.id, XSS_NAME, 'waiting']);
      expect(row[5]).toContain(XSS_ARG);
      // Resume, clicked: the task wakes in Lua.
      await page.click(`button[data-action="resume"][data-id="${live.id}"]`);
      await expect(live.result).resolves.toBe('woken');
      expect(rt.load('return woken')[0]).toBe('live');
      await page.waitFor(`!document.querySelector('tr[data-task="${live.id}"]')`);
      // Nothing the attacker wrote ran or became an element.
      expect(await page.evaluate('[window.__xss, document.querySelectorAll("img, body script").length]')).toEqual([
        null,
        0,
      ]);
    } finally {
      await page.send('Page.close').catch(() => {});
      dashboard.close();
      await server.close();
      await store.close();
    }
  });

  test('read-only: the page offers no action, and an action posted from it is refused', async () => {
    const rt = await openGame(tmpdir());
    const task = rt.spawn('waiter', { args: ['ro'] });
    const dashboard = createDashboard({ runtimes: { game: rt }, prefix: '/ops' });
    const server = await serve(dashboard);
    const page = await browser.newPage();
    try {
      await page.goto(server.url);
      await page.waitFor('document.body.dataset.loaded === "1"');
      await page.waitFor(`!!document.querySelector('tr[data-task="${task.id}"]')`);
      expect(await page.evaluate('document.getElementById("mode").textContent')).toBe('read-only');
      expect(
        await page.evaluate(
          'document.querySelectorAll("button[data-action=resume], button[data-action=cancel]").length',
        ),
      ).toBe(0);
      // The page's own request, with the header it sends when actions are on.
      const status = await page.evaluate(`fetch('api/resume', { method: 'POST',
        headers: { 'Content-Type': 'application/json', 'X-Lua-Tasks-Dashboard': '1' },
        body: JSON.stringify({ runtime: 'game', id: '${task.id}' }) }).then((r) => r.status)`);
      expect(status).toBe(403);
      expect(rt.task(task.id).status).toBe('waiting');
    } finally {
      await page.send('Page.close').catch(() => {});
      dashboard.close();
      await server.close();
    }
  });
});
