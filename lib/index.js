// SPDX-License-Identifier: MIT
// lua-tasks: the public JavaScript API (each name is defined in the file it requires).
'use strict';

const { Runtime } = require('./runtime');
const { Task } = require('./task');
const { DirectoryStore } = require('./store');
const errors = require('./errors');

module.exports = {
  Runtime,
  cron: require('./cron'),
  Task,
  DirectoryStore,
  codes: errors.codes,
  makeError: errors.makeError,
  LuaTasksError: errors.LuaTasksError,
  LuaError: errors.LuaError,
  CronSyntaxError: errors.CronSyntaxError,
  ConversionError: errors.ConversionError,
  RuntimeClosedError: errors.RuntimeClosedError,
  TaskError: errors.TaskError,
  StoreError: errors.StoreError,
  AbortError: errors.AbortError,
};
