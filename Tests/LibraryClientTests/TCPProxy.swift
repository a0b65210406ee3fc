import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A TCP proxy on 127.0.0.1 in front of the server: it counts the bytes the server sends, keeps
/// what clients send, cuts every connection on demand, and can swallow the answer to a request.
final class TCPProxy: Sendable {
    private struct State {
        var upstreamPort: Int
        var connections: [Int32] = []
        var bytesDown = 0
        var sent: [UInt8] = []
        /// A request whose text contains this has its connection closed before any answer reaches the client.
        var dropAnswerTo: String?
        var dropped = 0
    }

    let port: Int
    private let listener: Int32
    private let state: Mutex<State>

    init(upstreamPort: Int) throws {
        state = Mutex(State(upstreamPort: upstreamPort))
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var one: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = Self.loopback(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(listener, 128) == 0 else { throw ProxyError("bind/listen: errno \(errno)") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { _ = getsockname(listener, $0, &length) }
        }
        port = Int(UInt16(bigEndian: address.sin_port))
        self.listener = listener
        Thread.detachNewThread { [self] in
            while true {
                let client = accept(listener, nil, nil)
                guard client >= 0 else { return }
                self.serve(client)
            }
        }
    }

    deinit {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        cutAll()
    }

    /// Bytes the server has sent through the proxy.
    var bytesDown: Int { state.withLock { $0.bytesDown } }
    /// Everything clients sent, as text.
    var sentText: String { state.withLock { String(decoding: $0.sent, as: UTF8.self) } }
    /// Answers swallowed so far.
    var dropped: Int { state.withLock { $0.dropped } }

    /// The server moved (a restart on another port).
    func retarget(_ port: Int) { state.withLock { $0.upstreamPort = port } }

    func dropAnswer(toRequestContaining text: String) { state.withLock { $0.dropAnswerTo = text } }

    /// Closes every open connection in both directions, as a network failure would.
    func cutAll() {
        let fds = state.withLock { state in
            defer { state.connections = [] }
            return state.connections
        }
        for fd in fds { shutdown(fd, Int32(SHUT_RDWR)) }
    }

    private func serve(_ client: Int32) {
        let upstream = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = Self.loopback(port: state.withLock { $0.upstreamPort })
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(upstream, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            close(upstream)
            close(client)
            return
        }
        state.withLock { $0.connections += [client, upstream] }
        let swallow = Mutex(false)
        let pumpsLeft = Mutex(2)
        let done: @Sendable () -> Void = { [self] in
            guard
                pumpsLeft.withLock({ left in
                    left -= 1
                    return left == 0
                })
            else { return }
            state.withLock { $0.connections.removeAll { $0 == client || $0 == upstream } }
            close(client)
            close(upstream)
        }
        Thread.detachNewThread { [self] in
            defer { done() }
            pump(from: client, to: upstream) { bytes in
                state.withLock { state in
                    state.sent += bytes
                    if let text = state.dropAnswerTo, String(decoding: bytes, as: UTF8.self).contains(text) {
                        state.dropAnswerTo = nil
                        state.dropped += 1
                        swallow.withLock { $0 = true }
                    }
                }
                return true
            }
        }
        Thread.detachNewThread { [self] in
            defer { done() }
            pump(from: upstream, to: client) { bytes in
                if swallow.withLock({ $0 }) { return false }
                state.withLock { $0.bytesDown += bytes.count }
                return true
            }
        }
    }

    /// Copies until either side closes, or `take` refuses a chunk (then both sides close).
    private func pump(from source: Int32, to sink: Int32, take: ([UInt8]) -> Bool) {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = read(source, &buffer, buffer.count)
            guard count > 0 else { break }
            let chunk = Array(buffer[0..<count])
            guard take(chunk) else { break }
            var offset = 0
            while offset < count {
                let written = chunk[offset...].withUnsafeBytes { write(sink, $0.baseAddress, $0.count) }
                guard written > 0 else { return finish(source, sink) }
                offset += written
            }
        }
        finish(source, sink)
    }

    private func finish(_ source: Int32, _ sink: Int32) {
        shutdown(source, Int32(SHUT_RDWR))
        shutdown(sink, Int32(SHUT_RDWR))
    }

    private static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }
}

struct ProxyError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
