// SPDX-License-Identifier: MIT
// The README and docs/ say what the code does: their code blocks run, their tables match the code, their links resolve.
'use strict';

const fs = require('fs');
const path = require('path');
const { markdown } = require('../../bench/index.js');

const root = path.join(__dirname, '..', '..');
const read = (file) => fs.readFileSync(path.join(root, file), 'utf8');
const report = JSON.parse(read('bench/results.json'));

test('bench/results.md is bench/results.json as npm run bench writes it', () => {
  expect(read('bench/results.md')).toBe(markdown(report));
});

test('the results come from a run of every workload', () => {
  const ids = fs
    .readdirSync(path.join(root, 'bench'))
    .filter((f) => /^w\d+_\w+\.js$/.test(f))
    .map((f) => f.split('_')[0]);
  expect(report.workloads.map((w) => w.id).sort()).toEqual(ids.sort());
});

test('the README is for users: short, with the reference in docs/api.md', () => {
  expect(read('README.md').split('\n').length).toBeLessThanOrEqual(300);
});

// Every ```js block of the README and of docs/api.md runs as written, as a
// file of its own in an empty project where `lua-tasks` resolves to this
// package: an ES module if it imports, CommonJS otherwise. A block that is
// deliberately an excerpt says so with an HTML comment `<!-- fragment -->` on
// the line before it (kept rare).
function codeBlocks(file) {
  const text = read(file);
  const blocks = [];
  const fence = /(<!--\s*fragment\s*-->[ \t]*\r?\n)?```(js|javascript|mjs|cjs)[ \t]*\r?\n([\s\S]*?)\r?\n```/g;
  for (let m; (m = fence.exec(text)) !== null;) {
    const line = text.slice(0, m.index).split('\n').length + (m[1] ? 1 : 0);
    const esm = m[2] === 'mjs' || (m[2] !== 'cjs' && /^\s*import\s/m.test(m[3]));
    blocks.push({ where: `${file}:${line}`, esm, code: m[3], fragment: Boolean(m[1]) });
  }
  return blocks;
}

// Runs a block in a fresh directory (its cwd, so a store lands there).
function run(block) {
  const { spawnSync } = require('node:child_process');
  const os = require('node:os');
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

describe('the code blocks run as written', () => {
  const readme = codeBlocks('README.md');
  const all = [...readme, ...codeBlocks('docs/api.md')];
  // The README block whose code contains `marker`.
  const block = (marker) => readme.find((b) => b.code.includes(marker));

  test('the README has code blocks, and few are fragments', () => {
    expect(readme.length).toBeGreaterThanOrEqual(3);
    expect(readme.filter((b) => b.fragment).length).toBeLessThanOrEqual(2);
  });

  test.each(all.filter((b) => !b.fragment).map((b) => [b.where, b]))('the block at %s exits 0', (where, b) => {
    const r = run(b);
    expect({ status: r.status, signal: r.signal, stderr: r.stderr }).toEqual({ status: 0, signal: null, stderr: '' });
  });

  test('the quick start prints what its comments promise', () => {
    expect(run(readme[0]).stdout).toBe('hello, tick 3\nhello, tick 2\nhello, tick 1\nliftoff\n');
  });

  test('the tour prints what its comments promise', () => {
    expect(run(block("rt.start('profile', 7)")).stdout).toBe(
      "{ instruction: 'PROMISE' }\nAda, orders are down, 30 ms\n",
    );
    expect(run(block('http.createServer')).stdout).toBe('order-7: approved, gift-wrapped\n');
    expect(run(block('Runtime.open')).stdout).toBe('run 1: visit 1\nrun 2: visit 2\n');
    expect(run(block('memoryLimit')).stdout).toMatch(/ERR_MEMORY_LIMIT\nERR_TASK_TIMEOUT\n$/);
    expect(run(block('level_all')).stdout).toBe('resources/ada/sword\t2\tOK\n');
  });
});

// docs/api.md's tables list what the code has: the Options table every name
// of lib/runtime/options.js, one row each and in one table (a blank line would split
// it, and the rows after it would not render), the Errors table every code of
// lib/errors.js.
describe('the tables of docs/api.md agree with the code', () => {
  const api = read('docs/api.md');
  const sorted = (xs) => [...new Set(xs)].sort();

  // The lines from a heading to the next heading of the same or a higher level.
  function section(heading) {
    const start = api.indexOf(`\n${heading}\n`);
    expect(start).toBeGreaterThanOrEqual(0);
    const level = heading.split(' ')[0];
    const rest = api.slice(start + heading.length + 2);
    const next = rest.search(new RegExp(`^#{1,${level.length}} `, 'm'));
    return (next < 0 ? rest : rest.slice(0, next)).split('\n');
  }

  // The rows of the section's first table, and the table-like lines outside it.
  function table(lines) {
    const first = lines.findIndex((l) => l.startsWith('| '));
    expect(first).toBeGreaterThanOrEqual(0);
    let end = first;
    while (end < lines.length && lines[end].startsWith('|')) end++;
    const stray = lines.slice(end).filter((l) => l.startsWith('|'));
    return { header: lines[first], rows: lines.slice(first + 2, end), stray };
  }

  // A row's cells, splitting on pipes that are not escaped.
  const cells = (row) => row.replace(/\\\|/g, '').split('|').slice(1, -1);

  test('Options: every option of lib/runtime/options.js, one table, no other', () => {
    const { RUNTIME_OPTIONS, OPEN_OPTIONS } = require('../../lib/runtime/options');
    const { header, rows, stray } = table(section('### Options'));
    expect(header).toBe('| option | default | meaning |');
    expect(stray).toEqual([]);
    for (const row of rows) expect(cells(row)).toHaveLength(3);
    const names = rows.flatMap((r) => [...cells(r)[0].matchAll(/`(\w+)`/g)].map((m) => m[1]));
    expect(sorted(names)).toEqual(sorted([...RUNTIME_OPTIONS, ...OPEN_OPTIONS]));
  });

  test('Errors: every code of lib/errors.js, one row each, and no other code named', () => {
    const { codes } = require('../../lib/errors');
    const lines = section('## Errors');
    const { rows, stray } = table(lines);
    expect(stray).toEqual([]);
    for (const row of rows) expect(cells(row)).toHaveLength(3);
    expect(rows.map((r) => /^\| `([A-Z_]+)` \|/.exec(r)[1]).sort()).toEqual(Object.keys(codes).sort());
    const named = lines.join('\n').match(/\b(?:ERR_[A-Z_]+|ABORT_ERR)\b/g);
    expect(sorted(named)).toEqual(Object.keys(codes).sort());
  });
});

// Links between the README and docs/ lead somewhere: the file exists and, for
// a link to a heading, so does the heading (as GitHub makes its anchor). The
// code cites docs/design.md by anchor, so its section headings stay put.
describe('the links of the README and docs/ resolve', () => {
  // GitHub's anchor for a heading: lower case, punctuation dropped, spaces to
  // hyphens; a repeated heading gets -1, -2 ...
  function anchors(file) {
    const seen = new Map();
    const out = new Set();
    for (const [, text] of read(file).matchAll(/^#{1,6} (.+)$/gm)) {
      const slug = text
        .trim()
        .toLowerCase()
        .replace(/[^\p{L}\p{N}\s_-]/gu, '')
        .replace(/\s/g, '-');
      const n = seen.get(slug) || 0;
      seen.set(slug, n + 1);
      out.add(n === 0 ? slug : `${slug}-${n}`);
    }
    return out;
  }

  const files = [
    'README.md',
    ...fs
      .readdirSync(path.join(root, 'docs'))
      .filter((f) => f.endsWith('.md'))
      .map((f) => `docs/${f}`),
  ];

  test.each(files)('%s', (file) => {
    const broken = [];
    // Markdown links outside code spans: [text](target).
    const text = read(file)
      .replace(/```[\s\S]*?```/g, '')
      .replace(/`[^`\n]*`/g, '');
    for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/.test(target)) continue; // http:, mailto:
      const [rel, anchor] = target.split('#');
      const dest = rel === '' ? file : path.posix.normalize(path.posix.join(path.posix.dirname(file), rel));
      if (!fs.existsSync(path.join(root, dest))) broken.push(target);
      else if (anchor !== undefined && dest.endsWith('.md') && !anchors(dest).has(anchor)) broken.push(target);
    }
    expect(broken).toEqual([]);
  });

  test('docs/design.md has the sections the code cites', () => {
    const have = anchors('docs/design.md');
    for (const a of [
      'build',
      'layers',
      'life-of-a-task',
      'yield-instructions',
      'scheduling',
      'conversion',
      'limits-and-sandbox',
      'persistence',
      'cron',
      'errors',
    ]) {
      expect(have).toContain(a);
    }
  });
});
