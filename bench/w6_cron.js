// SPDX-License-Identifier: MIT
// W6: cron next-time computations per second, beside croner and cron-parser.
//
// Each implementation computes a chain of next times (each result is the next
// `from`) for the same expressions and zones. lua-tasks is timed through its JS
// API (cron.next with count), so its figure includes the Node-API crossing
// per batch of 1,000; the expressions are the five.
'use strict';

const { Cron } = require('croner');
const cronParser = require('cron-parser');
const { cron } = require('..');
const { nowMs, median, check } = require('./harness');

const EXPRS = ['* * * * * *', '0 0 12 ? * MON-FRI', '0 15 10 L * ?', '0 0 0 29 2 ?', '0 0/5 14,18 * * ?'];
const ZONES = [
  ['UTC', 2e6],
  ['America/New_York', 1e6],
];
const FROM = Date.UTC(2026, 0, 1);

// croner and cron-parser want '*' where Quartz wants '?' (croner reads '?' as
// the current weekday); croner runs with legacyMode: false (Quartz ANDs days).
const forPeers = (e) => e.replace(/\?/g, '*');

function rate(fn, n) {
  const samples = [];
  for (let r = 0; r < 4; r++) {
    const t = nowMs();
    fn(n);
    samples.push(n / ((nowMs() - t) / 1000));
  }
  return median(samples.slice(1));
}

function run() {
  const rows = [];
  for (const [tz, target] of ZONES) {
    for (const expr of EXPRS) {
      const ours = rate((n) => {
        let from = FROM;
        for (let done = 0; done < n; done += 1000) {
          const batch = cron.next(expr, { from, tz, count: 1000 });
          // Feb 29 runs out after a few thousand years: start the chain again.
          from = batch.length === 1000 ? batch[999].getTime() : FROM;
        }
      }, 10000);
      const peerExpr = forPeers(expr);
      const first = cron.next(expr, { from: FROM, tz })[0].getTime();
      const croner = new Cron(peerExpr, { timezone: tz, legacyMode: false });
      check(`croner agrees on ${expr} in ${tz}`, croner.nextRun(new Date(FROM)).getTime(), first);
      const cronerRate = rate((n) => {
        let d = new Date(FROM);
        for (let i = 0; i < n; i++) d = croner.nextRun(d) || new Date(FROM);
      }, 500);
      rows.push({
        case: `${expr} (${tz})`,
        impl: 'lua-tasks',
        value: ours,
        unit: 'next/s',
        target: `≥ ${target / 1e6}M/s`,
        ok: ours >= target,
      });
      rows.push({
        case: `${expr} (${tz})`,
        impl: 'croner',
        value: cronerRate,
        unit: 'next/s',
        ratio: ours / cronerRate,
        note: 'ratio: how many times slower than lua-tasks',
      });
      // cron-parser has no L, and its search for Feb 29 is too slow to time here.
      if (!expr.includes('L') && !expr.includes('29 2')) {
        const parserRate = rate((n) => {
          const it = cronParser.parseExpression(peerExpr, { currentDate: new Date(FROM), tz });
          for (let i = 0; i < n; i++) it.next();
        }, 500);
        rows.push({
          case: `${expr} (${tz})`,
          impl: 'cron-parser',
          value: parserRate,
          unit: 'next/s',
          ratio: ours / parserRate,
        });
      }
    }
  }
  return rows;
}

module.exports = { id: 'w6', title: 'W6: cron next-time computations per second', run };
