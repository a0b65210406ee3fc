import Glibc
import Logging

/// One line per log event on stderr: `2026-11-21T17:19:25.123Z info request method=GET ...`.
///
/// Each line is written with a single `write(2)`, so lines from different threads never interleave.
struct StderrLogHandler: LogHandler {
    var logLevel: Logger.Level
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?

    init(level: Logger.Level) {
        self.logLevel = level
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var line = "\(LogTimestamp.now()) \(event.level) \(event.message)"
        let merged = metadata.merging(event.metadata ?? [:]) { $1 }
        for (key, value) in merged.sorted(by: { $0.key < $1.key }) {
            let text = "\(value)"
            let quoted = text.isEmpty || text.contains(where: { $0 == " " || $0 == "\"" || $0 == "=" })
            line += " \(key)=" + (quoted ? "\"\(text.replacingQuotes())\"" : text)
        }
        line += "\n"
        var bytes = Array(line.utf8)
        _ = bytes.withUnsafeMutableBytes { write(2, $0.baseAddress, $0.count) }
    }
}

extension String {
    fileprivate func replacingQuotes() -> String {
        var result = ""
        for character in self {
            if character == "\"" || character == "\\" { result.append("\\") }
            if character == "\n" {
                result += "\\n"
                continue
            }
            result.append(character)
        }
        return result
    }
}

/// RFC 3339 UTC time with milliseconds for log lines.
enum LogTimestamp {
    static func now() -> String {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        var seconds = time.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func pad(_ value: Int32, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T"
            + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2)).\(pad(Int32(time.tv_nsec / 1_000_000), 3))Z"
    }
}
