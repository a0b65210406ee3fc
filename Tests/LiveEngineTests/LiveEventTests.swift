import LibraryDomain
import Testing

@testable import LiveEngine

@Suite struct LiveEventTests {
    func change(_ seq: Int, _ fields: [(BookField, FieldValue)]) -> LiveEvent {
        var event = LiveEvent(kind: .change, seq: seq, id: "b")
        event.bookFields = fields
        return event
    }

    @Test func wireForm_IsSharedByCopiesUntilOneIsChanged() {
        let event = change(1, [(.title, .string("a"))])
        let copy = event
        var encodings = 0
        let first = event.wire.bytes {
            encodings += 1
            return [1]
        }
        let second = copy.wire.bytes {
            encodings += 1
            return [2]
        }
        #expect(first == [1] && second == [1] && encodings == 1)
        var later = copy
        later.seq = 2
        #expect(later.wire.bytes { [3] } == [3])
        var other = copy
        other.bookFields = [(.author, .string("x"))]
        #expect(other.wire.bytes { [4] } == [4])
    }

    @Test func coalescing_KeepsTheLatestValuePerFieldAndTheLatestId() {
        var folded = FoldedChange(change(1, [(.title, .string("a")), (.author, .string("x"))]))
        folded.fold(change(2, [(.title, .string("b"))]))
        folded.fold(change(3, [(.isbn, .null)]))
        let merged = folded.event
        #expect(merged.seq == 3)
        #expect(merged.bookFields.map(\.0) == [.title, .author, .isbn])
        #expect(merged.bookFields.map(\.1) == [.string("b"), .string("x"), .null])
    }

    @Test func coalescing_FoldsMembershipSoTheClientEndsUpRight() {
        func membership(_ seq: Int, _ body: (inout LiveEvent.MembershipChange) -> Void) -> LiveEvent {
            var event = LiveEvent(kind: .change, seq: seq, id: "l")
            var change = LiveEvent.MembershipChange()
            body(&change)
            event.membership = change
            return event
        }
        let member = { (id: String, title: String) in LiveEvent.Member(id: id, fields: [(.title, .string(title))]) }
        var folded = FoldedChange(
            membership(1) {
                $0.added = [member("new", "n1")]; $0.removed = ["gone"]
            })
        folded.fold(membership(2) { $0.changed = [member("new", "n2"), member("kept", "k2")] })
        folded.fold(
            membership(3) {
                $0.removed = ["new"]; $0.added = [member("gone", "g3")]
            })
        let merged = folded.event
        let result = merged.membership!
        #expect(result.added.isEmpty, "added then removed: the client never sees it")
        #expect(result.removed.isEmpty, "removed then added back: the client keeps it")
        #expect(result.changed.map(\.id) == ["gone", "kept"], "in the order they first appeared")
        #expect(result.changed.first?.fields.map(\.1) == [.string("g3")])
        #expect(merged.seq == 3)
    }
}
