-- POST /books, a new book each time, into the libraries in turn.
dofile(os.getenv("BENCH_LUA") .. "/common.lua")

function request()
    local n = next_n()
    local body = string.format(
        '{"libraryId":"%s","title":"New book %d-%d","author":"Bench Author","publishedYear":2024}',
        library_id(n), index or 0, n)
    return wrk.format("POST", "/books", json_headers, body)
end
