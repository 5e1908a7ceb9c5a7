'use strict';
// The seed's yield tour (namazu-programs.test.js) as a durable task, its
// runtime closed and reopened in the middle of its waits: it finishes as it
// would have in one run, each line printed once (print is a JS call: a
// replay hands back its result instead of printing again).
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { Runtime } = require('../../..');
const { sleep } = require('../helpers');

const TOUR = fs.readFileSync(path.join(__dirname, '..', 'fixtures', 'yield-tour.lua'), 'utf8');

test('the yield tour survives two restarts in the middle of its waits, each line printed once', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lua-tasks-durable-seed-'));
  const lines = [];
  const open = () =>
    Runtime.open({ name: 'tour', store: dir, print: (line) => lines.push(line), setup: (rt) => rt.load(TOUR) });
  try {
    const t0 = Date.now();
    let rt = await open();
    const first = rt.spawn('tour', { durable: true, key: 'tour' });
    await sleep(400); // inside FOR 1 s
    expect(rt.task(first.id).waiting.instruction).toBe('FOR');
    await rt.close();
    rt = await open();
    await sleep(900); // FOR ended (its deadline kept), now inside UNTIL_TIME
    expect(rt.task(first.id).waiting.instruction).toMatch(/UNTIL_TIME|UNTIL_NEXT/);
    await rt.close();
    rt = await open();
    const task = rt.spawn('tour', { durable: true, key: 'tour' });
    expect(task.id).toBe(first.id);
    expect(await task.result).toBeUndefined(); // the tour returns nothing
    await rt.close();
    expect(lines).toHaveLength(8); // nothing printed twice
    expect(lines[0]).toBe('Yielding immediately');
    expect(lines[2]).toBe('Yielding for one second');
    const elapsedFor = Number(lines[3].split('\t')[2]);
    expect(elapsedFor).toBeGreaterThanOrEqual(1); // counted from the yield, across the restart
    expect(elapsedFor).toBeLessThan(2);
    expect(lines[4]).toMatch(/^Yielding until \t\d+\t \(in seconds\)$/);
    expect(lines[6]).toBe('Yielding until cron next cron for "* * * ? * *" (once every second)');
    expect((Date.now() - t0) / 1000).toBeLessThan(6);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
