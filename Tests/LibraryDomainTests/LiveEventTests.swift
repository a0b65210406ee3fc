import Testing

@testable import LibraryDomain

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
        #expect(copy.coalesced(with: change(5, [])).wire.bytes { [5] } == [5])
    }

    @Test func coalescing_KeepsTheLatestValuePerFieldAndTheLatestId() {
        let merged = change(1, [(.title, .string("a")), (.author, .string("x"))])
            .coalesced(with: change(2, [(.title, .string("b"))]))
            .coalesced(with: change(3, [(.isbn, .null)]))
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
        let merged = membership(1) {
            $0.added = [member("new", "n1")]; $0.removed = ["gone"]
        }
        .coalesced(with: membership(2) { $0.changed = [member("new", "n2"), member("kept", "k2")] })
        .coalesced(
            with: membership(3) {
                $0.removed = ["new"]; $0.added = [member("gone", "g3")]
            })
        let result = merged.membership!
        #expect(result.added.isEmpty, "added then removed: the client never sees it")
        #expect(result.removed.isEmpty, "removed then added back: the client keeps it")
        #expect(result.changed.map(\.id) == ["kept", "gone"])
        #expect(merged.seq == 3)
    }
}
