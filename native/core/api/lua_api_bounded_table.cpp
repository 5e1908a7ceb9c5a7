// SPDX-License-Identifier: MIT
// Bounded table functions: concat, insert, remove, move, sort, unpack, metered.
//
// Each keeps the Lua 5.4.4 behaviour (reference manual §6.6: metamethods
// respected, the same argument checks and errors) and counts its work with
// a WorkMeter. What made the stock ones long: a loop over a range the
// caller chooses (table.move({}, 1, 2^40, 2); table.insert on a table whose
// __len says 2^40), each step a table access that may itself walk a chain
// of 2,000 __index tables; and table.sort, whose comparisons of long
// strings run in C (4,000 references to one 16 MB string took 90 s).
#include <algorithm>
#include <climits>
#include <cstddef>

#include "core/api/lua_api_bounded.hpp"
#include "core/limits/work_meter.hpp"

namespace lua_tasks {

namespace {

// What an argument must allow for a function to use it as a table.
constexpr int kRead = 1;
constexpr int kWrite = 2;
constexpr int kLength = 4;

// One table read plus one write, as the loops below do per element.
constexpr size_t kMoveUnits = 2 * WorkMeter::kPerStep;

bool HasField(lua_State* L, const char* key, int n) {
  lua_pushstring(L, key);
  return lua_rawget(L, -n) != LUA_TNIL;
}

// Raises unless arg is a table, or has a metatable with the metamethods
// `what` needs.
void CheckTable(lua_State* L, int arg, int what) {
  if (lua_type(L, arg) == LUA_TTABLE) return;
  int n = 1;  // the metatable, then each field looked at
  if (lua_getmetatable(L, arg) && (!(what & kRead) || HasField(L, "__index", ++n)) &&
      (!(what & kWrite) || HasField(L, "__newindex", ++n)) && (!(what & kLength) || HasField(L, "__len", ++n))) {
    lua_pop(L, n);
    return;
  }
  luaL_checktype(L, arg, LUA_TTABLE);  // raises the usual message
}

lua_Integer Length(lua_State* L, int arg, int what) {
  CheckTable(L, arg, what | kLength);
  return luaL_len(L, arg);
}

// ---------------------------------------------------------------- concat

// table.concat(list [, sep [, i [, j]]])
int l_table_concat(lua_State* L) {
  lua_Integer last = Length(L, 1, kRead);
  size_t seplen;
  const char* sep = luaL_optlstring(L, 2, "", &seplen);
  lua_Integer i = luaL_optinteger(L, 3, 1);
  last = luaL_optinteger(L, 4, last);
  WorkMeter meter(L);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (; i <= last; ++i) {
    lua_geti(L, 1, i);
    if (!lua_isstring(L, -1)) {
      return luaL_error(L, "invalid value (%s) at index %I in table for 'concat'", luaL_typename(L, -1),
                        static_cast<LUAI_UACINT>(i));
    }
    const size_t before = luaL_bufflen(&b);
    luaL_addvalue(&b);
    if (i != last) luaL_addlstring(&b, sep, seplen);
    if (meter.Add(WorkMeter::kPerStep + (luaL_bufflen(&b) - before) / 4)) return LuaHost::RaiseStop(L);
    if (i == LUA_MAXINTEGER) break;  // i + 1 would wrap
  }
  luaL_pushresult(&b);
  meter.Done(L);
  return 1;
}

// ---------------------------------------------------------------- insert, remove

// table.insert(list, [pos,] value)
int l_table_insert(lua_State* L) {
  const lua_Integer e = static_cast<lua_Integer>(static_cast<lua_Unsigned>(Length(L, 1, kRead | kWrite)) + 1u);
  lua_Integer pos;
  switch (lua_gettop(L)) {
    case 2:
      pos = e;  // appended
      break;
    case 3: {
      pos = luaL_checkinteger(L, 2);
      luaL_argcheck(L, static_cast<lua_Unsigned>(pos) - 1u < static_cast<lua_Unsigned>(e), 2, "position out of bounds");
      WorkMeter meter(L);
      for (lua_Integer i = e; i > pos; --i) {  // t[i] = t[i - 1], from the top down
        lua_geti(L, 1, i - 1);
        lua_seti(L, 1, i);
        if (meter.Add(kMoveUnits)) return LuaHost::RaiseStop(L);
      }
      meter.Done(L);
      break;
    }
    default:
      return luaL_error(L, "wrong number of arguments to 'insert'");
  }
  lua_seti(L, 1, pos);
  return 0;
}

// table.remove(list [, pos])
int l_table_remove(lua_State* L) {
  const lua_Integer size = Length(L, 1, kRead | kWrite);
  lua_Integer pos = luaL_optinteger(L, 2, size);
  if (pos != size) {  // Lua 5.4.4 names argument 1 here
    luaL_argcheck(L, static_cast<lua_Unsigned>(pos) - 1u <= static_cast<lua_Unsigned>(size), 1,
                  "position out of bounds");
  }
  WorkMeter meter(L);
  lua_geti(L, 1, pos);         // the result
  for (; pos < size; ++pos) {  // t[pos] = t[pos + 1], from the bottom up
    lua_geti(L, 1, pos + 1);
    lua_seti(L, 1, pos);
    if (meter.Add(kMoveUnits)) return LuaHost::RaiseStop(L);
  }
  lua_pushnil(L);
  lua_seti(L, 1, pos);
  meter.Done(L);
  return 1;
}

// ---------------------------------------------------------------- move

// table.move(a1, f, e, t [, a2])
int l_table_move(lua_State* L) {
  const lua_Integer f = luaL_checkinteger(L, 2);
  const lua_Integer e = luaL_checkinteger(L, 3);
  const lua_Integer t = luaL_checkinteger(L, 4);
  const int tt = lua_isnoneornil(L, 5) ? 1 : 5;  // the destination
  CheckTable(L, 1, kRead);
  CheckTable(L, tt, kWrite);
  if (e >= f) {
    luaL_argcheck(L, f > 0 || e < LUA_MAXINTEGER + f, 3, "too many elements to move");
    const lua_Integer n = e - f + 1;
    luaL_argcheck(L, t <= LUA_MAXINTEGER - n + 1, 4, "destination wrap around");
    WorkMeter meter(L);
    // Ascending when the ranges cannot overlap the wrong way round.
    if (t > e || t <= f || (tt != 1 && !lua_compare(L, 1, tt, LUA_OPEQ))) {
      for (lua_Integer i = 0; i < n; ++i) {
        lua_geti(L, 1, f + i);
        lua_seti(L, tt, t + i);
        if (meter.Add(kMoveUnits)) return LuaHost::RaiseStop(L);
      }
    } else {
      for (lua_Integer i = n - 1; i >= 0; --i) {
        lua_geti(L, 1, f + i);
        lua_seti(L, tt, t + i);
        if (meter.Add(kMoveUnits)) return LuaHost::RaiseStop(L);
      }
    }
    meter.Done(L);
  }
  lua_pushvalue(L, tt);
  return 1;
}

// ---------------------------------------------------------------- unpack

// table.unpack(list [, i [, j]])
int l_table_unpack(lua_State* L) {
  lua_Integer i = luaL_optinteger(L, 2, 1);
  const lua_Integer e = lua_isnoneornil(L, 3) ? luaL_len(L, 1) : luaL_checkinteger(L, 3);
  if (i > e) return 0;
  lua_Unsigned n = static_cast<lua_Unsigned>(e) - static_cast<lua_Unsigned>(i);  // count - 1, without overflow
  if (n >= static_cast<unsigned int>(INT_MAX) || !lua_checkstack(L, static_cast<int>(++n))) {
    return luaL_error(L, "too many results to unpack");
  }
  WorkMeter meter(L);
  for (; i < e; ++i) {
    lua_geti(L, 1, i);
    if (meter.Add(WorkMeter::kPerStep)) return LuaHost::RaiseStop(L);
  }
  lua_geti(L, 1, e);
  meter.Done(L);
  return static_cast<int>(n);
}

// ---------------------------------------------------------------- sort

// An introsort: quicksort with the median of three as pivot, insertion sort
// for short ranges, and heapsort for a range that partitions badly too often,
// so any input (and any comparator, even one that is not an order) costs
// O(n log n) comparisons. A comparator that contradicts itself is caught
// where Lua's own sort catches it ("invalid order function for sorting");
// every index stays in the range either way. Stack: [list, comp or nil].
struct Sorter {
  lua_State* L;
  WorkMeter meter;
  bool comparator;
  const size_t* big_strings;  // MemoryBudget::big_strings: only then can one compare take long
};

constexpr lua_Integer kShortRange = 12;

// Whether the value at stack index a sorts before the one at b (negative
// indices: a and b are the top few values).
bool Less(Sorter* s, int a, int b) {
  lua_State* L = s->L;
  size_t units = WorkMeter::kPerStep;
  // Lua compares strings in C, reading up to the shorter one's length: with
  // 16 MB strings about a millisecond a compare. Strings that long exist
  // only while the state holds big ones.
  if (*s->big_strings != 0 && lua_type(L, a) == LUA_TSTRING && lua_type(L, b) == LUA_TSTRING) {
    units += std::min(lua_rawlen(L, a), lua_rawlen(L, b)) / 8;
  }
  if (s->meter.Add(units)) LuaHost::RaiseStop(L);
  if (!s->comparator) return lua_compare(L, a, b, LUA_OPLT);
  lua_pushvalue(L, 2);
  lua_pushvalue(L, a - 1);  // one more value on top now
  lua_pushvalue(L, b - 2);  // and two
  lua_call(L, 2, 1);
  const bool less = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return less;
}

void Get(Sorter* s, lua_Integer i) {
  lua_geti(s->L, 1, i);
}
void Set(Sorter* s, lua_Integer i) {  // pops the value
  lua_seti(s->L, 1, i);
}

[[noreturn]] void BadOrder(lua_State* L) {
  luaL_error(L, "invalid order function for sorting");
  __builtin_unreachable();
}

void InsertionSort(Sorter* s, lua_Integer lo, lua_Integer up) {
  for (lua_Integer i = lo + 1; i <= up; ++i) {
    Get(s, i);  // v
    lua_Integer j = i - 1;
    for (; j >= lo; --j) {
      Get(s, j);  // v, a[j]
      if (!Less(s, -2, -1)) {
        lua_pop(s->L, 1);
        break;
      }
      Set(s, j + 1);  // a[j + 1] = a[j]
    }
    if (j + 1 != i) {
      Set(s, j + 1);  // a[j + 1] = v
    } else {
      lua_pop(s->L, 1);  // already in place
    }
  }
}

// Heap of the range lo..lo+last (offsets 0..last): moves the value at
// offset `root` down to its place.
void SiftDown(Sorter* s, lua_Integer lo, lua_Integer root, lua_Integer last) {
  Get(s, lo + root);  // v
  for (;;) {
    lua_Integer child = 2 * root + 1;
    if (child > last) break;
    Get(s, lo + child);  // v, c
    if (child + 1 <= last) {
      Get(s, lo + child + 1);  // v, c, c2
      if (Less(s, -2, -1)) {
        lua_remove(s->L, -2);  // v, c2
        ++child;
      } else {
        lua_pop(s->L, 1);  // v, c
      }
    }
    if (!Less(s, -2, -1)) {  // v is not below its larger child: its place
      lua_pop(s->L, 1);
      break;
    }
    Set(s, lo + root);  // the child moves up
    root = child;
  }
  Set(s, lo + root);
}

void HeapSort(Sorter* s, lua_Integer lo, lua_Integer up) {
  const lua_Integer n = up - lo + 1;
  for (lua_Integer root = (n - 2) / 2; root >= 0; --root) SiftDown(s, lo, root, n - 1);
  for (lua_Integer last = n - 1; last > 0; --last) {
    Get(s, lo);
    Get(s, lo + last);
    Set(s, lo);
    Set(s, lo + last);  // the largest goes to the end
    SiftDown(s, lo, 0, last - 1);
  }
}

// Partitions lo..up (at least kShortRange + 1 values) around the median of
// a[lo], a[mid], a[up]; returns the pivot's final index p, with
// a[lo..p-1] <= a[p] <= a[p+1..up].
lua_Integer Partition(Sorter* s, lua_Integer lo, lua_Integer up) {
  lua_State* L = s->L;
  const lua_Integer mid = lo + (up - lo) / 2;
  auto order = [&](lua_Integer a, lua_Integer b) {  // makes a[a] <= a[b]
    Get(s, a);
    Get(s, b);  // x, y
    if (Less(s, -1, -2)) {
      Set(s, a);
      Set(s, b);
    } else {
      lua_pop(L, 2);
    }
  };
  order(lo, mid);
  order(mid, up);
  order(lo, mid);
  // The pivot goes next to the end: a[lo] <= P == a[up-1] <= a[up].
  Get(s, mid);  // P
  Get(s, up - 1);
  Set(s, mid);
  lua_pushvalue(L, -1);
  Set(s, up - 1);  // stack: P
  lua_Integer i = lo;
  lua_Integer j = up - 1;
  for (;;) {
    for (;;) {  // a[i] < P: leave it
      Get(s, ++i);
      if (!Less(s, -1, -2)) break;
      if (i == up - 1) BadOrder(L);  // a[up-1] is P, and P < P
      lua_pop(L, 1);
    }
    for (;;) {  // P < a[j]: leave it
      Get(s, --j);
      if (!Less(s, -3, -1)) break;
      if (j == lo) BadOrder(L);  // a[lo] <= P, and P < a[lo]
      lua_pop(L, 1);
    }
    // stack: P, a[i], a[j]
    if (j < i) {
      lua_pop(L, 1);
      Set(s, up - 1);  // a[up-1] = a[i]
      Set(s, i);       // a[i] = P
      return i;
    }
    Set(s, i);  // a[i] = old a[j]
    Set(s, j);  // a[j] = old a[i]
  }
}

void SortRange(Sorter* s, lua_Integer lo, lua_Integer up, int depth) {
  while (up - lo >= kShortRange) {
    if (depth-- == 0) {  // partitions keep coming out lopsided
      HeapSort(s, lo, up);
      return;
    }
    const lua_Integer p = Partition(s, lo, up);
    if (p - lo < up - p) {  // the smaller side recursively: O(log n) C stack
      SortRange(s, lo, p - 1, depth);
      lo = p + 1;
    } else {
      SortRange(s, p + 1, up, depth);
      up = p - 1;
    }
  }
  InsertionSort(s, lo, up);
}

// table.sort(list [, comp])
int l_table_sort(lua_State* L) {
  const lua_Integer n = Length(L, 1, kRead | kWrite);
  if (n > 1) {
    luaL_argcheck(L, n < INT_MAX, 1, "array too big");
    if (!lua_isnoneornil(L, 2)) luaL_checktype(L, 2, LUA_TFUNCTION);
    lua_settop(L, 2);
    Sorter s{L, WorkMeter(L), !lua_isnil(L, 2), &LuaHost::From(L)->memory().big_strings};
    int depth = 0;
    for (lua_Integer k = n; k > 1; k >>= 1) depth += 2;  // 2 log2(n) partitions before heapsort
    SortRange(&s, 1, n, depth);
    s.meter.Done(L);
  }
  return 0;
}

const luaL_Reg kTableFunctions[] = {
    {"concat", l_table_concat}, {"insert", l_table_insert}, {"remove", l_table_remove}, {"move", l_table_move},
    {"sort", l_table_sort},     {"unpack", l_table_unpack}, {nullptr, nullptr},
};

}  // namespace

void RegisterBoundedTable(lua_State* L, int table) {
  lua_pushvalue(L, table);
  luaL_setfuncs(L, kTableFunctions, 0);
  lua_pop(L, 1);
}

}  // namespace lua_tasks
