import Foundation  // reading a development copy of the console from disk (`--console-directory`)
import HTTPServer

/// The browser console's files: `index.html` at `/`, the rest at `/console/NAME`.
///
/// They are embedded at build time (`Sources/LibraryAPI/Console`, by the EmbedFiles plugin), so the
/// binary serves them with nothing on disk and nothing fetched from elsewhere. While the console is
/// being worked on, `--console-directory` makes the server read them from a folder on each request
/// instead, so an edit shows on reload without a rebuild; that read blocks an event loop for a small
/// file, which is fine for a development server and is why the flag is not for production.
package struct ConsoleFiles: Sendable {
    /// One file as served: its media type, bytes and strong entity tag.
    struct File: Sendable {
        let contentType: String
        let body: [UInt8]
        let entityTag: String
    }

    /// The page's policy: scripts, styles and requests from this origin only, no inline script or
    /// style, no plugins, no framing, no form posts elsewhere.
    static let contentSecurityPolicy =
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
        + "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

    private let embedded: [String: File]
    private let directory: String?

    /// The embedded files, or those of `directory` when it is given.
    package init(directory: String? = nil) {
        var embedded: [String: File] = [:]
        for (name, contents) in EmbeddedConsole.files {
            guard let file = Self.file(named: name, bytes: Array(contents.utf8)) else { continue }
            embedded[name] = file
        }
        self.embedded = embedded
        self.directory = directory
    }

    /// The file called `name`, or nil when there is none (or the name could leave the folder).
    func file(named name: String) -> File? {
        guard Self.isPlainName(name) else { return nil }
        guard let directory else { return embedded[name] }
        guard let data = FileManager.default.contents(atPath: directory + "/" + name) else { return nil }
        return Self.file(named: name, bytes: Array(data))
    }

    private static func file(named name: String, bytes: [UInt8]) -> File? {
        guard let contentType = contentType(of: name) else { return nil }
        return File(contentType: contentType, body: bytes, entityTag: entityTag(of: bytes))
    }

    /// A name of the folder itself: letters, digits, `-`, `_` and one `.` before a known extension;
    /// no `/`, no `..`, no hidden file.
    static func isPlainName(_ name: String) -> Bool {
        guard let first = name.utf8.first, first != UInt8(ascii: "."), name.utf8.count <= 64 else { return false }
        guard contentType(of: name) != nil else { return false }
        return name.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."):
                true
            default: false
            }
        } && !name.contains("..")
    }

    /// The media types the console uses; any other file is not served.
    static func contentType(of name: String) -> String? {
        if name.hasSuffix(".html") { return "text/html; charset=utf-8" }
        if name.hasSuffix(".js") { return "text/javascript; charset=utf-8" }
        if name.hasSuffix(".css") { return "text/css; charset=utf-8" }
        if name.hasSuffix(".svg") { return "image/svg+xml; charset=utf-8" }
        return nil
    }

    /// A strong tag from the bytes (64-bit FNV-1a): it changes whenever the file does, so a browser
    /// revalidates with `If-None-Match` and gets a 304 for a file it already has.
    private static func entityTag(of bytes: [UInt8]) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
        }
        let hex = String(hash, radix: 16)
        return "\"" + String(repeating: "0", count: 16 - hex.count) + hex + "\""
    }
}
