// SPDX-License-Identifier: MIT
// lua-tasks: the public JavaScript API (each name is defined in the file it requires).
'use strict';

const { Runtime } = require('./runtime/runtime');
const { Task } = require('./runtime/task');
const cron = require('./cron');
const { DirectoryStore } = require('./store/directory');
const { PostgresStore } = require('./store/postgres');
const { Fleet, Member } = require('./fleet/member');
const { Resources } = require('./resources/resources');
const { classes } = require('./errors');
const { listTasks } = require('./runtime/task_list');
const { createDashboard } = require('./dashboard/handler');

// The package's names, and only them: the error classes come from
// lib/errors.js's one list; its codes and makeError, and every other file's
// helpers, stay internal. index.mjs and index.d.ts list the same names
// (test/js/types.test.js).
module.exports = {
  Runtime,
  cron,
  Task,
  DirectoryStore,
  PostgresStore,
  Fleet,
  Member,
  listTasks,
  createDashboard,
  Resources,
  ...classes,
};
