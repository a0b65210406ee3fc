import Foundation
import JSON
import LibraryModel
import Observation

/// The fields of one live model, their observation and the demand their reads make.
///
/// The model's public properties read through here: each read tells Observation (so a SwiftUI
/// `body` or a `withObservationTracking` scope re-runs when that field changes, and only then) and
/// records demand for the field, which the client turns into the stream's watch of the resource.
///
/// A field's value is what the server last said (`confirmed`), unless a write of this client is
/// pending for it (`overlay`, the optimistic value, the newest one set): the stream and the
/// write's answer update `confirmed`; the overlay goes when the last write carrying the field is
/// answered, whatever it says, so a refused write rolls back to the server's newest value, not to
/// a stale copy.
///
/// Writes (a property set, or `update`) queue here: at most one is in flight per model, and
/// values set meanwhile wait in `unsent`, each field's newest value only, for the next one. So
/// typing "Dune" into a bound text field sends at most a few PATCHes, loses no character, and
/// never shows an older value after a newer one.
@MainActor
final class ModelStorage<Field: ResourceField>: Observable {
    private let registrar = ObservationRegistrar()
    let id: UUID
    /// The resource's path, which writes go to.
    let path: String
    weak var client: LibraryClient?
    private(set) var confirmed: [Field: FieldValue] = [:]
    private var overlay: [Field: FieldValue] = [:]
    /// How many times the stream set each field: a write's answer gives way to the stream for a
    /// field the stream set while the write was in flight (the stream's value is the newer, or the
    /// write's own).
    private(set) var streamStamps: [Field: Int] = [:]
    /// The fields some read asked for while the model was held.
    private(set) var demanded: Set<Field> = []
    /// Whether some read asked whether the resource still exists.
    private(set) var existenceDemanded = false
    /// The version the server last reported, for `If-Match`. Bookkeeping: not observed.
    var knownVersion: Int?
    private var deleted = false

    /// While `Changes` asks a key path which field it reads, reads record it here instead.
    private var probing = false
    private var probed: Field?

    /// A queued write: the values it carries and the `update` calls awaiting its outcome.
    struct Write {
        var values: [Field: FieldValue] = [:]
        var waiters: [CheckedContinuation<LibraryClientError?, Never>] = []
    }
    /// Values set since the write in flight was sent: the next write.
    private var unsent = Write()
    /// The write the server has not answered yet.
    private var inFlight: Write?
    private var conflictState: WriteConflict?
    /// Fields written whose answer came while the stream was setting them: the stream's value then
    /// may be older than the write (an echo of this client's earlier write) or newer, so the field
    /// shows the written value until the stream echoes it.
    private var echoes: [Field: FieldValue] = [:]
    private var writeErrorState: LibraryClientError?

    init(id: UUID, path: String, client: LibraryClient?) {
        self.id = id
        self.path = path
        self.client = client
    }

    /// The field's value as the model shows it; the key path `\.[field]` is what observers track.
    subscript(field: Field) -> FieldValue? { overlay[field] ?? confirmed[field] }

    /// A public property's read: observed, demanded, converted.
    func read<T: FieldConvertible>(_ field: Field) -> T {
        if probing {
            probed = field
        } else {
            registrar.access(self, keyPath: \.[field])
            if demanded.insert(field).inserted { client?.demandChanged() }
        }
        return self[field].flatMap(T.init(fieldValue:)) ?? T.placeholder
    }

    /// Whether the server said the resource was deleted. Reading it demands the resource's existence.
    var isDeleted: Bool {
        registrar.access(self, keyPath: \.isDeleted)
        if !existenceDemanded {
            existenceDemanded = true
            client?.demandChanged()
        }
        return deleted
    }

    /// Whether the server said the resource was deleted, read without demanding anything.
    var wasDeleted: Bool { deleted }

    /// Whether the server's state has arrived: a whole representation (a read, or a write's
    /// answer) or its watch's snapshot. Observed.
    var hasLoaded: Bool {
        registrar.access(self, keyPath: \.hasLoaded)
        return loaded
    }

    private var loaded = false

    /// The model's `loadState`: from `isDeleted` (which demands the resource), `hasLoaded` and
    /// the client's connection, each observed.
    var loadState: LoadState {
        if isDeleted { return .deleted }
        if hasLoaded { return .loaded }
        if case .offline(_, let reason)? = client?.connection { return .failed(reason) }
        return .loading
    }

    private func markLoaded() {
        guard !loaded else { return }
        registrar.withMutation(of: self, keyPath: \.hasLoaded) { loaded = true }
    }

    /// Whether the model has a value for every field (it came from a whole representation).
    var isComplete: Bool { Field.allCases.allSatisfy { confirmed[$0] != nil } }

    /// Whether any demand is left to watch (a deleted resource has nothing more to say).
    var watchedFields: [Field]? {
        guard !deleted, existenceDemanded || !demanded.isEmpty else { return nil }
        return Field.allCases.filter { demanded.contains($0) }
    }

    // MARK: Updates

    /// Values from the stream: each field that changes is one mutation its observers see. A
    /// field that shows this client's written value until the stream's echo of it (`echoes`)
    /// shows the stream's values from that echo on (or from a snapshot, which is newer).
    func applyFromStream(_ values: [String: JSONValue], snapshot: Bool = false) {
        for (name, json) in values {
            guard let field = Field(named: name), let value = json.fieldValue else { continue }
            streamStamps[field, default: 0] += 1
            setConfirmed(field, value)
            if let echo = echoes[field], snapshot || echo == value {
                echoes[field] = nil
                if !isWriting(field) { clearOverlay([field]) }
            }
        }
        if let version = values["version"]?.integer { knownVersion = max(knownVersion ?? 0, version) }
        if snapshot { markLoaded() }
    }

    /// A whole representation from an HTTP answer sent when the stream stamps were `stamps`: a
    /// field the stream set since keeps the stream's value (which may be older than the answer,
    /// or newer); the fields it kept are returned.
    @discardableResult
    func applyFromAnswer(_ values: [String: JSONValue], since stamps: [Field: Int]) -> Set<Field> {
        var kept: Set<Field> = []
        for (name, json) in values {
            guard let field = Field(named: name), let value = json.fieldValue else { continue }
            if streamStamps[field, default: 0] == stamps[field, default: 0] {
                setConfirmed(field, value)
            } else {
                kept.insert(field)
            }
        }
        if let version = values["version"]?.integer { knownVersion = max(knownVersion ?? 0, version) }
        markLoaded()
        return kept
    }

    private func setConfirmed(_ field: Field, _ value: FieldValue) {
        guard confirmed[field] != value else { return }
        if overlay[field] != nil {
            confirmed[field] = value  // shown once the write in flight is answered
        } else {
            registrar.withMutation(of: self, keyPath: \.[field]) { confirmed[field] = value }
        }
    }

    /// An optimistic value while a write is in flight.
    func setOverlay(_ values: [Field: FieldValue]) {
        for (field, value) in values where self[field] != value {
            registrar.withMutation(of: self, keyPath: \.[field]) { overlay[field] = value }
        }
        for (field, value) in values { overlay[field] = value }
    }

    /// The write is answered: the fields show the server's values again.
    func clearOverlay(_ fields: some Sequence<Field>) {
        for field in fields {
            guard let shown = overlay[field] else { continue }
            if shown != confirmed[field] {
                registrar.withMutation(of: self, keyPath: \.[field]) { overlay[field] = nil }
            } else {
                overlay[field] = nil
            }
        }
    }

    // MARK: Writes

    /// Whether a value set on the model has not yet been written (in flight, waiting for the one in
    /// flight, or held by a conflict).
    var hasPendingWrites: Bool {
        registrar.access(self, keyPath: \.hasPendingWrites)
        return pendingShown
    }

    private var pendingShown = false
    private var pending: Bool { inFlight != nil || !unsent.values.isEmpty || conflictState != nil }

    /// Tells observers of `hasPendingWrites` when it changed.
    private func showPending() {
        guard pendingShown != pending else { return }
        registrar.withMutation(of: self, keyPath: \.hasPendingWrites) { pendingShown = pending }
    }

    /// The conflict that holds this model's writes, if any.
    var conflict: WriteConflict? {
        registrar.access(self, keyPath: \.conflict)
        return conflictState
    }

    /// Why the latest write was refused (nil once one succeeds).
    var writeError: LibraryClientError? {
        registrar.access(self, keyPath: \.writeError)
        return writeErrorState
    }

    /// A property set: shown at once, written in the next write (`client.sendWrites`).
    func set(_ field: Field, _ value: FieldValue) {
        guard let client else {
            // A scratch model (what `create` fills), with nobody to write it: it just holds the value.
            return registrar.withMutation(of: self, keyPath: \.[field]) { confirmed[field] = value }
        }
        queue([field: value], waiter: nil, client: client)
    }

    /// `update`'s values, written in the next write; `waiter` is resumed with its outcome (at once
    /// with the conflict, while one holds the model's writes: the app resolves it first).
    func queue(
        _ values: [Field: FieldValue], waiter: CheckedContinuation<LibraryClientError?, Never>?,
        client: LibraryClient
    ) {
        if let waiter, let conflict = conflictState {
            let detail = "this model's earlier write meets someone else's change: resolveConflict first"
            return waiter.resume(returning: .conflict(current: conflict.theirs, detail: detail))
        }
        setOverlay(values)
        unsent.values.merge(values) { _, new in new }
        if let waiter { unsent.waiters.append(waiter) }
        showPending()
        if inFlight == nil, conflictState == nil { client.sendWrites(of: self) }
    }

    /// The next write to send, now in flight (nil: nothing to send, or one is in flight already),
    /// with the value the model knew from the server for each of its fields.
    func takeWrite() -> (values: [Field: FieldValue], known: [Field: FieldValue?])? {
        guard inFlight == nil, conflictState == nil, !unsent.values.isEmpty else { return nil }
        let write = unsent
        inFlight = write
        unsent = Write()
        return (write.values, Dictionary(uniqueKeysWithValues: write.values.keys.map { ($0, confirmed[$0]) }))
    }

    /// Whether a write of this client carrying `field` is in flight or queued.
    private func isWriting(_ field: Field) -> Bool { inFlight?.values[field] != nil || unsent.values[field] != nil }

    /// The write in flight was answered: `nil` when it was written, or why not; `unconfirmed`: the
    /// written fields the answer did not set (the stream set them meanwhile). A field whose newer
    /// value waits in `unsent` keeps showing it.
    func finishWrite(_ error: LibraryClientError?, unconfirmed: Set<Field> = []) {
        guard let write = inFlight else { return }
        inFlight = nil
        if error == nil {
            // Shown as written until the stream echoes this write: also when an earlier write's
            // echo is still due, which would otherwise end the overlay with the older value.
            for (field, value) in write.values where unconfirmed.contains(field) || echoes[field] != nil {
                echoes[field] = value
            }
        }
        if case .conflict(let current, _)? = error, write.waiters.isEmpty, unsent.waiters.isEmpty {
            // Held for the app to decide (`resolveConflict`); the model shows its own values meanwhile.
            var mine = write.values
            mine.merge(unsent.values) { _, new in new }
            unsent = Write()
            let conflict = WriteConflict(theirs: current, mine: ResourceState(values: Self.named(mine)))
            registrar.withMutation(of: self, keyPath: \.conflict) { conflictState = conflict }
        } else {
            if case .conflict? = error {
                // An awaited `update` throws the conflict, and the model shows the server's state;
                // so does one queued behind it that had nothing else to write.
                unsent.values = unsent.values.filter { write.values[$0.key] == nil }
                if unsent.values.isEmpty {
                    for waiter in unsent.waiters { waiter.resume(returning: error) }
                    unsent.waiters = []
                }
            }
            clearOverlay(write.values.keys.filter { unsent.values[$0] == nil && echoes[$0] == nil })
            if writeErrorState != error {
                registrar.withMutation(of: self, keyPath: \.writeError) { writeErrorState = error }
            }
        }
        showPending()
        for waiter in write.waiters { waiter.resume(returning: error) }
    }

    /// Ends the conflict: `keepingMine` writes this model's values over the server's (with the
    /// version the conflict read); otherwise the model shows the server's values.
    func resolveConflict(keepingMine: Bool) {
        guard let conflict = conflictState, let client else { return }
        var mine: [Field: FieldValue] = [:]
        for (name, value) in conflict.mine.values { if let field = Field(named: name) { mine[field] = value } }
        registrar.withMutation(of: self, keyPath: \.conflict) { conflictState = nil }
        // Values set since the conflict are newer than either side, and written either way.
        if keepingMine {
            unsent.values.merge(mine) { newer, _ in newer }
        } else {
            clearOverlay(mine.keys.filter { unsent.values[$0] == nil })
        }
        showPending()
        client.sendWrites(of: self)
    }

    private static func named(_ values: [Field: FieldValue]) -> [String: FieldValue] {
        Dictionary(uniqueKeysWithValues: values.map { ($0.name, $1) })
    }

    func markDeleted() {
        guard !deleted else { return }
        registrar.withMutation(of: self, keyPath: \.isDeleted) { deleted = true }
    }

    // MARK: Probing key paths

    /// The field a key path of the model reads, found by reading it with observation off.
    func field<Model, T>(of keyPath: KeyPath<Model, T>, in model: Model) -> Field? {
        probing = true
        probed = nil
        _ = model[keyPath: keyPath]
        probing = false
        return probed
    }
}

/// The members of a library or of a live query: observed as one property, demanded on read.
@MainActor
final class Membership<Member: LiveModel>: Observable {
    private let registrar = ObservationRegistrar()
    weak var client: LibraryClient?
    private(set) var members: [Member] = []
    /// The members' ids, so that a change costs work for what it names, not for every member.
    private var ids: Set<UUID> = []
    private(set) var demanded = false
    private var loaded = false

    init(client: LibraryClient?) { self.client = client }

    func read() -> [Member] {
        registrar.access(self, keyPath: \.members)
        demand()
        return members
    }

    /// Whether the server's list has arrived (an empty list then means no member, not "not yet").
    /// Reading it demands the membership, as reading the members does.
    var isLoaded: Bool {
        registrar.access(self, keyPath: \.isLoaded)
        demand()
        return loaded
    }

    private func demand() {
        guard !demanded else { return }
        demanded = true
        client?.demandChanged()
    }

    /// A snapshot: the members as the server lists them (models are one per id, so `===` compares).
    func replace(with books: [Member]) {
        if !loaded { registrar.withMutation(of: self, keyPath: \.isLoaded) { loaded = true } }
        guard !books.elementsEqual(members, by: ===) else { return }
        registrar.withMutation(of: self, keyPath: \.members) {
            members = books
            ids = Set(books.map(\.id))
        }
    }

    /// A change: members removed, then added at the end (the server's order for new members).
    /// Nothing is observed to change unless a removed id was a member or an added one was not.
    func apply(added: [Member], removed: Set<UUID>) {
        let leaving = removed.intersection(ids)
        var arriving: [Member] = []
        var seen = ids.subtracting(leaving)
        for book in added where seen.insert(book.id).inserted { arriving.append(book) }
        guard !leaving.isEmpty || !arriving.isEmpty else { return }
        registrar.withMutation(of: self, keyPath: \.members) {
            if !leaving.isEmpty { members.removeAll { leaving.contains($0.id) } }
            members.append(contentsOf: arriving)
            ids = seen
        }
    }
}
