// SPDX-License-Identifier: MIT
// The directory store passes the store conformance suite.
'use strict';
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { DirectoryStore } = require('../../..');
const { testing } = require('../../../lib/store/directory');
const { describeStore } = require('./conformance');

describeStore({
  label: 'DirectoryStore',
  setup: () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lua-tasks-store-'));
    return { dir, store: new DirectoryStore(dir) };
  },
  async teardown(ctx) {
    await ctx.store.close();
    fs.rmSync(ctx.dir, { recursive: true, force: true });
  },
  // One store object for every runtime of a test: they share its writer.
  store: (ctx) => ctx.store,
  child: (ctx) => ({
    module: path.join(__dirname, '..', 'fixtures', 'directory-store-spec.js'),
    spec: { dir: ctx.dir },
  }),
  // The snapshot blob in the database, replaced through SQLite (a save
  // without a token is not fenced).
  async corrupt(ctx, name, fn) {
    const bytes = await ctx.store.load(name);
    await ctx.store.save(name, fn(Buffer.from(bytes)));
  },
  // Nothing but the database, its WAL files and the lock files: no file of a
  // name's own may be left by a failed or killed write.
  leftovers: (ctx, name) => fs.readdirSync(ctx.dir).filter((f) => f.startsWith(`${name}.`) && f !== `${name}.lock`),
  faults: [
    {
      label: 'its transaction (EIO at COMMIT)',
      async inject(ctx) {
        const native = testing.nativeOf(ctx.store);
        native.failNextTransactions(1);
        return () => native.failNextTransactions(0);
      },
    },
  ],
});
