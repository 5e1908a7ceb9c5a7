# SPDX-License-Identifier: MIT
# Embeds one .lua file in C++: writes a header with its bytes as a char array and its chunk name.
#   cmake -DIN=<file.lua> -DOUT=<header> -P embed_lua.cmake
# For native/core/lua/text_only.lua the header declares
#   lua_tasks::kTextOnlyLua[]      the source, NUL-terminated (sizeof - 1 bytes of Lua)
#   lua_tasks::kTextOnlyLuaName[]  "=lua-tasks/text_only.lua", the chunk name for tracebacks
# A char array of '\xNN' literals, not a string literal: no escaping to get
# wrong, any byte fits a char (a UTF-8 comment too), and no
# compiler limit on string literal length (MSVC's is 16 KB).
get_filename_component(name ${IN} NAME)
get_filename_component(stem ${IN} NAME_WE)
string(REPLACE "_" ";" words ${stem})
set(symbol "k")
foreach(word ${words})
  string(SUBSTRING ${word} 0 1 first)
  string(SUBSTRING ${word} 1 -1 rest)
  string(TOUPPER ${first} first)
  string(APPEND symbol ${first}${rest})
endforeach()
string(APPEND symbol "Lua")
file(READ ${IN} hex HEX)
# 16 bytes a line (CMake's regex has no {n}: 32 dots are 16 bytes in hex).
string(REGEX REPLACE "(................................)" "\\1\n    " hex "${hex}")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," bytes "${hex}")
set(text "// Generated from ${name} by native/cmake/embed_lua.cmake at build time: edit the .lua file, not this.
#pragma once

namespace lua_tasks {

inline constexpr char ${symbol}[] = {
    ${bytes}'\\0'};
inline constexpr char ${symbol}Name[] = \"=lua-tasks/${name}\";

}  // namespace lua_tasks
")
file(WRITE ${OUT} "${text}")
