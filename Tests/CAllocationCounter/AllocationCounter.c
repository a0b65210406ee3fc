// Counts heap allocations per thread, for tests that pin down how many a code path makes.
//
// The test executable defines malloc and its siblings, so every allocation in the process (Swift
// runtime included) comes here first and is handed on to glibc's own allocator through its
// `__libc_*` entry points. `free` is left to glibc: the memory is glibc's either way. Counting is
// per thread, so tests running in parallel on other threads do not disturb a measurement.

#include "CAllocationCounter.h"

// Under a sanitizer the allocator is the sanitizer's: replacing malloc would hand it memory it
// never allocated. The counter is then off and the tests that need it are skipped.
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define ALLOCATION_COUNTER_OFF 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ALLOCATION_COUNTER_OFF 1
#endif

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *pointer, size_t size);
extern void *__libc_memalign(size_t alignment, size_t size);

static _Thread_local __attribute__((tls_model("initial-exec"))) bool counting;
static _Thread_local __attribute__((tls_model("initial-exec"))) size_t allocations;

void allocation_counter_start(void) {
    allocations = 0;
    counting = true;
}

size_t allocation_counter_stop(void) {
    counting = false;
    return allocations;
}

static inline void count(void) {
    if (counting) allocations += 1;
}

#ifndef ALLOCATION_COUNTER_OFF

bool allocation_counter_is_available(void) { return true; }

void *malloc(size_t size) {
    count();
    return __libc_malloc(size);
}

void *calloc(size_t count_, size_t size) {
    count();
    return __libc_calloc(count_, size);
}

void *realloc(void *pointer, size_t size) {
    count();
    return __libc_realloc(pointer, size);
}

void *aligned_alloc(size_t alignment, size_t size) {
    count();
    return __libc_memalign(alignment, size);
}

void *memalign(size_t alignment, size_t size) {
    count();
    return __libc_memalign(alignment, size);
}

int posix_memalign(void **result, size_t alignment, size_t size) {
    if (alignment < sizeof(void *) || (alignment & (alignment - 1)) != 0) return EINVAL;
    count();
    void *pointer = __libc_memalign(alignment, size);
    if (pointer == NULL && size != 0) return ENOMEM;
    *result = pointer;
    return 0;
}

#else

bool allocation_counter_is_available(void) { return false; }

#endif
