import Dispatch
import Foundation
import LibraryDomain
import Synchronization
import TestSupport
import Testing

/// Many clients writing the same books at once: every write is applied exactly once, in some
/// serial order, and the streams end at the state the database holds. On PostgreSQL this is what
/// drives the writer's batches (several writes per transaction, fast paths pipelined).
@Suite struct ConcurrentWritesTests {
    let live = try! LiveServer()

    @Test func concurrentPatches_AreEachAppliedOnceInASerialOrder() throws {
        let library = try live.createLibrary()
        let books = try (0..<4).map { try live.createBook(in: library, title: "b\($0)") }
        let streams = try books.map { try live.events("/books/\($0)/events?fields=title,version") }
        for stream in streams { _ = try #require(try stream.next()) }

        struct Outcome: Sendable {
            let book: Int
            let title: String
            let status: Int
            let version: Int?
        }
        let outcomes = Mutex<[Outcome]>([])
        let failures = Mutex<[String]>([])
        let port = live.port
        DispatchQueue.concurrentPerform(iterations: 8) { client in
            do {
                let connection = try TestConnection(port: port)
                var random = SeededGenerator(state: UInt64(client + 1) &* 0x9E37_79B9_7F4A_7C15)
                for step in 0..<40 {
                    let book = Int.random(in: 0..<books.count, using: &random)
                    // Every title is new, so a PATCH that succeeds is a change.
                    let title = "c\(client)-\(step)"
                    var headers: [String: String] = [:]
                    if step % 5 == 4 { headers["If-Match"] = "\"\(Int.random(in: 1...20, using: &random))\"" }
                    let response = try connection.request(
                        "PATCH", "/books/\(books[book])", headers: headers, body: #"{"title":"\#(title)"}"#)
                    outcomes.withLock {
                        $0.append(
                            Outcome(
                                book: book, title: title, status: response.status,
                                version: response.json["version"] as? Int))
                    }
                }
            } catch {
                failures.withLock { $0.append("client \(client): \(error)") }
            }
        }
        #expect(failures.withLock { $0 }.isEmpty, "\(failures.withLock { $0 })")
        let all = outcomes.withLock { $0 }
        #expect(all.count == 8 * 40)
        #expect(all.allSatisfy { $0.status == 200 || $0.status == 412 }, "\(Set(all.map(\.status)))")
        for (index, book) in books.enumerated() {
            let applied = all.filter { $0.book == index && $0.status == 200 }
            // Each change took the next version: versions 2 … n + 1, each once.
            #expect(applied.compactMap(\.version).sorted() == Array(2..<(applied.count + 2)), "book \(index)")
            let stored = try live.request("GET", "/books/\(book)").json
            let last = applied.max { ($0.version ?? 0) < ($1.version ?? 0) }
            #expect(stored["title"] as? String == last?.title ?? "b\(index)")
            #expect(stored["version"] as? Int == applied.count + 1)
            // The stream ends at the same state, its ids and versions only ever growing.
            var seen: [ReceivedEvent] = []
            let deadline = Date().addingTimeInterval(10)
            while seen.last?.json["version"] as? Int != applied.count + 1, Date() < deadline {
                seen += streams[index].drain(quiet: 200)
            }
            #expect(seen.last?.json["title"] as? String == stored["title"] as? String, "book \(index)")
            let ids = seen.compactMap { Int($0.id ?? "") }
            let versions = seen.compactMap { $0.json["version"] as? Int }
            #expect(ids == ids.sorted() && Set(ids).count == ids.count)
            #expect(versions == versions.sorted() && Set(versions).count == versions.count)
        }
    }

    /// Writes queued faster than the writer takes them, so that they share transactions: fast-path
    /// patches (one `UPDATE`, pipelined on PostgreSQL), patches that read first, and patches whose
    /// `If-Match` fails, on the same books. Each success took the next version, once.
    @Test func queuedWrites_AreEachAppliedOnceInASerialOrder() throws {
        let library = try live.createLibrary()
        let books = try (0..<4).map { try live.createBook(in: library, title: "b\($0)") }
        struct Outcome: Sendable {
            let book: Int
            let title: String
            let record: BookRecord?
            let error: StoreError.Kind?
        }
        let outcomes = Mutex<[Outcome]>([])
        let group = DispatchGroup()
        for step in 0..<240 {
            let book = (step * 7) % books.count
            var patch = BookPatch()
            patch[.title] = .string("q\(step)")
            if step % 6 == 5 { patch[.publishedYear] = .int(step) }  // two fields: reads first
            let precondition: Precondition = step % 10 == 9 ? .versions([1, 2]) : .none
            let (id, queued) = (books[book], patch)
            group.enter()
            live.store.write(
                { writer in try writer.patchBook(id: id, if: precondition, queued) },
                plan: LibraryWriter.singleFieldWrite(id: id, if: precondition, queued)
            ) { result in
                outcomes.withLock {
                    $0.append(
                        Outcome(
                            book: book, title: "q\(step)", record: try? result.get(),
                            error: result.failure?.kind))
                }
                group.leave()
            }
        }
        #expect(group.wait(timeout: .now() + 60) == .success)
        let all = outcomes.withLock { $0 }
        #expect(all.count == 240)
        #expect(all.allSatisfy { $0.record != nil || $0.error == .preconditionFailed })
        for (index, book) in books.enumerated() {
            let applied = all.filter { $0.book == index && $0.record != nil }
            #expect(applied.map { $0.record!.version }.sorted() == Array(2..<(applied.count + 2)), "book \(index)")
            #expect(applied.allSatisfy { $0.record!.title == $0.title })
            let stored = try live.request("GET", "/books/\(book)").json
            let last = applied.max { $0.record!.version < $1.record!.version }
            #expect(stored["title"] as? String == last?.title)
            #expect(stored["version"] as? Int == applied.count + 1)
        }
    }
}

extension Result {
    fileprivate var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
