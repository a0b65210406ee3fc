-- PATCH /books/{id} with a new title each time, cycling over the seeded books after the first
-- OFFSET (environment): those outside windows of the first OFFSET books (Benchmarks/windows.py).
dofile(os.getenv("BENCH_LUA") .. "/common.lua")

local books = tonumber(os.getenv("BOOKS") or "10000")
local offset = tonumber(os.getenv("OFFSET") or "0")

function request()
    local n = next_n()
    local id = string.format("00000000-0000-4000-9000-%012d", offset + n % (books - offset) + 1)
    local body = string.format('{"title":"Title %d-%d"}', index or 0, n)
    return wrk.format("PATCH", "/books/" .. id, json_headers, body)
end
