// SPDX-License-Identifier: MIT
// ESM entry: a thin re-export of the CommonJS module.
import lib from './index.js';

export const { Runtime, Task, codes, makeError, LuaTasksError, LuaError, CronSyntaxError, ConversionError, RuntimeClosedError, TaskError } = lib;
export default lib;
