-- GET /books/{id}, cycling over every seeded book.
dofile(os.getenv("BENCH_LUA") .. "/common.lua")

function request()
    return wrk.format("GET", "/books/" .. book_id(next_n()))
end
