// SPDX-License-Identifier: MIT
// Which store failures are transient: the one list both the commit queue and PostgresStore read.
'use strict';

/** Node's socket errors: the store's server is not there (yet, again). */
const SOCKET_ERRORS = Object.freeze(
  new Set([
    'ECONNRESET',
    'ECONNREFUSED',
    'ECONNABORTED',
    'EPIPE',
    'ETIMEDOUT',
    'EHOSTUNREACH',
    'ENETUNREACH',
    'ENOTFOUND',
    'EAI_AGAIN',
  ]),
);

module.exports = { SOCKET_ERRORS };
