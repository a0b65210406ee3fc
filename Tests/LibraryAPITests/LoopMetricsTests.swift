import TestSupport
import Testing

@Suite struct LoopMetricsTests {
    @Test func metrics_ShowOpenConnectionsPerLoop() throws {
        let server = try LiveServer()
        let held = try (0..<8).map { _ in try server.connect() }
        for connection in held { #expect(try connection.request("GET", "/healthz").status == 200) }
        let text = try server.request("GET", "/metrics").text
        let samples = text.split(separator: "\n").filter { $0.hasPrefix("library_http_loop_connections{") }
        #expect(samples.count == 2)  // LiveServer runs two loops
        let total = samples.compactMap { Int($0.split(separator: " ").last ?? "") }.reduce(0, +)
        #expect(total == 9)  // the eight held, and the one asking
        #expect(text.contains("# TYPE library_http_loop_connections gauge"))
    }
}
