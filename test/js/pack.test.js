// SPDX-License-Identifier: MIT
// The package as a user meets it: npm pack, npm install <tarball> into an empty project, smoke tests there.
//
// npm pack builds the prebuilt binary (prepack: scripts/prebuilt.js, a build
// of its own in build-prebuilt/). The first install loads that binary and
// compiles nothing; the second, with --build-from-source, compiles the addon
// from the tarball's sources (about a minute on two cores), so it has a
// generous timeout. Both run offline: node-addon-api and pg-copy-streams are bundled.
'use strict';
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const root = path.join(__dirname, '..', '..');
const INSTALL_MS = 10 * 60 * 1000;

// The nested npm and node see a user's environment: none of this run's build
// choices (LUA_TASKS_BUILD_DIR would point the installed package at our
// build) and nothing of an npm script running Jest but npm's own config.
function userEnv() {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (k.startsWith('LUA_TASKS_')) continue;
    if (k.startsWith('npm_') && !k.startsWith('npm_config_')) continue;
    env[k] = v;
  }
  return env;
}

function run(cmd, args, cwd, timeout = 120000) {
  try {
    return execFileSync(cmd, args, {
      cwd,
      env: userEnv(),
      encoding: 'utf8',
      timeout,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  } catch (e) {
    const output = `${e.stdout || ''}\n${e.stderr || ''}`;
    throw new Error(`${cmd} ${args.join(' ')} failed (${e.status ?? e.signal}):\n${output}`, { cause: e });
  }
}

function libFiles(dir, rel = 'lib') {
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .flatMap((d) => (d.isDirectory() ? libFiles(path.join(dir, d.name), `${rel}/${d.name}`) : [`${rel}/${d.name}`]));
}

// An empty project with the packed tarball installed; args: npm's extra flags.
function installInto(name, args = []) {
  const app = path.join(dir, name);
  fs.mkdirSync(app);
  fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'smoke', version: '1.0.0', private: true }));
  run(
    'npm',
    ['install', path.join(dir, packed.filename), '--offline', '--no-audit', '--no-fund', '--loglevel=error', ...args],
    app,
    INSTALL_MS,
  );
  return app;
}

let dir;
let packed;
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lua-tasks-pack-'));
  packed = JSON.parse(run('npm', ['pack', '--json', '--pack-destination', dir], root, INSTALL_MS))[0];
}, INSTALL_MS);
afterAll(() => {
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

test('the tarball holds the prebuilt binary and every file the build, the library and its reader need, and none of the tests, benches or builds', () => {
  const files = packed.files.map((f) => f.path);
  const needed = [
    'package.json',
    'README.md',
    'LICENSE',
    'CMakeLists.txt',
    'scripts/build.js',
    'scripts/install.js',
    ...libFiles(path.join(root, 'lib')),
    ...libFiles(path.join(root, 'native'), 'native'),
    ...libFiles(path.join(root, 'docs'), 'docs'), // the README links into docs/
    ...libFiles(path.join(root, 'examples'), 'examples'), // the README runs them
    ...libFiles(path.join(root, 'prebuilds'), 'prebuilds'),
  ];
  // node-addon-api (the source build) and pg-copy-streams (PostgresStore's
  // index reads) are bundled: the install needs no network.
  const bundled = files.filter((f) => f.startsWith('node_modules/'));
  expect(bundled).toEqual(
    expect.arrayContaining(['node_modules/node-addon-api/napi.h', 'node_modules/pg-copy-streams/copy-to.js']),
  );
  expect(bundled.every((f) => /^node_modules\/(node-addon-api|pg-copy-streams)\//.test(f))).toBe(true);
  expect(files.filter((f) => !f.startsWith('node_modules/')).sort()).toEqual([...new Set(needed)].sort());
  expect(needed).toEqual(
    expect.arrayContaining([
      'lib/index.mjs',
      'lib/index.d.ts',
      'lib/lua/util/async.lua',
      'native/core/lua/tasks.lua',
      'native/addon/lua/file_modules.lua',
      'native/cmake/embed_lua.cmake',
      'docs/api.md',
      'prebuilds/linux-x64/lua_tasks.node',
      'prebuilds/linux-x64/prebuilt.json',
      'prebuilds/linux-x64/liblua5.4.so.0',
      'examples/hello.js',
    ]),
  );
  // Sources and docs about 1 MB, the prebuilt binary and its libraries about 4 (a build tree is over 10).
  expect(packed.unpackedSize).toBeLessThan(7 * (1 << 20));
});

test(
  'it installs into an empty project without compiling and runs tasks from CommonJS, ESM, TypeScript and the CLI',
  () => {
    const app = installInto('app');
    const installed = path.join(app, 'node_modules', 'lua-tasks');
    expect(fs.existsSync(path.join(installed, 'build'))).toBe(false); // the prebuilt loaded: nothing was built

    fs.writeFileSync(
      path.join(app, 'smoke.cjs'),
      `
    // An installed package loads its own addon, whatever this says.
    process.env.LUA_TASKS_BUILD_DIR = '/nonexistent';
    const { Runtime } = require('lua-tasks');
    (async () => {
      const rt = new Runtime();
      rt.load('function t(ms) local why, el, unit = coroutine.yield("FOR", ms, "MILLISECONDS") return { why, el, unit } end');
      const t0 = Date.now();
      const [why, elapsed, unit] = await rt.call('t', 20);
      const wall = Date.now() - t0;
      const shipped = rt.load('return type(require("util.async").runner)')[0];
      await rt.close();
      const binding = require(require('node:path').join(require.resolve('lua-tasks'), '..', 'binding.js'));
      const hooks = ['snapshot', 'restore'].filter((m) => m in binding.NativeRuntime.prototype)
        .concat('failNextTransactions' in binding.NativeStore.prototype ? ['failNextTransactions'] : []);
      const { file } = require(require('node:path').join(require.resolve('lua-tasks'), '..', 'addon_path.js')).addonPath();
      console.log(JSON.stringify({ why, elapsed, unit, wall, shipped, hooks, file }));
    })();`,
    );
    const cjs = JSON.parse(run(process.execPath, ['smoke.cjs'], app));
    // The test-only methods are not in an installed package's addon.
    expect(cjs).toMatchObject({
      why: 'SCHEDULER',
      unit: 'MILLISECONDS',
      shipped: 'function',
      hooks: [],
      file: path.join(installed, 'prebuilds', 'linux-x64', 'lua_tasks.node'),
    });
    expect(cjs.elapsed).toBeGreaterThanOrEqual(19);
    expect(cjs.wall).toBeGreaterThanOrEqual(19);
    expect(cjs.wall).toBeLessThan(2000);

    fs.writeFileSync(
      path.join(app, 'smoke.mjs'),
      `
    import { Runtime, cron } from 'lua-tasks';
    const rt = new Runtime();
    rt.load('function t() tasks.sleep(0.01) return "slept" end');
    const v = await rt.call('t');
    rt.closeSync();
    const next = cron.next('0 0 12 * * ?', { from: new Date(Date.UTC(2030, 0, 1)), tz: 'UTC' });
    console.log(JSON.stringify({ v, next }));`,
    );
    expect(JSON.parse(run(process.execPath, ['smoke.mjs'], app))).toEqual({
      v: 'slept',
      next: ['2030-01-01T12:00:00.000Z'],
    });

    fs.writeFileSync(
      path.join(app, 'check.ts'),
      `
    import { Runtime, cron } from 'lua-tasks';
    const rt: Runtime = new Runtime({ libs: 'safe' });
    const next: Date[] = cron.next('*/5 * * * *', { count: 2 });
    console.log(rt, next);`,
    );
    run(
      process.execPath,
      [
        require.resolve('typescript/bin/tsc'),
        '--noEmit',
        '--strict',
        '--module',
        'commonjs',
        '--moduleResolution',
        'node',
        '--typeRoots',
        path.join(root, 'node_modules', '@types'),
        '--types',
        'node',
        'check.ts',
      ],
      app,
    );

    const cli = run(
      path.join(app, 'node_modules', '.bin', 'lua-tasks'),
      ['cron', '0 0 12 * * ?', '--count', '2', '--tz', 'UTC', '--from', '2030-01-01T00:00:00Z'],
      app,
    );
    expect(cli.trim().split('\n')).toEqual(['2030-01-01T12:00:00+00:00', '2030-01-02T12:00:00+00:00']);
  },
  INSTALL_MS + 60000,
);

test(
  'with --build-from-source it compiles the addon from the tarball and loads that build',
  () => {
    const app = installInto('built', ['--build-from-source']);
    const installed = path.join(app, 'node_modules', 'lua-tasks');
    expect(fs.readdirSync(path.join(installed, 'build'))).toEqual(['lua_tasks.node']); // no CMake tree left behind
    fs.writeFileSync(
      path.join(app, 'which.cjs'),
      `
    const { Runtime } = require('lua-tasks');
    const { addonPath } = require(require('node:path').join(require.resolve('lua-tasks'), '..', 'addon_path.js'));
    const rt = new Runtime();
    console.log(JSON.stringify({ file: addonPath().file, v: rt.load('return 6 * 7')[0] }));
    rt.closeSync();`,
    );
    expect(JSON.parse(run(process.execPath, ['which.cjs'], app))).toEqual({
      file: path.join(installed, 'build', 'lua_tasks.node'),
      v: 42,
    });
  },
  INSTALL_MS + 60000,
);
