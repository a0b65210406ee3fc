import Testing

@testable import HTTPServer

/// The word-at-a-time scans of the head parser agree with their byte-by-byte definitions, on
/// every byte value, at every position and alignment, and on random bytes.
@Suite struct ByteScanningTests {
    @Test func wordTestsAgreeWithTheirDefinitions_ForEveryByteAtEveryPosition() {
        for value in 0...255 {
            let byte = UInt8(value)
            for position in 0..<8 {
                var bytes = [UInt8](repeating: 0x41, count: 8)
                bytes[position] = byte
                let word = bytes.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
                #expect(ByteWords.hasByte(below: 0x20, in: word) == (byte < 0x20))
                #expect(ByteWords.hasByte(below: 14, in: word) == (byte < 14))
                #expect(ByteWords.hasByte(0x7F, in: word) == (byte == 0x7F))
            }
        }
    }

    @Test func scansAgreeWithTheirByteByByteDefinitions_OnRandomHeads() {
        var random = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            let count = Int.random(in: 0..<64, using: &random)
            // Mostly visible characters, with now and then a control character, DEL or obs-text.
            let bytes: [UInt8] = (0..<count).map { _ in
                Int.random(in: 0..<12, using: &random) == 0
                    ? UInt8.random(in: 0...255, using: &random) : UInt8.random(in: 0x20...0x7E, using: &random)
            }
            let start = count == 0 ? 0 : Int.random(in: 0...count, using: &random)
            let slice = bytes[start...]
            #expect(slice.isFieldValue() == slice.allSatisfy(isFieldValueByte), "\(bytes)")
            let limit = Int.random(in: start...count, using: &random)
            let expected = bytes[start..<limit].firstIndex { $0 < 14 } ?? limit
            #expect(bytes.firstControlCharacter(from: start, before: limit) == expected, "\(bytes) \(start) \(limit)")
            #expect(slice.index(of: 13) == slice.firstIndex(of: 13))
            #expect(slice.occurrences(of: 13) == slice.filter { $0 == 13 }.count)
        }
    }
}
