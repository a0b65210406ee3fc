#ifndef C_ALLOCATION_COUNTER_H
#define C_ALLOCATION_COUNTER_H

#include <stdbool.h>
#include <stddef.h>

/// Whether allocations are counted (not under a sanitizer, whose allocator this cannot wrap).
bool allocation_counter_is_available(void);

/// Starts counting the heap allocations made by the calling thread (from zero).
void allocation_counter_start(void);

/// Stops counting on the calling thread and returns how many allocations it made since `start`.
size_t allocation_counter_stop(void);

#endif
