import Synchronization

/// Checkpoints of a pool's WAL, done mostly off the writer's thread.
///
/// SQLite's own checkpoint runs inside the commit that grows the WAL past 1,000 pages: that write
/// (and every write queued behind it) waits while the WAL is copied into the database file and
/// both are synced. Here the writer only reports the WAL's size; a checkpointer connection on its
/// own thread copies the bulk (`PASSIVE`, so the writer goes on committing meanwhile), and the
/// writer then copies the few pages committed since, so that its next write can start the WAL
/// from the top again and the WAL stays bounded (about 16 MiB; should the copy fall behind, the
/// writer waits for it at four times that).
///
/// Checkpointing every 4,000 pages rather than 1,000 copies a page that changes often once
/// instead of four times; as the writer does not wait for the bulk, that costs no latency.
final class Checkpointer: Sendable {
    private enum Phase {
        case idle
        case copying
        case copied
    }

    private let connection: Confined
    private let walFrames = WALFrames()
    private let phase = Mutex(Phase.idle)
    /// The WAL size, in pages, that starts a checkpoint.
    private let threshold: Int
    /// At most about this many pages are left for the writer to copy.
    private let writerShare = 64
    /// The WAL size, in pages, at which the writer waits for a copy under way rather than let the
    /// WAL grow on: a checkpointer starved of CPU (a busy machine) must not leave it unbounded.
    private var ceiling: Int { threshold * 4 }

    init(path: String, writer: Connection, busyTimeoutMilliseconds: Int32, threshold: Int) throws {
        self.threshold = threshold
        try writer.reportWALSize(to: walFrames)
        connection = Confined(
            try Connection(path: path, role: .checkpointer, busyTimeoutMilliseconds: busyTimeoutMilliseconds),
            label: "sqlite.checkpointer")
    }

    /// Called on the writer's queue after each commit. A checkpoint that fails (a full disk, say)
    /// is tried again after a later commit; until then the WAL keeps every change.
    func afterCommit(on writer: Connection) {
        switch phase.withLock({ $0 }) {
        case .idle where walFrames.count.load(ordering: .relaxed) >= threshold:
            phase.withLock { $0 = .copying }
            connection.async { connection in
                // Writes go on meanwhile, so pass again while a pass leaves much behind: the
                // writer's own pass (below) then has only a few pages to copy.
                for _ in 0..<8 {
                    guard let copied = try? connection.checkpointPassively(),
                        self.walFrames.count.load(ordering: .relaxed) - copied > self.writerShare
                    else { break }
                }
                self.phase.withLock { $0 = .copied }
            }
        case .copied:
            _ = try? writer.checkpointPassively()
            phase.withLock { $0 = .idle }
        case .copying where walFrames.count.load(ordering: .relaxed) >= ceiling:
            // The copy fell behind the writes: the writer waits for it (backpressure, only
            // then), copies what is left, and its next write starts the WAL over.
            _ = try? connection.sync { _ in }
            _ = try? writer.checkpointPassively()
            phase.withLock { $0 = .idle }
        case .idle, .copying:
            break
        }
    }

    func close() {
        connection.close()
    }
}
