import Foundation

/// `library-server --check-health`: one `GET /healthz` to a running server, for a container's
/// HEALTHCHECK, so the runtime image needs no curl.
///
/// Exits 0 on a 200 and 1 otherwise, with one line on stderr saying why.
enum HealthCheck {
    static func run(host: String, port: Int) -> Never {
        // A server bound to every address is reached over loopback.
        let target = host == "0.0.0.0" || host == "::" || host.isEmpty ? "127.0.0.1" : host
        switch probe(host: target, port: port, timeoutSeconds: 3) {
        case .success(let status) where status == 200:
            exit(0)
        case .success(let status):
            FileHandle.standardError.write(Data("library-server: /healthz answered \(status)\n".utf8))
        case .failure(let failure):
            FileHandle.standardError.write(Data("library-server: health check failed: \(failure.reason)\n".utf8))
        }
        exit(1)
    }

    private struct Failure: Error { let reason: String }

    private static func probe(host: String, port: Int, timeoutSeconds: Int) -> Result<Int, Failure> {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var found: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &found) == 0, let address = found else {
            return .failure(Failure(reason: "cannot resolve \(host)"))
        }
        defer { freeaddrinfo(found) }
        let fd = socket(address.pointee.ai_family, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return .failure(Failure(reason: "socket: \(String(cString: strerror(errno)))")) }
        defer { close(fd) }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        guard connect(fd, address.pointee.ai_addr, address.pointee.ai_addrlen) == 0 else {
            return .failure(Failure(reason: "connect to \(host):\(port): \(String(cString: strerror(errno)))"))
        }
        let request = Array("GET /healthz HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n\r\n".utf8)
        guard send(fd, request, request.count, Int32(MSG_NOSIGNAL)) == request.count else {
            return .failure(Failure(reason: "send: \(String(cString: strerror(errno)))"))
        }
        // The status line is all that is needed: "HTTP/1.1 200 ...".
        var buffer = [UInt8](repeating: 0, count: 64)
        var received = 0
        while received < 12 {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + received, 64 - received, 0) }
            guard count > 0 else { return .failure(Failure(reason: "no answer from \(host):\(port)")) }
            received += count
        }
        let line = String(decoding: buffer[0..<received], as: UTF8.self)
        guard line.hasPrefix("HTTP/1."), let status = Int(line.dropFirst(9).prefix(3)) else {
            return .failure(Failure(reason: "not an HTTP answer"))
        }
        return .success(status)
    }
}
