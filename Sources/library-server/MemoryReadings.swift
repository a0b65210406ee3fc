import CSystemLinux
import Foundation

/// The process's memory as `/metrics` shows it: resident memory split into anonymous pages (the
/// heap, stacks) and file pages (the binary, libraries, SQLite's mapped files), and the heap split
/// into what is in use and what it holds free. One RSS figure hides which of these grew.
enum MemoryReadings {
    /// `RssAnon`, `RssFile` and `RssShmem` of `/proc/self/status`, in bytes.
    static func resident() -> (anon: Int, file: Int, shmem: Int) {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return (0, 0, 0) }
        func kilobytes(_ key: String) -> Int {
            guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(key + ":") }) else { return 0 }
            return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) * 1024
        }
        return (kilobytes("RssAnon"), kilobytes("RssFile"), kilobytes("RssShmem"))
    }

    static var heapInUse: Int { csys_heap_in_use_bytes() }
    static var heapFree: Int { csys_heap_free_bytes() }
}
