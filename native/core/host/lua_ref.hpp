// SPDX-License-Identifier: MIT
// LuaRef: one owned slot in a Lua state's registry; StackGuard: a stack height kept.
#pragma once

#include <utility>

#include <lua.hpp>

namespace lua_tasks {

// Move-only owner of a registry reference. The destructor frees the slot, so
// a LuaRef must not outlive its lua_State (owners are destroyed before
// lua_close). luaL_unref never raises, so destroying one is always safe.
class LuaRef {
 public:
  LuaRef() = default;
  // Pops the value on top of L's stack into a new reference.
  // The slot is freed through the main thread, which lives as long as the
  // state (L itself may be a coroutine that dies first).
  static LuaRef Pop(lua_State* L) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
    lua_State* main = lua_tothread(L, -1);
    lua_pop(L, 1);
    return LuaRef(main, luaL_ref(L, LUA_REGISTRYINDEX));
  }
  LuaRef(LuaRef&& o) noexcept : L_(std::exchange(o.L_, nullptr)), ref_(std::exchange(o.ref_, LUA_NOREF)) {}
  LuaRef& operator=(LuaRef&& o) noexcept {
    if (this != &o) {
      Reset();
      L_ = std::exchange(o.L_, nullptr);
      ref_ = std::exchange(o.ref_, LUA_NOREF);
    }
    return *this;
  }
  LuaRef(const LuaRef&) = delete;
  LuaRef& operator=(const LuaRef&) = delete;
  ~LuaRef() { Reset(); }

  // Pushes the referenced value onto `L` (any thread of the same state).
  void Push(lua_State* L) const { lua_rawgeti(L, LUA_REGISTRYINDEX, ref_); }
  int get() const { return ref_; }
  bool valid() const { return ref_ != LUA_NOREF && ref_ != LUA_REFNIL; }
  // Gives up ownership without freeing the slot.
  int Release() {
    L_ = nullptr;
    return std::exchange(ref_, LUA_NOREF);
  }
  void Reset() {
    if (L_ != nullptr) luaL_unref(L_, LUA_REGISTRYINDEX, ref_);
    L_ = nullptr;
    ref_ = LUA_NOREF;
  }

 private:
  LuaRef(lua_State* L, int ref) : L_(L), ref_(ref) {}
  lua_State* L_ = nullptr;  // the main thread; registry slots are state-wide
  int ref_ = LUA_NOREF;
};

// RAII: puts L's stack back to the height it had at construction when the
// scope ends, also when a C++ exception leaves it. Nothing to-be-closed may
// sit above that height (lua_settop would run it).
class StackGuard {
 public:
  explicit StackGuard(lua_State* L) : L_(L), top_(lua_gettop(L)) {}
  ~StackGuard() { lua_settop(L_, top_); }
  StackGuard(const StackGuard&) = delete;
  StackGuard& operator=(const StackGuard&) = delete;
  int top() const { return top_; }

 private:
  lua_State* L_;
  int top_;
};

}  // namespace lua_tasks
