// SPDX-License-Identifier: MIT
// Which addon the package loads, and when its install builds from source (lib/addon_path.js, scripts/install.js).
//
// Each test lays out a package of its own in a temporary directory: the two
// files under test, a prebuilt.json, and a scripts/build.js stub that only
// says it ran, so no test compiles anything.
'use strict';
const { execFileSync, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const root = path.join(__dirname, '..', '..');
const target = `${process.platform}-${process.arch}`;
const FITS = { uv: Number(process.versions.uv.split('.')[0]), napi: 8 };

let pkg;
beforeEach(() => {
  pkg = fs.mkdtempSync(path.join(os.tmpdir(), 'lua-tasks-addon-path-'));
  for (const f of ['lib/addon_path.js', 'scripts/install.js']) {
    fs.mkdirSync(path.join(pkg, path.dirname(f)), { recursive: true });
    fs.copyFileSync(path.join(root, f), path.join(pkg, f));
  }
  fs.writeFileSync(path.join(pkg, 'scripts', 'build.js'), 'console.error("stub build ran");\n');
});
afterEach(() => fs.rmSync(pkg, { recursive: true, force: true }));

// A prebuilt.json and, beside it, a lua_tasks.node no system can load.
function prebuiltJson(manifest) {
  const dir = path.join(pkg, 'prebuilds', target);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'prebuilt.json'), JSON.stringify(manifest));
  fs.writeFileSync(path.join(dir, 'lua_tasks.node'), 'not an ELF file');
}

// addonPath() in a fresh node, with env added to a user's environment.
function addonPath(env = {}) {
  const code = `console.log(JSON.stringify(require(${JSON.stringify(path.join(pkg, 'lib', 'addon_path.js'))}).addonPath()))`;
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('LUA_TASKS_')));
  return JSON.parse(execFileSync(process.execPath, ['-e', code], { env: { ...clean, ...env }, encoding: 'utf8' }));
}

// scripts/install.js as npm runs it; returns its stderr (stdout stays empty).
function install(env = {}) {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('npm_config_build')));
  const r = spawnSync(process.execPath, [path.join(pkg, 'scripts', 'install.js')], {
    env: { ...clean, ...env },
    encoding: 'utf8',
  });
  expect({ status: r.status, stdout: r.stdout }).toEqual({ status: 0, stdout: '' });
  return r.stderr;
}

test.each([
  ['no prebuilt.json', null, `no prebuilt binary for ${target} in this package`],
  [
    'another libuv major',
    { ...FITS, uv: FITS.uv + 1 },
    `the prebuilt binary is for libuv ${FITS.uv + 1}.x, this Node runs libuv ${process.versions.uv}`,
  ],
  [
    'a newer Node-API',
    { ...FITS, napi: 999 },
    `the prebuilt binary needs Node-API 999, this Node has ${process.versions.napi}`,
  ],
])('with %s the loader falls back to build/ and says why', (_, manifest, why) => {
  if (manifest) prebuiltJson(manifest);
  expect(addonPath()).toEqual({ file: path.join(pkg, 'build', 'lua_tasks.node'), why });
});

test('a prebuilt that fits is loaded when there is no source build', () => {
  prebuiltJson(FITS);
  expect(addonPath()).toEqual({ file: path.join(pkg, 'prebuilds', target, 'lua_tasks.node') });
});

test('a source build wins over a prebuilt that fits', () => {
  prebuiltJson(FITS);
  fs.mkdirSync(path.join(pkg, 'build'));
  fs.writeFileSync(path.join(pkg, 'build', 'lua_tasks.node'), '');
  expect(addonPath()).toEqual({ file: path.join(pkg, 'build', 'lua_tasks.node') });
});

test('LUA_TASKS_BUILD_DIR is obeyed in a source checkout only', () => {
  prebuiltJson(FITS);
  const prebuilt = { file: path.join(pkg, 'prebuilds', target, 'lua_tasks.node') };
  expect(addonPath({ LUA_TASKS_BUILD_DIR: '/elsewhere' })).toEqual(prebuilt);
  fs.mkdirSync(path.join(pkg, 'test', 'js'), { recursive: true });
  expect(addonPath({ LUA_TASKS_BUILD_DIR: '/elsewhere' })).toEqual({ file: '/elsewhere/lua_tasks.node' });
});

test.each([
  [
    'there is no prebuilt',
    () => {},
    `lua-tasks: no prebuilt binary for ${target} in this package: building from source`,
  ],
  [
    'the prebuilt does not load here',
    () => prebuiltJson(FITS),
    /^lua-tasks: the prebuilt binary does not load here \(.*\): building from source$/m,
  ],
  [
    'the prebuilt is for another libuv major',
    () => prebuiltJson({ ...FITS, uv: FITS.uv + 1 }),
    `lua-tasks: the prebuilt binary is for libuv ${FITS.uv + 1}.x, this Node runs libuv ${process.versions.uv}: building from source`,
  ],
])('the install builds from source when %s, and says why in one line', (_, arrange, said) => {
  arrange();
  const stderr = install();
  expect(stderr).toMatch(said);
  expect(stderr).toMatch(/stub build ran\n$/);
});

test('npm install --build-from-source builds even where a prebuilt would load', () => {
  prebuiltJson(FITS);
  expect(install({ npm_config_build_from_source: 'true' })).toBe(
    'lua-tasks: building from source (--build-from-source)\nstub build ran\n',
  );
});

test('in a source checkout the install builds quietly, as a contributor expects', () => {
  fs.mkdirSync(path.join(pkg, 'test', 'js'), { recursive: true });
  expect(install()).toBe('stub build ran\n');
});
