// SPDX-License-Identifier: MIT
// Cron bindings: cron.next / validate / describe for lib/cron.js, and zone checks.
#include "addon/cron.hpp"

#include <cmath>
#include <string>

#include "addon/errors.hpp"
#include "core/cron/cron_expr.hpp"
#include "core/cron/cron_schedule.hpp"

namespace lua_tasks {

namespace {

CronExpr Parse(Napi::Env env, const Napi::Value& v) {
  CronExpr expr;
  std::string error;
  if (!ParseCron(v.As<Napi::String>().Utf8Value(), &expr, &error)) ThrowError(env, "ERR_CRON_SYNTAX", error);
  return expr;
}

// cronNext(expr, fromMs, tz | undefined, count) -> [ms, ...] (fewer when the
// expression runs out of times).
Napi::Value JS_cronNext(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const CronExpr expr = Parse(env, info[0]);
  // Strictly after `from`, sub-seconds dropped: start from the whole second.
  int64_t from = static_cast<int64_t>(std::floor(info[1].As<Napi::Number>().DoubleValue() / 1000.0));
  // No tz: the process's zone, as UNTIL_NEXT's default (a CRON_TZ= prefix wins in CronNext).
  const date::time_zone* zone = nullptr;
  if (!info[2].IsString()) {
    zone = ProcessZone();
  } else {
    std::string error;
    zone = FindZone(info[2].As<Napi::String>().Utf8Value(), &error);
    if (zone == nullptr) ThrowError(env, "ERR_CRON_SYNTAX", error);
  }
  const uint32_t count = info[3].As<Napi::Number>().Uint32Value();
  Napi::Array out = Napi::Array::New(env);
  for (uint32_t i = 0; i < count; ++i) {
    const std::optional<int64_t> next = CronNext(expr, from, zone);
    if (!next) break;
    out.Set(i, Napi::Number::New(env, static_cast<double>(*next) * 1000.0));
    from = *next;
  }
  return out;
}

// cronValidate(expr) -> null | error message
Napi::Value JS_cronValidate(const Napi::CallbackInfo& info) {
  CronExpr expr;
  std::string error;
  if (ParseCron(info[0].As<Napi::String>().Utf8Value(), &expr, &error)) return info.Env().Null();
  return Napi::String::New(info.Env(), error);
}

Napi::Array Ints(Napi::Env env, const std::vector<int>& v) {
  Napi::Array a = Napi::Array::New(env, v.size());
  for (uint32_t i = 0; i < v.size(); ++i) a.Set(i, v[i]);
  return a;
}

// cronDescribe(expr) -> the expanded fields
Napi::Value JS_cronDescribe(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const CronDescription d = DescribeCron(Parse(env, info[0]));
  Napi::Object o = Napi::Object::New(env);
  o.Set("dialect", d.dialect);
  if (!d.zone.empty()) o.Set("zone", d.zone);
  o.Set("seconds", Ints(env, d.seconds));
  o.Set("minutes", Ints(env, d.minutes));
  o.Set("hours", Ints(env, d.hours));
  o.Set("daysOfMonth", Ints(env, d.days_of_month));
  o.Set("months", Ints(env, d.months));
  o.Set("daysOfWeek", Ints(env, d.days_of_week));
  o.Set("years", Ints(env, d.years));
  o.Set("everyDayOfMonth", d.every_day_of_month);
  o.Set("everyDayOfWeek", d.every_day_of_week);
  o.Set("lastDayOffsets", Ints(env, d.last_day_offsets));
  o.Set("nearestWeekdays", Ints(env, d.nearest_weekdays));
  o.Set("lastWeekdayOffsets", Ints(env, d.last_weekday_offsets));
  o.Set("lastDaysOfWeek", Ints(env, d.last_days_of_week));
  Napi::Array nth = Napi::Array::New(env, d.nth_days_of_week.size());
  for (uint32_t i = 0; i < d.nth_days_of_week.size(); ++i) {
    Napi::Object e = Napi::Object::New(env);
    e.Set("dayOfWeek", d.nth_days_of_week[i].first);
    e.Set("nth", d.nth_days_of_week[i].second);
    nth.Set(i, e);
  }
  o.Set("nthDaysOfWeek", nth);
  o.Set("dayOr", d.day_or);
  o.Set("interval", d.interval);
  return o;
}

// checkZone(name) -> null | error message
Napi::Value JS_checkZone(const Napi::CallbackInfo& info) {
  std::string error;
  if (FindZone(info[0].As<Napi::String>().Utf8Value(), &error) != nullptr) return info.Env().Null();
  return Napi::String::New(info.Env(), error);
}

}  // namespace

void InitCron(Napi::Env env, Napi::Object exports) {
  exports.Set("cronNext", Napi::Function::New(env, JS_cronNext, "cronNext"));
  exports.Set("cronValidate", Napi::Function::New(env, JS_cronValidate, "cronValidate"));
  exports.Set("cronDescribe", Napi::Function::New(env, JS_cronDescribe, "cronDescribe"));
  exports.Set("checkZone", Napi::Function::New(env, JS_checkZone, "checkZone"));
}

}  // namespace lua_tasks
