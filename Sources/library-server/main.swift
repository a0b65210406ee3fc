import AccessTokens
import CSystemLinux
import EventStreams
import Foundation
import HTTPServer
import LibraryAPI
import LibraryDomain
import LibraryStorage
import LiveEngine
import Logging

// Signals are taken synchronously by this thread (sigwait), so they are blocked before any other
// thread starts: every thread inherits the mask, and none is interrupted.
var stopSignals = sigset_t()
sigemptyset(&stopSignals)
sigaddset(&stopSignals, SIGTERM)
sigaddset(&stopSignals, SIGINT)
sigaddset(&stopSignals, SIGHUP)  // not a stop: rereads the --jwt-keys file
pthread_sigmask(SIG_BLOCK, &stopSignals, nil)

// glibc gives freed memory back to the system (madvise) as soon as 128 KiB lie free at the top of
// a thread's heap; the SQLite writer's thread frees about that much after every commit, so it paid
// a system call per transaction to take the memory back on the next one. Keep up to 32 MiB.
csys_malloc_trim_threshold(32 << 20)
// glibc gives each thread that contends for the heap an arena of its own, up to 8 per core; every
// thread the dispatch queues start (snapshot pages, replays) can take one, and each arena keeps
// what was freed in it for its own reuse. Over a five-minute run of 100,000-member snapshots that
// kept 1.7 GB of address space free across arenas (`Benchmarks/memory.py`; under 400 MiB with one
// arena per core, heap in use the same; the heap trimmer now gives back what lies free, in every
// arena). One arena per core was too few: a library's load, whose reader makes a million records
// while another thread makes their models, then often shared one arena, and its lock (a futex
// wait and wake per contended call) took a quarter of the CPU and doubled the load (first joins
// of 1,000,000 books between 1.4 and 3.0 s, against 1.3 to 1.5 s with two per core). Four per
// core were too many: under 10,000 writes/s to a watched million-book library the PATCH-to-event
// p99 went from about 50 ms to 190-350 ms (`Benchmarks/live.py --sizes 1000000`, two runs each).
// Two per core. With two per core the load's two threads still get one arena between them now and
// then, and that load takes twice as long (2 of 8 first joins of a million members 2.45 s against
// 1.24 to 1.31 s; `perf` in those: a third of both threads waiting on the arena's lock,
// `__lll_lock_wait_private`; `Benchmarks/profile_join.py`). Eight per core removed the slow loads
// (0 of 14) and doubled the PATCH-to-event p99 under writes at 100,000 books (27.8 and 18.8 ms
// against 12.6 and 12.3 ms, alternating `Benchmarks/live.py --sizes 100000` runs of the two).
csys_malloc_arena_max(Int32(max(2, ProcessInfo.processInfo.activeProcessorCount) * 2))

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("library-server: \(message)\n".utf8))
    exit(1)
}

let configuration: Configuration
do {
    configuration = try Configuration.parse(
        arguments: Array(CommandLine.arguments.dropFirst()),
        environment: ProcessInfo.processInfo.environment
    )
} catch {
    FileHandle.standardError.write(Data("library-server: \(error.description)\n".utf8))
    exit(64)
}
if configuration.showHelp {
    print(Configuration.usage)
    exit(0)
}
// The key file is read before anything starts, so a bad one is one line and a non-zero exit.
let signedTokens = configuration.jwtKeys.map { path in
    do {
        return SignedTokens(
            verifier: TokenVerifier(
                keys: try KeyFile.read(path), audience: configuration.jwtAudience, issuer: configuration.jwtIssuer,
                leeway: configuration.jwtLeeway),
            claim: configuration.jwtClaim)
    } catch {
        fail("--jwt-keys \(path): \(error)")
    }
}
if configuration.checkHealth {
    HealthCheck.run(host: configuration.host, port: configuration.port)
}

let logLevel = configuration.logLevel
LoggingSystem.bootstrap { _ in StderrLogHandler(level: logLevel) }
let logger = Logger(label: "library-server")

let store: any LibraryDatabase
let databaseName = Configuration.redactingPassword(configuration.database)
do {
    if PostgresLibraryStore.isPostgres(configuration.database) {
        store = try PostgresLibraryStore(
            uri: configuration.database, listenURI: configuration.listenDatabase,
            readers: max(4, 2 * HTTPServerConfiguration.coreCount),
            history: configuration.history,
            onGap: { gap in
                // The live models cannot be repaired: stop, so that subscribers reconnect to a
                // replica that can serve them (or to this one, restarted, from a fresh state).
                switch gap {
                case .pruned(let applied, let oldest):
                    logger.critical(
                        "changes this replica missed are no longer in the change log; stopping",
                        metadata: ["applied": "\(applied)", "oldest_kept": "\(oldest)"])
                case .rewound(let applied, let latest):
                    logger.critical(
                        "the database lost changes this replica applied (a failover without synchronous replication?); stopping",
                        metadata: ["applied": "\(applied)", "latest": "\(latest)"])
                }
                exit(70)
            })
    } else {
        store = try SQLiteLibraryStore(
            path: configuration.database, lanes: HTTPServerConfiguration.coreCount, history: configuration.history)
    }
} catch {
    fail("cannot open database \(databaseName): \(error)")
}
for migration in store.appliedMigrationNames {
    logger.notice("applied migration", metadata: ["migration": "\(migration)"])
}

// A large library's load grows the heaps by hundreds of MiB: a mapping at a time, not a page.
let heapGrowth = HeapGrowth()
let heapTrimmer = HeapTrimmer()
let hub = LiveHub.start(
    store: store, heartbeatInterval: configuration.heartbeatInterval,
    observers: LiveHub.Observers(
        wire: EventStreams.wire,
        largeLoads: LiveHub.LargeLoads(from: HeapGrowth.members) { heapGrowth.load(started: $0) },
        largeDrops: LiveHub.LargeDrops(from: HeapTrimmer.largeLibrary) { heapTrimmer.lookSoon() }
    ))
let api = LibraryAPI(
    store: store,
    hub: hub,
    configuration: APIConfiguration(
        apiToken: configuration.apiToken,
        readToken: configuration.readToken,
        signedTokens: signedTokens,
        corsOrigin: configuration.corsOrigin,
        allowedHosts: configuration.allowedHosts.map { AllowedHosts($0) }
            ?? AllowedHosts.defaults(listenHost: configuration.host),
        consoleDirectory: configuration.consoleDirectory
    ),
    logger: logger
)
var serverConfiguration = HTTPServerConfiguration()
serverConfiguration.host = configuration.host
serverConfiguration.port = configuration.port
serverConfiguration.maxConnections = configuration.maxConnections
let server = HTTPServer(configuration: serverConfiguration, responder: api)
api.reportMetrics(of: server)
if server.maxConnections < configuration.maxConnections {
    logger.warning(
        "max-connections lowered to fit the open-file limit (ulimit -n)",
        metadata: [
            "max_connections": "\(server.maxConnections)", "requested": "\(configuration.maxConnections)",
            "open_file_limit": "\(server.descriptorLimit)",
        ])
}

api.metrics.addGauge("library_resident_anon_bytes", help: "Resident anonymous memory (heap, stacks): RssAnon.") {
    MemoryReadings.resident().anon
}
api.metrics.addGauge(
    "library_resident_file_bytes", help: "Resident file-backed memory (binary, libraries, mapped files): RssFile."
) {
    MemoryReadings.resident().file
}
api.metrics.addGauge("library_heap_in_use_bytes", help: "Heap memory handed out now (malloc).") {
    MemoryReadings.heapInUse
}
api.metrics.addGauge("library_heap_free_bytes", help: "Heap memory freed but still held by the process (malloc).") {
    MemoryReadings.heapFree
}
api.metrics.addCounter(
    "library_heap_trims_total",
    help: "Times the heap held over \(HeapTrimmer.threshold >> 20) MiB free in resident pages and was trimmed back "
        + "to the system."
) { heapTrimmer.trims.load(ordering: .relaxed) }

let port: Int
do {
    port = try server.start()
} catch {
    fail("cannot listen: \(error)")
}
let shownHost = configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
// Unbuffered, so a supervisor reading a pipe sees the line at once.
FileHandle.standardOutput.write(Data("listening on http://\(shownHost):\(port)\n".utf8))
logger.notice("started", metadata: ["database": "\(databaseName)", "port": "\(port)"])

var received: Int32 = 0
while sigwait(&stopSignals, &received) == 0, received == SIGHUP {
    guard let signedTokens, let path = configuration.jwtKeys else {
        logger.notice("SIGHUP ignored: no --jwt-keys file to reread")
        continue
    }
    do {
        let keys = try KeyFile.read(path)
        signedTokens.replaceKeys(keys)
        logger.notice("reread the key file", metadata: ["keys": "\(keys.keys.count)", "skipped": "\(keys.skipped)"])
    } catch {
        logger.error("the key file did not parse; the keys in use are kept", metadata: ["error": "\(error)"])
    }
}
logger.notice("stopping", metadata: ["signal": "\(received == SIGTERM ? "SIGTERM" : "SIGINT")"])
server.shutdown(grace: 10)
if let failure = store.close() {
    logger.warning(
        "closing the database failed (SQLite: the WAL checkpoint; it is replayed at the next start)",
        metadata: ["error": "\(failure.detail)"])
}
logger.notice("stopped")
exit(0)
