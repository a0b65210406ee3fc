/// What the API layer is told at start.
package struct APIConfiguration: Sendable {
    /// When set, every mutating request needs `Authorization: Bearer <token>`.
    package var apiToken: String?
    /// Origins allowed to call from a browser (`*` for any, or a comma-separated list); nil turns
    /// CORS off.
    package var corsOrigin: String?

    package init(apiToken: String? = nil, corsOrigin: String? = nil) {
        self.apiToken = apiToken
        self.corsOrigin = corsOrigin
    }
}
