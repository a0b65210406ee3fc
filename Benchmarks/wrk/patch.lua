-- PATCH /books/{id} with a new title each time (a real change: the version goes up), cycling
-- over every seeded book.
dofile(os.getenv("BENCH_LUA") .. "/common.lua")

function request()
    local n = next_n()
    local body = string.format('{"title":"Title %d-%d"}', index or 0, n)
    return wrk.format("PATCH", "/books/" .. book_id(n), json_headers, body)
end
