// The BookReader sample of Apple's guide "Migrating from the Observable Object protocol to the
// Observable macro", ported to LibraryClient: its four views (`BookReaderApp`, `LibraryView`,
// `BookView`, `BookEditView`) over live models of a library-server. The article "Porting the
// BookReader sample" in the client's documentation shows this code; scripts/check-article-code.py
// holds the article to it. What each view shows is a function of the models here, compiled and
// tested on Linux (Tests/BookReaderTests, through the `withObservationTracking` render loop); the
// SwiftUI views, which exist on Apple platforms only, call the same functions.

import Foundation
import LibraryClient
import Observation

#if canImport(SwiftUI)
    import SwiftUI
#endif

/// What `LibraryView` shows: a placeholder until the library's books have arrived (so the first
/// render never flashes "No books"), a note for an empty library, or the books.
public enum LibraryContent: Equatable {
    case loading
    case empty
    case books([Book])
}

/// What `BookView` shows of a book: its title (a placeholder while it loads), and whether an
/// edit of it is still being saved.
public struct BookRow: Equatable {
    public let title: String
    public let isSaving: Bool

    public init(title: String, isSaving: Bool) {
        self.title = title
        self.isSaving = isSaving
    }
}

extension Library {
    /// `LibraryView`'s content. Reads the membership, not any book's field: a title change
    /// renders the book's own row only.
    @MainActor public var content: LibraryContent {
        guard hasLoadedBooks else { return .loading }
        return books.isEmpty ? .empty : .books(books)
    }
}

extension Book {
    /// `BookView`'s row. Reads `title`, `loadState` and `hasPendingWrites` in one render, so
    /// the client's first watch of the book already names its title, and nothing else of it.
    @MainActor public var row: BookRow {
        let title = self.title
        return BookRow(title: loadState == .loading ? "…" : title, isSaving: hasPendingWrites)
    }
}

/// The app's model: a client, and the library it opens on (the first the user may read).
@MainActor
@Observable
public final class BookReader {
    public let client: LibraryClient
    public let libraries: LibraryList

    public init(client: LibraryClient) {
        self.client = client
        libraries = client.libraries
    }

    /// The library the app shows, once the list of libraries has arrived.
    public var library: Library? { libraries.items.first }
}

#if canImport(SwiftUI)
    /// The guide's `BookReaderApp`: the `@State` holds a live client instead of a local `Library()`.
    /// (Mark it `@main` in your app target.)
    public struct BookReaderApp: App {
        @State private var reader = BookReader(
            client: LibraryClient(baseURL: URL(string: "http://127.0.0.1:8080")!))

        public init() {}

        public var body: some Scene {
            WindowGroup {
                if let library = reader.library {
                    LibraryView()
                        .environment(library)
                } else {
                    ProgressView()
                }
            }
        }
    }

    /// The guide's `LibraryView`, with a placeholder while the books arrive.
    public struct LibraryView: View {
        @Environment(Library.self) private var library

        public init() {}

        public var body: some View {
            switch library.content {
            case .loading: ProgressView()
            case .empty: Text("No books")
            case .books(let books):
                List(books) { book in
                    BookView(book: book)
                }
            }
        }
    }

    /// The guide's `BookView`, which also says when an edit is being saved.
    public struct BookView: View {
        var book: Book
        @State private var isEditorPresented = false

        public init(book: Book) { self.book = book }

        public var body: some View {
            HStack {
                Text(book.row.title)
                Spacer()
                if book.row.isSaving { ProgressView() }
                Button("Edit") {
                    isEditorPresented = true
                }
            }
            .sheet(isPresented: $isEditorPresented) {
                BookEditView(book: book)
            }
        }
    }

    /// The guide's `BookEditView`, unchanged: `$book.title` binds to the live model, and each
    /// keystroke is written to the server (coalesced, never lost).
    public struct BookEditView: View {
        @Bindable var book: Book
        @Environment(\.dismiss) private var dismiss

        public init(book: Book) { self.book = book }

        public var body: some View {
            VStack {
                HStack {
                    Text("Title")
                    TextField("Title", text: $book.title)
                        .textFieldStyle(.roundedBorder)
                        .onSubmit {
                            dismiss()
                        }
                }

                Button("Close") {
                    dismiss()
                }
                .buttonStyle(.borderedProminent)
            }
            .padding()
        }
    }

    /// The library view over the in-memory backend's sample data: no server needed.
    #Preview {
        @Previewable @State var reader = BookReader(client: LibraryClient(backend: .sample()))
        if let library = reader.library {
            LibraryView()
                .environment(library)
        }
    }
#endif
