import Foundation
import Glibc

/// A parsed HTTP response, as a test sees it.
package struct TestResponse: Sendable {
    package var status: Int
    package var headers: [(name: String, value: String)]
    package var body: [UInt8]

    /// The first value of a header, case-insensitively.
    package func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    package var text: String { String(decoding: body, as: UTF8.self) }

    /// The body parsed as JSON (objects as `[String: Any]`).
    package var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(body), options: [.fragmentsAllowed])) as? [String: Any] ?? [:]
    }
}

/// A blocking client socket for tests: send raw bytes, read responses. Reads time out after
/// `timeout` seconds so a broken server fails a test instead of hanging it.
package final class TestConnection {
    package let fd: Int32
    private var buffer: [UInt8] = []

    /// Connects to 127.0.0.1:`port`.
    package init(port: Int, timeout: Int = 5) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else {
            close(fd)
            throw TestError("connect failed: errno \(errno)")
        }
        setTimeout(timeout)
    }

    /// Wraps one end of a socketpair.
    package init(fd: Int32, timeout: Int = 5) {
        self.fd = fd
        setTimeout(timeout)
    }

    deinit { close(fd) }

    private func setTimeout(_ seconds: Int) {
        setTimeout(milliseconds: seconds * 1000)
    }

    /// How long a read waits before failing with a time-out.
    package func setTimeout(milliseconds: Int) {
        var time = timeval(tv_sec: milliseconds / 1000, tv_usec: (milliseconds % 1000) * 1000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
    }

    package func send(_ text: String) throws { try send(Array(text.utf8)) }

    package func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
            }
            // A server that rejected the request may stop reading; its answer is still to be read.
            if sent < 0 && (errno == EPIPE || errno == ECONNRESET) { return }
            guard sent > 0 else { throw TestError("send failed: errno \(errno)") }
            offset += sent
        }
    }

    /// Reads more bytes into the buffer; false on end of stream.
    private func fill() throws -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, 65536, 0) }
        if count > 0 {
            buffer.append(contentsOf: chunk[0..<count])
            return true
        }
        if count == 0 { return false }
        if errno == EAGAIN || errno == EWOULDBLOCK { throw TestError("timed out waiting for the server") }
        if errno == ECONNRESET { return false }
        throw TestError("recv failed: errno \(errno)")
    }

    /// Reads one line ending in CRLF (without it).
    package func readLine() throws -> String? {
        while true {
            if let index = buffer.firstIndex(of: 10), index > 0, buffer[index - 1] == 13 {
                let line = String(decoding: buffer[0..<(index - 1)], as: UTF8.self)
                buffer.removeFirst(index + 1)
                return line
            }
            guard try fill() else { return nil }
        }
    }

    /// Reads exactly `count` bytes.
    package func read(count: Int) throws -> [UInt8] {
        while buffer.count < count {
            guard try fill() else { throw TestError("connection closed after \(buffer.count) of \(count) bytes") }
        }
        let bytes = Array(buffer[0..<count])
        buffer.removeFirst(count)
        return bytes
    }

    /// Reads a status line and headers only.
    package func readHead() throws -> TestResponse {
        guard let statusLine = try readLine() else { throw TestError("connection closed before a response") }
        let parts = statusLine.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, let status = Int(parts[1]) else { throw TestError("bad status line: \(statusLine)") }
        var headers: [(String, String)] = []
        while let line = try readLine(), !line.isEmpty {
            let pair = line.split(separator: ":", maxSplits: 1)
            headers.append(
                (String(pair[0]), String(pair.count > 1 ? pair[1] : "").trimmingCharacters(in: .whitespaces)))
        }
        return TestResponse(status: status, headers: headers, body: [])
    }

    /// Reads one response. `head` says the request was HEAD (no body follows).
    package func readResponse(head: Bool = false) throws -> TestResponse {
        guard let statusLine = try readLine() else { throw TestError("connection closed before a response") }
        let parts = statusLine.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, parts[0] == "HTTP/1.1", let status = Int(parts[1]) else {
            throw TestError("bad status line: \(statusLine)")
        }
        var headers: [(String, String)] = []
        while let line = try readLine(), !line.isEmpty {
            let pair = line.split(separator: ":", maxSplits: 1)
            headers.append(
                (String(pair[0]), String(pair.count > 1 ? pair[1] : "").trimmingCharacters(in: .whitespaces)))
        }
        var response = TestResponse(status: status, headers: headers, body: [])
        if head || status == 204 || status == 304 || status < 200 { return response }
        if let length = response.header("content-length").flatMap(Int.init) {
            response.body = try read(count: length)
        } else if response.header("transfer-encoding")?.lowercased() == "chunked" {
            while let sizeLine = try readLine(), let size = Int(sizeLine, radix: 16), size > 0 {
                response.body += try read(count: size)
                _ = try readLine()
            }
            _ = try readLine()
        } else {
            while try fill() {}
            response.body = buffer
            buffer = []
        }
        return response
    }

    /// Whether the server has closed the connection (reads end of stream within the timeout).
    package func isClosedByPeer() -> Bool {
        guard buffer.isEmpty else { return false }
        return (try? fill()) == false
    }

    /// Sends a request and reads its response.
    package func request(
        _ method: String,
        _ path: String,
        headers: [String: String] = [:],
        body: String? = nil
    ) throws -> TestResponse {
        var text = "\(method) \(path) HTTP/1.1\r\nHost: test\r\n"
        var headers = headers
        if let body {
            headers["Content-Length"] = String(body.utf8.count)
            if headers["Content-Type"] == nil { headers["Content-Type"] = "application/json" }
        }
        for (name, value) in headers.sorted(by: { $0.key < $1.key }) { text += "\(name): \(value)\r\n" }
        text += "\r\n" + (body ?? "")
        try send(text)
        return try readResponse(head: method == "HEAD")
    }
}

package struct TestError: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}

/// A connected pair of stream sockets: one for the server, one for the test.
package func makeSocketPair() -> (server: Int32, client: Int32) {
    var fds: [Int32] = [0, 0]
    _ = socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds)
    return (fds[0], fds[1])
}
