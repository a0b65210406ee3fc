import APICore

/// The host names a request's `Host` header may carry (any port), against DNS rebinding.
///
/// A web page on `evil.example` that makes its name resolve to 127.0.0.1 can reach a server on
/// loopback from the browser, which then sends `Host: evil.example`. Answering only the names the
/// server is meant to be reached by keeps such pages out.
package struct AllowedHosts: Sendable, Equatable {
    /// Lowercased names without port and brackets; nil allows every host.
    package let names: Set<String>?

    /// `names` as configured (`localhost`, `127.0.0.1`, `[::1]`, `api.example:8080`; the port is
    /// ignored); nil, or a list containing `*`, allows every host.
    package init(_ names: [String]?) {
        guard let names, !names.contains("*") else {
            self.names = nil
            return
        }
        self.names = Set(names.compactMap { Self.hostName($0) })
    }

    /// The default for a server listening on `listenHost`: any host when bound to every address
    /// (a server meant to be reached from elsewhere, by names it cannot know); otherwise the listen
    /// address, plus `localhost`, `127.0.0.1` and `[::1]` when that address is loopback.
    package static func defaults(listenHost: String) -> AllowedHosts {
        let host = listenHost.lowercased()
        if host.isEmpty || host == "0.0.0.0" || host == "::" || host == "[::]" { return AllowedHosts(nil) }
        let loopback = host == "localhost" || host == "::1" || host == "[::1]" || host.hasPrefix("127.")
        return AllowedHosts(loopback ? [host, "localhost", "127.0.0.1", "[::1]"] : [host])
    }

    /// Whether a request with this `Host` header value is answered. A request without one (only
    /// HTTP/1.0 gets this far without it) names no host and is answered.
    package func permits(_ header: String?) -> Bool {
        guard let names, let header else { return true }
        guard let name = Self.hostName(header) else { return false }
        return names.contains(name)
    }

    /// `uri-host [ ":" port ]` reduced to the lowercased host (IPv6 without brackets); nil when empty.
    private static func hostName(_ text: String) -> String? {
        var host = Substring(text.trimmedOWS().lowercased())
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { return nil }
            host = host[host.index(after: host.startIndex)..<close]
        } else if host.filter({ $0 == ":" }).count == 1, let colon = host.firstIndex(of: ":") {
            host = host[..<colon]
        }
        if host.hasSuffix(".") { host = host.dropLast() }  // `localhost.` is the same name
        return host.isEmpty ? nil : String(host)
    }
}
