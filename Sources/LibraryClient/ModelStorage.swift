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
/// A field's value is what the server last said (`confirmed`), unless a write of this client is in
/// flight for it (`overlay`, the optimistic value): the stream and the write's answer update
/// `confirmed`; the overlay goes when the answer arrives, whatever it says, so a refused write
/// rolls back to the server's newest value, not to a stale copy.
@MainActor
final class ModelStorage<Field: ResourceField>: Observable {
    private let registrar = ObservationRegistrar()
    let id: UUID
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

    init(id: UUID, client: LibraryClient?) {
        self.id = id
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

    /// Whether the model has a value for every field (it came from a whole representation).
    var isComplete: Bool { Field.allCases.allSatisfy { confirmed[$0] != nil } }

    /// Whether any demand is left to watch (a deleted resource has nothing more to say).
    var watchedFields: [Field]? {
        guard !deleted, existenceDemanded || !demanded.isEmpty else { return nil }
        return Field.allCases.filter { demanded.contains($0) }
    }

    // MARK: Updates

    /// Values from the stream: each field that changes is one mutation its observers see.
    func applyFromStream(_ values: [String: JSONValue]) {
        for (name, json) in values {
            guard let field = Field(named: name), let value = json.fieldValue else { continue }
            streamStamps[field, default: 0] += 1
            setConfirmed(field, value)
        }
        if let version = values["version"]?.integer { knownVersion = max(knownVersion ?? 0, version) }
    }

    /// A whole representation from an HTTP answer sent when the stream stamps were `stamps`: a
    /// field the stream set since keeps the stream's value (newer than the answer, or the same).
    func applyFromAnswer(_ values: [String: JSONValue], since stamps: [Field: Int]) {
        for (name, json) in values {
            guard let field = Field(named: name), let value = json.fieldValue else { continue }
            if streamStamps[field, default: 0] == stamps[field, default: 0] { setConfirmed(field, value) }
        }
        if let version = values["version"]?.integer { knownVersion = max(knownVersion ?? 0, version) }
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
final class Membership: Observable {
    private let registrar = ObservationRegistrar()
    weak var client: LibraryClient?
    private(set) var members: [Book] = []
    /// The members' ids, so that a change costs work for what it names, not for every member.
    private var ids: Set<UUID> = []
    private(set) var demanded = false

    init(client: LibraryClient?) { self.client = client }

    func read() -> [Book] {
        registrar.access(self, keyPath: \.members)
        if !demanded {
            demanded = true
            client?.demandChanged()
        }
        return members
    }

    /// A snapshot: the members as the server lists them (models are one per id, so `===` compares).
    func replace(with books: [Book]) {
        guard !books.elementsEqual(members, by: ===) else { return }
        registrar.withMutation(of: self, keyPath: \.members) {
            members = books
            ids = Set(books.map(\.id))
        }
    }

    /// A change: members removed, then added at the end (the server's order for new members).
    /// Nothing is observed to change unless a removed id was a member or an added one was not.
    func apply(added: [Book], removed: Set<UUID>) {
        let leaving = removed.intersection(ids)
        var arriving: [Book] = []
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
