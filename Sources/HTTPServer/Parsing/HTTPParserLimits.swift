/// Size limits the parser enforces while reading a request.
package struct HTTPParserLimits: Sendable {
    /// The request line and header fields together (431 past it).
    package var maxHeadSize = 40 * 1024
    /// The request line alone (414 past it). Large enough for `/events` with its 100 watches as a
    /// browser writes them (`URLSearchParams`, about 82 bytes a book watch with two fields) plus a
    /// `lastEventId` naming 100 watches (16 bytes each), with room for longer collection watches.
    package var maxRequestLineSize = 32 * 1024
    /// The number of header fields (431 past it).
    package var maxHeaderCount = 100
    /// The decoded body (413 past it).
    package var maxBodySize = 1024 * 1024

    package init() {}
}
