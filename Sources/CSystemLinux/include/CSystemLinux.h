#ifndef CSYSTEMLINUX_H
#define CSYSTEMLINUX_H

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <netinet/tcp.h>
#include <malloc.h>

// Values Swift cannot import from macros or enums of the C headers.
static inline uint32_t csys_epollin(void) { return EPOLLIN; }
static inline uint32_t csys_epollout(void) { return EPOLLOUT; }
static inline uint32_t csys_epollet(void) { return EPOLLET; }
static inline uint32_t csys_epollrdhup(void) { return EPOLLRDHUP; }
static inline uint32_t csys_epollerr(void) { return EPOLLERR; }
static inline uint32_t csys_epollhup(void) { return EPOLLHUP; }
static inline int csys_sock_stream(void) { return SOCK_STREAM; }
static inline int csys_sock_nonblock_cloexec(void) { return SOCK_NONBLOCK | SOCK_CLOEXEC; }
static inline int csys_efd_flags(void) { return EFD_NONBLOCK | EFD_CLOEXEC; }
// glibc's malloc tuning, not exported by Swift's Glibc module.
static inline int csys_malloc_trim_threshold(int bytes) { return mallopt(M_TRIM_THRESHOLD, bytes); }
static inline int csys_malloc_arena_max(int arenas) { return mallopt(M_ARENA_MAX, arenas); }
static inline int csys_malloc_top_pad(int bytes) { return mallopt(M_TOP_PAD, bytes); }
// Bytes the heap holds free (not in use, not given back), and giving them back: glibc returns
// only the top of a heap by itself, so a burst of large frees stays resident until malloc_trim.
static inline size_t csys_heap_free_bytes(void) { return mallinfo2().fordblks; }
// Bytes the heap hands out now: small chunks in its arenas plus large ones mapped on their own.
static inline size_t csys_heap_in_use_bytes(void) { struct mallinfo2 m = mallinfo2(); return m.uordblks + m.hblkhd; }
static inline int csys_malloc_trim(void) { return malloc_trim(0); }

// accept4 needs _GNU_SOURCE, which the Swift importer does not define: wrapped in shims.c.
int csys_accept4(int fd, int flags);

#endif
