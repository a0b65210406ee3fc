/// What the API layer is told at start.
package struct APIConfiguration: Sendable {
    /// When set, every mutating request needs `Authorization: Bearer <token>`.
    package var apiToken: String?
    /// When set, every read, stream and `/metrics` needs a bearer token too: this one or `apiToken`.
    package var readToken: String?
    /// When set (`--jwt-keys`), every data route needs a credential, and a signed token's rights
    /// claim says which libraries its principal may read and write.
    package var signedTokens: SignedTokens?
    /// Origins allowed to call from a browser (`*` for any, or a comma-separated list); nil turns
    /// CORS off.
    package var corsOrigin: String?
    /// The names a request's `Host` header may carry; every host unless configured.
    package var allowedHosts: AllowedHosts
    /// When set, the console's files are read from this folder on each request instead of the copy
    /// embedded at build time: for working on the console without rebuilding.
    package var consoleDirectory: String?

    package init(
        apiToken: String? = nil,
        readToken: String? = nil,
        signedTokens: SignedTokens? = nil,
        corsOrigin: String? = nil,
        allowedHosts: AllowedHosts = AllowedHosts(nil),
        consoleDirectory: String? = nil
    ) {
        self.consoleDirectory = consoleDirectory
        self.apiToken = apiToken
        self.readToken = readToken
        self.signedTokens = signedTokens
        self.corsOrigin = corsOrigin
        self.allowedHosts = allowedHosts
    }
}
