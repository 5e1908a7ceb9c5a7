// SPDX-License-Identifier: MIT
// index.d.ts compiles a usage file under tsc --strict; ESM import works.
'use strict';
const path = require('node:path');
const { execFileSync } = require('node:child_process');

const root = path.join(__dirname, '..', '..');

test('index.d.ts covers the API: a usage file compiles with tsc --noEmit --strict', () => {
  const tsc = require.resolve('typescript/bin/tsc');
  execFileSync(process.execPath, [tsc, '-p', path.join(root, 'test', 'types', 'tsconfig.json')], { encoding: 'utf8' });
});

test("ESM: import { Runtime } from 'lua-tasks' works", () => {
  const url = require('node:url').pathToFileURL(path.join(root, 'lib', 'index.mjs')).href;
  const out = execFileSync(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      `import { Runtime, LuaError } from ${JSON.stringify(url)};
     const rt = new Runtime();
     console.log(rt.load('return 6 * 7')[0], typeof LuaError);
     rt.closeSync();`,
    ],
    { encoding: 'utf8' },
  );
  expect(out.trim()).toBe('42 function');
});

test('ESM: every name the CommonJS module exports is a named export, and the same value', () => {
  const url = require('node:url').pathToFileURL(path.join(root, 'lib', 'index.mjs')).href;
  const cjs = require(path.join(root, 'lib', 'index.js'));
  const out = execFileSync(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      `import * as esm from ${JSON.stringify(url)};
     import { createRequire } from 'node:module';
     const cjs = createRequire(${JSON.stringify(path.join(root, 'package.json'))})('./lib/index.js');
     const missing = Object.keys(cjs).filter((k) => esm[k] !== cjs[k]);
     console.log(JSON.stringify({ missing, cron: typeof esm.cron.next }));`,
    ],
    { encoding: 'utf8' },
  );
  expect(JSON.parse(out)).toEqual({ missing: [], cron: 'function' });
  expect(Object.keys(cjs)).toEqual(expect.arrayContaining(['Runtime', 'cron', 'DirectoryStore']));
});

test('the package exports its public names, each declared in index.d.ts, and no internals', () => {
  const fs = require('node:fs');
  const names = Object.keys(require(path.join(root, 'lib', 'index.js')));
  expect(names.sort()).toEqual([
    'AbortError',
    'ConversionError',
    'CronSyntaxError',
    'DirectoryStore',
    'Fleet',
    'FleetError',
    'LuaError',
    'LuaTasksError',
    'Member',
    'PostgresStore',
    'Resources',
    'Runtime',
    'RuntimeClosedError',
    'StoreError',
    'Task',
    'TaskError',
    'createDashboard',
    'cron',
    'listTasks',
  ]);
  const dts = fs.readFileSync(path.join(root, 'lib', 'index.d.ts'), 'utf8');
  const declared = [...dts.matchAll(/^export (?:class|namespace|const|function) (\w+)/gm)].map((m) => m[1]);
  expect(declared.sort()).toEqual(names);
});

describe('the options are documented alike everywhere (lib/runtime/options.js is the list)', () => {
  const fs = require('node:fs');
  const { RUNTIME_OPTIONS, OPEN_OPTIONS } = require('../../lib/runtime/options');
  const sorted = (xs) => [...new Set(xs)].sort();

  // The names of an interface's properties in index.d.ts.
  function members(dts, name) {
    const m = new RegExp(`export interface ${name}[^{]*\\{([\\s\\S]*?)\\n\\}`).exec(dts);
    return [...m[1].matchAll(/^ {2}(\w+)\??:/gm)].map((x) => x[1]);
  }

  test('index.d.ts declares every option in RuntimeOptions and OpenOptions', () => {
    const dts = fs.readFileSync(path.join(root, 'lib', 'index.d.ts'), 'utf8');
    expect(sorted(members(dts, 'RuntimeOptions'))).toEqual(sorted(RUNTIME_OPTIONS));
    expect(sorted(members(dts, 'OpenOptions'))).toEqual(sorted(OPEN_OPTIONS));
  });

  test("the constructor's JSDoc documents every runtime option", () => {
    const src = fs.readFileSync(path.join(root, 'lib', 'runtime', 'runtime.js'), 'utf8');
    const names = [...src.matchAll(/@param \{[^}]*\} \[options\.(\w+)/g)].map((m) => m[1]);
    expect(sorted(names)).toEqual(sorted(RUNTIME_OPTIONS));
  });

  test('the validator refuses any other key, naming the nearest option', () => {
    const { Runtime } = require('../..');
    expect(() => new Runtime({ timeslice: 5 })).toThrow(
      expect.objectContaining({
        code: 'ERR_INVALID_ARG_VALUE',
        message: expect.stringContaining('did you mean "timeSlice"'),
      }),
    );
    expect(() => new Runtime({ bogusOption: 1 })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_VALUE' }));
    for (const key of RUNTIME_OPTIONS) {
      let err;
      try {
        new Runtime({ [key]: undefined }).closeSync();
      } catch (e) {
        err = e;
      }
      expect(err).toBeUndefined();
    }
  });
});

describe('the task codes are defined once, natively (NativeRuntime.constants), and named alike everywhere', () => {
  const fs = require('node:fs');
  const binding = require('../../lib/binding');
  const codes = require('../../lib/runtime/task_codes');
  const C = binding.NativeRuntime.constants;
  const dts = fs.readFileSync(path.join(root, 'lib', 'index.d.ts'), 'utf8');

  // The string literals of a union in index.d.ts, found by what precedes it.
  function union(before) {
    const m = new RegExp(`${before}\\s*((?:\\|?\\s*'[^']*'\\s*)+);`).exec(dts);
    expect(m).not.toBeNull();
    return [...m[1].matchAll(/'([^']*)'/g)].map((x) => x[1]);
  }

  test("index.d.ts's TaskStatus is the binding's statuses, in order", () => {
    expect(union('export type TaskStatus =')).toEqual(C.status);
  });

  test("index.d.ts's TaskWaiting.instruction is the binding's wait kinds a waiting task shows", () => {
    expect(union('instruction:')).toEqual(C.wait.filter((w) => w !== 'NONE'));
  });

  test("a task's end kinds are the statuses it ends with, and a callback's failure", () => {
    expect(C.end).toEqual(['done', 'failed', 'cancelled', 'callbackFailed']);
    expect(C.status).toEqual(expect.arrayContaining(C.end.slice(0, 3)));
  });

  test("Lua's tasks.instruction and tasks.unit are the binding's instructions and units", () => {
    const { Runtime } = require('../..');
    const rt = new Runtime();
    const [instructions, units] = rt.load(`
      local function keys(t) local out = {} for k in pairs(t) do out[#out + 1] = k end table.sort(out) return out end
      return keys(tasks.instruction), keys(tasks.unit)`);
    rt.closeSync();
    expect(instructions).toEqual([...C.instruction].sort());
    expect(units).toEqual([...C.unit].sort());
  });

  test("lib/runtime/task_codes.js hands out the binding's names and numbers, and unpacks its codes", () => {
    expect(codes.TASK_STATUS).toEqual(C.status);
    expect(codes.WAIT_KINDS).toEqual(C.wait);
    expect(codes.INSTRUCTIONS).toEqual(C.instruction);
    expect(codes.UNITS).toEqual(C.unit);
    expect(codes.END_NAMES).toEqual(C.end);
    expect(codes.END).toEqual({ done: 0, failed: 1, cancelled: 2, callbackFailed: 3 });
    expect(codes.ID_KEY_DIGITS).toBe(C.idKeyDigits);
    expect(codes.ENDED_KEPT).toBe(C.finishedKept);
    const key = 2 ** 40 + 7;
    expect(codes.startKey(key * C.startSlots + codes.END.cancelled + 1)).toBe(key);
    expect(codes.startEnd(key * C.startSlots + codes.END.cancelled + 1)).toBe(codes.END.cancelled);
    expect(codes.startEnd(key * C.startSlots)).toBe(-1);
    const waiting = C.status.indexOf('waiting') | (C.wait.indexOf('RECEIVE') << C.stateWaitShift);
    expect([codes.stateStatus(waiting), codes.stateWait(waiting)]).toEqual(['waiting', 'RECEIVE']);
  });

  test('a task id ends in its key in idKeyDigits base-36 digits', () => {
    const { Runtime } = require('../..');
    const rt = new Runtime();
    rt.load('function forever() coroutine.yield("INDEFINITELY") end');
    const first = rt.start('forever');
    const second = rt.start('forever');
    const tail = (id) => id.slice(-C.idKeyDigits);
    expect(parseInt(tail(second.id), 36) - parseInt(tail(first.id), 36)).toBe(1);
    expect(first.id.slice(0, -C.idKeyDigits)).toBe(second.id.slice(0, -C.idKeyDigits));
    expect(first.id.slice(0, -C.idKeyDigits)).toMatch(/-$/);
    rt.closeSync();
  });
});
