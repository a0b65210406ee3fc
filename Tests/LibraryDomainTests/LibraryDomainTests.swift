import Foundation
import Synchronization
import Testing

@testable import LibraryDomain

@Suite struct ISBNTests {
    @Test(arguments: [
        "0-306-40615-2", "0306406152", "080442957X", "0-8044-2957-x", "978-0-306-40615-7", "9780306406157",
    ])
    func accepts(_ isbn: String) {
        #expect(ISBN.isValid(isbn))
    }

    @Test(arguments: [
        "0-306-40615-3", "978-0-306-40615-8", "12345", "", "X804429570", "97803064061570", "-0306406152", "0306406152-",
        "0306--406152", "978030640615X", "abcdefghij",
    ])
    func rejects(_ isbn: String) {
        #expect(!ISBN.isValid(isbn))
    }
}

@Suite struct IdentifierTests {
    /// The filtered values of a book in library "l".
    static func keys(author: String, available: Bool) -> BookKeys {
        BookRecord(seq: 1) { field in
            switch field {
            case .author: .string(author)
            case .available: .bool(available)
            case .version: .int(1)
            default: .string("l")
            }
        }.keys
    }

    @Test func bookFilter_ComparesTextByteForByteAsSQLiteDoes() {
        let composed = "caf\u{E9}"
        let decomposed = "cafe\u{301}"
        #expect(composed == decomposed, "Swift equates them")
        let filter = BookFilter([.author: .string(composed)])
        #expect(filter.matches(Self.keys(author: composed, available: true)))
        #expect(!filter.matches(Self.keys(author: decomposed, available: true)))
        #expect(filter != BookFilter([.author: .string(decomposed)]))
        #expect(
            Set([filter, BookFilter([.author: .string(decomposed)]), BookFilter([.author: .string(composed)])]).count
                == 2)
        #expect(BookFilter.all(matching: Self.keys(author: "a", available: false)).count == 8)
    }

    @Test func canonical_AcceptsUUIDsInEitherCaseAndLowercasesThem() {
        #expect(Identifier.canonical("0A1B2C3D-4E5F-4a6b-8C7D-9e0f1a2b3c4d") == "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d")
        #expect(Identifier.canonical("00000000-0000-0000-0000-000000000000") == "00000000-0000-0000-0000-000000000000")
    }

    @Test(arguments: [
        "", "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4", "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d0",
        "0a1b2c3d4e5f-4a6b-8c7d-9e0f1a2b3c4d-", "0a1b2c3d-4e5f-4a6b-8c7d_9e0f1a2b3c4d",
        "0a1b2c3g-4e5f-4a6b-8c7d-9e0f1a2b3c4d",
        "{a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4}", "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3cé",
    ])
    func canonical_RejectsAnythingElse(_ text: String) {
        #expect(Identifier.canonical(text) == nil)
    }

    /// `make` gives version 4 (random) UUIDs, `sequential` version 8 (prefix and counter).
    @Test(arguments: [4, 8])
    func make_AndSequential_GiveDistinctUUIDsOfTheirVersion(version: Int) {
        let next = version == 4 ? Identifier.make : Identifier.sequential
        let ids = (0..<1_000).map { _ in next() }
        #expect(Set(ids).count == ids.count)
        for id in ids {
            #expect(Identifier.canonical(id) == id)
            #expect(Array(id)[14] == Character(String(version)))
            #expect("89ab".contains(Array(id)[19]))
        }
    }
}

@Suite struct ValidationTests {
    @Test func libraryDraft_ChecksLengths() {
        #expect(LibraryDraft(name: "Central").validate().isEmpty)
        #expect(LibraryDraft(name: "").validate().map(\.field) == ["name"])
        #expect(LibraryDraft(name: String(repeating: "n", count: 201)).validate().map(\.field) == ["name"])
        #expect(
            LibraryDraft(name: "a", address: String(repeating: "a", count: 501)).validate().map(\.field) == ["address"])
    }

    @Test func bookDraft_ChecksEveryField() {
        let library = Identifier.make()
        #expect(
            BookDraft(libraryId: library, title: "Dune", isbn: "9780441172719", publishedYear: 1965).validate().isEmpty)
        let bad = BookDraft(
            libraryId: "nope", title: "", author: String(repeating: "a", count: 301), isbn: "123", publishedYear: 10_000
        )
        #expect(bad.validate().map(\.field) == ["libraryId", "title", "author", "isbn", "publishedYear"])
        #expect(BookDraft(libraryId: library, title: "t", publishedYear: -9999).validate().isEmpty)
    }

    @Test func patch_LeavesAbsentFieldsAndClearsNulls() {
        let draft = LibraryDraft(name: "Old", address: "Main St")
        #expect(
            LibraryPatch([.name: .string("New")]).applied(to: draft) == LibraryDraft(name: "New", address: "Main St"))
        #expect(LibraryPatch([.address: .null]).applied(to: draft) == LibraryDraft(name: "Old", address: nil))
    }
}
