import Foundation
import TestSupport
import Testing

@Suite struct OperationsTests {
    @Test func health_MetricsAndSpecAreServed() throws {
        let live = try LiveServer()
        let health = try live.request("GET", "/healthz")
        #expect(health.status == 200)
        #expect(health.json["status"] as? String == "ok")
        _ = try live.request("GET", "/books")
        let metrics = try live.request("GET", "/metrics")
        #expect(metrics.header("content-type")?.hasPrefix("text/plain") == true)
        #expect(metrics.text.contains(#"library_http_requests_total{route="/books",method="GET",status="200"} 1"#))
        #expect(metrics.text.contains("library_http_request_duration_seconds_bucket"))
        let spec = try live.request("GET", "/openapi.yaml")
        #expect(spec.status == 200)
        #expect(spec.text.hasPrefix("openapi: 3.1"))
    }

    @Test func writes_NeedTheTokenWhenOneIsConfigured() throws {
        let live = try LiveServer(token: "s3cret")
        let missing = try live.request("POST", "/libraries", body: #"{"name":"x"}"#)
        #expect(missing.status == 401)
        #expect(missing.header("www-authenticate")?.hasPrefix("Bearer") == true)
        #expect(
            try live.request("POST", "/libraries", headers: ["Authorization": "Bearer wrong"], body: #"{"name":"x"}"#)
                .status == 401)
        let created = try live.request(
            "POST", "/libraries", headers: ["Authorization": "Bearer s3cret"], body: #"{"name":"x"}"#)
        #expect(created.status == 201)
        let id = try #require(created.json["id"] as? String)
        for (method, path) in [
            ("PUT", "/libraries/\(id)"), ("PATCH", "/libraries/\(id)"), ("DELETE", "/libraries/\(id)"),
            ("POST", "/books"),
        ] {
            #expect(try live.request(method, path, body: "{}").status == 401, "\(method) \(path)")
        }
        #expect(try live.request("GET", "/libraries/\(id)").status == 200)
        #expect(try live.request("GET", "/libraries").status == 200)
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
