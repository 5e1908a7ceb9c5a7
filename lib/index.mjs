// SPDX-License-Identifier: MIT
// ESM entry: a thin re-export of the CommonJS module (every name it exports;
// test/js/types.test.js checks that the two lists agree).
import lib from './index.js';

export const {
  Runtime,
  Task,
  cron,
  DirectoryStore,
  PostgresStore,
  Fleet,
  Member,
  listTasks,
  createDashboard,
  Resources,
  LuaTasksError,
  LuaError,
  CronSyntaxError,
  ConversionError,
  RuntimeClosedError,
  TaskError,
  StoreError,
  FleetError,
  AbortError,
} = lib;
export default lib;
