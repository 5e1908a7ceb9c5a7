// SPDX-License-Identifier: MIT
// What the conversion tests share: a matcher for an error's code, and two ways to ask Lua about a JS value.
'use strict';

const code = (c) => expect.objectContaining({ code: c });

// inLua and roundTrip on the runtime current() returns (the test file's fixture).
function conversionProbes(current) {
  return {
    // Sets `v` as a global and returns what Lua says about it.
    inLua: (v, expr) => {
      const rt = current();
      rt.set('v', v);
      return rt.load(`return ${expr}`);
    },
    // Round trip JS -> Lua -> JS.
    roundTrip: (v) => {
      const rt = current();
      rt.set('v', v);
      return rt.get('v');
    },
  };
}

module.exports = { code, conversionProbes };
