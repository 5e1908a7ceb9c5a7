-- The seed's yield tour, runnable as: npx lua-tasks run examples/coroutine-tour.lua
local coroutine = require "coroutine"

print "Yielding immediately"
local reason, elapsed, units = coroutine.yield("IMMEDIATE")
print(reason, " yielded for ", elapsed, " ", units)

print "Yielding for 100 milliseconds"
reason, elapsed, units = coroutine.yield("FOR", 100, "MILLISECONDS")
print(reason, " yielded for ", elapsed, " ", units)

local time = os.time() + 1
print("Yielding until ", time, " (in seconds)")
reason, elapsed, units = coroutine.yield("UNTIL_TIME", time, "SECONDS")
print(reason, " yielded for ", elapsed, " ", units)

print("Yielding until cron next cron for \"* * * ? * *\" (once every second)")
reason, elapsed, units = coroutine.yield("UNTIL_NEXT", "* * * ? * *")
print(reason, " yielded for ", elapsed, " ", units)
