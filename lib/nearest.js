// SPDX-License-Identifier: MIT
// nearest(): the known word a misspelling most likely meant, for "did you mean" hints.
'use strict';

// Edit distance (insertions, deletions, substitutions and swaps of two
// neighbours, each 1).
function distance(a, b) {
  const d = Array.from({ length: a.length + 1 }, (_, i) => [i]);
  for (let j = 1; j <= b.length; j++) d[0][j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.length][b.length];
}

/**
 * The word in `words` that `word` most likely misspells (case does not
 * count), or undefined if none is within a quarter of its length.
 * @param {string} word
 * @param {string[]} words
 * @returns {string|undefined}
 */
function nearest(word, words) {
  let best;
  let bestD = Infinity;
  for (const w of words) {
    const d = distance(word.toLowerCase(), w.toLowerCase());
    if (d < bestD) [best, bestD] = [w, d];
  }
  return best !== undefined && bestD <= Math.max(1, Math.floor(best.length / 4)) ? best : undefined;
}

module.exports = { nearest };
