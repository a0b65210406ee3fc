import LibraryDomain
import Synchronization
import Testing

@testable import LiveEngine

/// A library's load hands its members to `LoadedMembers` a batch at a time, from the reading
/// thread; the box takes each batch whole and moves its records into their models.
@Suite struct LoadedMembersTests {
    /// A value of each field's kind; `named` gives the ones a test tells apart.
    static func value(of descriptor: FieldDescriptor, _ named: [String: FieldValue]) -> FieldValue {
        if let value = named[descriptor.name] { return value }
        if descriptor.nullable { return .null }
        switch descriptor.kind {
        case .identifier, .text: return .string("x")
        case .timestamp: return .string("2026-11-27T00:00:00.000Z")
        case .integer: return .int(1)
        case .boolean: return .bool(true)
        }
    }

    static func book(_ index: Int, in library: String) -> BookRecord {
        let named: [String: FieldValue] = [
            BookField.id.name: .string("book-\(index)"), BookField.libraryId.name: .string(library),
            BookField.title.name: .string("A title long enough to live on the heap, number \(index)"),
        ]
        return BookRecord(seq: 100 + index) { value(of: $0.descriptor, named) }
    }

    @Test @LiveActor func eachBatchIsTakenWhole_AndEveryRecordBecomesItsModel_InOrder() async {
        let library = LibraryRecord(seq: 1) { Self.value(of: $0.descriptor, [LibraryField.id.name: .string("lib")]) }
        let members = LoadedMembers(snapshotOf: nil)
        var first = (0..<3).map { Self.book($0, in: library.id) }
        var second = (3..<5).map { Self.book($0, in: library.id) }
        members.add(&first, seq: 7, expected: 5)
        members.add(&second, seq: 7, expected: 5)
        #expect(first.isEmpty && second.isEmpty)

        await withCheckedContinuation { done in
            members.finish(.success(LoadedState(seq: 7, resource: .library(library, members: [])))) {
                done.resume()
            }
        }
        let (ordered, byID) = members.take()
        let expected = (0..<5).map { Self.book($0, in: library.id) }
        #expect(ordered.map(\.id) == expected.map(\.id))
        #expect(byID.count == 5 && expected.allSatisfy { byID[$0.id]?.id == $0.id })
        for (model, record) in zip(ordered, expected) {
            #expect(BookField.allCases.allSatisfy { model[$0] == record[$0] })
            #expect(model.order == record.seq && model.baseSeq == 7)
        }
    }

    /// Loads five members in two batches read at id 7, encoding rows ahead with a stand-in that
    /// writes each row's index, noting `change` (a change's id) between the batches; returns the
    /// rows the snapshot carries encoded ahead (nil: none) and the rows the encoder was given.
    @LiveActor static func encodedAhead(noting change: Int?) async -> (rows: [UInt8]?, given: [Int]) {
        let library = LibraryRecord(seq: 1) { Self.value(of: $0.descriptor, [LibraryField.id.name: .string("lib")]) }
        let given = Mutex<[Int]>([])
        let members = LoadedMembers(
            snapshotOf: SubscriptionRequest.Shape(libraryFields: [], bookFields: [.title], members: true),
            encodingRows: { _, range, bytes in
                given.withLock { $0.append(contentsOf: range) }
                bytes.append(contentsOf: range.map { UInt8($0) })
            })
        var first = (0..<3).map { Self.book($0, in: library.id) }
        var second = (3..<5).map { Self.book($0, in: library.id) }
        members.add(&first, seq: 7, expected: 5)
        if let change { members.noteChange(seq: change) }
        members.add(&second, seq: 7, expected: 5)
        await withCheckedContinuation { done in
            members.finish(.success(LoadedState(seq: 7, resource: .library(library, members: [])))) {
                done.resume()
            }
        }
        return (members.snapshot?.event.encodedMembers?.take(), given.withLock { $0 })
    }

    /// The first subscriber's rows are encoded as they are read, unless a change past the read's
    /// id arrives meanwhile: that snapshot will not be used, so the rest is not encoded, and the
    /// snapshot carries none encoded ahead. A change at or before the read's id is in the
    /// snapshot already, and changes nothing.
    @Test func rowsAreEncodedAhead_UntilAChangePastTheReadArrives() async {
        let untouched = await Self.encodedAhead(noting: nil)
        #expect(untouched.rows == [0, 1, 2, 3, 4] && untouched.given == [0, 1, 2, 3, 4])
        let seen = await Self.encodedAhead(noting: 7)
        #expect(seen.rows == [0, 1, 2, 3, 4] && seen.given == [0, 1, 2, 3, 4])
        let later = await Self.encodedAhead(noting: 8)
        #expect(later.rows == nil)
        // The first batch may have been encoded before the change was noted; the second never is.
        #expect(later.given == [] || later.given == [0, 1, 2])
    }
}
