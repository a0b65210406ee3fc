-- GET /libraries/{id}/books?limit=50, cycling over the libraries: the first page of each.
dofile(os.getenv("BENCH_LUA") .. "/common.lua")

function request()
    return wrk.format("GET", "/libraries/" .. library_id(next_n()) .. "/books?limit=50")
end
