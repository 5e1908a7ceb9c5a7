'use strict';
// A durable resume under SIGKILL at random instants (docs/durable.md#guarantees):
// a wake that rt.resumeDurable acknowledged (resolved true) is never lost.
// The child process wakes a durable task N times, one value at a time,
// sending again after a kill only the wakes it never saw acknowledged; the
// task counts each value it got in the store, inside a step. A lost
// acknowledged wake would leave its value uncounted.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { runKillable, killWindow } = require('../helpers');
const { Runtime } = require('../../..');

const CHILD = path.join(__dirname, '..', 'fixtures', 'durable-resume-child.js');
const KILLS = Number(process.env.LUA_TASKS_RESUME_KILLS || 20);
const WAKES = 60;

test(`every wake rt.resumeDurable acknowledged survives ${KILLS} SIGKILLs`, async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lua-tasks-resume-kill-'));
  const logFile = path.join(dir, 'runs.log');
  fs.writeFileSync(logFile, '');
  try {
    let kills = 0;
    let attempt = 0;
    let store = path.join(dir, `s${attempt}`);
    const acked = () =>
      fs
        .readFileSync(logFile, 'utf8')
        .split('\n')
        .filter((l) => l.startsWith('acked '));
    let checked = 0;
    const when = killWindow(300); // a random instant of the run, however quick it is
    for (let round = 0; round < KILLS * 6; round++) {
      const killing = kills < KILLS;
      const r = await runKillable(CHILD, [store, WAKES, logFile], logFile, killing ? when.next() : undefined);
      when.saw(r);
      if (r.signal === 'SIGKILL') kills++;
      else expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
      if (!fs.readFileSync(logFile, 'utf8').includes('finished all')) continue;
      // Every value counted, none lost (an acknowledged one was never sent again).
      const rt = await Runtime.open({ name: 'wake', store });
      const [got] = rt.load(
        `local t = {} for i = 1, ${WAKES} do t[i] = tasks.store.get("got/" .. i) or 0 end return t`,
      );
      await rt.close();
      for (let i = 1; i <= WAKES; i++) expect({ i, got: got[i - 1] >= 1 }).toEqual({ i, got: true });
      checked += acked().length;
      if (kills >= KILLS) break;
      store = path.join(dir, `s${++attempt}`); // again, on a fresh store
      fs.writeFileSync(logFile, '');
    }
    console.log(`durable resume kill test: ${kills} SIGKILLs, ${checked} acknowledged wakes checked`);
    expect(kills).toBe(KILLS);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}, 600000);
