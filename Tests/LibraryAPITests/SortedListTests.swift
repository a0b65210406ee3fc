import Foundation
import TestSupport
import Testing

/// `sort=`, `q=` and their cursors on `GET /books`, `GET /libraries/{id}/books` and
/// `GET /libraries`, held against an order and a search written here from the documentation (not
/// from the server's code), on whichever engine the suite runs on (SQLite, PostgreSQL, memory).
@Suite struct SortedListTests {
    let live = try! LiveServer()

    /// Titles and authors that tell the documented order from others: case (folded for ASCII
    /// letters only), letters outside ASCII (after `z`, by code point, case kept), punctuation
    /// between `Z` and `a` in ASCII, digits, prefixes and exact ties.
    static let texts = [
        "apple", "Apple", "APPLE", "Banana", "banana", "cherry", "Éclair", "éclair", "Zebra", "zebra", "a_b", "A[b",
        "a", "10", "9", "Ωmega", "ωmega", "straße", "STRASSE", "zz", "Z", "(x)", "~tilde", "apple pie",
    ]

    /// The documented order of two values of one sortable field: text with A-Z folded to a-z,
    /// compared byte for byte in UTF-8; numbers by value with null first; ties by id.
    static func precedes(_ a: [String: Any], _ b: [String: Any], _ field: String, descending: Bool) -> Bool {
        func key(_ value: Any?) -> [UInt8] {
            switch value {
            case let text as String: Array(text.utf8).map { (0x41...0x5A).contains($0) ? $0 | 0x20 : $0 }
            case let number as Int:
                withUnsafeBytes(of: UInt64(bitPattern: Int64(number)) ^ (1 << 63)) { Array($0.reversed()) }
            default: []  // null: before every value
            }
        }
        let (x, y) = (key(a[field]), key(b[field]))
        let ordered =
            x == y
            ? Array((a["id"] as! String).utf8).lexicographicallyPrecedes(Array((b["id"] as! String).utf8))
            : x.lexicographicallyPrecedes(y)
        return descending ? !ordered : ordered
    }

    /// Every item of a list, page by page (`limit` a page), and the pages' count.
    func all(_ path: String, limit: Int = 4) throws -> [[String: Any]] {
        var items: [[String: Any]] = []
        var cursor: String?
        repeat {
            let separator = path.contains("?") ? "&" : "?"
            let response = try live.request(
                "GET", path + separator + "limit=\(limit)" + (cursor.map { "&cursor=\($0)" } ?? ""))
            try #require(response.status == 200, "\(path): \(response.text)")
            items += response.json["items"] as! [[String: Any]]
            cursor = response.json["nextCursor"] as? String
        } while cursor != nil
        return items
    }

    func create(_ fields: [String: Any], at path: String = "/books") throws -> [String: Any] {
        let body = String(decoding: try JSONSerialization.data(withJSONObject: fields), as: UTF8.self)
        let response = try live.request("POST", path, body: body)
        try #require(response.status == 201, "\(response.text)")
        return response.json
    }

    @Test func sortedBooks_FollowTheDocumentedOrder_InEveryListAndDirection() throws {
        let library = try live.createLibrary("Sorted")
        let other = try live.createLibrary("Other")
        var books: [[String: Any]] = []
        for (index, title) in Self.texts.enumerated() {
            var fields: [String: Any] = [
                "libraryId": library, "title": title, "author": Self.texts[(index * 7) % Self.texts.count],
            ]
            if index % 3 != 0 { fields["publishedYear"] = [1965, -500, 2001, 1965][index % 4] }
            books.append(try create(fields))
            if index % 5 == 0 { _ = try create(["libraryId": other, "title": title]) }
        }
        // A few updates, so updatedAt differs from createdAt's order.
        for book in books.prefix(4) {
            let patched = try live.request("PATCH", "/books/\(book["id"]!)", body: #"{"available":false}"#)
            #expect(patched.status == 200)
        }
        books = try all("/libraries/\(library)/books", limit: 100)
        for field in ["title", "author", "publishedYear", "createdAt", "updatedAt"] {
            for descending in [false, true] {
                let sort = (descending ? "-" : "") + field
                let expected = books.sorted { Self.precedes($0, $1, field, descending: descending) }.map {
                    $0["id"] as! String
                }
                #expect(
                    try all("/libraries/\(library)/books?sort=\(sort)").map { $0["id"] as! String } == expected,
                    "\(sort)")
                #expect(
                    try all("/books?libraryId=\(library)&sort=\(sort)", limit: 7).map { $0["id"] as! String }
                        == expected,
                    "\(sort)")
                let everyBook = try all("/books?sort=\(sort)", limit: 100)
                #expect(everyBook.count == books.count + 5)
                #expect(
                    everyBook.map { $0["id"] as! String }
                        == everyBook.sorted { Self.precedes($0, $1, field, descending: descending) }.map {
                            $0["id"] as! String
                        },
                    "\(sort) over every library")
            }
        }
    }

    @Test func sortedLibraries_FollowTheDocumentedOrder() throws {
        for (index, name) in Self.texts.prefix(12).enumerated() {
            let library = try create(["name": name], at: "/libraries")
            for _ in 0..<(index % 3) { _ = try create(["libraryId": library["id"]!, "title": "T"]) }
        }
        let libraries = try all("/libraries", limit: 100)
        for field in ["name", "bookCount", "createdAt", "updatedAt"] {
            for descending in [false, true] {
                let sort = (descending ? "-" : "") + field
                let expected = libraries.sorted { Self.precedes($0, $1, field, descending: descending) }
                #expect(
                    try all("/libraries?sort=\(sort)", limit: 5).map { $0["id"] as! String }
                        == expected.map { $0["id"] as! String }, "\(sort)")
            }
        }
    }

    /// Keyset paging: a client paging through a sorted list while others insert, rename and delete
    /// sees every book that stayed as it was exactly once, and no book twice.
    @Test func sortedPages_NeitherSkipNorRepeat_WhileOthersWrite() throws {
        var random = SeededGenerator(state: 46)
        let library = try live.createLibrary("Busy")
        let words = ["dune", "Emma", "ulysses", "Beloved", "it", "Dracula", "emma", "Zorba"]
        var ids: [String] = []
        for index in 0..<60 {
            let title = words[Int(random.next() % UInt64(words.count))] + " \(index % 7)"
            ids.append(try create(["libraryId": library, "title": title])["id"] as! String)
        }
        for sort in ["title", "-title", "createdAt"] {
            var untouched = Set(ids)
            var seen: [String] = []
            var cursor: String?
            repeat {
                let response = try live.request(
                    "GET", "/libraries/\(library)/books?sort=\(sort)&limit=6" + (cursor.map { "&cursor=\($0)" } ?? ""))
                try #require(response.status == 200, "\(response.text)")
                seen += (response.json["items"] as! [[String: Any]]).map { $0["id"] as! String }
                cursor = response.json["nextCursor"] as? String
                // Between pages: a new book, a renamed one and a deleted one.
                ids.append(try create(["libraryId": library, "title": words[Int(random.next() % 8)]])["id"] as! String)
                let renamed = ids[Int(random.next() % UInt64(ids.count))]
                let title = words[Int(random.next() % 8)] + "!"
                if try live.request("PATCH", "/books/\(renamed)", body: #"{"title":"\#(title)"}"#).status == 200 {
                    untouched.remove(renamed)
                }
                let deleted = ids.remove(at: Int(random.next() % UInt64(ids.count)))
                #expect(try live.request("DELETE", "/books/\(deleted)").status == 204)
                untouched.remove(deleted)
            } while cursor != nil
            // A renamed book may come again (or never) when its new title is on a page still to come.
            let stayed = seen.filter(untouched.contains)
            #expect(Set(stayed).count == stayed.count, "\(sort): no unchanged book twice")
            #expect(untouched.isSubset(of: Set(seen)), "\(sort): every unchanged book")
        }
    }

    /// `q` keeps the books whose title or author contains the text, ASCII letters without case and
    /// everything else exactly, with `%`, `_` and quotes as plain characters; sorted and paged too.
    @Test func search_FindsTitlesAndAuthors_AsDocumented() throws {
        let library = try live.createLibrary("Searched")
        let other = try live.createLibrary("Elsewhere")
        let books: [(String, String)] = [
            ("Dune", "Frank Herbert"), ("DUNE Messiah", "Frank Herbert"), ("Children of Dune", "F. H."),
            ("Éclair au café", "Zoë"), ("éclair", "zoë"), ("100% Pure", "Percent"), ("a_b_c", "Under Score"),
            ("Say \"cheese\"", "Quote"), ("Straße", "Weiß"), ("Emma", "Jane Austen"), ("Dunes", "Herbert Frank"),
        ]
        var made: [[String: Any]] = []
        for (title, author) in books {
            made.append(try create(["libraryId": library, "title": title, "author": author]))
        }
        _ = try create(["libraryId": other, "title": "Dune (elsewhere)"])
        func found(_ q: String, _ extra: String = "") throws -> [String] {
            let encoded = q.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            return try all("/libraries/\(library)/books?q=\(encoded)\(extra)", limit: 2).map { $0["title"] as! String }
        }
        #expect(try found("dune") == ["Dune", "DUNE Messiah", "Children of Dune", "Dunes"])
        #expect(try found("HERB") == ["Dune", "DUNE Messiah", "Dunes"], "the author")
        #expect(try found("dune", "&sort=-title") == ["Dunes", "DUNE Messiah", "Dune", "Children of Dune"])
        #expect(try found("écl") == ["éclair"], "É is not é: only ASCII letters fold")
        #expect(try found("ÉCL") == ["Éclair au café"], "É is É, and C and L fold")
        #expect(try found("Éclair") == ["Éclair au café"])
        #expect(try found("zoë") == ["Éclair au café", "éclair"], "Z folds, ë is ë")
        #expect(try found("0% ") == ["100% Pure"], "% is a character")
        #expect(try found("_b_") == ["a_b_c"], "_ is a character")
        #expect(try found("a b") == [], "a space is a character")
        #expect(try found("\"cheese\"") == ["Say \"cheese\""], "quotes are characters")
        #expect(try found("traß") == ["Straße"])
        #expect(try found("STRASS") == [], "ß is not ss")
        let everywhere = try all("/books?q=dune&sort=title", limit: 3).map { $0["title"] as! String }
        #expect(everywhere == ["Children of Dune", "Dune", "Dune (elsewhere)", "DUNE Messiah", "Dunes"])
        // A reference search over random text: every engine finds what the rule says.
        var random = SeededGenerator(state: 7)
        let pieces = ["ab", "AB", "é", "É", "c", "%", "_", " ", "x"]
        var titles: [String: String] = [:]
        for _ in 0..<40 {
            let title = (0..<5).map { _ in pieces[Int(random.next() % UInt64(pieces.count))] }.joined()
            titles[try create(["libraryId": other, "title": title, "author": "r"])["id"] as! String] = title
        }
        func fold(_ text: String) -> [UInt8] { Array(text.utf8).map { (0x41...0x5A).contains($0) ? $0 | 0x20 : $0 } }
        for q in ["abab", "ABé", "é%c", "_ x", "xab", "ÉAB", "c%_", "bab"] {
            let expected = titles.filter { fold($0.value).contains(fold(q)) }.keys.sorted()
            let encoded = q.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            let got = try all("/libraries/\(other)/books?q=\(encoded)", limit: 10).map { $0["id"] as! String }.sorted()
            #expect(got == expected, "q=\(q)")
        }
    }

    @Test func badSortsSearchesAndCursors_Are400sThatNameTheParameter() throws {
        let library = try live.createLibrary()
        for index in 0..<3 { _ = try live.createBook(in: library, title: "Book \(index)") }
        let sorted = try live.request("GET", "/books?sort=title&limit=1")
        let sortedCursor = try #require(sorted.json["nextCursor"] as? String)
        #expect(sortedCursor.hasPrefix("s"))
        let plainCursor = try #require(try live.request("GET", "/books?limit=1").json["nextCursor"] as? String)
        let cases: [(String, String)] = [
            ("/books?sort=isbn", "sort"), ("/books?sort=-", "sort"), ("/books?sort=Title", "sort"),
            ("/books?sort=title&sort=author", "sort"), ("/libraries?sort=title", "sort"),
            ("/libraries/\(library)/books?sort=name", "sort"), ("/books?q=du", "q"), ("/books?q=%00%00%00", "q"),
            ("/books?q=" + String(repeating: "x", count: 201), "q"),
            ("/books?sort=author&cursor=\(sortedCursor)", "cursor"),
            ("/books?sort=-title&cursor=\(sortedCursor)", "cursor"),
            ("/books?cursor=\(sortedCursor)", "cursor"), ("/books?sort=title&cursor=\(plainCursor)", "cursor"),
            ("/books?sort=title&cursor=sAAAA", "cursor"), ("/books?sort=title&cursor=s", "cursor"),
            ("/books?sort=publishedYear&cursor=" + Self.cursor("publishedYear", key: "x"), "cursor"),
            ("/books?sort=title&cursor=" + Self.cursor("title", id: "not-a-uuid"), "cursor"),
        ]
        for (path, parameter) in cases {
            let response = try live.request("GET", path)
            #expect(response.status == 400, "\(path)")
            #expect(response.header("content-type") == "application/problem+json", "\(path)")
            #expect((response.json["detail"] as? String)?.contains(parameter) == true, "\(path): \(response.text)")
        }
        #expect(try live.request("GET", "/books?q=").status == 200, "an empty q is no search")
        let next = try live.request("GET", "/books?sort=title&limit=1&cursor=\(sortedCursor)")
        #expect((next.json["items"] as? [[String: Any]])?.first?["title"] as? String == "Book 1")
    }

    /// A sorted cursor as the server writes one (`s` and base64url of the order, id and key).
    static func cursor(_ sort: String, id: String = "3f2a9c1e-8b4d-4e6f-9a1b-2c3d4e5f6a7b", key: String = "k") -> String
    {
        "s"
            + Data("\(sort)\n\(id)\n\(key)".utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }
}
