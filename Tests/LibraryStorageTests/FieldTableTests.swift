import Foundation
import LibraryDomain
import SQLite
import Testing

@testable import LibraryStorage

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
        for table in ["libraries", "books", "change_log"] {
            try connection.statement("PRAGMA table_info(\(table))").forEach { row in
                tables[table, default: [:]][row.text(1)] = row.int(3) == 0
            }
        }
        return tables
    }

    /// The same from the PostgreSQL migrations, in order: their CREATE TABLE statements, the
    /// columns `ALTER TABLE … RENAME COLUMN` renames and those `ALTER TABLE … ADD COLUMN` adds.
    static func postgresColumns() throws -> [String: [String: Bool]] {
        var tables: [String: [String: Bool]] = [:]
        var table: String?
        let folder = root.appendingPathComponent("Migrations/postgres")
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".sql") }
            .sorted()
        #expect(files.count >= 3)
        for file in files {
            for line in try text("Migrations/postgres/" + file).split(separator: "\n") {
                let words = line.split(separator: " ")
                if line.hasPrefix("CREATE TABLE "), words.count > 2 {
                    table = String(words[2])
                } else if line.hasPrefix(")") {
                    table = nil
                } else if let table, line.hasPrefix("    "), let name = words.first {
                    tables[table, default: [:]][String(name)] =
                        !line.contains("NOT NULL") && !line.contains("PRIMARY KEY")
                } else if line.hasPrefix("ALTER TABLE "), words.count == 8, words[3] == "RENAME", words[4] == "COLUMN" {
                    let (renamed, old, new) = (String(words[2]), String(words[5]), String(words[7].dropLast()))
                    let nullable = tables[renamed]?.removeValue(forKey: old)
                    #expect(nullable != nil, "\(file): no column \(old) in \(renamed)")
                    tables[renamed]?[new] = nullable
                } else if line.hasPrefix("ALTER TABLE "), words.count >= 7, words[3] == "ADD", words[4] == "COLUMN" {
                    tables[String(words[2]), default: [:]][String(words[5])] = !line.contains("NOT NULL")
                } else {
                    #expect(!line.hasPrefix("ALTER TABLE"), "\(file): the test does not read \(line)")
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
        #expect(try Self.schema("BookPatch").properties.prefix(6) == BookField.writable.map(\.name)[...])
        #expect(try Self.schema("LibraryPatch").properties.prefix(2) == LibraryField.writable.map(\.name)[...])
    }

    @Test func `the change log has a column for every field of both resources, on both engines`() throws {
        for (engine, columns) in [("SQLite", try Self.sqliteColumns()), ("PostgreSQL", try Self.postgresColumns())] {
            let log = columns["change_log"] ?? [:]
            #expect(
                Set(log.keys) == Set(ChangeLog.metaColumns.map(\.name) + ChangeLog.fieldColumns.map(\.name)),
                "\(engine)")
            // A field's value is NULL in the rows of the other resource, so only the shared columns are NOT NULL.
            for column in ChangeLog.fieldColumns where column.library == nil || column.book == nil {
                #expect(log[column.name] == true, "\(engine): change_log.\(column.name) must allow NULL")
            }
        }
        let kinds = Dictionary(uniqueKeysWithValues: ChangeLog.fieldColumns.map { ($0.name, $0.kind) })
        #expect(kinds["library_id"] == .identifier && kinds["version"] == .integer)
    }

    /// A named schema's keywords (`minLength: 1` → ["minLength": "1"]), from openapi.yaml.
    static func keywords(_ name: String) throws -> [String: String] {
        let lines = try text("openapi.yaml").split(separator: "\n", omittingEmptySubsequences: false)
        guard let start = lines.firstIndex(of: "    \(name):") else { throw TestFailure("no schema \(name)") }
        var keywords: [String: String] = [:]
        for line in lines[(start + 1)...] {
            if line.hasPrefix("    "), !line.hasPrefix("     ") { break }
            if line.hasPrefix("      "), !line.hasPrefix("       "), let colon = line.firstIndex(of: ":") {
                keywords[line[..<colon].trimmingCharacters(in: .whitespaces)] =
                    line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
        }
        return keywords
    }

    /// The schema a property of `schema` refers to (`$ref: '#/components/schemas/Title'` → "Title").
    static func reference(of property: String, in schema: String) throws -> String? {
        let lines = try text("openapi.yaml").split(separator: "\n", omittingEmptySubsequences: false)
        guard let start = lines.firstIndex(of: "    \(schema):"),
            let at = lines[start...].firstIndex(of: "        \(property):")
        else { throw TestFailure("no property \(property) in \(schema)") }
        let next = lines[at + 1].trimmingCharacters(in: .whitespaces)
        guard next.hasPrefix("$ref: '#/components/schemas/") else { return nil }
        return String(next.dropFirst("$ref: '#/components/schemas/".count).dropLast())
    }

    @Test func `each writable field's rule is its openapi.yaml schema's bounds`() throws {
        func check<Field: ResourceField>(_: Field.Type, in schema: String) throws {
            for field in Field.writable {
                let rule = field.descriptor.rule
                let named = try Self.reference(of: field.name, in: schema)
                let keywords = try named.map(Self.keywords) ?? [:]
                switch rule {
                case .length(let bounds):
                    #expect(keywords["maxLength"] == String(bounds.upperBound), "\(field)")
                    #expect((keywords["minLength"] ?? "0") == String(bounds.lowerBound), "\(field)")
                    #expect(keywords["pattern"] == "'^[^\\x00]*$'", "\(field): text refuses U+0000")
                case .range(let bounds):
                    #expect(keywords["minimum"] == String(bounds.lowerBound), "\(field)")
                    #expect(keywords["maximum"] == String(bounds.upperBound), "\(field)")
                case .uuid: #expect(keywords["format"] == "uuid", "\(field)")
                case .isbn: #expect(named == "ISBN", "\(field)")
                case nil: #expect(keywords["maxLength"] == nil && keywords["minimum"] == nil, "\(field)")
                }
            }
        }
        try check(LibraryField.self, in: "LibraryInput")
        try check(BookField.self, in: "BookInput")
    }

    @Test func `a whole representation requires exactly the fields without a default, and says the defaults`() throws {
        for (schema, fields) in [
            ("LibraryInput", LibraryField.writable.map(\.descriptor)),
            ("BookInput", BookField.writable.map(\.descriptor)),
        ] {
            #expect(
                try Self.schema(schema).required == fields.filter { $0.defaultValue == nil }.map(\.name), "\(schema)")
            let lines = try Self.text("openapi.yaml").split(separator: "\n", omittingEmptySubsequences: false)
            let start = lines.firstIndex(of: "    \(schema):")!
            for descriptor in fields {
                guard let defaultValue = descriptor.defaultValue else { continue }
                let at = lines[start...].firstIndex(of: "        \(descriptor.name):")!
                let stated = lines[(at + 1)...(at + 3)].first { $0.contains("default:") }
                let expected =
                    switch defaultValue {
                    case .null: "null"
                    case .string(let text): "'\(text)'"
                    case .int(let number): String(number)
                    case .bool(let truth): String(truth)
                    }
                #expect(
                    stated?.trimmingCharacters(in: .whitespaces) == "default: \(expected)",
                    "\(schema).\(descriptor.name)")
            }
        }
    }

    /// Every write sets the stamped fields by itself: the memory store by their kinds (an integer
    /// one more, a timestamp the write's time), the SQL writes (`SQLRows`) by these columns.
    @Test func `each resource's stamped fields are its version and its update time, the server's`() {
        func check<Field: ResourceField>(_: Field.Type) {
            let stamped = Field.stamped.map(\.descriptor)
            #expect(stamped.map(\.column) == ["version", "updated_at"])
            #expect(stamped.map(\.kind) == [.integer, .timestamp])
            #expect(stamped.allSatisfy { !$0.writable && !$0.nullable })
        }
        check(LibraryField.self)
        check(BookField.self)
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
