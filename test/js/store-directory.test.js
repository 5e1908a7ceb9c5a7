// SPDX-License-Identifier: MIT
// The directory store passes the store conformance suite.
'use strict';
const fs = require('node:fs');
const fsp = require('node:fs/promises');
const os = require('node:os');
const path = require('node:path');
const { describeStore } = require('./store-conformance');

// Makes the next save fail at one step: `step` is given each fs call of the
// store and answers whether it fails. Only the writes of a save are hit
// (temporary files and the directory's sync), never a load or the lock.
function failAt(label, code, target) {
  return {
    label: `${label} (${code})`,
    async inject() {
      const err = () => Object.assign(new Error(`${code}: injected at ${label}`), { code });
      const restores = [];
      if (target === 'rename') {
        const spy = jest.spyOn(fsp, 'rename').mockImplementation(async () => {
          throw err();
        });
        restores.push(() => spy.mockRestore());
      } else if (target === 'open-tmp' || target === 'open-dir') {
        const real = fsp.open;
        const spy = jest.spyOn(fsp, 'open').mockImplementation(async (p, ...rest) => {
          const isTmp = String(p).endsWith('.tmp');
          if ((target === 'open-tmp' && isTmp) || (target === 'open-dir' && !isTmp && !String(p).endsWith('.state'))) {
            throw err();
          }
          return real.call(fsp, p, ...rest);
        });
        restores.push(() => spy.mockRestore());
      } else {
        // A FileHandle method (write, sync, close) of the temporary file:
        // the handle fsp.open returns gets a failing one of its own.
        const real = fsp.open;
        const spy = jest.spyOn(fsp, 'open').mockImplementation(async (p, ...rest) => {
          const fh = await real.call(fsp, p, ...rest);
          if (!String(p).endsWith('.tmp')) return fh;
          const method = fh[target].bind(fh);
          fh[target] =
            target === 'close'
              ? () =>
                  method().then(() => {
                    throw err();
                  }) // closed for real: no fd leak
              : async () => {
                  throw err();
                };
          return fh;
        });
        restores.push(() => spy.mockRestore());
      }
      return () => restores.forEach((r) => r());
    },
  };
}

describeStore({
  label: 'DirectoryStore',
  setup: () => ({ dir: fs.mkdtempSync(path.join(os.tmpdir(), 'lua-tasks-store-')) }),
  teardown: (ctx) => fs.rmSync(ctx.dir, { recursive: true, force: true }),
  store: (ctx) => ctx.dir,
  child: (ctx) => ({ module: path.join(__dirname, 'fixtures', 'directory-store-spec.js'), spec: { dir: ctx.dir } }),
  corrupt(ctx, name, fn) {
    const file = path.join(ctx.dir, `${name}.state`);
    fs.writeFileSync(file, fn(fs.readFileSync(file)));
  },
  leftovers: (ctx, name) => fs.readdirSync(ctx.dir).filter((f) => f.startsWith(`${name}.state.`)),
  faults: [
    failAt('opening the temporary file', 'EACCES', 'open-tmp'),
    failAt('writing', 'ENOSPC', 'write'),
    failAt('fsync of the file', 'EIO', 'sync'),
    failAt('closing the file', 'EIO', 'close'),
    failAt('the rename', 'EXDEV', 'rename'),
    failAt('opening the directory for its fsync', 'EIO', 'open-dir'),
  ],
});
