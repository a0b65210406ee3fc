import LibraryDomain
import Testing

@testable import LiveEngine

/// A sink that records what a subscriber sends.
@LiveActor final class RecordingSink: LiveEventSink {
    var sent: [LiveEvent] = []
    var finished = false
    var isReady: Bool { true }
    func send(_ event: LiveEvent) { sent.append(event) }
    func whenReady(_ callback: @escaping @Sendable () -> Void) { callback() }
    func sendPage(_ event: LiveEvent, then next: @escaping @Sendable @LiveActor () -> Void) { next() }
    func keepAlive() {}
    func finish() { finished = true }
}

/// How a collection subscriber treats changes folded on their way to the live side, around the
/// id of its snapshot.
@Suite struct SubscriberFoldTests {
    func added(_ id: String, seq: Int, foldedFrom: Int? = nil) -> LiveEvent {
        var event = LiveEvent(kind: .change, seq: seq, id: "", isCollection: true)
        var membership = LiveEvent.MembershipChange()
        membership.added = [.init(id: id, fields: [(.title, .string(id))])]
        event.membership = membership
        event.foldedFrom = foldedFrom
        return event
    }

    @LiveActor func subscriber() -> (Subscriber, RecordingSink) {
        let sink = RecordingSink()
        let request = SubscriptionRequest(target: .books(BookFilter()), bookFields: [.title], members: true)
        return (Subscriber(id: 1, request: request, sink: sink), sink)
    }

    @Test @LiveActor func heldChanges_AtOrBelowTheSnapshotAreDroppedAndLaterOnesSentOnce() {
        let (subscriber, sink) = subscriber()
        subscriber.holdForSnapshot()
        subscriber.deliver(added("a", seq: 5))
        subscriber.deliver(added("b", seq: 8))
        subscriber.setFloor(6)
        subscriber.deliver(added("c", seq: 6))  // applied late, in the snapshot already
        subscriber.release(after: [])
        #expect(sink.sent.map(\.seq) == [8])
        #expect(sink.sent.first?.membership?.added.map(\.id) == ["b"])
        #expect(!sink.finished)
    }

    @Test @LiveActor func aFoldAcrossTheSnapshotsID_EndsTheStreamInsteadOfSendingWrongState() {
        let (held, heldSink) = subscriber()
        held.holdForSnapshot()
        held.deliver(added("x", seq: 10, foldedFrom: 3))  // held while the id was unknown
        held.setFloor(6)
        #expect(heldSink.finished && heldSink.sent.isEmpty)

        let (live, liveSink) = subscriber()
        live.holdForSnapshot()
        live.setFloor(6)
        live.release(after: [])
        live.deliver(added("y", seq: 12, foldedFrom: 7))  // wholly after the snapshot: sent
        #expect(liveSink.sent.map(\.seq) == [12] && !liveSink.finished)
        live.deliver(added("z", seq: 20, foldedFrom: 4))  // cannot happen after 12, but would straddle
        #expect(liveSink.finished)
    }

    @Test @LiveActor func aCollectionsReplay_IsFoldedIntoOneChange() {
        let (subscriber, sink) = subscriber()
        subscriber.held = Subscriber.Held()
        subscriber.release(after: (1...50).map { added("i\($0)", seq: $0) })
        #expect(sink.sent.count == 1)
        #expect(sink.sent.first?.seq == 50)
        #expect(sink.sent.first?.membership?.added.count == 50)
    }
}
