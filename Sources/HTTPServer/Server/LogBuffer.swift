import Glibc

/// One event loop's access-log lines, built as bytes and written with one `write(2)` per loop turn.
///
/// A line costs no allocation once the buffer has grown: the caller appends its fields in place,
/// after a timestamp formatted at most once per millisecond. Loop thread only.
struct LogBuffer {
    /// Past this many bytes the buffer is written at once, before the loop turn ends.
    static let capacity = 64 * 1024

    private var bytes: [UInt8] = []
    /// The tail of a line the reader took only part of; written before anything else, so the
    /// reader never sees half a line followed by another.
    private var carry: [UInt8] = []
    private var stamp = TimestampCache()

    init(capacity: Int = LogBuffer.capacity) {
        bytes.reserveCapacity(capacity)
    }

    var isEmpty: Bool { bytes.isEmpty }

    /// Appends `<timestamp> ` + what `appendRest` writes + a line feed.
    mutating func append(to sink: LogSink, _ appendRest: (inout [UInt8]) -> Void) {
        if bytes.count >= Self.capacity { flush(to: sink) }
        stamp.append(to: &bytes)
        bytes.append(32)
        appendRest(&bytes)
        bytes.append(10)
    }

    /// Writes what is buffered; lines the reader has no room for are dropped and counted.
    mutating func flush(to sink: LogSink) {
        if !carry.isEmpty {
            let written = sink.write(carry, from: 0)
            carry.removeFirst(written)
            if !carry.isEmpty {
                drop(from: 0, to: sink)
                return
            }
        }
        let written = sink.write(bytes, from: 0)
        if written < bytes.count {
            // Keep the rest of a line begun, drop the lines after it.
            let lineEnd =
                written == 0 || bytes[written - 1] == 10 ? written : (bytes[written...].firstIndex(of: 10)! + 1)
            carry.append(contentsOf: bytes[written..<lineEnd])
            drop(from: lineEnd, to: sink)
            return
        }
        bytes.removeAll(keepingCapacity: true)
    }

    private mutating func drop(from start: Int, to sink: LogSink) {
        var lines = 0
        for byte in bytes[start...] where byte == 10 { lines += 1 }
        sink.dropped.add(lines, ordering: .relaxed)
        bytes.removeAll(keepingCapacity: true)
    }
}

/// `2026-11-21T17:19:25.123Z`, formatted again only when the millisecond changes.
struct TimestampCache {
    private var millisecond = -1
    private var second = -1
    private var text = [UInt8](repeating: 0, count: 24)

    mutating func append(to bytes: inout [UInt8]) {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        let now = Int(time.tv_sec) * 1000 + Int(time.tv_nsec) / 1_000_000
        if now != millisecond {
            millisecond = now
            if Int(time.tv_sec) != second {
                second = Int(time.tv_sec)
                var seconds = time.tv_sec
                var parts = tm()
                gmtime_r(&seconds, &parts)
                put(Int(parts.tm_year) + 1900, at: 0, width: 4)
                text[4] = UInt8(ascii: "-")
                put(Int(parts.tm_mon) + 1, at: 5, width: 2)
                text[7] = UInt8(ascii: "-")
                put(Int(parts.tm_mday), at: 8, width: 2)
                text[10] = UInt8(ascii: "T")
                put(Int(parts.tm_hour), at: 11, width: 2)
                text[13] = UInt8(ascii: ":")
                put(Int(parts.tm_min), at: 14, width: 2)
                text[16] = UInt8(ascii: ":")
                put(Int(parts.tm_sec), at: 17, width: 2)
                text[19] = UInt8(ascii: ".")
                text[23] = UInt8(ascii: "Z")
            }
            put(now % 1000, at: 20, width: 3)
        }
        bytes.append(contentsOf: text)
    }

    private mutating func put(_ value: Int, at offset: Int, width: Int) {
        var rest = value
        for index in stride(from: offset + width - 1, through: offset, by: -1) {
            text[index] = UInt8(ascii: "0") + UInt8(rest % 10)
            rest /= 10
        }
    }
}
