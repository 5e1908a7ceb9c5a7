// SPDX-License-Identifier: MIT
// cron: next times, validation and the expanded fields of a cron expression (docs/design.md#cron).
'use strict';

const binding = require('./binding');
const { makeError } = require('./errors');

function expression(expr) {
  if (typeof expr !== 'string') {
    throw makeError('ERR_INVALID_ARG_TYPE', `The cron expression must be a string. Received ${typeof expr}.`);
  }
  return expr;
}

/**
 * The next times an expression fires, strictly after `from` (sub-seconds dropped).
 * 6 or 7 fields are Quartz (seconds first), 5 are Vixie; nicknames like @daily.
 * @param {string} expr
 * @param {{ from?: Date|number, tz?: string, count?: number }} [options]
 *   tz: IANA zone (a CRON_TZ= prefix wins; default: the process's zone, $TZ else
 *   /etc/localtime, as Date's and UNTIL_NEXT's); count: 1-10000 (default 1)
 * @returns {Date[]} fewer than `count` (even none) when the expression runs out of times
 * @throws {CronSyntaxError} ERR_CRON_SYNTAX naming the field and position
 */
function next(expr, options = {}) {
  expression(expr);
  if (options === null || typeof options !== 'object') {
    throw makeError('ERR_INVALID_ARG_TYPE', 'The "options" argument must be an object.');
  }
  const { from = new Date(), tz, count = 1 } = options;
  const fromMs = from instanceof Date ? from.getTime() : from;
  if (typeof fromMs !== 'number' || !Number.isFinite(fromMs)) {
    throw makeError(
      'ERR_INVALID_ARG_TYPE',
      `The "options.from" option must be a Date or epoch milliseconds. Received ${String(from)}.`,
    );
  }
  if (tz !== undefined && typeof tz !== 'string') {
    throw makeError(
      'ERR_INVALID_ARG_TYPE',
      `The "options.tz" option must be an IANA zone name. Received ${typeof tz}.`,
    );
  }
  if (!Number.isInteger(count) || count < 1 || count > 10000) {
    throw makeError(
      'ERR_OUT_OF_RANGE',
      `The "options.count" option must be an integer from 1 to 10000. Received ${String(count)}.`,
    );
  }
  return binding.cronNext(expr, fromMs, tz, count).map((ms) => new Date(ms));
}

/**
 * @param {string} expr
 * @returns {{ ok: boolean, error?: string }}
 */
function validate(expr) {
  expression(expr);
  const error = binding.cronValidate(expr);
  return error === null ? { ok: true } : { ok: false, error };
}

/**
 * The expanded fields: which seconds, minutes, hours, days, months, weekdays
 * (0 = Sunday) and years match, plus the L/W/# specials and the dialect.
 * @param {string} expr
 * @returns {object}
 * @throws {CronSyntaxError} ERR_CRON_SYNTAX
 */
function describe(expr) {
  return binding.cronDescribe(expression(expr));
}

module.exports = { next, validate, describe };
