import HTTPServer
import TestSupport
import Testing

@Suite struct LoopBalanceTests {
    // Issue 16 (2): with one listening socket shared by every loop, whichever loop woke first
    // accepted a whole burst, and one client's connections often all landed on one loop.
    @Test func server_SpreadsOneClientsConnectionsOverEveryLoop() throws {
        var configuration = HTTPServerConfiguration()
        configuration.port = 0
        configuration.loopCount = 4
        let server = HTTPServer(configuration: configuration, responder: LoopIndexResponder())
        let port = try server.start()
        defer { server.shutdown(grace: 1) }
        let connections = try (0..<64).map { _ in try TestConnection(port: port) }
        var perLoop: [String: Int] = [:]
        for connection in connections {
            perLoop[try connection.request("GET", "/").text, default: 0] += 1
        }
        #expect(Set(perLoop.keys) == ["0", "1", "2", "3"])
        let counted = server.openConnectionsPerLoop
        #expect(counted.count == 4)
        #expect(counted.reduce(0, +) == 64)
        #expect(counted == (0..<4).map { perLoop[String($0)] ?? 0 })
    }
}
