/// Size limits the parser enforces while reading a request.
package struct HTTPParserLimits: Sendable {
    /// The request line and header fields together (431 past it).
    package var maxHeadSize = 16 * 1024
    /// The request line alone (414 past it).
    package var maxRequestLineSize = 8 * 1024
    /// The number of header fields (431 past it).
    package var maxHeaderCount = 100
    /// The decoded body (413 past it).
    package var maxBodySize = 1024 * 1024

    package init() {}
}
