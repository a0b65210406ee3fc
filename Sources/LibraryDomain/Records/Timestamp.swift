import Glibc

/// RFC 3339 UTC timestamps with milliseconds (`2026-11-21T17:19:25.123Z`), which sort as text.
package enum Timestamp {
    /// The current time.
    package static func now() -> String {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        var seconds = time.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        let milliseconds = Int(time.tv_nsec / 1_000_000)
        return "\(pad(Int(parts.tm_year) + 1900, 4))-\(pad(Int(parts.tm_mon) + 1, 2))-\(pad(Int(parts.tm_mday), 2))T"
            + "\(pad(Int(parts.tm_hour), 2)):\(pad(Int(parts.tm_min), 2)):\(pad(Int(parts.tm_sec), 2)).\(pad(milliseconds, 3))Z"
    }

    /// The current time in whole seconds since 1970.
    package static func secondsSince1970() -> Int { Int(time(nil)) }

    private static func pad(_ value: Int, _ width: Int) -> String {
        let digits = String(value)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }
}
