/// Where the server listens and the limits it enforces.
package struct HTTPServerConfiguration: Sendable {
    package var host = "127.0.0.1"
    /// 0 binds a free port; `HTTPServer.start` returns the one bound.
    package var port = 8080
    /// Event loops, one thread each; defaults to the number of cores.
    package var loopCount = HTTPServerConfiguration.coreCount
    /// Open connections past which new ones get a 503 and are closed.
    package var maxConnections = 19_000
    /// Open files the process needs besides its connections and the loops' own (standard streams,
    /// the database's files, logs): kept free when `maxConnections` is fitted to the open-file limit.
    package var reservedDescriptors = 64
    /// Milliseconds a kept-alive connection may sit idle between requests.
    package var idleTimeout: UInt64 = 60_000
    /// Milliseconds from a request's first byte until it must be complete (slowloris defence).
    package var requestTimeout: UInt64 = 10_000
    /// Milliseconds a response may wait for the client to read it before the connection is dropped.
    package var writeTimeout: UInt64 = 30_000
    /// Unsent bytes an open stream may pile up before the connection is dropped as a slow reader.
    package var maxStreamBacklog = 1024 * 1024
    /// The kernel send buffer of a streamed response (the kernel doubles it).
    package var streamSendBuffer = 16 * 1024
    package var limits = HTTPParserLimits()

    package init() {}

    /// `maxConnections`, lowered when `descriptorLimit` open files could not hold that many
    /// connections besides the reserve and each loop's epoll, eventfd and spare descriptor.
    package func connectionCap(descriptorLimit: Int) -> Int {
        let spare = descriptorLimit - reservedDescriptors - 3 * max(1, loopCount) - 1
        return max(1, min(maxConnections, spare))
    }

    package static var coreCount: Int {
        max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
    }
}

#if canImport(Glibc)
    import Glibc
#endif
