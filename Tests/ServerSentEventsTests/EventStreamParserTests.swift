import ServerSentEvents
import Testing

@Suite struct EventStreamParserTests {
    private func parse(_ chunks: [String]) -> [EventStreamItem] {
        var parser = EventStreamParser()
        return chunks.flatMap { parser.feed(Array($0.utf8)) }
    }

    @Test func `data lines join with line feeds and the id persists to later events`() {
        let items = parse(["id: 7\ndata: a\ndata: b\n\ndata: c\n\n"])
        #expect(
            items == [
                .event(ServerSentEvent(data: "a\nb", lastEventId: "7", hasId: true)),
                .event(ServerSentEvent(data: "c", lastEventId: "7", hasId: false)),
            ])
    }

    @Test(arguments: ["\r\n", "\n", "\r"])
    func `every line ending the standard allows ends a line`(_ end: String) {
        let items = parse(["event: change" + end + "data: x" + end + end])
        #expect(items == [.event(ServerSentEvent(type: "change", data: "x"))])
    }

    @Test func `a CRLF split across chunks is one line ending`() {
        let items = parse(["data: x\r", "\n\r", "\n"])
        #expect(items == [.event(ServerSentEvent(data: "x"))])
    }

    @Test func `comments, retry and a leading byte-order mark`() {
        let items = parse(["\u{FEFF}: keep-alive\nretry: 2000\nretry: 2x\n\n"])
        #expect(items == [.comment("keep-alive"), .retry(2000)])
    }

    @Test func `a block without data dispatches nothing and an id with NUL is ignored`() {
        let items = parse(["event: x\n\nid: 1\u{0}2\ndata\n\n"])
        #expect(items == [.event(ServerSentEvent(data: ""))])
    }

    @Test func `a field without a colon and a value without a space`() {
        let items = parse(["data:no space\nevent\n\n"])
        #expect(items == [.event(ServerSentEvent(data: "no space"))])
    }

    @Test func `reset forgets a half-read event and keeps the last id`() {
        var parser = EventStreamParser()
        _ = parser.feed(Array("id: 3\ndata: a\n\ndata: half".utf8))
        parser.reset()
        #expect(parser.feed(Array("data: b\n\n".utf8)) == [.event(ServerSentEvent(data: "b", lastEventId: "3"))])
    }
}
