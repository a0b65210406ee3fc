-- 90 % GET /books/{id}, 10 % PATCH /books/{id}, interleaved, cycling over every seeded book.
dofile(os.getenv("BENCH_LUA") .. "/common.lua")

function request()
    local n = next_n()
    if n % 10 == 0 then
        local body = string.format('{"title":"Title %d-%d"}', index or 0, n)
        return wrk.format("PATCH", "/books/" .. book_id(n * 7), json_headers, body)
    end
    return wrk.format("GET", "/books/" .. book_id(n))
end
