import CSystemLinux
import Glibc
import Synchronization

/// Standard error for the access log, written so that an event loop never blocks on it.
///
/// When stderr is a pipe, the sink writes through a non-blocking description of its own (opened
/// from `/proc/self/fd/2`, so the flag does not reach the shell or supervisor that shares fd 2);
/// a socket is written with `MSG_DONTWAIT`. What the reader has no room for is dropped, whole lines
/// at a time, and counted: a slow log reader costs log lines, never latency. Files and terminals
/// are written as they are (they do not hold a writer back for long).
package final class LogSink: Sendable {
    private enum Kind {
        case nonBlocking
        case socket
        case plain
    }

    /// The process's standard error, opened once, on first use.
    package static let standardError = LogSink(descriptor: 2)

    private let fd: Int32
    private let kind: Kind
    /// Lines dropped because the reader of stderr had no room for them.
    package let dropped = Atomic<Int>(0)

    init(descriptor: Int32) {
        var info = stat()
        fstat(descriptor, &info)
        switch info.st_mode & S_IFMT {
        case S_IFIFO:
            let reopened = open("/proc/self/fd/\(descriptor)", O_WRONLY | O_NONBLOCK | O_CLOEXEC)
            (fd, kind) = reopened >= 0 ? (reopened, .nonBlocking) : (descriptor, .plain)
        case S_IFSOCK:
            (fd, kind) = (descriptor, .socket)
        default:
            (fd, kind) = (descriptor, .plain)
        }
    }

    /// Writes whole lines from `bytes[start...]`; returns how many bytes were written, which may
    /// end inside a line when the reader ran out of room. Never blocks when stderr is a pipe or socket.
    func write(_ bytes: [UInt8], from start: Int) -> Int {
        var offset = start
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { buffer in
                let base = buffer.baseAddress! + offset
                let count = bytes.count - offset
                if kind == .socket { return send(fd, base, count, Int32(MSG_DONTWAIT) | Int32(MSG_NOSIGNAL)) }
                return Glibc.write(fd, base, count)
            }
            if written > 0 {
                offset += written
            } else if written < 0 && errno == EINTR {
                continue
            } else {
                break  // EAGAIN: no room now; anything else: stderr is gone
            }
        }
        return offset - start
    }
}
