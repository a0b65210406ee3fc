extension StringProtocol {
    /// Without leading and trailing spaces and tabs (HTTP's optional whitespace).
    package func trimmedOWS() -> SubSequence {
        var result = self[...]
        while let first = result.first, first == " " || first == "\t" { result = result.dropFirst() }
        while let last = result.last, last == " " || last == "\t" { result = result.dropLast() }
        return result
    }
}
