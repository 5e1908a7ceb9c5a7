// SPDX-License-Identifier: MIT
// ESLint's configuration for the repository's JavaScript: mistakes, not layout (layout is .prettierrc's).
'use strict';

const js = require('@eslint/js');
const globals = require('globals');

module.exports = [
  // What git ignores: the builds (build/generated included), scratch output
  // of the bench and the fuzzers. node_modules/ is ignored by default; no
  // fixture needs to keep a layout of its own. .prettierignore lists the same.
  { ignores: ['build/', 'build-*/', 'bench/.work/', 'fuzz-corpus/', 'prebuilds/'] },
  js.configs.recommended,
  {
    files: ['**/*.js'],
    languageOptions: {
      ecmaVersion: 2023, // what Node 20, the oldest Node supported, runs
      sourceType: 'commonjs',
      globals: globals.node,
    },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // A caught error left unused is fine: `catch {` is the form for it.
      'no-unused-vars': ['error', { args: 'after-used', argsIgnorePattern: '^_', caughtErrors: 'none' }],
      strict: ['error', 'global'], // every CommonJS file says 'use strict'
      'no-var': 'error',
      'prefer-const': ['error', { destructuring: 'all' }],
      eqeqeq: ['error', 'always'],
      'no-throw-literal': 'error',
      'no-new-func': 'error',
      'no-eval': 'error',
      // A body without braces stays on its statement's line; Prettier
      // breaking the line makes the braces come back (eslint --fix).
      curly: ['error', 'multi-line'],
    },
  },
  {
    files: ['**/*.mjs'],
    languageOptions: { ecmaVersion: 2023, sourceType: 'module', globals: globals.node },
  },
  {
    // The dashboard's page script runs in the browser (lib/dashboard/handler.js serves it).
    files: ['lib/dashboard/page.js'],
    languageOptions: { sourceType: 'script', globals: globals.browser },
  },
  {
    files: ['test/js/**/*.js'],
    languageOptions: { globals: globals.jest },
  },
];
