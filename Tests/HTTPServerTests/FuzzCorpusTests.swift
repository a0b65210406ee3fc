import Foundation
import FuzzChecks
import Testing

@testable import HTTPServer

/// The fuzz corpus in `Tests/FuzzCorpus/http`: seeded from the parser table, plus every input the
/// fuzzer ever crashed on (`regression-*`). `HTTPParserCheck` must hold on each of them.
@Suite struct FuzzCorpusTests {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("FuzzCorpus/http")

    static func seedName(_ testCase: ParserCase) -> String {
        "table-" + testCase.name.map { $0.isLetter || $0.isNumber ? $0 : "-" }.reduce("") { $0 + String($1) }
    }

    /// `UPDATE_FUZZ_SEEDS=1 swift test --filter FuzzCorpusTests` rewrites the seeds from the table.
    @Test func seeds_HoldEveryParserTableCase() throws {
        let update = ProcessInfo.processInfo.environment["UPDATE_FUZZ_SEEDS"] == "1"
        for testCase in validCases + malformedCases {
            let file = Self.directory.appendingPathComponent(Self.seedName(testCase))
            if update {
                try FileManager.default.createDirectory(at: Self.directory, withIntermediateDirectories: true)
                try Data(testCase.raw.utf8).write(to: file)
            }
            #expect(
                FileManager.default.contents(atPath: file.path) == Data(testCase.raw.utf8), "\(file.lastPathComponent)")
        }
    }

    @Test func parserCheck_HoldsOnTheWholeCorpus() throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: Self.directory.path)
        #expect(files.count >= validCases.count + malformedCases.count)
        for name in files.sorted() {
            let bytes = try #require(
                FileManager.default.contents(atPath: Self.directory.appendingPathComponent(name).path))
            HTTPParserCheck.run(Array(bytes))
        }
    }
}
