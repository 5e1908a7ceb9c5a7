// SPDX-License-Identifier: MIT
// Value summaries: a Lua value as a short line for a person (see value_summary.hpp).
#include "core/host/value_summary.hpp"

#include <cstdio>

namespace lua_tasks {

namespace {

// Entries a table's summary shows, and keys it counts before it says "at least".
constexpr int kShown = 3;
constexpr size_t kCounted = 10000;

void AppendNumber(lua_State* L, int idx, std::string* out) {
  char buf[48];
  int isint = 0;
  const lua_Integer i = lua_tointegerx(L, idx, &isint);
  if (isint && lua_isinteger(L, idx)) {
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(i));
  } else {
    std::snprintf(buf, sizeof buf, "%.14g", static_cast<double>(lua_tonumber(L, idx)));
  }
  out->append(buf);
}

// A string quoted, its bytes past `max` cut; control bytes and quotes escaped.
void AppendString(lua_State* L, int idx, size_t max, std::string* out) {
  size_t len = 0;
  const char* s = lua_tolstring(L, idx, &len);  // a string already: nothing converted, nothing allocated
  out->push_back('"');
  const size_t shown = len < max ? len : max;
  for (size_t i = 0; i < shown; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(c));
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\%d", c);
      out->append(buf);
    } else {
      out->push_back(static_cast<char>(c));
    }
  }
  out->push_back('"');
  if (shown < len) {
    out->insert(out->size() - 1, "...");
    out->append(" (").append(std::to_string(len)).append(" bytes)");
  }
}

void AppendScalar(lua_State* L, int idx, size_t max, std::string* out) {
  switch (lua_type(L, idx)) {
    case LUA_TNIL:
      out->append("nil");
      break;
    case LUA_TBOOLEAN:
      out->append(lua_toboolean(L, idx) ? "true" : "false");
      break;
    case LUA_TNUMBER:
      AppendNumber(L, idx, out);
      break;
    case LUA_TSTRING:
      AppendString(L, idx, max, out);
      break;
    case LUA_TTABLE:
      out->append("{...}");
      break;
    default:
      out->append(lua_typename(L, lua_type(L, idx)));
  }
}

void AppendTable(lua_State* L, int idx, size_t max, std::string* out) {
  const lua_Unsigned items = lua_rawlen(L, idx);
  out->push_back('{');
  int shown = 0;
  size_t keys = 0;
  bool more = false;
  lua_pushnil(L);
  while (lua_next(L, idx) != 0) {
    ++keys;
    const bool in_sequence =
        lua_isinteger(L, -2) && lua_tointeger(L, -2) >= 1 && static_cast<lua_Unsigned>(lua_tointeger(L, -2)) <= items;
    if (shown < kShown && out->size() < max) {
      if (shown > 0) out->append(", ");
      if (!in_sequence) {
        if (lua_type(L, -2) == LUA_TSTRING) {
          size_t n = 0;
          const char* k = lua_tolstring(L, -2, &n);
          out->append(k, n < 40 ? n : 40);
        } else {
          out->push_back('[');
          AppendScalar(L, -2, 20, out);
          out->push_back(']');
        }
        out->append(" = ");
      }
      AppendScalar(L, -1, 40, out);
      ++shown;
    } else {
      more = true;
    }
    lua_pop(L, 1);
    if (keys >= kCounted) {
      lua_pop(L, 1);  // the key: the traversal stops here
      break;
    }
  }
  if (more) out->append(shown > 0 ? ", ..." : "...");
  out->push_back('}');
  const bool counted_all = keys < kCounted;
  if (more || !counted_all) {
    const bool list = items > 0 && items == keys;
    out->append(" (")
        .append(counted_all ? "" : "at least ")
        .append(std::to_string(list ? items : keys))
        .append(list ? " items)" : " keys)");
  }
}

}  // namespace

std::string SummarizeValue(lua_State* L, int idx, size_t max) {
  std::string out;
  idx = lua_absindex(L, idx);
  if (lua_type(L, idx) != LUA_TTABLE) {
    AppendScalar(L, idx, max, &out);
    return out;
  }
  if (!lua_checkstack(L, 2)) return "table";
  AppendTable(L, idx, max, &out);
  if (out.size() > max + 40) {
    out.resize(max);
    out.append("...}");
  }
  return out;
}

std::vector<std::string> SummarizeValues(lua_State* L, int first, int n) {
  std::vector<std::string> out;
  first = lua_absindex(L, first);
  size_t total = 0;
  for (int i = 0; i < n; ++i) {
    if (total >= kSummaryListBytes) {
      out.push_back("... (" + std::to_string(n - i) + " more)");
      break;
    }
    out.push_back(SummarizeValue(L, first + i));
    total += out.back().size();
  }
  return out;
}

}  // namespace lua_tasks
