import TestSupport
import Testing

/// `Expect: 100-continue`: the head is judged before the client is told to send its body.
@Suite struct ExpectContinueTests {
    static func head(_ method: String, _ path: String, _ extra: String = "") -> String {
        "\(method) \(path) HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 16\r\n\(extra)\r\n"
    }

    // Issue 12 (5): 100 Continue went out before route, method and token were checked, so an
    // unauthenticated client uploaded its body anyway.
    @Test(arguments: [
        (head("POST", "/libraries", "Content-Type: application/json\r\n"), 401),
        (head("POST", "/nowhere", "Authorization: Bearer secret\r\n"), 404),
        (head("PATCH", "/libraries", "Authorization: Bearer secret\r\n"), 405),
        (head("POST", "/libraries", "Authorization: Bearer secret\r\nContent-Type: text/plain\r\n"), 415),
    ])
    func refusedHead_IsAnsweredWithoutContinue(head: String, status: Int) throws {
        let server = try LiveServer(token: "secret")
        let connection = try server.connect()
        try connection.send(head)
        let response = try connection.readResponse()
        #expect(response.status == status)
        #expect(response.header("content-type") == "application/problem+json")
        #expect(response.header("connection") == "close")
        #expect(connection.isClosedByPeer())
    }

    @Test func acceptedHead_GetsContinueThenTheAnswer() throws {
        let server = try LiveServer(token: "secret")
        let connection = try server.connect()
        let headers = "Authorization: Bearer secret\r\nContent-Type: application/json\r\n"
        try connection.send(Self.head("POST", "/libraries", headers))
        #expect(try connection.readLine() == "HTTP/1.1 100 Continue")
        #expect(try connection.readLine() == "")
        try connection.send(#"{"name":"Later"}"#)
        #expect(try connection.readResponse().status == 201)
    }
}
