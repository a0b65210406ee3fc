-- PATCH /books/{id} on random books (the seeded ids 1..BOOKS, all members of one watched library
-- in Benchmarks/live.py), each title carrying the wall-clock time it was sent in microseconds, so
-- the subscriber can measure how long each change took to reach it.
dofile(os.getenv("BENCH_LUA") .. "/common.lua")

local ffi = require("ffi")
ffi.cdef([[
typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
int clock_gettime(int clock, bench_timespec *time);
]])
local now = ffi.new("bench_timespec")
local books = tonumber(os.getenv("BOOKS") or "10000")

function init(args)
    math.randomseed(1000 + (index or 0))
end

function request()
    ffi.C.clock_gettime(0, now) -- CLOCK_REALTIME
    local micros = tonumber(now.tv_sec) * 1000000 + math.floor(tonumber(now.tv_nsec) / 1000)
    local body = string.format('{"title":"t%d"}', micros)
    return wrk.format("PATCH", "/books/" .. book_id(math.random(0, books - 1)), json_headers, body)
end
