import Dispatch
import Foundation
import Glibc
import HTTPServer
import Synchronization
import TestSupport
import Testing

/// Holds the answer to `/held` until the test releases it; answers everything else at once.
final class HeldResponder: HTTPResponder {
    let release = DispatchSemaphore(value: 0)
    let arrived = DispatchSemaphore(value: 0)

    func respond(to request: HTTPRequest, writer: HTTPResponseWriter) {
        guard request.target == "/held" else { return writer.send(.text(.ok, request.target)) }
        arrived.signal()
        DispatchQueue.global().async { [release] in
            _ = release.wait(timeout: .now() + 10)
            writer.send(.text(.ok, request.target))
        }
    }
}

/// Answers `/big` with `size` bytes; refuses the head of anything sent to `/refused` before its body.
struct BulkResponder: HTTPResponder {
    static let size = 3 << 20

    func respond(to request: HTTPRequest, writer: HTTPResponseWriter) {
        if request.target == "/big" {
            return writer.send(HTTPResponse(status: .ok, body: [UInt8](repeating: 120, count: Self.size)))
        }
        writer.send(.text(.ok, "\(request.method) \(request.target) \(String(decoding: request.body, as: UTF8.self))"))
    }

    func respondBeforeBody(to head: HTTPRequest, writer: HTTPResponseWriter) -> Bool {
        guard head.target == "/refused" else { return false }
        writer.send(.text(.unauthorized, "no"))
        return true
    }
}

/// A one-loop server with `responder` and a socketpair connection to it, configured by `configure`.
func withConnection(
    _ responder: some HTTPResponder,
    configure: (inout HTTPServerConfiguration) -> Void = { _ in },
    _ body: (TestConnection) throws -> Void
) throws {
    var configuration = HTTPServerConfiguration()
    configuration.loopCount = 1
    configure(&configuration)
    let server = HTTPServer(configuration: configuration, responder: responder)
    let (serverEnd, clientEnd) = makeSocketPair()
    server.adopt(serverEnd)
    let connection = TestConnection(fd: clientEnd)
    defer { server.shutdown(grace: 1) }
    try body(connection)
}

@Suite struct HTTPConnectionHardeningTests {
    // Issue 12 (1): the end of stream arrived while the first answer was pending, and the
    // connection closed after it instead of answering the second request, received in full.
    @Test func connection_AnswersPipelinedRequestsAfterTheClientHalfCloses() throws {
        let responder = HeldResponder()
        try withConnection(responder) { connection in
            try connection.send("GET /held HTTP/1.1\r\nHost: a\r\n\r\nGET /second HTTP/1.1\r\nHost: a\r\n\r\n")
            #expect(responder.arrived.wait(timeout: .now() + 5) == .success)
            shutdown(connection.fd, Int32(SHUT_WR))
            usleep(100_000)  // lets the loop see the end of stream while the first answer is held
            responder.release.signal()
            #expect(try connection.readResponse().text == "/held")
            #expect(try connection.readResponse().text == "/second")
            #expect(connection.isClosedByPeer())
        }
    }

    // Issue 12 (10): each blank line restarted the idle timeout, so `\r\n` now and then kept a
    // connection for ever without a request.
    @Test func connection_BlankLinesDoNotKeepAnIdleConnectionOpen() throws {
        try withConnection(BulkResponder(), configure: { $0.idleTimeout = 500 }) { connection in
            #expect(try connection.request("GET", "/first").status == 200)
            connection.setTimeout(milliseconds: 100)
            var closed = false
            for _ in 0..<50 where !closed {  // 5 s, ten times the idle timeout
                try connection.send("\r\n")
                closed = connection.isClosedByPeer()
            }
            #expect(closed)
        }
    }

    // Issue 12 (8): the write deadline ran from the first time the kernel buffer was full, so a
    // client reading steadily but slowly was cut off after the write timeout.
    @Test func connection_KeepsAReaderThatIsSlowButSteady() throws {
        // A read every 40 ms, the timeout 2 s: a test thread starved for a while on a loaded
        // machine (CI runs every suite at once) still reads well within it.
        try withConnection(BulkResponder(), configure: { $0.writeTimeout = 2_000 }) { connection in
            try connection.send("GET /big HTTP/1.1\r\nHost: a\r\n\r\n")
            let head = try connection.readHead()
            #expect(head.status == 200)
            var received = 0
            while received < BulkResponder.size {
                usleep(40_000)  // about 400 KB/s: the whole body takes some 8 s, four write timeouts
                guard let chunk = try? connection.read(count: min(16_384, BulkResponder.size - received)) else {
                    break
                }
                received += chunk.count
            }
            #expect(received == BulkResponder.size)
        }
    }

    @Test func connection_DropsAReaderThatTakesNothing() throws {
        try withConnection(BulkResponder(), configure: { $0.writeTimeout = 300 }) { connection in
            try connection.send("GET /big HTTP/1.1\r\nHost: a\r\n\r\n")
            usleep(2_500_000)  // the write timeout, then the loop's once-a-second check, passes
            var received = 0
            while let chunk = try? connection.read(count: 1), !chunk.isEmpty { received += 1 }
            #expect(received < BulkResponder.size)
        }
    }

    // Issue 12 (5): `100 Continue` went out before the responder saw the head.
    @Test func connection_LetsTheResponderRefuseAHeadBeforeContinue() throws {
        try withConnection(BulkResponder()) { connection in
            try connection.send(
                "POST /refused HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n")
            let response = try connection.readResponse()
            #expect(response.status == 401)
            #expect(response.header("connection") == "close")
            #expect(connection.isClosedByPeer())
        }
    }

    @Test func connection_SendsContinueWhenTheResponderTakesTheHead() throws {
        try withConnection(BulkResponder()) { connection in
            try connection.send("POST /up HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n")
            #expect(try connection.readLine() == "HTTP/1.1 100 Continue")
            #expect(try connection.readLine() == "")
            try connection.send("data")
            #expect(try connection.readResponse().text == "POST /up data")
        }
    }

    // RFC 9110 §10.1.1: an HTTP/1.0 request's expectation is ignored, and never answered with 100.
    @Test func connection_NeverSendsContinueToHTTP10() throws {
        try withConnection(BulkResponder()) { connection in
            try connection.send("POST /old HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n")
            usleep(200_000)  // a 100 would have been sent by now
            try connection.send("data")
            let response = try connection.readResponse()
            #expect(response.status == 200)
            #expect(response.text == "POST /old data")
        }
    }
}

@Suite struct DescriptorLimitTests {
    @Test(arguments: [
        (19_000, 1_048_576, 19_000),
        (19_000, 512, 512 - 64 - 3 * 2 - 1),
        (600, 512, 441),
        (10, 16, 1),
    ])
    func connectionCap_FitsTheOpenFileLimit(configured: Int, descriptorLimit: Int, expected: Int) {
        var configuration = HTTPServerConfiguration()
        configuration.loopCount = 2
        configuration.maxConnections = configured
        #expect(configuration.connectionCap(descriptorLimit: descriptorLimit) == expected)
    }

    // Issue 12 (9): with no descriptor left, accept failed with EMFILE, the connection stayed
    // queued, the level-triggered listener spun the loop and the client never got an answer.
    // In a child process, so the lowered limit touches no other test.
    @Test func listener_AnswersWith503WhenOutOfDescriptors_ThenRecovers() async {
        await #expect(processExitsWith: .success) {
            var limit = rlimit(rlim_cur: 256, rlim_max: 256)
            setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
            var configuration = HTTPServerConfiguration()
            configuration.port = 0
            configuration.loopCount = 1
            let server = HTTPServer(configuration: configuration, responder: BulkResponder())
            guard let port = try? server.start() else { exit(2) }
            // One answered request first: the loop thread has then set up its listener and spare
            // descriptor, which a slow start (a loaded machine) could otherwise leave until after
            // the descriptors below are gone.
            guard let ready = try? TestConnection(port: port).request("GET", "/before"), ready.status == 200 else {
                exit(5)
            }
            var filler: [Int32] = []
            // Take every descriptor, again until none frees up: the server may still be closing
            // the connection above, and a slot it frees would let its accept succeed.
            for _ in 0..<20 {
                let before = filler.count
                while case let fd = open("/dev/null", O_RDONLY), fd >= 0 { filler.append(fd) }
                if filler.count == before && before > 0 { break }
                usleep(50_000)
            }
            close(filler.removeLast())  // room for the client's socket, none for the server's accept
            guard let refused = try? TestConnection(port: port).request("GET", "/refused"), refused.status == 503 else {
                exit(3)
            }
            filler.forEach { close($0) }
            guard let served = try? TestConnection(port: port).request("GET", "/after"), served.status == 200 else {
                exit(4)
            }
            server.shutdown(grace: 1)
            exit(0)
        }
    }
}
