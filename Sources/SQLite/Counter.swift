import Synchronization

/// A thread-safe counter for round-robin choices.
final class Counter: Sendable {
    private let value = Atomic<Int>(0)

    /// Adds one and returns the value before.
    func increment() -> Int {
        value.wrappingAdd(1, ordering: .relaxed).oldValue & Int.max
    }
}
