-- PATCH /books/{id} turning `available` over (a check-out or a return): false on the first pass
-- over the seeded books (all available), true on the next, so every write is a real change.
dofile(os.getenv("BENCH_LUA") .. "/common.lua")

local books = tonumber(os.getenv("BOOKS") or "10000")

function request()
    local n = next_n()
    local body = math.floor(n / books) % 2 == 0 and '{"available":false}' or '{"available":true}'
    return wrk.format("PATCH", "/books/" .. book_id(n), json_headers, body)
end
