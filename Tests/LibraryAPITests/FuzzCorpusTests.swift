import Foundation
import FuzzChecks
import JSON
import Testing

@testable import LibraryAPI

/// The JSON fuzz corpus in `Tests/FuzzCorpus/json`: hand-made seeds plus every input the fuzzer
/// ever crashed on (`regression-*`). `BodyCheck` must hold on each of them.
@Suite struct JSONFuzzCorpusTests {
    /// Every file of `Tests/FuzzCorpus/<target>`, by name.
    static func corpus(_ target: String) throws -> [String: [UInt8]] {
        let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("FuzzCorpus/\(target)")
        var files: [String: [UInt8]] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: directory.path) {
            files[name] = Array(
                try #require(FileManager.default.contents(atPath: directory.appendingPathComponent(name).path)))
        }
        return files
    }

    @Test func bodyCheck_HoldsOnTheWholeCorpus() throws {
        let files = try Self.corpus("json")
        #expect(files.count >= 15)
        for name in files.keys.sorted() { BodyCheck.run(files[name]!) }
    }
}

/// The token fuzz corpus in `Tests/FuzzCorpus/jwt`: tokens and key sets, hand-made, plus every
/// input the fuzzer ever crashed on. `TokenCheck` must hold on each of them; the valid seed must
/// verify, so the fuzzer starts from inputs that reach the claims.
@Suite struct TokenFuzzCorpusTests {
    @Test func tokenCheck_HoldsOnTheWholeCorpus() throws {
        let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("FuzzCorpus/jwt")
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        #expect(files.count >= 5)
        for name in files.sorted() {
            let bytes = try #require(FileManager.default.contents(atPath: directory.appendingPathComponent(name).path))
            TokenCheck.run(Array(bytes))
        }
        let valid = try #require(
            FileManager.default.contents(atPath: directory.appendingPathComponent("valid-hs256").path))
        #expect(TokenCheck.verifies(Array(valid)))
    }
}

@Suite struct JSONWriterTests {
    @Test func strings_RoundTripWithEveryEscape() throws {
        let text = "plain \"quoted\" back\\slash\n\r\t\u{01}\u{1F}é😀/end"
        var json = JSONWriter()
        json.string(text)
        #expect(
            String(decoding: json.bytes, as: UTF8.self)
                == #""plain \"quoted\" back\\slash\n\r\t\u0001\u001fé😀/end""#)
        #expect(try JSONParser.parse(json.bytes) == .string(text))
    }

    /// A parsed value written back is the same text, members in their order and numbers as they
    /// were written (how the Swift client writes its request bodies).
    @Test func parsedValues_AreWrittenBackAsTheSameText() throws {
        let text = #"{"b":[1,-2.5e3,true,null,"x/y"],"a":{},"c":[],"d":{"e":0}}"#
        let value = try JSONParser.parse(Array(text.utf8))
        var json = JSONWriter()
        json.value(value)
        #expect(String(decoding: json.bytes, as: UTF8.self) == text)
        #expect(value["b"]?.array?.count == 5 && value["d"]?["e"]?.integer == 0 && value["z"] == nil)
        #expect(value.members?.keys.sorted() == ["a", "b", "c", "d"] && value["b"]?.array?.first?.string == nil)
    }
}
