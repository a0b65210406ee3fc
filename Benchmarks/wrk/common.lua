-- Shared by the workloads: the seeded ids (Benchmarks/seed.py) and a result line for bench.py.
--
-- BOOKS and LIBRARIES (environment) give the seeded counts. Each wrk thread walks the ids from its
-- own offset, one id per request, so the requests cycle over every book.

local books = tonumber(os.getenv("BOOKS") or "10000")
local libraries = tonumber(os.getenv("LIBRARIES") or "100")

function book_id(n)
    return string.format("00000000-0000-4000-9000-%012d", n % books + 1)
end

function library_id(n)
    return string.format("00000000-0000-4000-8000-%012d", n % libraries + 1)
end

local threads = {}
local thread_count = 0

function setup(thread)
    thread:set("index", thread_count)
    thread_count = thread_count + 1
    table.insert(threads, thread)
end

counter = 0

-- The next position of this thread: threads start far apart so they touch different rows.
function next_n()
    counter = counter + 1
    return (index or 0) * 7919 + counter
end

json_headers = { ["Content-Type"] = "application/json" }

-- AUTHORIZATION (environment): an Authorization header every request sends (Benchmarks/tokens.py).
local authorization = os.getenv("AUTHORIZATION")
if authorization then
    wrk.headers["Authorization"] = authorization
    json_headers["Authorization"] = authorization
end

-- One line bench.py reads: requests, seconds, socket errors, non-2xx answers, latency in µs.
function done(summary, latency, requests)
    local errors = summary.errors
    io.write(string.format(
        "RESULT requests=%d seconds=%.3f socket_errors=%d non2xx=%d p50_us=%d p99_us=%d max_us=%d\n",
        summary.requests, summary.duration / 1e6,
        errors.connect + errors.read + errors.write + errors.timeout, errors.status,
        latency:percentile(50), latency:percentile(99), latency.max))
end
