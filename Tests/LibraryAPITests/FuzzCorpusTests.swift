import Foundation
import LibraryAPI
import Testing

/// The JSON fuzz corpus in `Tests/FuzzCorpus/json`: hand-made seeds plus every input the fuzzer
/// ever crashed on (`regression-*`). `BodyCheck` must hold on each of them.
@Suite struct JSONFuzzCorpusTests {
    @Test func bodyCheck_HoldsOnTheWholeCorpus() throws {
        let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("FuzzCorpus/json")
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        #expect(files.count >= 15)
        for name in files.sorted() {
            let bytes = try #require(FileManager.default.contents(atPath: directory.appendingPathComponent(name).path))
            BodyCheck.run(Array(bytes))
        }
    }
}
