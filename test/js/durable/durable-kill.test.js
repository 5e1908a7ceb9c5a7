'use strict';
// Durable tasks under SIGKILL at random instants (docs/durable.md#guarantees):
// every worker finishes with the right result; a step before the last
// durable point never runs again; one after it runs again at most once per
// kill; the JS call after each durable wait is made at least once; a message
// acknowledged by rt.sendDurable is received, never lost.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { runKillable, killWindow } = require('../helpers');

const CHILD = path.join(__dirname, '..', 'fixtures', 'durable-child.js');
const KILLS = Number(process.env.LUA_TASKS_DURABLE_KILLS || 60);
const WORKERS = 8;
const STEPS = 30;

test(`durable workers survive ${KILLS} SIGKILLs: nothing lost, nothing before a durable point repeated`, async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lua-tasks-durable-kill-'));
  const logFile = path.join(dir, 'effects.log');
  fs.writeFileSync(logFile, '');
  try {
    // Generations of workers (new keys each), until KILLS kills have landed
    // and the last generation finished: each kill lands mid-run somewhere.
    let kills = 0;
    let gen = 0;
    const when = killWindow(300); // a random instant of the run, however quick it is
    for (let round = 0; round < KILLS * 4; round++) {
      const killing = kills < KILLS;
      // Kill anywhere from the open to well into the run.
      const r = await runKillable(
        CHILD,
        [dir, WORKERS, STEPS, logFile, gen],
        logFile,
        killing ? when.next() : undefined,
      );
      when.saw(r);
      if (r.signal === 'SIGKILL') kills++;
      else expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
      if (fs.readFileSync(logFile, 'utf8').includes(`finished ${gen}\n`)) {
        if (kills >= KILLS) break;
        gen++;
      }
    }
    expect(fs.readFileSync(logFile, 'utf8')).toContain(`finished ${gen}\n`);
    const lines = fs.readFileSync(logFile, 'utf8').trim().split('\n');
    const runs = lines.filter((l) => l.startsWith('run ')).length;
    // Per worker: the steps in the order they ran, split by the run they ran in.
    const expected = (STEPS * (STEPS + 1)) / 2;
    const perWorker = new Map();
    let run = 0;
    for (const line of lines) {
      const [kind, name, i, extra] = line.split(' ');
      if (kind === 'run') run++;
      if (kind !== 'step' && kind !== 'done' && kind !== 'after') continue;
      if (!perWorker.has(name)) perWorker.set(name, { steps: [], after: new Set(), done: [] });
      const w = perWorker.get(name);
      if (kind === 'step') w.steps.push([Number(i), run]);
      if (kind === 'after') w.after.add(Number(i));
      if (kind === 'done') w.done.push([i, extra]);
    }
    expect(perWorker.size).toBe(WORKERS * (gen + 1));
    let repeats = 0;
    for (const [name, w] of perWorker) {
      // Done once with the right sum (a restart after the end finds it retained, never starts it again).
      expect({ name, sums: [...new Set(w.done.map(([sum]) => sum))] }).toEqual({ name, sums: [`${expected}+bonus`] });
      expect(new Set(w.done.map(([, id]) => id)).size).toBe(1);
      // Steps ran in order; a step ran again only as the first of a new run,
      // and only if it was the last one the killed run made (after the last durable point).
      let last = 0;
      let lastRun = 0;
      for (const [i, r] of w.steps) {
        if (i === last) {
          expect({ name, step: i, newRun: r > lastRun }).toEqual({ name, step: i, newRun: true });
          repeats++;
        } else {
          expect({ name, step: i }).toEqual({ name, step: last + 1 });
        }
        last = i;
        lastRun = r;
      }
      expect(last).toBe(STEPS);
      for (let i = 1; i <= STEPS; i++) expect(w.after.has(i)).toBe(true);
    }
    // The figures, for the note: kills, runs, steps that ran again.
    console.log(`durable kill test: ${kills} SIGKILLs, ${runs} runs, ${repeats} steps run again after a kill`);
    expect(kills).toBe(KILLS);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}, 600000);
