import HTTPServer
import Synchronization

/// Request counters, latency histograms and gauges, rendered in the Prometheus text format.
package final class Metrics: Sendable {
    private struct Key: Hashable {
        let route: String
        let method: String
        let status: Int
    }

    /// Cumulative-on-render latency buckets, as Prometheus histograms expect.
    private struct Histogram {
        var buckets = [Int](repeating: 0, count: Metrics.bounds.count)
        var sum = 0.0
        var count = 0

        mutating func record(_ seconds: Double) {
            if let bucket = Metrics.bounds.firstIndex(where: { seconds <= $0 }) { buckets[bucket] += 1 }
            sum += seconds
            count += 1
        }

        mutating func add(_ other: Histogram) {
            for index in buckets.indices { buckets[index] += other.buckets[index] }
            sum += other.sum
            count += other.count
        }

        func render(_ name: String, labels: String, into lines: inout [String]) {
            let prefix = labels.isEmpty ? "" : labels + ","
            var cumulative = 0
            for (bound, count) in zip(Metrics.bounds, buckets) {
                cumulative += count
                lines.append("\(name)_bucket{\(prefix)le=\"\(bound)\"} \(cumulative)")
            }
            lines.append("\(name)_bucket{\(prefix)le=\"+Inf\"} \(count)")
            let suffix = labels.isEmpty ? "" : "{\(labels)}"
            lines.append("\(name)_sum\(suffix) \(sum)")
            lines.append("\(name)_count\(suffix) \(count)")
        }
    }

    private struct State {
        var requests: [Key: Int] = [:]
        var latency: [String: Histogram] = [:]
        var transactions = Histogram()
        var writesCommitted = 0

        mutating func add(_ other: State) {
            requests.merge(other.requests, uniquingKeysWith: +)
            latency.merge(other.latency) { mine, theirs in
                var total = mine
                total.add(theirs)
                return total
            }
            transactions.add(other.transactions)
            writesCommitted += other.writesCommitted
        }
    }

    /// Upper bounds (seconds) of the latency buckets.
    static let bounds: [Double] = [
        0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
    ]

    /// One shard per event loop (loops follow the core count) and one for other threads, so the
    /// loops never wait for each other to count a request; merged when scraped.
    private let shards = (0...HTTPServerConfiguration.coreCount).map { _ in Shard() }

    private final class Shard: Sendable {
        let state = Mutex(State())
    }

    private var shard: Shard { shards[(LoopThread.index ?? shards.count - 1) % shards.count] }
    private let readings = Mutex<[(name: String, type: String, help: String, read: @Sendable () -> Int)]>([])
    private let labelled = Mutex<
        [(name: String, type: String, help: String, label: String, read: @Sendable () -> [(String, Int)])]
    >([])

    package init() {}

    /// The methods counted under their own name; any other token a client sends is counted as
    /// `OTHER`, so a client cannot add label values (and lines to every scrape) at will.
    static let methodLabels: Set<String> = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]

    /// The `method` label of a request's method token: itself when known, else `OTHER`.
    static func methodLabel(_ method: String) -> String {
        methodLabels.contains(method) ? method : "OTHER"
    }

    /// Counts one answered request and its duration. `route` is a route template (a closed set);
    /// the method is reduced to `methodLabel`.
    func record(route: String, method: String, status: Int, seconds: Double) {
        let key = Key(route: route, method: Self.methodLabel(method), status: status)
        shard.state.withLock { state in
            state.requests[key, default: 0] += 1
            state.latency[route, default: Histogram()].record(seconds)
        }
    }

    /// Records one SQLite write transaction: how long it took, from its start to its commit, and
    /// how many writes it committed together (group commit).
    package func recordTransaction(seconds: Double, writes: Int) {
        shard.state.withLock { state in
            state.transactions.record(seconds)
            state.writesCommitted += writes
        }
    }

    /// Adds a gauge read when metrics are scraped (open connections, for instance).
    package func addGauge(_ name: String, help: String, read: @escaping @Sendable () -> Int) {
        readings.withLock { $0.append((name, "gauge", help, read)) }
    }

    /// Adds a gauge with one sample per index, labelled `label="<index>"` (one per event loop, say).
    package func addGauge(
        _ name: String, help: String, label: String, read: @escaping @Sendable () -> [Int]
    ) {
        labelled.withLock {
            $0.append((name, "gauge", help, label, { read().enumerated().map { (String($0.offset), $0.element) } }))
        }
    }

    /// Adds a counter with one sample per label value (`label="<value>"`), kept elsewhere and read
    /// when metrics are scraped; the values must be a closed set.
    package func addCounter(
        _ name: String, help: String, label: String, read: @escaping @Sendable () -> [(String, Int)]
    ) {
        labelled.withLock { $0.append((name, "counter", help, label, read)) }
    }

    /// Adds a counter kept elsewhere and read when metrics are scraped; `name` ends in `_total`.
    package func addCounter(_ name: String, help: String, read: @escaping @Sendable () -> Int) {
        readings.withLock { $0.append((name, "counter", help, read)) }
    }

    /// The exposition text.
    func render() -> String {
        var state = State()
        for shard in shards { state.add(shard.state.withLock { $0 }) }
        var lines = [
            "# HELP library_http_requests_total HTTP requests answered, by route template, method and status.",
            "# TYPE library_http_requests_total counter",
        ]
        for (key, count) in state.requests.sorted(by: {
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
        for (route, histogram) in state.latency.sorted(by: { $0.key < $1.key }) {
            histogram.render("library_http_request_duration_seconds", labels: "route=\"\(route)\"", into: &lines)
        }
        lines.append(
            "# HELP library_sqlite_write_duration_seconds Time of one SQLite write transaction, commit included.")
        lines.append("# TYPE library_sqlite_write_duration_seconds histogram")
        state.transactions.render("library_sqlite_write_duration_seconds", labels: "", into: &lines)
        lines.append(
            "# HELP library_sqlite_writes_committed_total Writes committed; several can share one transaction.")
        lines.append("# TYPE library_sqlite_writes_committed_total counter")
        lines.append("library_sqlite_writes_committed_total \(state.writesCommitted)")
        for reading in readings.withLock({ $0 }) {
            lines.append("# HELP \(reading.name) \(reading.help)")
            lines.append("# TYPE \(reading.name) \(reading.type)")
            lines.append("\(reading.name) \(reading.read())")
        }
        for family in labelled.withLock({ $0 }) {
            lines.append("# HELP \(family.name) \(family.help)")
            lines.append("# TYPE \(family.name) \(family.type)")
            for (label, value) in family.read() {
                lines.append("\(family.name){\(family.label)=\"\(label)\"} \(value)")
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }
}
