// SPDX-License-Identifier: MIT
// cron.next / validate / describe, UNTIL_NEXT in tasks, and a differential check against croner.
'use strict';
const { execFileSync } = require('child_process');
const path = require('path');
const { Cron } = require('croner');
const { cron } = require('../../..');
const { makeRuntime } = require('../helpers');

const iso = (dates) => dates.map((d) => d.toISOString());

test.each([
  ['0 0 12 ? * MON-FRI', '2026-11-21T00:00:00Z', 'UTC', ['2026-11-23T12:00:00.000Z', '2026-11-24T12:00:00.000Z']],
  ['0 15 10 L * ?', '2026-02-01T00:00:00Z', 'UTC', ['2026-02-28T10:15:00.000Z', '2026-03-31T10:15:00.000Z']],
  ['0 0 0 29 2 ?', '2097-01-01T00:00:00Z', 'UTC', ['2104-02-29T00:00:00.000Z']],
  [
    '0 30 2 * * ?',
    '2026-03-07T12:00:00Z',
    'America/New_York',
    ['2026-03-08T07:00:00.000Z', '2026-03-09T06:30:00.000Z'],
  ],
  [
    '0 30 1 * * ?',
    '2026-11-01T00:00:00Z',
    'America/New_York',
    ['2026-11-01T05:30:00.000Z', '2026-11-02T06:30:00.000Z'],
  ],
  ['0 0 12 ? * 1', '2026-11-22T12:00:00Z', 'UTC', ['2026-11-29T12:00:00.000Z']],
  ['0 12 * * 0', '2026-11-22T12:00:00Z', 'UTC', ['2026-11-29T12:00:00.000Z']],
  ['@daily', '2026-11-22T00:00:00.500Z', 'UTC', ['2026-11-23T00:00:00.000Z']],
])('cron.next(%p) from %s in %s gives the expected next times', (expr, from, tz, want) => {
  expect(iso(cron.next(expr, { from: new Date(from), tz, count: want.length }))).toEqual(want);
});

test('an expression with no next time gives an empty list, quickly', () => {
  expect(cron.next('0 0 0 30 2 ?', { count: 3 })).toEqual([]);
  expect(cron.next('0 0 0 1 1 ? 1999', { count: 1 })).toEqual([]);
});

test.each([
  ['0 0 24 * * ?', /hour out of range: 24 at position 5 \(allowed 0-23\)/],
  ['* * * *', /./],
  ['0 0 12 1 * MON', /./],
  ['', /./],
])('validate(%p) names what is wrong', (expr, message) => {
  const r = cron.validate(expr);
  expect(r.ok).toBe(false);
  expect(r.error).toMatch(message);
  expect(() => cron.next(expr)).toThrow(expect.objectContaining({ code: 'ERR_CRON_SYNTAX' }));
});

test('describe expands the fields', () => {
  const d = cron.describe('0 0/20 9-10 ? * MON-FRI');
  expect(d).toMatchObject({
    dialect: 'quartz',
    seconds: [0],
    minutes: [0, 20, 40],
    hours: [9, 10],
    daysOfWeek: [1, 2, 3, 4, 5],
  });
  expect(cron.describe('*/30 * * * *')).toMatchObject({ dialect: 'vixie', minutes: [0, 30] });
});

test('bad arguments are refused', () => {
  expect(() => cron.next(42)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_TYPE' }));
  expect(() => cron.next('* * * * *', { count: 0 })).toThrow(expect.objectContaining({ code: 'ERR_OUT_OF_RANGE' }));
  expect(() => cron.next('* * * * *', { tz: 'Mars/Base' })).toThrow(
    expect.objectContaining({ code: 'ERR_CRON_SYNTAX' }),
  );
});

test('UNTIL_NEXT waits for the next instant and returns SCHEDULER, elapsed, SECONDS', async () => {
  const rt = makeRuntime({ timeZone: 'UTC' });
  rt.load('function t() local r, e, u = coroutine.yield("UNTIL_NEXT", "* * * ? * *") return { r, e, u } end');
  const task = rt.start('t');
  expect(task.waiting.instruction).toBe('UNTIL_NEXT');
  expect(task.waiting.until.getMilliseconds()).toBe(0);
  const [r, e, u] = await task.result;
  expect([r, u]).toEqual(['SCHEDULER', 'SECONDS']);
  expect(e).toBeGreaterThan(0);
  expect(e).toBeLessThanOrEqual(1.5);
});

test('UNTIL_NEXT with a bad expression, zone or no next time raises at the yield', async () => {
  const rt = makeRuntime();
  rt.load(`function t(...) local ok, e = pcall(coroutine.yield, "UNTIL_NEXT", ...) return tostring(e) end`);
  expect(await rt.call('t', '0 0 0 30 2 ?')).toMatch(/has no next time/);
  expect(await rt.call('t', '61 * * * * ?')).toMatch(/second out of range: 61/);
  expect(await rt.call('t', '* * * * *', 'Mars/Base')).toMatch(/unknown time zone: 'Mars\/Base'/);
});

// Issue 20: 6 fields with day numbers beside a '*' day-of-month mean
// SUN-THU in Quartz and MON-FRI in node-cron and croner; refused everywhere.
describe('day numbers beside a * day-of-month in 6 or 7 fields', () => {
  const message =
    "cron: day-of-week '1-5' at position 11 is ambiguous with day-of-month '*': Quartz (6-7 fields) " +
    'counts 1 = SUN, node-cron and croner count 1 = MON. Write "0 0 9 ? * MON-FRI" (names), or use 5 fields ("0 9 * * 1-5")';

  test('are refused by cron.validate, cron.next and cron.describe with ERR_CRON_SYNTAX naming both readings', () => {
    expect(cron.validate('0 0 9 * * 1-5')).toEqual({ ok: false, error: message });
    expect(() => cron.next('0 0 9 * * 1-5')).toThrow(expect.objectContaining({ code: 'ERR_CRON_SYNTAX', message }));
    expect(() => cron.describe('0 0 9 * * 1-5')).toThrow(expect.objectContaining({ code: 'ERR_CRON_SYNTAX', message }));
    for (const expr of [
      '0 0 9 * * 2',
      '0 0 9 * * 1,7',
      '0 0 9 * * 1-5/2',
      '0 0 9 * * 6#3',
      '0 0 9 * * 5L',
      '0 0 9 * * 1-5 2030',
    ]) {
      expect(cron.validate(expr)).toEqual({
        ok: false,
        error: expect.stringContaining('node-cron and croner count 1 = MON'),
      });
    }
  });

  test('are refused at an UNTIL_NEXT yield, catchably', async () => {
    const rt = makeRuntime();
    rt.load('function t(e) local ok, err = pcall(coroutine.yield, "UNTIL_NEXT", e) return tostring(err) end');
    expect(await rt.call('t', '0 0 9 * * 1-5')).toMatch(
      /UNTIL_NEXT: cron: day-of-week '1-5' .* Write "0 0 9 \? \* MON-FRI"/,
    );
  });

  test('both suggested spellings, and every unambiguous form, are accepted; the suggestions agree', () => {
    for (const expr of [
      '0 0 9 * * MON-FRI',
      '0 0 9 ? * 1-5',
      '0 0 9 * * ?',
      '0 0 9 * * *',
      '0 0 9 ? * *',
      '0 9 * * 1-5',
      '0 0 9 * * */2',
    ]) {
      expect(cron.validate(expr)).toEqual({ ok: true });
    }
    const from = new Date('2026-11-20T00:00:00Z'); // a Friday
    const named = iso(cron.next('0 0 9 ? * MON-FRI', { from, tz: 'UTC', count: 5 }));
    expect(named).toEqual([
      '2026-11-20T09:00:00.000Z',
      '2026-11-23T09:00:00.000Z',
      '2026-11-24T09:00:00.000Z',
      '2026-11-25T09:00:00.000Z',
      '2026-11-26T09:00:00.000Z',
    ]);
    expect(iso(cron.next('0 9 * * 1-5', { from, tz: 'UTC', count: 5 }))).toEqual(named);
    expect(iso(new Cron('0 0 9 * * 1-5', { timezone: 'UTC' }).nextRuns(5, from))).toEqual(named);
  });
});

// Issue 20: cron.next defaulted to UTC, UNTIL_NEXT to the process's zone.
// Run in a child so $TZ is the process's own from the start.
test("cron.next and UNTIL_NEXT default to the same zone, the process's; a tz or CRON_TZ= wins", () => {
  const script = `
    const { Runtime, cron } = require(${JSON.stringify(path.join(__dirname, '..', '..', '..'))});
    const from = new Date('2025-12-31T12:00:00Z');
    const iso = (d) => d.toISOString();
    const rt = new Runtime();
    rt.load('function t() coroutine.yield("UNTIL_NEXT", "0 0 9 ? * *") end');
    const task = rt.start('t');
    const untilNext = iso(task.waiting.until);
    rt.cancel(task.id);
    task.result.catch(() => {});
    rt.closeSync();
    console.log(JSON.stringify({
      fromDefault: iso(cron.next('0 0 9 ? * *', { from })[0]),
      cronNextNow: iso(cron.next('0 0 9 ? * *')[0]),
      untilNext,
      explicit: iso(cron.next('0 0 9 ? * *', { from, tz: 'UTC' })[0]),
      prefix: iso(cron.next('CRON_TZ=Europe/Paris 0 0 9 ? * *', { from })[0]),
    }));`;
  const run = (TZ) =>
    JSON.parse(execFileSync(process.execPath, ['-e', script], { env: { ...process.env, TZ }, encoding: 'utf8' }));
  const tokyo = run('Asia/Tokyo');
  expect(tokyo.fromDefault).toBe('2026-01-01T00:00:00.000Z'); // 09:00 in Tokyo; it was 09:00 UTC
  expect(tokyo.cronNextNow).toBe(tokyo.untilNext);
  expect(tokyo.explicit).toBe('2026-01-01T09:00:00.000Z');
  expect(tokyo.prefix).toBe('2026-01-01T08:00:00.000Z');
  const york = run('America/New_York');
  expect(york.fromDefault).toBe('2025-12-31T14:00:00.000Z');
  expect(york.cronNextNow).toBe(york.untilNext);
});

// Differential: random expressions in the subset both implement the same way
// (6 fields, plain numbers, ranges, steps and lists; day-of-week '*', as
// croner reads '?' as the current weekday; hours
// that avoid the 1-3 am DST transitions of America/New_York). croner runs
// with legacyMode: false, since Quartz ANDs a day-of-month with a '?' weekday.
test('cron.next agrees with croner on random expressions across zones', () => {
  let seed = 42;
  const rnd = (n) => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed % n;
  };
  const field = (lo, hi, avoid = []) => {
    const pick = () => {
      let v;
      do v = lo + rnd(hi - lo + 1);
      while (avoid.includes(v));
      return v;
    };
    switch (rnd(5)) {
      case 0:
        return '*';
      case 1:
        return String(pick());
      case 2: {
        const a = pick();
        const b = pick();
        return a <= b ? `${a}-${b}` : `${b}-${a}`;
      }
      case 3:
        return `${lo === 0 ? '*' : lo}/${1 + rnd(Math.max(1, Math.floor((hi - lo) / 2)))}`;
      default:
        return [...new Set([pick(), pick(), pick()])].sort((a, b) => a - b).join(',');
    }
  };
  const zones = ['UTC', 'America/New_York', 'Europe/Berlin', 'Asia/Tokyo'];
  let compared = 0;
  for (let i = 0; i < 1500; i++) {
    let hours = field(0, 23, [1, 2, 3]);
    if (/^[*]|\//.test(hours)) hours = String([0, 4, 9, 12, 18, 23][rnd(6)]);
    const expr = `${field(0, 59)} ${field(0, 59)} ${hours} ${field(1, 28)} ${field(1, 12)} *`;
    const tz = zones[rnd(zones.length)];
    const from = new Date(Date.UTC(2020 + rnd(10), rnd(12), 1 + rnd(28), rnd(24), rnd(60), rnd(60)));
    const ours = iso(cron.next(expr, { from, tz, count: 3 }));
    const theirs = iso(new Cron(expr, { timezone: tz, legacyMode: false }).nextRuns(3, from));
    expect({ expr, tz, from: from.toISOString(), next: ours }).toEqual({
      expr,
      tz,
      from: from.toISOString(),
      next: theirs,
    });
    compared++;
  }
  expect(compared).toBe(1500);
});
