#ifndef C_ALLOCATION_COUNTER_H
#define C_ALLOCATION_COUNTER_H

#include <stddef.h>

/// Starts counting the heap allocations made by the calling thread (from zero).
void allocation_counter_start(void);

/// Stops counting on the calling thread and returns how many allocations it made since `start`.
size_t allocation_counter_stop(void);

#endif
