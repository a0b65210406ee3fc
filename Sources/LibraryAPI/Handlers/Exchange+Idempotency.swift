import APICore
import Digest
import HTTPServer
import LibraryDomain

extension Exchange {
    /// The `Idempotency-Key` of a request: nil when it has none; 400 when it is not 1 to 255
    /// visible ASCII characters, or given twice.
    static func idempotencyKey(_ request: HTTPRequest) throws(APIError) -> String? {
        let values = request.headers.values("idempotency-key")
        guard let key = values.first else { return nil }
        guard values.count == 1 else { throw .badRequest("Idempotency-Key is given more than once.") }
        guard (1...255).contains(key.utf8.count), key.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw .badRequest("Idempotency-Key must be 1 to 255 visible ASCII characters.")
        }
        return key
    }

    /// A `POST` that creates: as `write`, and when the request carries an `Idempotency-Key`, its
    /// answer is kept with the write, in the same transaction.
    ///
    /// A retry with the same key and the same request (method, path, query and body) then gets the first
    /// answer, status, headers and body, and writes nothing, whichever replica it reaches: a
    /// client whose answer was lost (a cut connection, a timeout, a lost answer to `COMMIT`) can
    /// send it again safely. The same key with another request is a 422: it names a different
    /// operation. Refusals (400, 403, 404, 422) are not kept; a retry is judged again. A signed
    /// token's keys are its subject's own.
    func create<T: Sendable>(
        _ resource: String,
        _ work: @escaping @Sendable (LibraryWriter) throws -> T,
        respond: @escaping @Sendable (T) -> HTTPResponse
    ) throws(APIError) {
        guard let given = try Self.idempotencyKey(request) else { return write(resource, work, respond: respond) }
        // Keys are kept per principal: another principal's request with the same key is a new
        // request, and never gets the first one's answer. The static tokens keep the bare key.
        let key = principal.subject.map { "\(SHA256.hex(of: Array($0.utf8))) \(given)" } ?? given
        // The query is part of the request: a retry with another query is another operation.
        let target = request.query.map { "\(request.path)?\($0)" } ?? request.path
        let fingerprint = SHA256.hex(of: Array("\(request.method) \(target)\n".utf8) + request.body)
        write(
            resource,
            { writer -> HTTPResponse in
                if let kept = try writer.rememberedAnswer(forKey: key) {
                    guard kept.fingerprint == fingerprint else {
                        throw StoreError(
                            .invalid([
                                FieldError(
                                    "Idempotency-Key",
                                    "was first sent with another request (method, path or body); a new request needs a new key"
                                )
                            ]))
                    }
                    return HTTPResponse(
                        status: HTTPStatus(kept.status, kept.status == 201 ? "Created" : "OK"),
                        headers: HTTPHeaders(kept.headers), body: kept.body)
                }
                let response = respond(try work(writer))
                try writer.remember(
                    RememberedAnswer(
                        fingerprint: fingerprint, status: response.status.code, headers: Array(response.headers),
                        body: response.body),
                    forKey: key)
                return response
            },
            respond: { $0 })
    }
}
