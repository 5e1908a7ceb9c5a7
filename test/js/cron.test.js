// SPDX-License-Identifier: MIT
// cron.next / validate / describe, UNTIL_NEXT in tasks, and a differential check against croner.
'use strict';
const { Cron } = require('croner');
const { Runtime, cron } = require('../..');

const iso = (dates) => dates.map((d) => d.toISOString());

test.each([
  ['0 0 12 ? * MON-FRI', '2026-11-21T00:00:00Z', 'UTC', ['2026-11-23T12:00:00.000Z', '2026-11-24T12:00:00.000Z']],
  ['0 15 10 L * ?', '2026-02-01T00:00:00Z', 'UTC', ['2026-02-28T10:15:00.000Z', '2026-03-31T10:15:00.000Z']],
  ['0 0 0 29 2 ?', '2097-01-01T00:00:00Z', 'UTC', ['2104-02-29T00:00:00.000Z']],
  ['0 30 2 * * ?', '2026-03-07T12:00:00Z', 'America/New_York', ['2026-03-08T07:00:00.000Z', '2026-03-09T06:30:00.000Z']],
  ['0 30 1 * * ?', '2026-11-01T00:00:00Z', 'America/New_York', ['2026-11-01T05:30:00.000Z', '2026-11-02T06:30:00.000Z']],
  ['0 0 12 ? * 1', '2026-11-22T12:00:00Z', 'UTC', ['2026-11-29T12:00:00.000Z']],
  ['0 12 * * 0', '2026-11-22T12:00:00Z', 'UTC', ['2026-11-29T12:00:00.000Z']],
  ['@daily', '2026-11-22T00:00:00.500Z', 'UTC', ['2026-11-23T00:00:00.000Z']],
])('cron.next(%p) from %s in %s', (expr, from, tz, want) => {
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
  expect(d).toMatchObject({ dialect: 'quartz', seconds: [0], minutes: [0, 20, 40], hours: [9, 10], daysOfWeek: [1, 2, 3, 4, 5] });
  expect(cron.describe('*/30 * * * *')).toMatchObject({ dialect: 'vixie', minutes: [0, 30] });
});

test('bad arguments are refused', () => {
  expect(() => cron.next(42)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_TYPE' }));
  expect(() => cron.next('* * * * *', { count: 0 })).toThrow(expect.objectContaining({ code: 'ERR_OUT_OF_RANGE' }));
  expect(() => cron.next('* * * * *', { tz: 'Mars/Base' })).toThrow(expect.objectContaining({ code: 'ERR_CRON_SYNTAX' }));
});

test('UNTIL_NEXT waits for the next instant and returns SCHEDULER, elapsed, SECONDS', async () => {
  const rt = new Runtime({ timeZone: 'UTC' });
  rt.load('function t() local r, e, u = coroutine.yield("UNTIL_NEXT", "* * * ? * *") return { r, e, u } end');
  const task = rt.start('t');
  expect(task.waiting.instruction).toBe('UNTIL_NEXT');
  expect(task.waiting.until.getMilliseconds()).toBe(0);
  const [r, e, u] = await task.result;
  expect([r, u]).toEqual(['SCHEDULER', 'SECONDS']);
  expect(e).toBeGreaterThan(0);
  expect(e).toBeLessThanOrEqual(1.5);
  rt.closeSync();
});

test('UNTIL_NEXT with a bad expression, zone or no next time raises at the yield', async () => {
  const rt = new Runtime();
  rt.load(`function t(...) local ok, e = pcall(coroutine.yield, "UNTIL_NEXT", ...) return tostring(e) end`);
  expect(await rt.call('t', '0 0 0 30 2 ?')).toMatch(/has no next time/);
  expect(await rt.call('t', '61 * * * * ?')).toMatch(/second out of range: 61/);
  expect(await rt.call('t', '* * * * *', 'Mars/Base')).toMatch(/unknown time zone: 'Mars\/Base'/);
  rt.closeSync();
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
      do v = lo + rnd(hi - lo + 1); while (avoid.includes(v));
      return v;
    };
    switch (rnd(5)) {
      case 0: return '*';
      case 1: return String(pick());
      case 2: { const a = pick(); const b = pick(); return a <= b ? `${a}-${b}` : `${b}-${a}`; }
      case 3: return `${lo === 0 ? '*' : lo}/${1 + rnd(Math.max(1, Math.floor((hi - lo) / 2)))}`;
      default: return [...new Set([pick(), pick(), pick()])].sort((a, b) => a - b).join(',');
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
    expect({ expr, tz, from: from.toISOString(), next: ours }).toEqual({ expr, tz, from: from.toISOString(), next: theirs });
    compared++;
  }
  expect(compared).toBe(1500);
});
