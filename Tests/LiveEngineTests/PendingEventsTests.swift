import LibraryDomain
import Testing

@testable import LiveEngine

/// The one rule by which events wait for a slow connection, for a single stream's subscriber and
/// for a multiplexed stream's watch alike.
@Suite struct PendingEventsTests {
    func change(_ seq: Int, _ title: String) -> LiveEvent {
        var event = LiveEvent(kind: .change, seq: seq, id: "b")
        event.bookFields = [(.title, .string(title))]
        return event
    }

    func kinds(_ events: [LiveEvent]) -> [String] { events.map { "\($0.kind.rawValue)@\($0.seq)" } }

    @Test func changesFoldIntoOne_WithTheLatestValueAndId() {
        var pending = PendingEvents()
        #expect(pending.isEmpty)
        for seq in 1...5 { pending.add(change(seq, "t\(seq)")) }
        #expect(pending.folded == 4)
        let events = pending.take()
        #expect(kinds(events) == ["change@5"])
        #expect(events.first?.bookFields.first?.1 == .string("t5"))
        #expect(pending.isEmpty && pending.take().isEmpty)
    }

    @Test func aSnapshotReplacesWhatWaited_AndChangesAfterItFollowIt() {
        var pending = PendingEvents()
        pending.add(change(1, "a"))
        pending.add(LiveEvent(kind: .delete, seq: 2, id: "b"))
        pending.add(LiveEvent(kind: .snapshot, seq: 3, id: "b"))
        pending.add(change(4, "c"))
        #expect(kinds(pending.take()) == ["snapshot@3", "change@4"])
    }

    @Test func aDeleteReplacesTheChangeThatWaited_AndComesLast() {
        var pending = PendingEvents()
        pending.add(LiveEvent(kind: .snapshot, seq: 1, id: "b"))
        pending.add(change(2, "a"))
        pending.add(LiveEvent(kind: .delete, seq: 3, id: "b"))
        #expect(kinds(pending.take()) == ["snapshot@1", "delete@3"])
    }

    @Test func aCollectionChangeThatCancelledOut_IsNotTaken() {
        var pending = PendingEvents()
        var added = LiveEvent(kind: .change, seq: 1, id: "", isCollection: true)
        var joining = LiveEvent.MembershipChange()
        joining.added = [.init(id: "x", fields: [(.title, .string("x"))])]
        added.membership = joining
        var removed = LiveEvent(kind: .change, seq: 2, id: "", isCollection: true)
        var leaving = LiveEvent.MembershipChange()
        leaving.removed = ["x"]
        removed.membership = leaving
        pending.add(added)
        pending.add(removed)
        #expect(!pending.isEmpty)
        #expect(pending.take().isEmpty)
    }

    /// Every subscriber and every watch holds one, so its size is per-subscriber memory at
    /// fan-out: a waiting snapshot or delete is kept out of line (one reference), never as an
    /// inline `LiveEvent?` pair (which took fan-out from 2.0 to 2.6 KiB a subscriber).
    @Test func aWaitingSnapshotOrDeleteIsKeptOutOfLine() {
        let inline = MemoryLayout<FoldedChange?>.size + MemoryLayout<AnyObject?>.size + MemoryLayout<Int>.size
        #expect(MemoryLayout<PendingEvents>.size <= inline)
        #expect(MemoryLayout<PendingEvents>.size < MemoryLayout<FoldedChange?>.size + 2 * MemoryLayout<LiveEvent?>.size)
    }
}
