// SPDX-License-Identifier: MIT
// The README's benchmark section is bench/results.json rendered, never edited by hand.
'use strict';

const fs = require('fs');
const path = require('path');
const { readmeSection, markdown, README_BEGIN, README_END } = require('../../bench/index.js');

const root = path.join(__dirname, '..', '..');
const report = JSON.parse(fs.readFileSync(path.join(root, 'bench', 'results.json'), 'utf8'));

test('the README benchmark section is bench/results.json as npm run bench writes it', () => {
  const readme = fs.readFileSync(path.join(root, 'README.md'), 'utf8');
  const a = readme.indexOf(README_BEGIN);
  const b = readme.indexOf(README_END);
  expect(a).toBeGreaterThan(0);
  expect(readme.slice(a, b + README_END.length)).toBe(readmeSection(report));
});

test('bench/results.md is bench/results.json as npm run bench writes it', () => {
  expect(fs.readFileSync(path.join(root, 'bench', 'results.md'), 'utf8')).toBe(markdown(report));
});

test('the results come from a run of every workload', () => {
  const ids = fs.readdirSync(path.join(root, 'bench')).filter((f) => /^w\d+_\w+\.js$/.test(f)).map((f) => f.split('_')[0]);
  expect(report.workloads.map((w) => w.id).sort()).toEqual(ids.sort());
});
