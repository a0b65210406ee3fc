import LibraryDomain
import Observation

/// Tracks what `read` reads, once: `changed` runs (on the live executor) at the first change.
///
/// Observation calls `onChange` before the new value is stored, on the mutating thread, which for
/// live models is always `LiveActor`'s executor; callers therefore only note *that* a field
/// changed, and read the new value after the whole write has been applied.
@LiveActor
func trackOnce(_ read: () -> Void, changed: @escaping @Sendable @LiveActor () -> Void) {
    withObservationTracking(read) {
        LiveActor.assumeIsolated(changed)
    }
}
