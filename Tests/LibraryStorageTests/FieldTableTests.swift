import Foundation
import LibraryDomain
import SQLite
import Testing

/// The field table (`LibraryModel/Fields.swift`) held against what it describes: the columns the
/// migrations of both engines create, and the schemas of openapi.yaml.
@Suite struct FieldTableTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static func text(_ path: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
    }

    /// Columns and whether each may be NULL, per table, after every SQLite migration.
    static func sqliteColumns() throws -> [String: [String: Bool]] {
        let connection = try Connection(path: ":memory:")
        let folder = root.appendingPathComponent("Migrations")
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".sql") }
            .sorted()
        for file in files { try connection.execute(try text("Migrations/" + file)) }
        var tables: [String: [String: Bool]] = [:]
        for table in ["libraries", "books"] {
            try connection.statement("PRAGMA table_info(\(table))").forEach { row in
                tables[table, default: [:]][row.text(1)] = row.int(3) == 0
            }
        }
        return tables
    }

    /// The same from the PostgreSQL migrations' CREATE TABLE statements.
    static func postgresColumns() throws -> [String: [String: Bool]] {
        var tables: [String: [String: Bool]] = [:]
        var table: String?
        for file in ["0001_library_schema.sql", "0002_idempotency_keys.sql"] {
            for line in try text("Migrations/postgres/" + file).split(separator: "\n") {
                let words = line.split(separator: " ")
                if line.hasPrefix("CREATE TABLE "), words.count > 2 {
                    table = String(words[2])
                } else if line.hasPrefix(")") {
                    table = nil
                } else if let table, line.hasPrefix("    "), let name = words.first {
                    tables[table, default: [:]][String(name)] =
                        !line.contains("NOT NULL") && !line.contains("PRIMARY KEY")
                }
            }
        }
        return tables
    }

    /// A component schema's property names, and which are `readOnly`, from openapi.yaml.
    static func schema(_ name: String) throws -> (properties: [String], readOnly: Set<String>, required: [String]) {
        let lines = try text("openapi.yaml").split(separator: "\n", omittingEmptySubsequences: false)
        guard let start = lines.firstIndex(of: "    \(name):") else { throw TestFailure("no schema \(name)") }
        var properties: [String] = []
        var readOnly: Set<String> = []
        var required: [String] = []
        var current: String?
        for line in lines[(start + 1)...] {
            if line.hasPrefix("    "), !line.hasPrefix("     ") { break }  // the next schema
            if line.hasPrefix("      required: [") {
                required = line.dropFirst("      required: [".count).dropLast().split(separator: ",").map {
                    $0.trimmingCharacters(in: .whitespaces)
                }
            } else if line.hasPrefix("        "), !line.hasPrefix("         "), line.hasSuffix(":") {
                current = String(line.dropFirst(8).dropLast())
                properties.append(current!)
            } else if line.trimmingCharacters(in: .whitespaces) == "readOnly: true", let current {
                readOnly.insert(current)
            }
        }
        return (properties, readOnly, required)
    }

    func check<Field: ResourceField>(
        _: Field.Type, table: String, schema: String, columns: [String: [String: Bool]], engine: String
    ) {
        let tableColumns = columns[table] ?? [:]
        for field in Field.allCases {
            let descriptor = field.descriptor
            #expect(tableColumns[descriptor.column] != nil, "\(engine): \(table) has no column \(descriptor.column)")
            #expect(
                tableColumns[descriptor.column] == descriptor.nullable,
                "\(engine): \(table).\(descriptor.column) NULL-ability is not the table's \(descriptor.nullable)")
        }
    }

    @Test func `every field has its column, NULL where the table says, on SQLite`() throws {
        let columns = try Self.sqliteColumns()
        check(LibraryField.self, table: "libraries", schema: "LibraryComplete", columns: columns, engine: "SQLite")
        check(BookField.self, table: "books", schema: "BookComplete", columns: columns, engine: "SQLite")
    }

    @Test func `every field has its column, NULL where the table says, on PostgreSQL`() throws {
        let columns = try Self.postgresColumns()
        check(LibraryField.self, table: "libraries", schema: "LibraryComplete", columns: columns, engine: "PostgreSQL")
        check(BookField.self, table: "books", schema: "BookComplete", columns: columns, engine: "PostgreSQL")
    }

    @Test func `openapi.yaml's complete schemas list the table's fields, required, read-only where the server's`()
        throws
    {
        for (name, fields) in [
            ("LibraryComplete", LibraryField.allCases.map(\.descriptor)),
            ("BookComplete", BookField.allCases.map(\.descriptor)),
        ] {
            let schema = try Self.schema(name)
            #expect(schema.properties == fields.map(\.name), "\(name)")
            #expect(schema.required == fields.map(\.name), "\(name)")
            #expect(schema.readOnly == Set(fields.filter { !$0.writable }.map(\.name)), "\(name)")
        }
        #expect(try Self.schema("BookPatch").properties.prefix(6) == BookField.writable.map(\.rawValue)[...])
        #expect(try Self.schema("LibraryPatch").properties.prefix(2) == LibraryField.writable.map(\.rawValue)[...])
    }

    @Test func `the filterable fields are the book list's filters`() {
        #expect(BookField.allCases.filter(\.descriptor.filterable) == [.libraryId, .author, .available])
        #expect(LibraryField.allCases.filter(\.descriptor.filterable).isEmpty)
    }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
