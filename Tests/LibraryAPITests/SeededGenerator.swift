/// A small deterministic generator (xorshift), so that a failing run can be repeated. The seed must
/// not be zero.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        return state
    }
}
