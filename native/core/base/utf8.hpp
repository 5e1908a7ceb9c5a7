// SPDX-License-Identifier: MIT
// UTF-8 validation: decides whether Lua bytes cross to JS as a string or a Buffer.
#pragma once

#include <cstddef>

namespace lua_tasks {

// True when [p, p+n) is well-formed UTF-8 (RFC 3629: no overlongs, no
// surrogates, nothing past U+10FFFF), so a JS string holds it losslessly.
bool IsValidUtf8(const char* p, size_t n) noexcept;

// True when every byte is below 0x80.
bool IsAscii(const char* p, size_t n) noexcept;

}  // namespace lua_tasks
