// SPDX-License-Identifier: MIT
// Cron bindings: cron.next / validate / describe for lib/cron.js, and zone checks.
#pragma once

#include <napi.h>

namespace lua_tasks {

// Adds cronNext, cronValidate, cronDescribe and checkZone to `exports`.
void InitCron(Napi::Env env, Napi::Object exports);

}  // namespace lua_tasks
