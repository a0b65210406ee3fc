import CSystemLinux
import Glibc

/// Thin wrappers over the Glibc socket calls the server needs.
enum Socket {
    /// Binds and listens on `host:port` (port 0 picks a free one); returns the descriptor and the
    /// port actually bound. The socket is non-blocking. With `reusePort`, several sockets of this
    /// process bind the same port and the kernel spreads incoming connections over them.
    static func listen(
        host: String, port: Int, backlog: Int32 = 4096, reusePort: Bool = false
    ) throws(SocketError) -> (fd: Int32, port: Int) {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = csys_sock_stream()
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let list else {
            throw SocketError("resolve \(host) (\(String(cString: gai_strerror(status))))", errno: EINVAL)
        }
        defer { freeaddrinfo(list) }
        var lastError = SocketError("bind \(host):\(port)", errno: EADDRNOTAVAIL)
        var entry: UnsafeMutablePointer<addrinfo>? = list
        while let info = entry?.pointee {
            entry = info.ai_next
            let fd = socket(info.ai_family, info.ai_socktype | csys_sock_nonblock_cloexec(), info.ai_protocol)
            guard fd >= 0 else {
                lastError = SocketError("socket")
                continue
            }
            var one: Int32 = 1
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
            if reusePort {
                setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, socklen_t(MemoryLayout<Int32>.size))
            }
            guard bind(fd, info.ai_addr, info.ai_addrlen) == 0 else {
                lastError = SocketError("bind \(host):\(port)")
                close(fd)
                continue
            }
            guard Glibc.listen(fd, backlog) == 0 else {
                lastError = SocketError("listen \(host):\(port)")
                close(fd)
                continue
            }
            return (fd, boundPort(fd))
        }
        throw lastError
    }

    static func boundPort(_ fd: Int32) -> Int {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { _ = getsockname(fd, $0, &length) }
        }
        switch Int32(storage.ss_family) {
        case AF_INET:
            return withUnsafePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) }
            }
        case AF_INET6:
            return withUnsafePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                    Int(UInt16(bigEndian: $0.pointee.sin6_port))
                }
            }
        default:
            return 0
        }
    }

    /// What one `accept` call gave.
    enum Accepted {
        /// A connection, as a non-blocking socket with Nagle off.
        case connection(Int32)
        /// No connection waits (or the one that did was gone before it was taken).
        case none
        /// The process or the system is out of file descriptors (EMFILE, ENFILE, or no buffers):
        /// the connection stays queued, so a level-triggered listener would wake again at once.
        case outOfDescriptors
    }

    /// Accepts one pending connection.
    static func accept(_ listener: Int32) -> Accepted {
        while true {
            let fd = csys_accept4(listener, csys_sock_nonblock_cloexec())
            if fd >= 0 {
                setNoDelay(fd)
                return .connection(fd)
            }
            switch errno {
            case EINTR: continue
            case EMFILE, ENFILE, ENOBUFS, ENOMEM: return .outOfDescriptors
            default: return .none
            }
        }
    }

    /// Turns off Nagle's algorithm: a response goes out as soon as it is written.
    static func setNoDelay(_ fd: Int32) {
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    static func setNonBlocking(_ fd: Int32) {
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
    }

    /// Ignores SIGPIPE: a process-wide setting a server that writes to sockets needs.
    static func prepareProcess() {
        signal(SIGPIPE, SIG_IGN)
    }

    /// Raises the open-file limit to its hard maximum and returns the limit now in force.
    static func raiseDescriptorLimit() -> Int {
        var limit = rlimit()
        guard getrlimit(RLIMIT_NOFILE_VALUE, &limit) == 0 else { return Int.max }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(RLIMIT_NOFILE_VALUE, &raised) == 0 { limit = raised }
        }
        return limit.rlim_cur > UInt(Int.max) ? Int.max : Int(limit.rlim_cur)  // RLIM_INFINITY is all ones
    }
}

private let RLIMIT_NOFILE_VALUE = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)

/// Milliseconds on the monotonic clock.
func monotonicMilliseconds() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) * 1000 + UInt64(time.tv_nsec) / 1_000_000
}
