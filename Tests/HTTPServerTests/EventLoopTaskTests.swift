import Testing

@testable import HTTPServer

@Suite struct EventLoopTaskTests {
    /// A stream write queued for a loop holds its bytes through a plain pointer. When Swift keeps
    /// the enum's case in the pointer's spare bits instead, a write still queued when a process
    /// exits looks leaked to LeakSanitizer (it failed CI once so).
    @Test func `a queued stream write keeps a plain pointer to its bytes`() {
        let bytes = [UInt8](repeating: 7, count: 300)
        let storage = unsafeBitCast(bytes, to: UInt.self)
        let tasks = [EventLoop.Task.streamWrite(fd: 3, connectionID: 9, bytes: bytes)]
        let words = tasks.withUnsafeBytes { raw in
            (0..<MemoryLayout<EventLoop.Task>.size / 8).map { raw.load(fromByteOffset: $0 * 8, as: UInt.self) }
        }
        #expect(words.contains(storage))
    }
}
