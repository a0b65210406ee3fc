// The field table and field values are the model the server and the Swift client share; every
// target that sees the domain sees them too.
@_exported import LibraryModel
