import Synchronization

/// Request counters and latency histograms, rendered in the Prometheus text format.
package final class Metrics: Sendable {
    private struct Key: Hashable {
        let route: String
        let method: String
        let status: Int
    }

    private struct Histogram {
        var buckets: [Int]
        var sum = 0.0
        var count = 0
    }

    /// Upper bounds (seconds) of the latency buckets.
    static let bounds: [Double] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

    private let state = Mutex<(requests: [Key: Int], latency: [String: Histogram])>(([:], [:]))
    private let gauges = Mutex<[(name: String, help: String, read: @Sendable () -> Int)]>([])

    package init() {}

    /// Counts one answered request and its duration.
    func record(route: String, method: String, status: Int, seconds: Double) {
        state.withLock { state in
            state.requests[Key(route: route, method: method, status: status), default: 0] += 1
            var histogram = state.latency[route] ?? Histogram(buckets: Array(repeating: 0, count: Self.bounds.count))
            if let bucket = Self.bounds.firstIndex(where: { seconds <= $0 }) { histogram.buckets[bucket] += 1 }
            histogram.sum += seconds
            histogram.count += 1
            state.latency[route] = histogram
        }
    }

    /// Adds a gauge read when metrics are scraped (open connections, for instance).
    package func addGauge(_ name: String, help: String, read: @escaping @Sendable () -> Int) {
        gauges.withLock { $0.append((name, help, read)) }
    }

    /// The exposition text.
    func render() -> String {
        let (requests, latency) = state.withLock { ($0.requests, $0.latency) }
        var lines = [
            "# HELP library_http_requests_total HTTP requests answered, by route template, method and status.",
            "# TYPE library_http_requests_total counter",
        ]
        for (key, count) in requests.sorted(by: {
            ($0.key.route, $0.key.method, $0.key.status) < ($1.key.route, $1.key.method, $1.key.status)
        }) {
            lines.append(
                "library_http_requests_total{route=\"\(key.route)\",method=\"\(key.method)\",status=\"\(key.status)\"} \(count)"
            )
        }
        lines.append(
            "# HELP library_http_request_duration_seconds Time from a parsed request to its response, by route template."
        )
        lines.append("# TYPE library_http_request_duration_seconds histogram")
        for (route, histogram) in latency.sorted(by: { $0.key < $1.key }) {
            var cumulative = 0
            for (bound, count) in zip(Self.bounds, histogram.buckets) {
                cumulative += count
                lines.append(
                    "library_http_request_duration_seconds_bucket{route=\"\(route)\",le=\"\(bound)\"} \(cumulative)")
            }
            lines.append(
                "library_http_request_duration_seconds_bucket{route=\"\(route)\",le=\"+Inf\"} \(histogram.count)")
            lines.append("library_http_request_duration_seconds_sum{route=\"\(route)\"} \(histogram.sum)")
            lines.append("library_http_request_duration_seconds_count{route=\"\(route)\"} \(histogram.count)")
        }
        for gauge in gauges.withLock({ $0 }) {
            lines.append("# HELP \(gauge.name) \(gauge.help)")
            lines.append("# TYPE \(gauge.name) gauge")
            lines.append("\(gauge.name) \(gauge.read())")
        }
        return lines.joined(separator: "\n") + "\n"
    }
}
