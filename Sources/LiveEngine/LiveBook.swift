import Dispatch
import LibraryDomain
import Observation
import Synchronization

/// A book that somebody watches, directly or as a member of a watched library, as an observable
/// model.
///
/// Its fields are observed one by one, through `self[field]` (the key path `\.[field]`), and
/// applying a committed change tells Observation of exactly the fields whose values differ, so it
/// reports exactly the fields a write changed. Bookkeeping is `@ObservationIgnored`: touching it
/// never notifies anybody.
@LiveActor
@Observable
package final class LiveBook {
    /// The book's values, and its insertion order (`seq`). Read one field at a time through
    /// `self[field]`; never observed as a whole.
    @ObservationIgnored private var record: BookRecord
    /// The latest change this model already reflects: older ones, still on their way, are skipped.
    @ObservationIgnored var baseSeq: Int
    /// Fields with an Observation tracker waiting for their next change.
    @ObservationIgnored var armed: Set<BookField> = []
    /// Fields changed by the change being applied, not yet published.
    @ObservationIgnored var dirty: Set<BookField> = []
    /// The change that made it a member of its library: it is `added` there, not `changed`.
    @ObservationIgnored var joinedSeq = 0

    /// Nonisolated, so that a library's members can be made off the live actor (`LoadedMembers`).
    nonisolated init(_ record: consuming BookRecord, seq: Int) {
        self.record = record
        baseSeq = seq
    }

    package var id: String { record.id }

    /// Insertion order (the row's `seq`), the order of a library's members.
    var order: Int { record.seq }

    /// One field's value; inside `withObservationTracking`, tracks that field alone.
    subscript(field: BookField) -> FieldValue {
        access(keyPath: Self.paths[field.rawValue])
        return record[field]
    }

    /// The library it belongs to, for the hub's bookkeeping: not tracked.
    var library: String { record.library }

    /// The key path each field is observed by, made once.
    private static let paths = BookField.allCases.map { \LiveBook.[$0] }

    /// Takes the values of `new`, telling Observation of the fields the write set (`fields`, from
    /// the writer's `ChangeItem`) whose values differ: within changes folded on the way to the live
    /// side a field may have been set and set back. No other field is compared.
    func update(_ new: BookRecord, fields: Set<BookField>) {
        let changed = BookField.allCases.filter { $0 != .id && fields.contains($0) && new[$0] != record[$0] }
        var next = new
        next.seq = record.seq  // rows logged before migration 0008 have no insertion order
        if !changed.isEmpty { mutating(changed[...]) { record = next } }
    }

    /// Runs `change` as a mutation of each of `fields`: Observation hears of each one, and of no other.
    private func mutating(_ fields: ArraySlice<BookField>, _ change: () -> Void) {
        guard let field = fields.first else { return change() }
        withMutation(keyPath: Self.paths[field.rawValue]) { mutating(fields.dropFirst(), change) }
    }

    /// Tracks each of `fields` not tracked yet; `changed` hears of the first change of each.
    /// Returns how many trackers it armed.
    @discardableResult
    func track(_ fields: Set<BookField>, changed: @escaping @LiveActor (LiveBook, BookField) -> Void) -> Int {
        var count = 0
        for field in fields where field != .id && !armed.contains(field) {
            armed.insert(field)
            count += 1
            // Unowned, not weak: the tracker lives in this model's own registrar, so it can only
            // fire while the model is alive, and a weak reference would give every model a side
            // table, making each retain of it (a million for a big snapshot) take the slow path.
            trackOnce({ _ = self[field] }) { [unowned self] in
                armed.remove(field)
                changed(self, field)
            }
        }
        return count
    }
}

/// The models of a library's members as a load reads them, made off the live actor while the
/// read goes on: a million of them take about a second to allocate and index, which the live actor
/// would otherwise spend with every other stream waiting, and the read about as long again.
///
/// A box filled on a queue of its own and handed once to the live actor, which `take`s its
/// contents: what it takes is then the only reference to that storage, so the catch-up's first
/// change to the membership does not copy a million entries.
// Used on `queue` until the hand-over, then taken once; `isLarge` is set on the reader's thread
// before the batches it hands over, and read after the last.
final class LoadedMembers: @unchecked Sendable {
    private let queue = DispatchQueue(label: "library.live.load", qos: .userInitiated)
    /// In insertion order, as the read returned them.
    private var ordered: [LiveBook] = []
    private var byID: [String: LiveBook] = [:]
    /// The shape of the first subscriber's snapshot, when it asked for the members, and the
    /// members' part of it.
    private let shape: SubscriptionRequest.Shape?
    private var table: LiveEvent.MemberTable?
    /// The first subscriber's snapshot, exact at the read's id, when it asked for the members.
    private(set) var snapshot: (shape: SubscriptionRequest.Shape, event: LiveEvent)?

    /// Who is told if this load is large (`LiveHub.Observers`): at its first batch, and by
    /// `endLargeLoad` once the models are in place.
    private let largeLoads: LiveHub.LargeLoads?
    /// Whether `largeLoads` was told of the start: set on the reader's thread, read by
    /// `endLargeLoad` once the box has been handed over.
    private var isLarge = false
    /// The id of the newest change concerning the library noted during the load (0: none), set on
    /// the live actor. Past the read's id the snapshot made here will not be used (the library
    /// has moved past it; `LiveHub` applies that change to the models instead), so its rows are
    /// no longer encoded. A change at or before the read's id is in the snapshot already.
    private let newestChange = Atomic<Int>(0)

    /// How the snapshot's rows are encoded as they are read (nil: the snapshot is encoded whole
    /// when sent). A million members' rows take about 0.15 s to encode: here, beside the read,
    /// rather than after it, with the first subscriber waiting.
    private let encodeRows: LiveHub.RowEncoder?
    /// The table's rows encoded so far.
    private var encodedRows: [UInt8] = []

    /// A box for a load whose first subscriber asked for `shape` (nil: no snapshot made here),
    /// encoding its snapshot's rows with `encodeRows` as they are read.
    init(
        snapshotOf shape: SubscriptionRequest.Shape?,
        encodingRows encodeRows: LiveHub.RowEncoder? = nil,
        largeLoads: LiveHub.LargeLoads? = nil
    ) {
        self.shape = shape.flatMap { $0.members ? $0 : nil }
        table = self.shape.map { LiveEvent.memberTable(for: $0, capacity: 0) }
        self.encodeRows = encodeRows
        self.largeLoads = largeLoads
    }

    /// Takes members just read and makes their models, and their part of the snapshot, on the
    /// box's queue; with the first, room for the `expected` members (a million grown a few at a
    /// time rehashed every id and copied every array about twenty times).
    ///
    /// The records are moved into their models, not copied: a copy retains each of a record's
    /// strings here and the batch's end releases them again, atomics on the reading thread's
    /// cache lines, and on one line for the library's id, which every member shares and the
    /// reader retains for each record it makes. With a million members that line went back and
    /// forth between the two cores millions of times, slowing both threads (`perf`: a quarter of
    /// the load's CPU in `swift_retain` and `swift_release`).
    func add(_ records: inout [BookRecord], seq: Int, expected: Int) {
        if !isLarge, let largeLoads, expected >= largeLoads.members {  // on the reader's thread
            isLarge = true
            largeLoads.observe(true)
        }
        let batch = HandedBatch()
        swap(&batch.records, &records)
        queue.async { [self] in
            var records: [BookRecord] = []
            swap(&records, &batch.records)  // this closure's alone now, so changed in place
            if ordered.isEmpty {
                ordered.reserveCapacity(expected)
                byID.reserveCapacity(expected)
                table?.reserveCapacity(expected)
            }
            records.withUnsafeMutableBufferPointer { records in
                for index in records.indices {
                    // Moved out by pointer: even by index, an array's record was copied whole
                    // here, retaining each of its strings.
                    let slot = records.baseAddress! + index
                    let record = slot.move()
                    slot.initialize(to: .vacant)  // what the array frees: nothing
                    table?.append(book: record.id, order: record.seq) { record[$0] }
                    let id = record.id
                    let book = LiveBook(consume record, seq: seq)
                    ordered.append(book)
                    byID[id] = book  // ids are unique
                }
            }
            if isOutdated(readAt: seq) {
                encodedRows = []
            } else if let table, let encodeRows {
                let start = table.count - records.count
                encodeRows(table, start..<table.count, &encodedRows)
                if start == 0 && expected > table.count {
                    // Room for the rest at the size of the first rows, and an eighth more.
                    encodedRows.reserveCapacity(encodedRows.count / max(table.count, 1) * expected * 9 / 8)
                }
            }
        }
    }

    /// Once the read has ended: makes the snapshot of a library that was found, then calls
    /// `completion`, on the box's queue.
    func finish(_ result: Result<LoadedState, StoreError>, then completion: @escaping @Sendable () -> Void) {
        queue.async { [self] in
            defer { completion() }
            guard case .success(let state) = result, case .library(let library, _)? = state.resource else {
                (ordered, byID) = ([], [:])
                return
            }
            if let shape, let table {
                var event = LiveEvent.librarySnapshot(
                    id: library.id, seq: state.seq, shape: shape, fields: { library[$0] }, members: table)
                if encodeRows != nil && !isOutdated(readAt: state.seq) {
                    event.encodedMembers = LiveEvent.EncodedRows(encodedRows)
                }
                snapshot = (shape, event)
            }
            table = nil
            encodedRows = []
        }
    }

    /// Notes a change concerning the library, made at `seq`, that arrived during the load.
    func noteChange(seq: Int) {
        newestChange.max(seq, ordering: .relaxed)
    }

    /// Whether a change past `seq`, the read's id, has been noted: the snapshot read at `seq`
    /// is then not the library's state when the models are attached.
    private func isOutdated(readAt seq: Int) -> Bool {
        newestChange.load(ordering: .relaxed) > seq
    }

    /// Tells `largeLoads` that a large load has ended (on the live actor, once its models are
    /// attached); nothing for another load.
    func endLargeLoad() {
        if isLarge { largeLoads?.observe(false) }
    }

    /// A batch on its way from the reader to the queue, whose records the queue moves out.
    private final class HandedBatch: @unchecked Sendable {  // filled by the reader, then used on the queue alone
        var records: [BookRecord] = []
    }

    /// The models in insertion order and by id; the box is empty afterwards.
    func take() -> (ordered: [LiveBook], byID: [String: LiveBook]) {
        defer {
            ordered = []
            byID = [:]
            snapshot = nil
        }
        return (ordered, byID)
    }
}

extension BookRecord {
    /// A record of empty values, holding no memory of its own: what a slot of a batch keeps once
    /// its record has been moved out.
    fileprivate static let vacant = BookRecord(seq: 0) { field in
        let descriptor = field.descriptor
        if descriptor.nullable { return .null }
        switch descriptor.kind {
        case .identifier, .text, .timestamp: return .string("")
        case .integer: return .int(0)
        case .boolean: return .bool(false)
        }
    }
}
