import APICore
import JSON
import LibraryDomain
import LiveEngine
import ServerSentEvents

/// The one encoder of the server's event streams, for every stream kind: a resource's or a
/// collection's own stream (`GET /books/{id}/events`, `/books/events`, …) and the frames of a
/// multiplexed one (`/events`). The framing itself (`retry`, keep-alive comments, `event:`, `id:`
/// and `data:` lines) is `ServerSentEvents.EventStreamFraming`'s; this adds the JSON each kind
/// carries.
///
/// A stream of its own sends `event:`, `id:` and one `data:` line of JSON per event; a
/// collection's snapshot as pages of `data:` lines, one item each, whose id comes with the last.
/// A multiplexed stream sends frames: one event (no `event:` line) whose data is a JSON array of
/// entries, one `data:` line each (`{"watch":…,"event":…,"data":…}`), and whose id
/// (`<seq>.<tag>`) comes last.
enum EventEncoding {
    /// What every stream says first: the reconnection time.
    static let opening = EventStreamFraming.retry

    /// A comment that keeps a silent stream open.
    static let keepAlive = EventStreamFraming.keepAlive

    /// The last event of a stream whose credential has expired. It has no id, so a client that
    /// reconnects with a new token resumes from the last event it had, losing nothing.
    static let expired = Array(
        "event: expired\ndata: {\"detail\":\"The stream's credential has expired; reconnect with a new one.\"}\n\n".utf8
    )

    /// The data of a watch's `revoked` entry: the stream's new credential may no longer read it.
    static let revoked = Array(
        #"{"detail":"The stream's credential no longer reads this; the watch has ended."}"#.utf8)

    /// An event of a stream of its own.
    static func encode(_ event: LiveEvent) -> [UInt8] {
        // The data written after the head in place: a snapshot's 70 MB are not copied again.
        var json = JSONWriter(after: EventStreamFraming.eventHead(kind: event.kind.rawValue, id: String(event.seq)))
        write(event, to: &json)
        return json.finish(with: EventStreamFraming.eventEnd)
    }

    /// An event of a stream of its own in pieces, written one after another: a snapshot whose rows
    /// were encoded ahead (`LiveEvent.encodedMembers`) is its head, those rows as they are (70 MB
    /// for a million members, not copied again) and its end; any other event is one piece.
    static func pieces(_ event: LiveEvent) -> [[UInt8]] {
        guard event.members != nil, let rows = event.encodedMembers?.take() else { return [encode(event)] }
        var json = JSONWriter(after: EventStreamFraming.eventHead(kind: event.kind.rawValue, id: String(event.seq)))
        let rowsAt = write(event, to: &json, rowsApart: true) ?? 0
        let shell = json.finish(with: EventStreamFraming.eventEnd)
        return [Array(shell[..<rowsAt]), rows, Array(shell[rowsAt...])]
    }

    /// The JSON an event carries (for a collection's snapshot page, see `page`).
    static func data(_ event: LiveEvent) -> [UInt8] {
        var json = JSONWriter()
        write(event, to: &json)
        return json.bytes
    }

    /// Writes the event's JSON. With `rowsApart`, a snapshot's members' brackets are written empty,
    /// and where their rows go between them is returned (`pieces`).
    @discardableResult
    private static func write(_ event: LiveEvent, to json: inout JSONWriter, rowsApart: Bool = false) -> Int? {
        var rowsAt: Int?
        json.beginObject()
        if !event.isCollection {
            json.key("id")
            json.string(event.id)
        }
        for (field, value) in event.libraryFields {
            json.key(bytes: JSONKeys.library[field.rawValue])
            json.value(value)
        }
        for (field, value) in event.bookFields {
            json.key(bytes: JSONKeys.book[field.rawValue])
            json.value(value)
        }
        if let members = event.members {
            json.key(event.isCollection ? "items" : "books")
            if rowsApart {
                json.raw { bytes in
                    bytes.append(UInt8(ascii: "["))
                    rowsAt = bytes.count
                    bytes.append(UInt8(ascii: "]"))
                }
            } else if let rows = event.encodedMembers?.take() {
                json.raw { bytes in
                    bytes.append(UInt8(ascii: "["))
                    bytes.append(contentsOf: rows)
                    bytes.append(UInt8(ascii: "]"))
                }
            } else {
                json.members(members)
            }
        }
        if let membership = event.membership {
            if !event.isCollection {
                json.key("books")
                json.beginObject()
            }
            if !membership.added.isEmpty {
                json.key("added")
                json.beginArray()
                membership.added.forEach { json.member($0) }
                json.endArray()
            }
            if !membership.removed.isEmpty {
                json.key("removed")
                json.beginArray()
                membership.removed.forEach { json.string($0) }
                json.endArray()
            }
            if !membership.changed.isEmpty {
                json.key("changed")
                json.beginArray()
                membership.changed.forEach { json.member($0) }
                json.endArray()
            }
            if !event.isCollection { json.endObject() }
        }
        json.endObject()
        return rowsAt
    }

    /// One page of a collection's snapshot on a stream of its own: the first page opens the
    /// `snapshot` event and its `items`, each item is a `data:` line (the lines join into one JSON
    /// document), and the last closes them and gives the event its id.
    static func page(_ event: LiveEvent) -> [UInt8] {
        var bytes: [UInt8] = []
        if event.page?.isFirst == true { bytes += EventStreamFraming.eventLine(LiveEvent.Kind.snapshot.rawValue) }
        bytes += pageItems(event, opening: EventStreamFraming.dataLine(Array(#"{"items":["#.utf8)))
        if event.page?.isLast == true {
            bytes += EventStreamFraming.dataLine(Array("]}".utf8)) + EventStreamFraming.idLine(String(event.seq))
            bytes.append(EventStreamFraming.lineEnd)
        }
        return bytes
    }

    /// A page's items as `data:` lines, after `opening` on the first page.
    static func pageItems(_ event: LiveEvent, opening: [UInt8]) -> [UInt8] {
        guard let members = event.members else { return [] }
        var bytes: [UInt8] = []
        let first = event.page?.isFirst == true
        if first { bytes += opening }
        let keys = JSONWriter.columnKeys(members)
        for index in 0..<members.count {
            bytes += EventStreamFraming.dataPrefix
            if !(first && index == 0) { bytes.append(UInt8(ascii: ",")) }
            JSONWriter.appendMember(members, index, keys: keys, to: &bytes)
            bytes.append(EventStreamFraming.lineEnd)
        }
        return bytes
    }

    // MARK: Multiplexed frames

    /// The start of a frame's entry, up to its `data` value: `data: [` when it opens the frame,
    /// else `data: ,`, then the watch and the kind.
    static func entryStart(opensFrame: Bool, watchJSON: [UInt8], kind: String) -> [UInt8] {
        var bytes = EventStreamFraming.dataPrefix
        bytes.append(UInt8(ascii: opensFrame ? "[" : ","))
        bytes += Array(#"{"watch":"#.utf8) + watchJSON
        bytes += Array(#","event":""#.utf8) + Array(kind.utf8) + Array(#"","data":"#.utf8)
        return bytes
    }

    /// The end of an entry, after its `data` value.
    static let entryEnd = Array("}".utf8) + [EventStreamFraming.lineEnd]

    /// What follows a snapshot entry's start on a collection's first page: its `items`, opened.
    static let entryItemsStart = Array(#"{"items":["#.utf8) + [EventStreamFraming.lineEnd]

    /// The end of a snapshot entry on a collection's last page: its `items`, its data and the entry.
    static let entryItemsEnd = EventStreamFraming.dataLine(Array("]}}".utf8))

    /// The end of a frame: its array closed, and its id (`seq`, then `.` and the tag when there is one).
    static func frameEnd(seq: Int, tag: String) -> [UInt8] {
        var bytes = EventStreamFraming.dataLine(Array("]".utf8))
        bytes += EventStreamFraming.idLine(tag.isEmpty ? String(seq) : "\(seq).\(tag)")
        bytes.append(EventStreamFraming.lineEnd)
        return bytes
    }
}

extension JSONWriter {
    /// A snapshot's table as an array of members, written row after row straight into the bytes:
    /// the path of a million members (about 70 MB).
    mutating func members(_ table: LiveEvent.MemberTable) {
        raw { bytes in
            let start = bytes.count
            bytes.append(UInt8(ascii: "["))
            let first = min(256, table.count)
            Self.appendRows(table, 0..<first, to: &bytes)
            if table.count > 4_096 {
                // Room for the rest at the size of the first rows (and an eighth more), so the
                // bytes are not copied each time they double.
                let row = (bytes.count - start) / first
                bytes.reserveCapacity(bytes.count + row * (table.count - first) * 9 / 8)
            }
            Self.appendRows(table, first..<table.count, to: &bytes)
            bytes.append(UInt8(ascii: "]"))
        }
    }

    /// Rows `range` of a table, each after a comma but the first row: what `members` writes
    /// between its brackets, and what a library's load encodes ahead (`LiveEvent.encodedMembers`).
    static func appendRows(_ table: LiveEvent.MemberTable, _ range: Range<Int>, to bytes: inout [UInt8]) {
        let keys = columnKeys(table)
        for index in range {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            appendMember(table, index, keys: keys, to: &bytes)
        }
    }

    /// The keys of a table's columns, each after the comma before it: made once per run of rows.
    static func columnKeys(_ table: LiveEvent.MemberTable) -> [[UInt8]] {
        table.fields.map { [UInt8(ascii: ",")] + JSONKeys.key($0) }
    }

    /// Member `index` of a table as a JSON object, with the keys `columnKeys` made.
    static func appendMember(_ table: LiveEvent.MemberTable, _ index: Int, keys: [[UInt8]], to bytes: inout [UInt8]) {
        bytes.append(contentsOf: JSONKeys.memberStart)
        appendString(table.ids[index], to: &bytes)
        let first = index * keys.count
        for column in 0..<keys.count {
            bytes.append(contentsOf: keys[column])
            append(table.values[first + column], to: &bytes)
        }
        bytes.append(UInt8(ascii: "}"))
    }

    mutating func member(_ member: LiveEvent.Member) {
        beginObject()
        key("id")
        string(member.id)
        for (field, value) in member.libraryFields {
            key(bytes: JSONKeys.library[field.rawValue])
            self.value(value)
        }
        for (field, value) in member.fields {
            key(bytes: JSONKeys.book[field.rawValue])
            self.value(value)
        }
        endObject()
    }
}
