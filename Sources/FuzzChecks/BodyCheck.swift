import APICore
import EventStreams
import HTTPServer
import JSON
import LibraryAPI

/// The JSON body path's invariants on arbitrary bytes, for the fuzz target (`Sources/library-fuzz`)
/// and its regression tests.
///
/// Bad input may only ever throw an `APIError` that is a 4xx. A document the parser accepts must,
/// written back out, parse to the same value; and every write route's decoder, and those of the
/// stream bodies (`POST /events`, `POST /events/{streamId}`), must take the bytes without trapping.
package enum BodyCheck {
    /// Runs the checks; traps (so the fuzzer reports the input) when one fails.
    package static func run(_ bytes: [UInt8]) {
        if let value = try? JSONParser.parse(bytes) {
            var printed: [UInt8] = []
            write(value, to: &printed)
            let again = try? JSONParser.parse(printed)
            precondition(again == value, "printing and parsing again changed the value")
        }
        let request = HTTPRequest(
            method: "POST", target: "/books", headers: HTTPRequestHeaders([("content-type", "application/json")]),
            body: bytes)
        for route in 0..<7 {
            do throws(APIError) {
                switch route {
                case 0: _ = try BodyDecoding.libraryDraft(request)
                case 1: _ = try BodyDecoding.libraryPatch(request)
                case 2: _ = try BodyDecoding.bookDraft(request)
                case 3: _ = try BodyDecoding.bookDraft(request, pathLibraryID: "3f2a9c1e-8b4d-4e6f-9a1b-2c3d4e5f6a7b")
                case 4: _ = try BodyDecoding.bookPatch(request)
                case 5: _ = try PostedWatches(request)
                default: _ = try WatchChanges(request)
                }
            } catch {
                precondition((400...499).contains(error.status.code), "a body gave status \(error.status.code)")
            }
        }
    }

    private static func write(_ value: JSONValue, to bytes: inout [UInt8]) {
        switch value {
        case .null: bytes += "null".utf8
        case .bool(let flag): bytes += (flag ? "true" : "false").utf8
        case .number(let text): bytes += text.utf8
        case .string(let text): JSONWriter.appendString(text, to: &bytes)
        case .array(let items):
            bytes.append(UInt8(ascii: "["))
            for (offset, item) in items.enumerated() {
                if offset > 0 { bytes.append(UInt8(ascii: ",")) }
                write(item, to: &bytes)
            }
            bytes.append(UInt8(ascii: "]"))
        case .object(let members):
            bytes.append(UInt8(ascii: "{"))
            for (offset, member) in members.enumerated() {
                if offset > 0 { bytes.append(UInt8(ascii: ",")) }
                JSONWriter.appendString(member.key, to: &bytes)
                bytes.append(UInt8(ascii: ":"))
                write(member.value, to: &bytes)
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }
}
