import Dispatch
import Foundation
import Glibc
import HTTPServer
import Synchronization
import TestSupport
import Testing

/// Answers every request with its method, target and body, so tests can see what the server parsed.
struct EchoResponder: HTTPResponder {
    func respond(to request: HTTPRequest, writer: HTTPResponseWriter) {
        if request.target == "/stream" {
            let stream = writer.stream(
                HTTPResponse(status: .ok, headers: HTTPHeaders([("Content-Type", "text/event-stream")])),
                onClose: {}
            )
            stream.write(Array("data: one\n\n".utf8))
            stream.write(Array("data: two\n\n".utf8))
            stream.finish()
            return
        }
        let text = "\(request.method) \(request.target) \(String(decoding: request.body, as: UTF8.self))"
        // Answer from another thread, as the real API does after a database call.
        DispatchQueue.global().async { writer.send(.text(.ok, text)) }
    }
}

/// Answers with the index of the event loop that called it.
struct LoopIndexResponder: HTTPResponder {
    func respond(to request: HTTPRequest, writer: HTTPResponseWriter) {
        writer.send(.text(.ok, LoopThread.index.map(String.init) ?? "none"))
    }
}

@Suite struct LoopThreadTests {
    @Test func eachLoopKnowsItsIndex_OtherThreadsHaveNone() throws {
        var configuration = HTTPServerConfiguration()
        configuration.loopCount = 3
        let server = HTTPServer(configuration: configuration, responder: LoopIndexResponder())
        defer { server.shutdown(grace: 1) }
        var seen: Set<String> = []
        for _ in 0..<3 {  // adopted connections go to the loops in turn
            let (serverEnd, clientEnd) = makeSocketPair()
            server.adopt(serverEnd)
            seen.insert(try TestConnection(fd: clientEnd).request("GET", "/").text)
        }
        #expect(seen == ["0", "1", "2"])
        #expect(LoopThread.index == nil)
    }
}

/// A server with the echo responder and one connection to it over a socketpair.
func withConnection(_ body: (TestConnection, HTTPServer) throws -> Void) throws {
    var configuration = HTTPServerConfiguration()
    configuration.loopCount = 1
    let server = HTTPServer(configuration: configuration, responder: EchoResponder())
    let (serverEnd, clientEnd) = makeSocketPair()
    server.adopt(serverEnd)
    let connection = TestConnection(fd: clientEnd)
    defer { server.shutdown(grace: 1) }
    try body(connection, server)
}

@Suite struct HTTPConnectionTests {
    @Test func connection_AnswersRequestsOnAKeptAliveConnection() throws {
        try withConnection { connection, _ in
            let first = try connection.request("GET", "/a")
            #expect(first.status == 200)
            #expect(first.text == "GET /a ")
            #expect(first.header("date") != nil)
            let second = try connection.request("POST", "/b", body: "hi")
            #expect(second.text == "POST /b hi")
        }
    }

    @Test func connection_AnswersPipelinedRequestsInOrder() throws {
        try withConnection { connection, _ in
            try connection.send(
                "GET /1 HTTP/1.1\r\nHost: a\r\n\r\nGET /2 HTTP/1.1\r\nHost: a\r\n\r\nGET /3 HTTP/1.1\r\nHost: a\r\n\r\n"
            )
            let texts = try (0..<3).map { _ in try connection.readResponse().text }
            #expect(texts == ["GET /1 ", "GET /2 ", "GET /3 "])
        }
    }

    @Test func connection_ClosesAfterConnectionClose() throws {
        try withConnection { connection, _ in
            try connection.send("GET /x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
            let response = try connection.readResponse()
            #expect(response.header("connection") == "close")
            #expect(connection.isClosedByPeer())
        }
    }

    @Test func connection_ClosesAfterAnHTTP10Request() throws {
        try withConnection { connection, _ in
            try connection.send("GET /x HTTP/1.0\r\n\r\n")
            #expect(try connection.readResponse().status == 200)
            #expect(connection.isClosedByPeer())
        }
    }

    @Test func connection_SendsContinueBeforeReadingTheBody() throws {
        try withConnection { connection, _ in
            try connection.send("POST /up HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n")
            #expect(try connection.readLine() == "HTTP/1.1 100 Continue")
            #expect(try connection.readLine() == "")
            try connection.send("data")
            #expect(try connection.readResponse().text == "POST /up data")
        }
    }

    @Test func connection_RejectsMalformedRequestAndCloses() throws {
        try withConnection { connection, _ in
            try connection.send("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n")
            let response = try connection.readResponse()
            #expect(response.status == 400)
            #expect(response.header("connection") == "close")
            #expect(connection.isClosedByPeer())
        }
    }

    @Test func connection_OmitsTheBodyOfAHeadResponse() throws {
        try withConnection { connection, _ in
            let head = try connection.request("HEAD", "/h")
            #expect(head.header("content-length") == "8")  // "HEAD /h "
            // The next response must parse cleanly: no stray body bytes were sent.
            #expect(try connection.request("GET", "/after").text == "GET /after ")
        }
    }

    @Test func connection_StreamsChunkedBodyThenCloses() throws {
        try withConnection { connection, _ in
            let response = try connection.request("GET", "/stream")
            #expect(response.header("transfer-encoding") == "chunked")
            #expect(response.text == "data: one\n\ndata: two\n\n")
            #expect(connection.isClosedByPeer())
        }
    }

    @Test func connection_IsFreedWhenTheClientGoesAway() throws {
        try withConnection { connection, server in
            _ = try connection.request("GET", "/a")
            #expect(server.openConnections == 1)
            shutdown(connection.fd, Int32(SHUT_RDWR))
            var waited = 0
            while server.openConnections > 0 && waited < 200 {
                usleep(10_000)
                waited += 1
            }
            #expect(server.openConnections == 0)
        }
    }

    // Found by scripts/hostile-requests.py: with edge-triggered epoll, a FIN that arrived with the
    // last bytes was never seen, so the connection waited for the 10 s request timeout.
    @Test func connection_ClosesAtOnceWhenTheClientHangsUpMidRequest() throws {
        try withConnection { connection, server in
            try connection.send("POST /b HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nhalf")
            shutdown(connection.fd, Int32(SHUT_WR))
            connection.setTimeout(milliseconds: 2_000)
            #expect(connection.isClosedByPeer())
        }
    }

    // Found by scripts/slow-clients.py: past about 1 MiB of pipelined requests the server stopped
    // reading (it paused at its input limit and nothing resumed it) and timed the client out.
    @Test func connection_AnswersMegabytesOfPipelinedRequests() throws {
        try withConnection { connection, _ in
            let count = 40_000
            let request = Array("GET /p HTTP/1.1\r\nHost: a\r\n\r\n".utf8)
            let fd = connection.fd
            let sender = Thread {
                var bytes: [UInt8] = []
                for _ in 0..<count { bytes += request }  // about 1.2 MiB
                var sent = 0
                while sent < bytes.count {
                    let written = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + sent, bytes.count - sent, 0) }
                    guard written > 0 else { return }
                    sent += written
                }
            }
            sender.start()
            var answered = 0
            while answered < count, let response = try? connection.readResponse(), response.status == 200 {
                answered += 1
            }
            #expect(answered == count)
        }
    }
}

@Suite struct HTTPServerLiveTests {
    @Test func server_ListensOnAFreePortAndAnswers() throws {
        var configuration = HTTPServerConfiguration()
        configuration.port = 0
        let server = HTTPServer(configuration: configuration, responder: EchoResponder())
        let port = try server.start()
        defer { server.shutdown(grace: 1) }
        #expect(port > 0)
        let connection = try TestConnection(port: port)
        #expect(try connection.request("GET", "/live").text == "GET /live ")
    }

    @Test func server_TimesOutAHalfSentRequest() throws {
        var configuration = HTTPServerConfiguration()
        configuration.port = 0
        configuration.requestTimeout = 300
        let server = HTTPServer(configuration: configuration, responder: EchoResponder())
        let port = try server.start()
        defer { server.shutdown(grace: 1) }
        let connection = try TestConnection(port: port)
        try connection.send("GET /slow HTTP/1.1\r\nHost: a\r\n")
        let response = try connection.readResponse()
        #expect(response.status == 408)
        #expect(connection.isClosedByPeer())
    }

    // Found by scripts/slow-clients.py: a connection that never sent a byte was kept for the 60 s
    // keep-alive idle timeout, six times longer than one that sends half a request.
    @Test func server_ClosesASilentConnectionAfterTheRequestTimeout() throws {
        var configuration = HTTPServerConfiguration()
        configuration.port = 0
        configuration.requestTimeout = 300
        configuration.idleTimeout = 60_000
        let server = HTTPServer(configuration: configuration, responder: EchoResponder())
        let port = try server.start()
        defer { server.shutdown(grace: 1) }
        let connection = try TestConnection(port: port)
        connection.setTimeout(milliseconds: 3_000)
        #expect(connection.isClosedByPeer())
    }

    @Test func server_RefusesConnectionsPastTheLimit() throws {
        var configuration = HTTPServerConfiguration()
        configuration.port = 0
        configuration.maxConnections = 1
        let server = HTTPServer(configuration: configuration, responder: EchoResponder())
        let port = try server.start()
        defer { server.shutdown(grace: 1) }
        let first = try TestConnection(port: port)
        #expect(try first.request("GET", "/one").status == 200)
        let second = try TestConnection(port: port)
        let refused = try second.readResponse()
        #expect(refused.status == 503)
        #expect(refused.header("retry-after") == "1")
    }
}
