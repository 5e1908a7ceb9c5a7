// SPDX-License-Identifier: MIT
// Yield instructions: what IMMEDIATE, FOR, UNTIL_TIME and tasks.sleep wait for and return, and how a bad yield fails.
'use strict';
const { makeRuntime, LATE_MS, expectOnTime } = require('../helpers');

let rt;
beforeEach(() => (rt = makeRuntime()));

describe('IMMEDIATE', () => {
  test.each([
    ['coroutine.yield()'],
    ['coroutine.yield(nil)'],
    ['coroutine.yield("IMMEDIATE")'],
    ['coroutine.yield("immediate")'],
    ['coroutine.yield(tasks.instruction.IMMEDIATE)'],
  ])('%s returns "SCHEDULER", a small elapsed and "SECONDS"', async (y) => {
    rt.load(`function t() return { ${y} } end`);
    const [reason, elapsed, unit] = await rt.call('t');
    expect(reason).toBe('SCHEDULER');
    expect(unit).toBe('SECONDS');
    expect(elapsed).toBeGreaterThanOrEqual(0);
    expect(elapsed).toBeLessThan(LATE_MS / 1000);
  });

  test('the reason constant matches what the yield returns', async () => {
    rt.load('function t() local r = coroutine.yield() return r == tasks.reason.SCHEDULER end');
    expect(await rt.call('t')).toBe(true);
  });

  test('an IMMEDIATE task does not run again before start() returns', async () => {
    rt.load('n = 0 function t() n = n + 1 coroutine.yield() n = n + 1 end');
    const task = rt.start('t');
    expect(rt.get('n')).toBe(1);
    await task.result;
    expect(rt.get('n')).toBe(2);
  });
});

describe('FOR', () => {
  // [duration, unit given, unit returned, factor to milliseconds]
  test.each([
    [30, 'MILLISECONDS', 'MILLISECONDS', 1],
    [30, 'milliseconds', 'MILLISECONDS', 1],
    [30, 'MilliSeconds', 'MILLISECONDS', 1],
    [30000, 'MICROSECONDS', 'MICROSECONDS', 1e-3],
    [30e6, 'NANOSECONDS', 'NANOSECONDS', 1e-6],
    [0.03, 'SECONDS', 'SECONDS', 1e3],
    [0.03, 'seconds', 'SECONDS', 1e3],
    [0.03, null, 'SECONDS', 1e3],
    [0.0005, 'MINUTES', 'MINUTES', 60e3],
    [0.03 / 3600, 'HOURS', 'HOURS', 3600e3],
    [0.03 / 86400, 'days', 'DAYS', 86400e3],
  ])('FOR %p %s waits about 30 ms and reports elapsed in %s', async (value, unit, unitOut, toMs) => {
    const args = unit === null ? `"FOR", ${value}` : `"FOR", ${value}, "${unit}"`;
    rt.load(`function t() return { coroutine.yield(${args}) } end`);
    const t0 = process.hrtime.bigint();
    const [reason, elapsed, u] = await rt.call('t');
    const wallMs = Number(process.hrtime.bigint() - t0) / 1e6;
    expect(reason).toBe('SCHEDULER');
    expect(u).toBe(unitOut);
    expect(typeof elapsed).toBe('number');
    expectOnTime(elapsed * toMs, 30);
    expect(elapsed * toMs).toBeLessThanOrEqual(wallMs + 1);
    expect(wallMs).toBeGreaterThanOrEqual(29);
  });

  test('FOR 0 resumes on a later turn with a small elapsed', async () => {
    rt.load('n = 0 function t() n = n + 1 local r, e, u = coroutine.yield("FOR", 0) n = n + 1 return { r, e, u } end');
    const task = rt.start('t');
    expect(rt.get('n')).toBe(1);
    const [r, e, u] = await task.result;
    expect([r, u]).toEqual(['SCHEDULER', 'SECONDS']);
    expect(e).toBeLessThan(LATE_MS / 1000);
  });

  test('tasks.sleep waits about the given seconds', async () => {
    rt.load('function t() tasks.sleep(0.03) return "slept" end');
    const t0 = Date.now();
    expect(await rt.call('t')).toBe('slept');
    expect(Date.now() - t0).toBeGreaterThanOrEqual(25);
  });

  test('a yield across pcall waits like a plain one', async () => {
    rt.load('function t() return { pcall(coroutine.yield, "FOR", 10, "MILLISECONDS") } end');
    const [ok, r, e, u] = await rt.call('t');
    expect([ok, r, u]).toEqual([true, 'SCHEDULER', 'MILLISECONDS']);
    expect(e).toBeGreaterThanOrEqual(9);
  });

  test('FOR waits about the duration and returns SCHEDULER, elapsed, unit', async () => {
    rt.load(`function t() return coroutine.yield("FOR", 30, "milliseconds") end`);
    // Taken before start: the wait begins inside start(), and under a slow
    // build (ASan) the checks below can take longer than any slack.
    const t0 = performance.now();
    const task = rt.start('t');
    expect(task.status).toBe('waiting');
    expect(task.waiting).toEqual({ instruction: 'FOR', until: expect.anything() });
    const reason = await task.result;
    expect(reason).toBe('SCHEDULER');
    expect(performance.now() - t0).toBeGreaterThanOrEqual(29);
    rt.load(`function t2() local r, e, u = coroutine.yield("FOR", 20, "MILLISECONDS") return {r, e, u} end`);
    const [r, e, u] = await rt.call('t2');
    expect([r, u]).toEqual(['SCHEDULER', 'MILLISECONDS']);
    expect(e).toBeGreaterThanOrEqual(19);
    expect(e).toBeLessThan(1000);
  });
});

describe('UNTIL_TIME', () => {
  test('os.time() + 1 resumes at the next whole second or later, within about a second', async () => {
    rt.load(`function t()
      local at = os.time() + 1
      local r, e, u = coroutine.yield("UNTIL_TIME", at)
      return { at, r, e, u }
    end`);
    const [at, r, e, u] = await rt.call('t');
    const now = Date.now();
    expect([r, u]).toEqual(['SCHEDULER', 'SECONDS']);
    expect(now).toBeGreaterThanOrEqual(at * 1000 - 20);
    expect(e).toBeGreaterThan(0);
    expect(e).toBeLessThanOrEqual(1 + LATE_MS / 1000);
  });

  // Regression (issue 20): os.time() read glibc's coarse clock, which moves
  // once per kernel tick, while the task wakes a millisecond after `at`: it
  // often still said at - 1, and os.date() the second (or day) before.
  test('after each UNTIL_TIME or UNTIL_NEXT wake at t, os.time() and os.date() say t has come', async () => {
    rt.load(`function t(rounds)
      local seen = {}
      for i = 1, rounds do
        local at = os.time() + 1
        if i % 2 == 0 then
          coroutine.yield("UNTIL_NEXT", "* * * ? * *")  -- the next whole second is at
        else
          coroutine.yield("UNTIL_TIME", at)
        end
        seen[i] = { at, os.time(), os.date("!%Y%m%d%H%M%S"), os.date("!%Y%m%d%H%M%S", at), os.date("!*t").sec }
      end
      return seen
    end`);
    const seen = await rt.call('t', 5);
    const now = Date.now();
    expect(seen).toHaveLength(5);
    for (const [at, time, date, dateAt, sec] of seen) {
      expect(time).toBeGreaterThanOrEqual(at);
      expect(date >= dateAt).toBe(true);
      expect(sec).toBe(Number(date.slice(-2)));
      expect(time).toBeLessThanOrEqual(Math.floor(now / 1000));
    }
  }, 20000);

  test('a MILLISECONDS epoch value in the future resumes at that time, elapsed in MILLISECONDS', async () => {
    rt.load('function t(at) return { coroutine.yield("UNTIL_TIME", at, "MILLISECONDS") } end');
    const at = Date.now() + 40;
    const result = rt.call('t', at);
    // The task yielded inside call(): it waited at least from here to `at`
    // (under a slow build, call() alone may eat much of the 40 ms).
    const yielded = Date.now();
    const [r, e, u] = await result;
    expect(Date.now()).toBeGreaterThanOrEqual(at - 5);
    expect([r, u]).toEqual(['SCHEDULER', 'MILLISECONDS']);
    expect(e).toBeGreaterThanOrEqual(at - yielded - 5);
    expect(e).toBeLessThan(40 + LATE_MS);
  });

  test.each([
    ['os.time() - 10', ''],
    ['0', ''],
    ['os.time()', ''],
    ['(os.time() - 60) * 1000', ', "MILLISECONDS"'],
  ])('UNTIL_TIME %s%s (the past) resumes on the next turn', async (at, unit) => {
    rt.load(
      `n = 0 function t() n = n + 1 local r, e = coroutine.yield("UNTIL_TIME", ${at}${unit}) n = n + 1 return { r, e } end`,
    );
    const task = rt.start('t');
    expect(rt.get('n')).toBe(1);
    expect(task.waiting.instruction).toBe('UNTIL_TIME');
    const [r, e] = await task.result;
    expect(r).toBe('SCHEDULER');
    expect(e).toBeLessThan(unit ? LATE_MS : LATE_MS / 1000);
  });
});

describe('bad yields raise at the yield', () => {
  // [yield arguments, message pattern]: the message names what was given and what is accepted.
  const INSTRUCTIONS = /IMMEDIATE, FOR, UNTIL_TIME, UNTIL_NEXT, INDEFINITELY or COMMIT/;
  const UNITS = /NANOSECONDS, MICROSECONDS, MILLISECONDS, SECONDS, MINUTES, HOURS or DAYS/;
  const rows = [
    ['"SOON"', [/unknown yield instruction "SOON"/, INSTRUCTIONS]],
    ['"for "', [/unknown yield instruction "for "/, INSTRUCTIONS]],
    ['42', [/bad yield instruction: 42/, INSTRUCTIONS]],
    ['{}', [/bad yield instruction: a table/, INSTRUCTIONS]],
    ['true', [/bad yield instruction: a boolean/, INSTRUCTIONS]],
    ['"FOR", 5, "FORTNIGHTS"', [/unknown time unit "FORTNIGHTS" for FOR/, UNITS]],
    ['"FOR", 5, "MS"', [/unknown time unit "MS" for FOR/, UNITS]],
    ['"FOR", 5, 1000', [/unknown time unit 1000 for FOR/, UNITS]],
    ['"UNTIL_TIME", os.time() + 5, "WEEKS"', [/unknown time unit "WEEKS" for UNTIL_TIME/, UNITS]],
    ['"FOR", -1', [/FOR duration must be >= 0, got -1 SECONDS/]],
    ['"FOR", -0.5, "MILLISECONDS"', [/FOR duration must be >= 0, got -0.5 MILLISECONDS/]],
    ['"FOR", 0/0', [/FOR value must be finite, got -?nan/i]],
    ['"FOR", math.huge', [/FOR value must be finite, got inf/i]],
    ['"FOR", -math.huge', [/FOR value must be finite, got -inf/i]],
    ['"FOR", 1e300', [/FOR duration too large: 1e\+300 SECONDS \(at most 100 years\)/]],
    ['"FOR", 101 * 365, "DAYS"', [/FOR duration too large: 36865 DAYS \(at most 100 years\)/]],
    ['"FOR", math.maxinteger, "NANOSECONDS"', [/FOR duration too large/]],
    ['"FOR"', [/FOR needs a number of time units to wait, got nothing/]],
    ['"FOR", "10"', [/FOR needs a number of time units to wait, got "10"/]],
    ['"FOR", {}', [/FOR needs a number of time units to wait, got a table/]],
    ['"UNTIL_TIME"', [/UNTIL_TIME needs a number of time units since the Unix epoch, got nothing/]],
    ['"UNTIL_TIME", "tomorrow"', [/UNTIL_TIME needs a number of time units since the Unix epoch, got "tomorrow"/]],
    ['"UNTIL_TIME", 0/0', [/UNTIL_TIME value must be finite, got -?nan/i]],
    ['"UNTIL_TIME", math.huge', [/UNTIL_TIME value must be finite, got inf/i]],
    ['"UNTIL_TIME", -5', [/UNTIL_TIME out of range: -5 SECONDS since the epoch \(allowed 0 to 100 years from now\)/]],
    ['"UNTIL_TIME", 1e15', [/UNTIL_TIME out of range: 1e\+15 SECONDS/]],
    ['"UNTIL_NEXT", "0 0 25 * * ?"', [/UNTIL_NEXT: cron: hour out of range: 25 at position 5 \(allowed 0-23\)/]],
    ['"UNTIL_NEXT", "0 0 0 30 2 ?"', [/UNTIL_NEXT: cron expression "0 0 0 30 2 \?" has no next time/]],
    ['"UNTIL_NEXT", "* * * * *", "Mars/Base"', [/unknown time zone: 'Mars\/Base'/]],
    ['"UNTIL_NEXT"', [/UNTIL_NEXT needs a cron expression string, got nothing/]],
    // Without a store COMMIT must fail loudly, never lose data silently.
    ['"COMMIT"', [/COMMIT failed: this runtime has no store/]],
  ];

  // A bad instruction is ERR_BAD_YIELD; COMMIT without a store ERR_COMMIT_FAILED (README "Errors").
  const codeOf = (args) => (args === '"COMMIT"' ? 'ERR_COMMIT_FAILED' : 'ERR_BAD_YIELD');

  test.each(rows)('coroutine.yield(%s) raises, catchable by pcall, with the caller line', async (args, patterns) => {
    rt.load(
      `function t()
      local ok, err = pcall(function()
        coroutine.yield(${args})
      end)
      local r = coroutine.yield("FOR", 1, "MILLISECONDS")
      return { ok, tostring(err), err.message, err.code, r }
    end`,
      { name: 'bad.lua' },
    );
    const [ok, text, message, code, r] = await rt.call('t');
    expect(ok).toBe(false);
    expect(text).toMatch(/^bad\.lua:3: /);
    for (const p of patterns) expect(text).toMatch(p);
    expect(message).toBe(text);
    expect(code).toBe(codeOf(args));
    expect(r).toBe('SCHEDULER'); // the task goes on normally after catching it
  });

  test.each(rows)(
    'coroutine.yield(%s) uncaught fails the task with its code at the caller line',
    async (args, patterns) => {
      rt.load(`function t()\n  coroutine.yield(${args})\nend`, { name: 'uncaught.lua' });
      const err = await rt.call('t').catch((e) => e);
      expect(err).toMatchObject({ code: codeOf(args), line: 2, source: 'uncaught.lua' });
      expect(err.luaStack).toMatch(/uncaught\.lua:2:/);
      expect(err.message).toMatch(/^uncaught\.lua:2: /);
      for (const p of patterns) expect(err.message).toMatch(p);
    },
  );

  // Regression (issue 20): Lua said "attempt to yield from outside a coroutine".
  test.each([
    ['at the top level of rt.load', (src) => rt.load(src)],
    [
      'in a Lua function JS calls',
      (src) => {
        rt.load(`function f() ${src} end`);
        rt.get('f')();
      },
    ],
  ])('a yield instruction %s says it needs a task and how to start one', (_, run) => {
    for (const [src, call] of [
      ['coroutine.yield("FOR", 1)', 'coroutine.yield("FOR")'],
      ['coroutine.yield("until_time", 0)', 'coroutine.yield("UNTIL_TIME")'],
      ['coroutine.yield()', 'coroutine.yield()'],
    ]) {
      let err;
      try {
        run(src);
      } catch (e) {
        err = e;
      }
      expect(err).toBeDefined();
      expect(err.message).toContain(
        `${call}: not inside a task (yield instructions need one: start it with rt.start(fn) or tasks.start(fn))`,
      );
    }
  });

  test("a plain yield outside any coroutine that names no instruction keeps Lua's message", () => {
    expect(() => rt.load('coroutine.yield(42)')).toThrow(/attempt to yield from outside a coroutine/);
  });

  test('a bad yield raises at the yield with the caller line, catchable by pcall', async () => {
    rt.load(
      `function t()
      local ok, err = pcall(coroutine.yield, "FOR", 5, "FORTNIGHTS")
      return tostring(err)
    end`,
      { name: 'bad.lua' },
    );
    expect(await rt.call('t')).toMatch(/unknown time unit "FORTNIGHTS" for FOR \(expected NANOSECONDS.*DAYS\)/);
    rt.load('function u() coroutine.yield("SOON") end', { name: 'u.lua' });
    await expect(rt.call('u')).rejects.toMatchObject({
      code: 'ERR_BAD_YIELD',
      message: expect.stringMatching(/^u\.lua:1: unknown yield instruction "SOON"/),
    });
  });

  test('tasks.sleep outside a task is an error, not a hang', () => {
    expect(() => rt.load('tasks.sleep(0.01)')).toThrow(/tasks\.sleep: not inside a task/);
    expect(() => rt.load('coroutine.wrap(function() tasks.sleep(0.01) end)()')).toThrow(/not inside a task/);
  });

  test.each([
    ['-1', /seconds must be a finite number from 0 to 100 years/],
    ['0/0', /seconds must be a finite number from 0 to 100 years/],
    ['math.huge', /seconds must be a finite number from 0 to 100 years/],
    ['"soon"', /number expected, got string/],
    ['', /number expected, got no value/],
  ])('tasks.sleep(%s) raises a catchable error naming the argument', async (arg, pattern) => {
    rt.load(
      `function t()
      local ok, err = pcall(function()
        tasks.sleep(${arg})
      end)
      return { ok, err }
    end`,
      { name: 'sleep.lua' },
    );
    const [ok, err] = await rt.call('t');
    expect(ok).toBe(false);
    expect(err).toMatch(/^sleep\.lua:3: bad argument #1 to 'sleep'/);
    expect(err).toMatch(pattern);
  });
});
