// SPDX-License-Identifier: MIT
// SqliteConnection and SqliteStatement: RAII owners of a SQLite connection and a prepared statement.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace lua_tasks {

// A connection, closed by its destructor. sqlite3_close_v2: statements still
// alive keep it open until they are finalized, so destruction order between a
// connection and its statements never matters.
class SqliteConnection {
 public:
  SqliteConnection() = default;
  explicit SqliteConnection(sqlite3* db) : db_(db) {}
  sqlite3* get() const { return db_.get(); }
  explicit operator bool() const { return db_ != nullptr; }

 private:
  struct Close {
    void operator()(sqlite3* db) const noexcept { sqlite3_close_v2(db); }
  };
  std::unique_ptr<sqlite3, Close> db_;
};

// A prepared statement, finalized by its destructor. Each use binds, steps
// and ends with Reset() (a Use scope does it), so the statement holds no read
// transaction between uses.
class SqliteStatement {
 public:
  SqliteStatement() = default;
  explicit SqliteStatement(sqlite3_stmt* stmt) : stmt_(stmt) {}
  sqlite3_stmt* get() const { return stmt_.get(); }

  // Resets the statement and clears its bindings when the scope ends,
  // however it ends.
  class Use {
   public:
    explicit Use(SqliteStatement& s) : stmt_(s.get()) {}
    ~Use() {
      sqlite3_reset(stmt_);
      sqlite3_clear_bindings(stmt_);
    }
    Use(const Use&) = delete;
    Use& operator=(const Use&) = delete;

   private:
    sqlite3_stmt* stmt_;
  };

 private:
  struct Finalize {
    void operator()(sqlite3_stmt* s) const noexcept { sqlite3_finalize(s); }
  };
  std::unique_ptr<sqlite3_stmt, Finalize> stmt_;
};

}  // namespace lua_tasks
