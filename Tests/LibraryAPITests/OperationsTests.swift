import Foundation
import SQLite
import TestSupport
import Testing

@Suite struct OperationsTests {
    @Test func health_MetricsAndSpecAreServed() throws {
        let live = try LiveServer()
        let health = try live.request("GET", "/healthz")
        #expect(health.status == 200)
        #expect(health.json["status"] as? String == "ok")
        _ = try live.request("GET", "/books")
        _ = try live.createLibrary()
        let metrics = try live.request("GET", "/metrics")
        #expect(metrics.header("content-type")?.hasPrefix("text/plain") == true)
        #expect(metrics.text.contains(#"library_http_requests_total{route="/books",method="GET",status="200"} 1"#))
        for name in [
            "library_http_request_duration_seconds_bucket", "library_http_open_connections",
            "library_sse_subscribers", "library_sse_events_sent_total", "library_sse_changes_coalesced_total",
            "library_sqlite_write_duration_seconds_count",
        ] {
            #expect(metrics.text.contains(name), "\(name)")
        }
        #expect(metrics.text.contains("library_sqlite_write_duration_seconds_count 1\n"))
        #expect(metrics.text.contains("library_sqlite_writes_committed_total 1\n"))
        let spec = try live.request("GET", "/openapi.yaml")
        #expect(spec.status == 200)
        #expect(spec.text.hasPrefix("openapi: 3.1"))
    }

    @Test func `metrics show the heap SQLite holds, on SQLite only`() throws {
        let live = try LiveServer()
        _ = try live.createLibrary()
        let metrics = try live.request("GET", "/metrics").text
        let line = metrics.split(separator: "\n").first { $0.hasPrefix("library_sqlite_memory_bytes ") }
        if let engine = ProcessInfo.processInfo.environment["LIBRARY_TEST_ENGINE"], engine != "sqlite" {
            #expect(line == nil)  // the data lives in another process (PostgreSQL), or in no engine (memory)
        } else {
            let bytes = line.flatMap { Int($0.split(separator: " ").last ?? "") } ?? 0
            #expect(bytes > 100_000, "\(line ?? "no library_sqlite_memory_bytes line")")
        }
    }

    @Test func requestCounts_AddUpOverEveryLoop() throws {
        let live = try LiveServer()  // two loops, each counting into its own shard
        for _ in 0..<20 { #expect(try live.request("GET", "/books").status == 200) }
        let metrics = try live.request("GET", "/metrics")
        #expect(metrics.text.contains(#"library_http_requests_total{route="/books",method="GET",status="200"} 20"#))
        #expect(metrics.text.contains(#"library_http_request_duration_seconds_count{route="/books"} 20"#))
    }

    @Test func metricsLabels_NeverCarryClientText() throws {
        let live = try LiveServer()
        for index in 0..<30 {
            let method = "INVENTED\(index)" + String(repeating: "X", count: 1_000)
            #expect(try live.request(method, "/books").status == 405)
            #expect(try live.request(method, "/no/such/route/\(index)").status == 404)
        }
        let metrics = try live.request("GET", "/metrics").text
        #expect(!metrics.contains("INVENTED"))
        #expect(!metrics.contains("/no/such"))
        #expect(metrics.contains(#"library_http_requests_total{route="/books",method="OTHER",status="405"} 30"#))
        #expect(metrics.contains(#"library_http_requests_total{route="unmatched",method="OTHER",status="404"} 30"#))
        #expect(metrics.utf8.count < 20_000)
    }

    /// REDbot's finding: without Cache-Control, caches may pick a freshness of their own for data
    /// that changes at any time.
    @Test func responses_SayHowTheyMayBeCached() throws {
        let live = try LiveServer()
        let library = try live.createLibrary()
        #expect(try live.request("GET", "/libraries/\(library)").header("cache-control") == "no-cache")
        let notModified = try live.request("GET", "/libraries/\(library)", headers: ["If-None-Match": #""1""#])
        #expect(notModified.status == 304)
        #expect(notModified.header("cache-control") == "no-cache")
        for path in ["/libraries", "/libraries/\(library)/books", "/books", "/openapi.yaml", "/healthz", "/metrics"] {
            #expect(try live.request("GET", path).header("cache-control") == "no-store", "\(path)")
        }
        #expect(try live.events("/libraries/\(library)/events").head.header("cache-control") == "no-store")
    }

    @Test func concurrentHealthChecks_ShareOneWriteLockProbe() throws {
        try withTemporaryFile { path in
            let live = try LiveServer(path: path, busyTimeoutMilliseconds: 10_000)
            let blocker = try Connection(path: path)
            try blocker.execute("BEGIN IMMEDIATE")  // the first probe waits for the write lock
            let checks = try (0..<40).map { _ in try live.connect() }
            for check in checks { try check.send("GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n") }
            let deadline = Date().addingTimeInterval(10)
            var metrics = ""
            while Date() < deadline {
                metrics = try live.request("GET", "/metrics").text
                if metrics.contains("library_health_checks_waiting 40\n") { break }
                usleep(10_000)
            }
            try blocker.execute("ROLLBACK")
            for check in checks { #expect(try check.readResponse().status == 200) }
            metrics = try live.request("GET", "/metrics").text
            #expect(metrics.contains("library_health_probes_total 1\n"), "one probe for 40 concurrent checks")
            #expect(try live.request("GET", "/healthz").status == 200)
            #expect(try live.request("GET", "/metrics").text.contains("library_health_probes_total 2\n"))
        }
    }

    @Test func writes_NeedTheTokenWhenOneIsConfigured() throws {
        let live = try LiveServer(token: "s3cret")
        let authorized = ["Authorization": "Bearer s3cret"]
        let created = try live.request("POST", "/libraries", headers: authorized, body: #"{"name":"x"}"#)
        #expect(created.status == 201)
        let library = try #require(created.json["id"] as? String)
        let book = try #require(
            try live.request(
                "POST", "/books", headers: authorized, body: #"{"libraryId":"\#(library)","title":"T"}"#
            ).json["id"] as? String)
        let before = try live.request("GET", "/books/\(book)").text

        let writes = [
            ("POST", "/libraries", #"{"name":"y"}"#),
            ("PUT", "/libraries/\(library)", #"{"name":"y"}"#),
            ("PATCH", "/libraries/\(library)", #"{"name":"y"}"#),
            ("DELETE", "/libraries/\(library)", ""),
            ("POST", "/libraries/\(library)/books", #"{"title":"U"}"#),
            ("POST", "/books", #"{"libraryId":"\#(library)","title":"U"}"#),
            ("PUT", "/books/\(book)", #"{"libraryId":"\#(library)","title":"U"}"#),
            ("PATCH", "/books/\(book)", #"{"title":"U"}"#),
            ("DELETE", "/books/\(book)", ""),
        ]
        let refused: [[String: String]] = [
            [:], ["Authorization": "Bearer wrong!"], ["Authorization": "Bearer s3creT"],
            ["Authorization": "Bearer s3cret2"], ["Authorization": "Basic czNjcmV0"], ["Authorization": "s3cret"],
        ]
        for (method, path, body) in writes {
            for headers in refused {
                let response = try live.request(method, path, headers: headers, body: body)
                #expect(response.status == 401, "\(method) \(path) \(headers)")
                #expect(response.header("www-authenticate")?.hasPrefix("Bearer") == true)
            }
        }
        // Nothing was written, and reads and streams stay open.
        #expect(try live.request("GET", "/books/\(book)").text == before)
        #expect((try live.request("GET", "/libraries").json["items"] as? [Any])?.count == 1)
        #expect(try live.request("GET", "/libraries/\(library)/books").status == 200)
        let stream = try live.events("/books/\(book)/events?fields=title")
        #expect(stream.head.status == 200)
        #expect(try stream.next()?.event == "snapshot")
        #expect(try live.request("PATCH", "/books/\(book)", headers: authorized, body: #"{"title":"V"}"#).status == 200)
        #expect(try stream.next()?.json["title"] as? String == "V")
    }

    @Test func cors_AnswersPreflightAndExposesHeaders() throws {
        let live = try LiveServer(cors: "https://app.example")
        let preflight = try live.request(
            "OPTIONS", "/books",
            headers: ["Origin": "https://app.example", "Access-Control-Request-Method": "POST"]
        )
        #expect(preflight.status == 204)
        #expect(preflight.header("access-control-allow-origin") == "https://app.example")
        #expect(preflight.header("access-control-allow-methods")?.contains("POST") == true)
        let get = try live.request("GET", "/books", headers: ["Origin": "https://app.example"])
        #expect(get.header("access-control-expose-headers")?.contains("ETag") == true)
        // EventSource from the allowed origin: a plain GET whose answer must carry the origin.
        let library = try live.createLibrary()
        let stream = try live.events("/libraries/\(library)/events", headers: ["Origin": "https://app.example"])
        #expect(stream.head.header("access-control-allow-origin") == "https://app.example")
        #expect(try stream.next()?.event == "snapshot")
        let other = try live.request("GET", "/books", headers: ["Origin": "https://evil.example"])
        #expect(other.header("access-control-allow-origin") == nil)
        let off = try LiveServer()
        #expect(
            try off.request("GET", "/books", headers: ["Origin": "https://app.example"]).header(
                "access-control-allow-origin") == nil)
    }

    @Test func data_SurvivesARestart() throws {
        try withTemporaryFile { path in
            let first = try LiveServer(path: path)
            let library = try first.createLibrary("Durable")
            let book = try first.createBook(in: library)
            first.stop()
            let second = try LiveServer(path: path)
            #expect(try second.request("GET", "/libraries/\(library)").json["name"] as? String == "Durable")
            #expect(try second.request("GET", "/books/\(book)").status == 200)
        }
    }
}
