// SPDX-License-Identifier: MIT
// The README's code blocks run as written, and bench/results.md is bench/results.json rendered.
'use strict';

const fs = require('fs');
const path = require('path');
const { markdown } = require('../../bench/index.js');

const root = path.join(__dirname, '..', '..');
const report = JSON.parse(fs.readFileSync(path.join(root, 'bench', 'results.json'), 'utf8'));

test('bench/results.md is bench/results.json as npm run bench writes it', () => {
  expect(fs.readFileSync(path.join(root, 'bench', 'results.md'), 'utf8')).toBe(markdown(report));
});

test('the results come from a run of every workload', () => {
  const ids = fs.readdirSync(path.join(root, 'bench')).filter((f) => /^w\d+_\w+\.js$/.test(f)).map((f) => f.split('_')[0]);
  expect(report.workloads.map((w) => w.id).sort()).toEqual(ids.sort());
});

// Every ```js block of the README runs as written, as a file of its own in an
// empty project where `lua-tasks` resolves to this package: an ES module if it
// imports, CommonJS otherwise. A block that is deliberately an excerpt says so
// with an HTML comment `<!-- fragment -->` on the line before it (kept rare).
describe('the README code blocks run as written', () => {
  const { spawnSync } = require('node:child_process');
  const os = require('node:os');
  const readme = fs.readFileSync(path.join(root, 'README.md'), 'utf8');
  const blocks = [];
  const fence = /(<!--\s*fragment\s*-->[ \t]*\r?\n)?```(js|javascript|mjs|cjs)[ \t]*\r?\n([\s\S]*?)\r?\n```/g;
  for (let m; (m = fence.exec(readme)) !== null;) {
    const line = readme.slice(0, m.index).split('\n').length + (m[1] ? 1 : 0);
    const esm = m[2] === 'mjs' || (m[2] !== 'cjs' && /^\s*import\s/m.test(m[3]));
    blocks.push({ line, esm, code: m[3], fragment: Boolean(m[1]) });
  }

  // Runs a block in a fresh directory (its cwd, so a store lands there).
  function run(block) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lua-tasks-readme-'));
    try {
      fs.mkdirSync(path.join(dir, 'node_modules'));
      fs.symlinkSync(root, path.join(dir, 'node_modules', 'lua-tasks'), 'dir');
      const file = block.esm ? 'block.mjs' : 'block.cjs';
      fs.writeFileSync(path.join(dir, file), block.code);
      return spawnSync(process.execPath, [file], { cwd: dir, encoding: 'utf8', timeout: 30000 });
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }

  test('the README has code blocks, and few are fragments', () => {
    expect(blocks.length).toBeGreaterThanOrEqual(3);
    expect(blocks.filter((b) => b.fragment).length).toBeLessThanOrEqual(2);
  });

  test.each(blocks.filter((b) => !b.fragment).map((b) => [b.line, b]))('the block at README.md:%i exits 0', (line, block) => {
    const r = run(block);
    expect({ status: r.status, signal: r.signal, stderr: r.stderr }).toEqual({ status: 0, signal: null, stderr: '' });
  });

  test('the quick start prints what its comments promise', () => {
    expect(run(blocks[0]).stdout).toBe('hello, tick 3\nhello, tick 2\nhello, tick 1\nliftoff\n');
  });
});
