import Glibc

/// A failed socket call, with the errno it set.
package struct SocketError: Error, CustomStringConvertible, Sendable {
    /// The call that failed, e.g. `bind(127.0.0.1:8080)`.
    package let operation: String
    package let errno: Int32

    init(_ operation: String, errno: Int32 = Glibc.errno) {
        self.operation = operation
        self.errno = errno
    }

    package var description: String {
        "\(operation) failed: \(String(cString: strerror(errno)))"
    }
}
