// SPDX-License-Identifier: MIT
// The scheduler's mailboxes: tasks.send and tasks.receive, a durable task's inbox kept in the store.
#include <string>
#include <utility>

#include "core/durable/replayer.hpp"
#include "core/scheduling/scheduler.hpp"

namespace lua_tasks {

Scheduler::SendResult Scheduler::Post(uint64_t key, lua_State* from, int nargs, std::string* restored) {
  Task* t = Find(key);
  if (t == nullptr || t->mail_count >= mailbox_limit_) {
    lua_pop(from, nargs);
    return t == nullptr ? SendResult::kNotFound : SendResult::kFull;
  }
  // A durable task's message is kept in its inbox until it is received.
  if (t->durable && !replayer_->OnSend(t, from, nargs, restored, &last_send_error_)) {
    lua_pop(from, nargs);
    return SendResult::kNotPersistable;
  }
  {
    // The mailbox's growth is bounded by mailbox_limit_: it is not charged
    // to the memory limit, so a send never raises it here (the values were
    // charged when they were made or converted).
    LuaHost::HostSection section(host_, from);
    if (t->mailbox == LUA_NOREF) {
      lua_createtable(from, 4, 0);
      t->mailbox = luaL_ref(from, LUA_REGISTRYINDEX);
    }
    lua_rawgeti(from, LUA_REGISTRYINDEX, t->mailbox);
    const int box = lua_gettop(from);
    const int first = box - nargs;
    lua_pushinteger(from, nargs);
    lua_rawseti(from, box, t->mail_tail);
    for (int i = 0; i < nargs; ++i) {
      lua_pushvalue(from, first + i);
      lua_rawseti(from, box, t->mail_tail + 1 + i);
    }
    lua_settop(from, first - 1);
    t->mail_tail += 1 + nargs;
    ++t->mail_count;
  }
  if (t->status == TaskStatus::kWaiting && t->wait == WaitKind::kReceive) {
    ClearWait(t);
    Continue(t, 0);
    if (batch_ == 0) hooks_->OnScheduleChange();
  } else if ((t->family & Task::kHasParts) != 0) {
    WakeReceivingPart(t);
  }
  return SendResult::kQueued;
}

int Scheduler::TakeMessage(Task* t, lua_State* L) {
  t = Owner(t);  // a part receives its task's messages
  if (int n; t->durable && replayer_->ReplayMessage(t, L, &n)) return n;
  if (t->mail_count == 0) return -1;
  lua_rawgeti(L, LUA_REGISTRYINDEX, t->mailbox);
  const int box = lua_gettop(L);
  lua_rawgeti(L, box, t->mail_head);
  const int n = static_cast<int>(lua_tointeger(L, -1));
  lua_pop(L, 1);
  if (!lua_checkstack(L, n + 2)) {
    lua_pop(L, 1);
    return -2;
  }
  for (int i = 0; i <= n; ++i) {
    if (i > 0) lua_rawgeti(L, box, t->mail_head + i);
    lua_pushnil(L);  // setting a present key to nil never allocates
    lua_rawseti(L, box, t->mail_head + i);
  }
  lua_remove(L, box);
  --t->mail_count;
  // An empty mailbox starts again at slot 1, so the slots a task keeps
  // receiving into stay in the table's array part.
  t->mail_head = t->mail_count == 0 ? 1 : t->mail_head + 1 + n;
  if (t->mail_count == 0) t->mail_tail = 1;
  return t->durable ? replayer_->MessageTaken(t, L, n) : n;
}

}  // namespace lua_tasks
