/// ISBN-10 and ISBN-13 validation, checksum included.
package enum ISBN {
    /// Whether `text` is an ISBN-10 or ISBN-13, with hyphens allowed between digits.
    package static func isValid(_ text: String) -> Bool {
        guard !text.hasPrefix("-"), !text.hasSuffix("-"), !text.contains("--") else { return false }
        let characters = text.utf8.filter { $0 != UInt8(ascii: "-") }
        switch characters.count {
        case 10: return isValidISBN10(characters)
        case 13: return isValidISBN13(characters)
        default: return false
        }
    }

    private static func isValidISBN10(_ characters: [UInt8]) -> Bool {
        var sum = 0
        for (index, character) in characters.enumerated() {
            let value: Int
            if let digit = digit(character) {
                value = digit
            } else if index == 9 && (character == UInt8(ascii: "X") || character == UInt8(ascii: "x")) {
                value = 10
            } else {
                return false
            }
            sum += value * (10 - index)
        }
        return sum % 11 == 0
    }

    private static func isValidISBN13(_ characters: [UInt8]) -> Bool {
        var sum = 0
        for (index, character) in characters.enumerated() {
            guard let value = digit(character) else { return false }
            sum += index % 2 == 0 ? value : value * 3
        }
        return sum % 10 == 0
    }

    private static func digit(_ character: UInt8) -> Int? {
        character >= 0x30 && character <= 0x39 ? Int(character - 0x30) : nil
    }
}
