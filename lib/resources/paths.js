// SPDX-License-Identifier: MIT
// Resource paths and list patterns: segments joined by "/", none empty; "*" in a pattern is one whole segment.
'use strict';

const { makeError, typeName } = require('../errors');

/** The longest path or pattern, in UTF-8 bytes: a path is a key of the registry (at most 512 bytes with its prefix). */
const MAX_PATH_BYTES = 500;

// Control characters have no place in a name a person reads, and a NUL
// ends a key in some stores.
const CONTROL_RE = /[\u0000-\u001f\u007f]/; // eslint-disable-line no-control-regex

function checkSegments(fn, what, value, wildcard) {
  if (typeof value !== 'string') {
    throw makeError(
      'ERR_INVALID_ARG_TYPE',
      `${fn}: the ${what} must be a string of "/"-separated segments. Received ${typeName(value)}.`,
    );
  }
  if (Buffer.byteLength(value) > MAX_PATH_BYTES) {
    throw makeError(
      'ERR_OUT_OF_RANGE',
      `${fn}: the ${what} is ${Buffer.byteLength(value)} bytes long; at most ${MAX_PATH_BYTES} are allowed.`,
    );
  }
  const segments = value.split('/');
  for (const s of segments) {
    let bad = null;
    if (s === '') bad = 'an empty segment';
    else if (CONTROL_RE.test(s)) bad = 'a control character';
    else if (s.includes('*') && !(wildcard && s === '*')) {
      bad = wildcard ? 'a "*" that is not a whole segment' : 'a "*" (only a list pattern may hold one)';
    }
    if (bad) {
      throw makeError(
        'ERR_INVALID_ARG_VALUE',
        `${fn}: the ${what} ${JSON.stringify(value)} has ${bad}; a ${what} is segments joined by "/", none empty (as "resources/alice/sword")${wildcard ? ', a segment "*" matching any one segment' : ''}.`,
      );
    }
  }
  return segments;
}

/**
 * A path, checked.
 * @param {string} fn the call, for messages ("resource.create")
 * @param {string} path
 * @param {string} [what='path']
 * @returns {string} the path
 * @throws {TypeError} ERR_INVALID_ARG_TYPE, ERR_INVALID_ARG_VALUE; {RangeError} ERR_OUT_OF_RANGE
 */
function checkPath(fn, path, what = 'path') {
  checkSegments(fn, what, path, false);
  return path;
}

/**
 * A list pattern, checked, as a matcher.
 * @param {string} fn
 * @param {string} pattern
 * @returns {(path: string) => boolean}
 */
function patternMatcher(fn, pattern) {
  const want = checkSegments(fn, 'pattern', pattern, true);
  if (!want.includes('*')) return (path) => path === pattern;
  return (path) => {
    const got = path.split('/');
    if (got.length !== want.length) return false;
    for (let i = 0; i < want.length; i++) if (want[i] !== '*' && want[i] !== got[i]) return false;
    return true;
  };
}

module.exports = { MAX_PATH_BYTES, checkPath, patternMatcher };
