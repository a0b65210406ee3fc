import Foundation
import JSON
import LibraryDomain
import TestSupport
import Testing

@testable import EventStreams
@testable import LiveEngine

/// The fast paths of event encoding: strings checked eight bytes at a time, integers written
/// without a string, a snapshot's table written row after row. Each must write what the plain
/// path would, whatever the input.
@Suite struct EventEncodingTests {
    /// Characters that need an escape, others that do not, and multi-byte ones, at every position.
    static let alphabet: [Character] = [
        "a", "Z", "0", " ", "\"", "\\", "\n", "\t", "\u{01}", "\u{1F}", "é", "€", "𝄞", "/",
    ]

    static func decoded(_ bytes: [UInt8]) throws -> Any {
        try JSONSerialization.jsonObject(with: Foundation.Data(bytes), options: [.fragmentsAllowed])
    }

    @Test func strings_RoundTripWhateverTheirEscapesAndWhereTheyFall() throws {
        var random = SeededGenerator(state: 42)
        for _ in 0..<5_000 {
            let length = Int.random(in: 0...40, using: &random)
            let text = String((0..<length).map { _ in Self.alphabet.randomElement(using: &random)! })
            var bytes: [UInt8] = []
            JSONWriter.appendString(text, to: &bytes)
            #expect(try Self.decoded(bytes) as? String == text, "\(text.debugDescription)")
        }
        // A word of plain bytes, then one that needs an escape in each of its eight places.
        for place in 0..<8 {
            for special in ["\"", "\\", "\u{00}", "\u{1F}"] {
                var text = Array(repeating: "x", count: 16)
                text[8 + place] = special
                var bytes: [UInt8] = []
                JSONWriter.appendString(text.joined(), to: &bytes)
                #expect(try Self.decoded(bytes) as? String == text.joined())
            }
        }
        // Bytes of 0x20 and up that are neither a quote nor a backslash are never escaped.
        let plain = String(decoding: (0x20...0x7E).filter { $0 != 0x22 && $0 != 0x5C }, as: UTF8.self) + "héllo€"
        var bytes: [UInt8] = []
        JSONWriter.appendString(plain, to: &bytes)
        #expect(bytes == Array("\"\(plain)\"".utf8))
    }

    @Test func integers_AreWrittenAsDecimal() {
        var random = SeededGenerator(state: 7)
        let values =
            [0, 1, -1, 9, 10, -10, 99, 100, Int.max, Int.min, Int.max - 1, Int.min + 1]
            + (0..<1_000).map { _ in
                Int.random(in: Int.min...Int.max, using: &random) >> Int.random(in: 0...63, using: &random)
            }
        for value in values {
            var bytes: [UInt8] = []
            JSONWriter.appendInt(value, to: &bytes)
            #expect(String(decoding: bytes, as: UTF8.self) == String(value))
        }
    }

    @Test func aSnapshotsTable_IsWrittenAsEachMemberWouldBe() throws {
        var random = SeededGenerator(state: 3)
        let fields: [BookField] = [.title, .author, .isbn, .publishedYear, .available]
        for count in [0, 1, 300, 5_000] {  // past the row whose size reserves room for the rest
            var books: [BookRecord] = []
            for index in 0..<count {
                let title = String(
                    (0..<Int.random(in: 1...30, using: &random)).map { _ in
                        Self.alphabet.randomElement(using: &random)!
                    })
                books.append(
                    BookRecord(seq: index + 1) { field in
                        switch field {
                        case .id: .string("id-\(index)")
                        case .title: .string(title)
                        case .author: .string("A\"\(index)")
                        case .publishedYear: .int(index * 37 - 1_000)
                        case .available: .bool(index % 2 == 0)
                        case .libraryId: .string("lib")
                        case .isbn: index % 3 == 0 ? .null : .string("978-\(index)")
                        case .version: .int(1)
                        case .createdAt, .updatedAt: .string("2026-11-27T10:00:00Z")
                        }
                    })
            }
            var table = LiveEvent.MemberTable(.books(fields), capacity: count)
            table.append(books: books, id: \.id, order: \.seq) { $0[$1] }
            var event = LiveEvent(kind: .snapshot, seq: 9, id: "lib")
            event.members = table

            let encoded = EventEncoding.encode(event)
            let text = String(decoding: encoded, as: UTF8.self)
            #expect(text.hasPrefix("event: snapshot\nid: 9\ndata: ") && text.hasSuffix("}\n\n"))
            let data = Array(encoded.dropFirst("event: snapshot\nid: 9\ndata: ".utf8.count).dropLast(2))
            #expect(data == EventEncoding.data(event))
            // Each member as the writer of a change's members writes it.
            var expected: [UInt8] = Array(#"{"id":"lib","books":["#.utf8)
            for index in 0..<count {
                var json = JSONWriter()
                json.member(LiveEvent.Member(id: table.ids[index], fields: Array(zip(fields, table.values(of: index)))))
                if index > 0 { expected.append(UInt8(ascii: ",")) }
                expected += json.bytes
            }
            expected += Array("]}".utf8)
            #expect(data == expected)
            // The same rows encoded ahead, a batch at a time as a library's load reads them, and
            // handed to the encoder: the same bytes.
            var rows: [UInt8] = []
            var start = 0
            while start < count {
                let end = min(count, start + Int.random(in: 1...700, using: &random))
                JSONWriter.appendRows(table, start..<end, to: &rows)
                start = end
            }
            var ahead = event
            ahead.encodedMembers = LiveEvent.EncodedRows(rows)
            #expect(EventEncoding.encode(ahead) == encoded)
            #expect(ahead.encodedMembers?.take() == nil)  // taken by the first encoding
            #expect(EventEncoding.data(ahead) == data)  // the table's, then
            ahead.encodedMembers = LiveEvent.EncodedRows(rows)
            #expect(EventEncoding.data(ahead) == data)
            // In pieces, for a stream of its own: the rows between the head and the end, as they are.
            ahead.encodedMembers = LiveEvent.EncodedRows(rows)
            let pieces = EventEncoding.pieces(ahead)
            #expect(pieces.count == 3 && pieces[1] == rows)
            #expect(Array(pieces.joined()) == encoded)
            #expect(EventEncoding.pieces(ahead) == [encoded])  // taken: one piece, from the table
            ahead.encodedMembers = LiveEvent.EncodedRows(rows)
            ahead.members = table  // rows encoded ahead never outlive the table they were made of
            #expect(ahead.encodedMembers == nil)
            let members = try #require((try Self.decoded(data) as? [String: Any])?["books"] as? [[String: Any]])
            #expect(members.count == count)
            for (member, book) in zip(members, books) {
                #expect(member["title"] as? String == book[.title].string)
                #expect(member["publishedYear"] as? Int == book[.publishedYear].int)
            }
        }
    }
}
