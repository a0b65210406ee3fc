// The field table (`BookField`, `LibraryField`) and `FieldValue` appear in the client's public
// API (`book[.title]`, `ResourceState`, `Changes`): an app that imports LibraryClient sees them
// without depending on a target that is not a product.
@_exported import LibraryModel
