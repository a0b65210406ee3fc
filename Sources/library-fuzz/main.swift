import Foundation
import FuzzChecks

// Fuzz targets for the HTTP request parser, the JSON body decoders and the token verifier.
//
//   library-fuzz http|json|jwt FILE...      replays inputs, e.g. a crash the fuzzer saved
//
// Built by scripts/fuzz.sh with `-sanitize=fuzzer,address -D FUZZING`, the same binary is a
// libFuzzer driver: `library-fuzz http|json|jwt [libFuzzer options] [CORPUS...]`. The checks themselves
// are `HTTPParserCheck`, `BodyCheck` and `TokenCheck`; the tests run them over the committed corpus.

typealias Check = @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32

let checks: [String: Check] = [
    "http": { data, count in
        HTTPParserCheck.run(Array(UnsafeBufferPointer(start: data, count: count)))
        return 0
    },
    "json": { data, count in
        BodyCheck.run(Array(UnsafeBufferPointer(start: data, count: count)))
        return 0
    },
    "jwt": { data, count in
        TokenCheck.run(Array(UnsafeBufferPointer(start: data, count: count)))
        return 0
    },
]

var arguments = CommandLine.arguments
guard arguments.count >= 2, let check = checks[arguments[1]] else {
    FileHandle.standardError.write(Data("usage: library-fuzz http|json|jwt FILE...\n".utf8))
    exit(64)
}
arguments.remove(at: 1)

#if FUZZING
    // libFuzzer's own entry point, so that this program keeps its `main` and picks the target.
    @_silgen_name("LLVMFuzzerRunDriver")
    func runDriver(
        _ argc: UnsafeMutablePointer<Int32>,
        _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
        _ callback: Check
    ) -> Int32

    // libFuzzer's runtime also refers to the classic entry point; it runs the selected check.
    nonisolated(unsafe) var selectedCheck = check  // written once here, before the driver starts
    @_cdecl("LLVMFuzzerTestOneInput")
    func testOneInput(_ data: UnsafePointer<UInt8>?, _ count: Int) -> Int32 { selectedCheck(data, count) }

    var cStrings: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
    var argc = Int32(arguments.count)
    exit(
        cStrings.withUnsafeMutableBufferPointer { buffer in
            var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = buffer.baseAddress
            return runDriver(&argc, &argv, check)
        })
#else
    for path in arguments.dropFirst() {
        guard let data = FileManager.default.contents(atPath: path) else {
            FileHandle.standardError.write(Data("library-fuzz: cannot read \(path)\n".utf8))
            exit(66)
        }
        _ = data.withUnsafeBytes { check($0.bindMemory(to: UInt8.self).baseAddress, data.count) }
    }
#endif
