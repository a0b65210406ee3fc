import Foundation
import Glibc
import HTTPServer
import TestSupport
import Testing

/// Logs one access line per request through the loop's buffer, then answers.
struct LoggingResponder: HTTPResponder {
    func respond(to request: HTTPRequest, writer: HTTPResponseWriter) {
        writer.log { line in
            line.append(contentsOf: "info request target=".utf8)
            line.append(contentsOf: request.target.utf8)
            line.append(contentsOf: " pad=".utf8)
            line.append(contentsOf: repeatElement(UInt8(ascii: "p"), count: 200))
        }
        writer.send(.text(.ok, "logged"))
    }
}

@Suite struct AccessLogTests {
    // Issue 16 (1): with stderr a pipe nobody reads, the loops go on answering; the lines that find
    // no room are dropped whole and counted, and every line that does get through is whole.
    // In a child process, whose stderr the test can replace.
    @Test func accessLog_DropsAndCountsLinesWhenStderrBlocks() async {
        await #expect(processExitsWith: .success) {
            var pipeEnds: [Int32] = [0, 0]
            guard pipe(&pipeEnds) == 0, dup2(pipeEnds[1], 2) == 2 else { exit(2) }
            _ = fcntl(pipeEnds[0], F_SETFL, fcntl(pipeEnds[0], F_GETFL) | O_NONBLOCK)
            var configuration = HTTPServerConfiguration()
            configuration.port = 0
            configuration.loopCount = 1
            let server = HTTPServer(configuration: configuration, responder: LoggingResponder())
            guard let port = try? server.start(), let connection = try? TestConnection(port: port) else { exit(3) }
            let requests = 2_000  // ~250 bytes a line: about eight times what the pipe holds
            for index in 0..<requests {
                guard (try? connection.request("GET", "/\(index)"))?.status == 200 else { exit(4) }
            }
            var logged: [UInt8] = []
            func readPipe() {
                var chunk = [UInt8](repeating: 0, count: 65536)
                while case let count = read(pipeEnds[0], &chunk, chunk.count), count > 0 {
                    logged += chunk[0..<count]
                }
            }
            readPipe()
            // With room again, one more request's line (and any line begun before) gets through.
            guard (try? connection.request("GET", "/last"))?.status == 200 else { exit(5) }
            let dropped = { LogSink.standardError.dropped.load(ordering: .relaxed) }
            var lines = 0
            for _ in 0..<100 where lines + dropped() < requests + 1 {
                usleep(10_000)
                readPipe()
                lines = logged.count { $0 == 10 }
            }
            guard dropped() > 0 else { exit(6) }
            guard lines + dropped() == requests + 1 else { exit(7) }
            guard logged.last == 10 else { exit(8) }
            let text = String(decoding: logged, as: UTF8.self)
            let shape = #/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z info request target=/\S+ pad=p{200}$/#
            guard text.split(separator: "\n").allSatisfy({ $0.wholeMatch(of: shape) != nil }) else { exit(9) }
            guard text.hasSuffix("target=/last pad=" + String(repeating: "p", count: 200) + "\n") else { exit(10) }
            server.shutdown(grace: 1)
            exit(0)
        }
    }
}
