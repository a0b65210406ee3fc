/*
 * fanout: Server-Sent Events fan-out load generator for library-server.
 *
 * Opens N event streams on one book (GET /books/{id}/events?fields=title), waits for every
 * stream's snapshot, then runs R rounds: PATCH the book's title to "<prefix>round-K" over a
 * separate keep-alive connection and time how long each subscriber takes to see an event carrying
 * it.
 *
 * Single-threaded, epoll, C99, Linux only, no dependencies. Only ever connects to 127.0.0.1.
 *
 *   cc -O2 -o fanout fanout.c
 *   fanout [-s setup_timeout_s] [-t round_timeout_s] [-p pause_ms] [-b max_in_flight]
 *          [-g go_wait_s] [-w write_port] [-m prefix] [-a source_address] [-P first_port-last_port]
 *          [-T token_file] [-A patch_token] port book_id [N=18000] [R=20]
 *
 * Source ports: each subscriber socket is bound (SO_REUSEADDR) to an explicit 127.0.0.1 port,
 * walking the local port range, before it connects. Left to connect(), Linux picks even ports
 * first and, once those are used up (about 14,000 connections with the default range), scans them
 * all again on every connect: over a millisecond of client kernel time each, which would show up
 * as a slow setup that is not the server's doing.
 *
 * -w: send the PATCHes to 127.0.0.1:write_port instead of the streams' port (another replica of
 *     the same database: the events then cross replicas). Default: the streams' port.
 * -m: titles are "<prefix>round-K", and the marker looked for is the same quoted title, so that
 *     several fanout processes can run at once on one book without taking each other's rounds for
 *     their own ("round-1" never matches inside "r1-round-1": the marker includes the quotes).
 *     Letters, digits and "-_.:" only, up to 32 characters. Default: empty.
 * -a: bind the subscriber sockets to this source address instead of 127.0.0.1 (any 127.x.y.z:
 *     on Linux the whole of 127.0.0.0/8 is local). Several processes on different source addresses
 *     each have a whole port range to themselves.
 * -P: walk these source ports instead of the local port range (ip_local_port_range). Ports below
 *     that range are never picked by the kernel for connect(): using them leaves the local range
 *     free for every other client on the machine (the PATCH connection, curl, the server's own
 *     database connections), which tens of thousands of explicitly bound ports, whatever their
 *     address, would otherwise exhaust (connect() skips a port any socket has bound explicitly).
 *
 * -T: subscriber i sends "Authorization: Bearer <line i of token_file>" (lines reused when fewer
 *     than N): each subscriber a principal of its own, for a server run with --jwt-keys.
 * -A: the PATCHes send "Authorization: Bearer <patch_token>".
 *
 * -g: after the setup phase print "READY <connected>" and keep serving the streams until SIGUSR1
 *     arrives (or go_wait_s seconds pass) before starting the rounds; the driver script uses the
 *     pause to read the server's memory with every subscriber connected.
 *
 * The last line of output is machine-readable:
 *   RESULT connected=.. subscribers=.. rounds=.. samples=.. received=.. missed=.. p50=.. p90=..
 *          p99=.. max=..   (milliseconds)
 * Exit status: 0 when every subscriber connected and every sample arrived, 1 otherwise, 2 on
 * a usage or setup error.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define TAIL_MAX 64 /* bytes of the previous read kept so a marker split across reads is found */
#define READ_SIZE (64 * 1024)
#define MAX_ATTEMPTS 5 /* connection attempts per subscriber slot during setup */
#define PATCH_TAG UINT32_MAX

enum state { S_IDLE, S_CONNECTING, S_SENT, S_SUBSCRIBED, S_DEAD, S_FAILED };

struct conn {
    int fd;
    uint8_t state;
    uint8_t attempts;
    uint8_t tail_len;
    uint8_t head_len;
    uint16_t source_port; /* 0: chosen by the kernel */
    int32_t done_round; /* last round whose marker this subscriber saw */
    char tail[TAIL_MAX];
    char head[12]; /* "HTTP/1.1 200" */
};

struct retry {
    uint32_t slot;
    double not_before;
};

static struct conn *conns;
static int n_subs = 18000, n_rounds = 20;
static int port, write_port, epfd;
static const char *book_id;
static const char *prefix = "";
static struct in_addr source_addr = {.s_addr = 0}; /* set to 127.0.0.1 in main unless -a */
static double setup_timeout = 60, round_timeout = 30, go_wait = 0;
static int pause_ms = 200, max_in_flight = 1000;
static char request[512];
static int request_len;
static struct sockaddr_in server_addr, write_addr;
static char buf[TAIL_MAX + READ_SIZE];

/* Setup bookkeeping. */
static struct retry *retries;
static size_t retry_head, retry_count;
static uint32_t next_fresh;
static int in_flight, n_subscribed, n_alive;
static long fail_refused, fail_reset, fail_eof, fail_again, fail_other, fail_status, retried;
static long status_counts[600];
static long lost_during_rounds, lost_before_rounds;

/* Round bookkeeping. */
static int current_round;       /* 0 during setup */
static char marker[96];
static size_t marker_len;
static double t0;
static int pending;             /* subscribers yet to see the current round's marker */
static float *samples;          /* n_subs * n_rounds, ms; NAN = missed */

/* Tokens (-T), one per subscriber, and the PATCHes' (-A). */
#define TOKEN_MAX 8192
static char **tokens;
static int n_tokens;
static const char *patch_token;

static void die(const char *fmt, ...);

static void read_tokens(const char *path) {
    FILE *file = fopen(path, "r");
    if (!file) die("cannot open %s: %s", path, strerror(errno));
    static char line[TOKEN_MAX + 2];
    int capacity = 0;
    while (fgets(line, sizeof line, file)) {
        size_t len = strcspn(line, "\r\n");
        if (len == 0) continue;
        if (len > TOKEN_MAX) die("a token in %s is over %d bytes", path, TOKEN_MAX);
        line[len] = 0;
        if (n_tokens == capacity) {
            capacity = capacity ? capacity * 2 : 1024;
            tokens = realloc(tokens, (size_t)capacity * sizeof *tokens);
            if (!tokens) die("out of memory");
        }
        tokens[n_tokens] = strdup(line);
        if (!tokens[n_tokens++]) die("out of memory");
    }
    fclose(file);
    if (n_tokens == 0) die("%s has no token", path);
}

/* The PATCH connection. */
static int patch_fd = -1;
static char patch_buf[8192];
static size_t patch_len;
static int patch_waiting, patch_status;
static double patch_sent, patch_rtt;
static long patch_failures;

static volatile sig_atomic_t go_signal;

/* The local port range (or -P), walked by pick_source_port. */
static int port_lo = 32768, port_hi = 60999, port_next, ports_given;
static uint8_t ports_held[65536 / 8]; /* source ports bound by our open subscriber sockets */

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fanout: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(2);
}

static void on_usr1(int sig) {
    (void)sig;
    go_signal = 1;
}

static void raise_nofile(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) die("getrlimit: %s", strerror(errno));
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) die("setrlimit: %s", strerror(errno));
    if (rl.rlim_cur != RLIM_INFINITY && (rlim_t)n_subs + 32 > rl.rlim_cur) {
        fprintf(stderr, "fanout: open-file limit %llu is too low for %d subscribers; using %d\n",
                (unsigned long long)rl.rlim_cur, n_subs, (int)rl.rlim_cur - 32);
        n_subs = (int)rl.rlim_cur - 32;
    }
}

/* ---------- subscriber connections ---------- */

/* The range given with -P, else the kernel's local port range. */
static void read_port_range(void) {
    FILE *f = ports_given ? NULL : fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) {
        int lo, hi;
        if (fscanf(f, "%d %d", &lo, &hi) == 2 && lo > 0 && hi >= lo && hi <= 65535) {
            port_lo = lo;
            port_hi = hi;
        }
        fclose(f);
    }
    port_next = port_lo;
}

/* Binds fd to the source address (127.0.0.1 unless -a) and the next port of the range that none
 * of our own sockets holds, with SO_REUSEADDR so ports left in TIME_WAIT by earlier runs can be
 * taken again (their 4-tuples differ: the server listens on a fresh port each run; a clash makes
 * connect fail with EADDRNOTAVAIL and the slot is retried). Returns the port, or 0 when the socket
 * was left for the kernel to bind at connect. */
static uint16_t pick_source_port(int fd) {
    struct sockaddr_in local = {.sin_family = AF_INET, .sin_addr = source_addr};
    int one = 1, refused = 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    for (int tries = 0, span = port_hi - port_lo + 1; tries < span; tries++) {
        int p = port_next;
        port_next = port_next == port_hi ? port_lo : port_next + 1;
        if (p == port || p == write_port || (ports_held[p >> 3] & (1u << (p & 7)))) continue;
        local.sin_port = htons((uint16_t)p);
        if (bind(fd, (struct sockaddr *)&local, sizeof local) == 0) {
            ports_held[p >> 3] |= (uint8_t)(1u << (p & 7));
            return (uint16_t)p;
        }
        if (errno != EADDRINUSE || ++refused > 64) break;
    }
    return 0;
}

static void schedule_retry(uint32_t slot, double delay) {
    struct conn *c = &conns[slot];
    if (c->attempts >= MAX_ATTEMPTS || current_round > 0) {
        c->state = S_FAILED;
        return;
    }
    c->state = S_IDLE;
    retried++;
    size_t at = (retry_head + retry_count) % (size_t)n_subs;
    retries[at].slot = slot;
    retries[at].not_before = now() + delay;
    retry_count++;
}

static void close_conn(uint32_t slot) {
    struct conn *c = &conns[slot];
    if (c->fd >= 0) {
        close(c->fd); /* also removes it from the epoll set */
        c->fd = -1;
        ports_held[c->source_port >> 3] &= (uint8_t)~(1u << (c->source_port & 7));
        c->source_port = 0;
    }
    if (c->state == S_CONNECTING || c->state == S_SENT) in_flight--;
    if (c->state == S_SUBSCRIBED) {
        n_alive--;
        if (current_round > 0) {
            lost_during_rounds++;
            if (c->done_round < current_round) pending--;
        }
    }
}

/* A connection failed or was closed. Before its snapshot: count why and try again (setup only);
 * after it: the stream is lost. */
static void setup_failure(uint32_t slot, int err) {
    int was_subscribed = conns[slot].state == S_SUBSCRIBED;
    close_conn(slot);
    if (was_subscribed) {
        if (current_round == 0) lost_before_rounds++;
        conns[slot].state = S_DEAD;
        return;
    }
    switch (err) {
    case ECONNREFUSED: fail_refused++; break;
    case ECONNRESET: case EPIPE: fail_reset++; break;
    case 0: fail_eof++; break;
    case EAGAIN: case EADDRNOTAVAIL: case EADDRINUSE: fail_again++; break;
    default: fail_other++; break;
    }
    schedule_retry(slot, err == EAGAIN || err == EADDRNOTAVAIL ? 0.2 : 0.05);
}

static int send_request(uint32_t slot) {
    struct conn *c = &conns[slot];
    const char *message = request;
    int length = request_len;
    char with_token[TOKEN_MAX + 512];
    if (n_tokens > 0) {
        length = snprintf(with_token, sizeof with_token, "%.*sAuthorization: Bearer %s\r\n\r\n", request_len - 2,
                          request, tokens[slot % (uint32_t)n_tokens]);
        message = with_token;
    }
    ssize_t n = send(c->fd, message, (size_t)length, MSG_NOSIGNAL);
    if (n != length) return n < 0 ? errno : EIO; /* a send of a few hundred bytes on a new socket never splits */
    c->state = S_SENT;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.u32 = slot};
    if (epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev) != 0) return errno;
    return 0;
}

static void start_connect(uint32_t slot) {
    struct conn *c = &conns[slot];
    c->attempts++;
    c->tail_len = 0;
    c->head_len = 0;
    c->done_round = 0;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        fail_other++;
        if (errno == EMFILE || errno == ENFILE) {
            fprintf(stderr, "fanout: socket: %s\n", strerror(errno));
            c->state = S_FAILED;
            return;
        }
        schedule_retry(slot, 0.2);
        return;
    }
    c->source_port = pick_source_port(fd);
    c->fd = fd;
    c->state = S_CONNECTING;
    in_flight++;
    struct epoll_event ev = {.events = EPOLLOUT | EPOLLIN | EPOLLRDHUP, .data.u32 = slot};
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) != 0) die("epoll_ctl: %s", strerror(errno));
    if (connect(fd, (struct sockaddr *)&server_addr, sizeof server_addr) == 0) {
        int err = send_request(slot);
        if (err) setup_failure(slot, err);
    } else if (errno != EINPROGRESS) {
        setup_failure(slot, errno);
    }
}

/* Starts as many connections as the in-flight budget allows: retries that are due, then fresh slots. */
static void pump_connects(void) {
    double t = now();
    while (in_flight < max_in_flight) {
        if (retry_count > 0 && retries[retry_head].not_before <= t) {
            uint32_t slot = retries[retry_head].slot;
            retry_head = (retry_head + 1) % (size_t)n_subs;
            retry_count--;
            start_connect(slot);
        } else if (next_fresh < (uint32_t)n_subs) {
            start_connect(next_fresh++);
        } else {
            break;
        }
    }
}

static void on_marker(uint32_t slot, double t) {
    struct conn *c = &conns[slot];
    c->done_round = current_round;
    samples[(size_t)(current_round - 1) * (size_t)n_subs + slot] = (float)((t - t0) * 1000.0);
    pending--;
}

/* Scans `len` bytes (the previous tail already copied in front) for the marker that matters now. */
static void scan(uint32_t slot, size_t len, double t) {
    struct conn *c = &conns[slot];
    if (c->state == S_SENT) {
        if (memmem(buf, len, "event: snapshot", 15)) {
            c->state = S_SUBSCRIBED;
            in_flight--;
            n_subscribed++;
            n_alive++;
        }
    } else if (c->state == S_SUBSCRIBED && current_round > 0 && c->done_round < current_round) {
        if (memmem(buf, len, marker, marker_len)) on_marker(slot, t);
    }
    size_t keep = len < TAIL_MAX ? len : TAIL_MAX;
    memcpy(c->tail, buf + len - keep, keep);
    c->tail_len = (uint8_t)keep;
}

static void on_subscriber_event(uint32_t slot, uint32_t events, double t) {
    struct conn *c = &conns[slot];
    if (c->state == S_CONNECTING) {
        if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) return;
        int err = 0;
        socklen_t len = sizeof err;
        getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err == 0 && (events & EPOLLOUT)) err = send_request(slot);
        else if (err == 0) err = ECONNRESET;
        if (err) setup_failure(slot, err);
        return;
    }
    if (c->state != S_SENT && c->state != S_SUBSCRIBED) return;
    for (;;) {
        memcpy(buf, c->tail, c->tail_len);
        ssize_t n = read(c->fd, buf + c->tail_len, READ_SIZE);
        if (n > 0) {
            /* The status line, checked once from the first bytes of the response. */
            if (c->head_len < sizeof c->head) {
                size_t take = sizeof c->head - c->head_len;
                if ((size_t)n < take) take = (size_t)n;
                memcpy(c->head + c->head_len, buf + c->tail_len, take);
                c->head_len += (uint8_t)take;
                if (c->head_len == sizeof c->head && memcmp(c->head, "HTTP/1.1 200", 12) != 0) {
                    int code = 0; /* the head is not NUL-terminated: read its three digits */
                    for (int d = 9; d < 12 && c->head[d] >= '0' && c->head[d] <= '9'; d++)
                        code = code * 10 + (c->head[d] - '0');
                    if (code > 0 && code < 600) status_counts[code]++;
                    fail_status++;
                    close_conn(slot);
                    c->state = S_FAILED; /* an error status is an answer, not a transient failure */
                    return;
                }
            }
            scan(slot, c->tail_len + (size_t)n, t);
            if (n < READ_SIZE) return; /* level-triggered: anything left reports again */
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) return;
        setup_failure(slot, n == 0 ? 0 : errno);
        return;
    }
}

/* ---------- the PATCH connection ---------- */

static int open_patch_connection(void) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&write_addr, sizeof write_addr) != 0) {
        close(fd);
        return -1;
    }
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.u32 = PATCH_TAG};
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) != 0) die("epoll_ctl: %s", strerror(errno));
    patch_len = 0;
    return fd;
}

static void close_patch_connection(void) {
    if (patch_fd >= 0) close(patch_fd);
    patch_fd = -1;
    patch_len = 0;
}

/* Sends PATCH /books/{id} {"title":value} on the blocking keep-alive connection; t0 is taken
 * right before the send. */
static int send_patch(const char *value) {
    if (patch_fd < 0 && (patch_fd = open_patch_connection()) < 0) return -1;
    char body[128], msg[TOKEN_MAX + 768];
    int body_len = snprintf(body, sizeof body, "{\"title\":\"%s\"}", value);
    int len = snprintf(msg, sizeof msg,
                       "PATCH /books/%s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
                       "%s%s%sContent-Length: %d\r\n\r\n%s",
                       book_id, write_port, patch_token ? "Authorization: Bearer " : "", patch_token ? patch_token : "",
                       patch_token ? "\r\n" : "", body_len, body);
    t0 = now();
    patch_sent = t0;
    ssize_t n = send(patch_fd, msg, (size_t)len, MSG_NOSIGNAL);
    if (n != len) {
        close_patch_connection();
        return -1;
    }
    patch_waiting = 1;
    patch_status = 0;
    return 0;
}

/* Reads the PATCH response (Content-Length framed); one read per readiness report, so the
 * blocking socket never blocks. */
static void on_patch_event(double t) {
    if (patch_len == sizeof patch_buf) patch_len = 0; /* nonsense; start over */
    ssize_t n = read(patch_fd, patch_buf + patch_len, sizeof patch_buf - patch_len);
    if (n <= 0) {
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
        if (patch_waiting) patch_failures++;
        patch_waiting = 0;
        close_patch_connection();
        return;
    }
    patch_len += (size_t)n;
    for (;;) {
        char *end = memmem(patch_buf, patch_len, "\r\n\r\n", 4);
        if (!end) return;
        size_t head = (size_t)(end - patch_buf) + 4;
        long body = 0;
        int close_after = 0;
        for (char *p = patch_buf; p < end; p++) {
            if (*p != '\n') continue;
            if (strncasecmp(p + 1, "content-length:", 15) == 0) body = strtol(p + 16, NULL, 10);
            if (strncasecmp(p + 1, "connection: close", 17) == 0) close_after = 1;
        }
        if (patch_len < head + (size_t)body) return;
        int status = atoi(patch_buf + 9);
        if (patch_waiting) {
            patch_status = status;
            patch_rtt = t - patch_sent;
            patch_waiting = 0;
            if (status != 200) {
                patch_failures++;
                fprintf(stderr, "fanout: PATCH answered %d: %.*s\n", status, (int)(patch_len - head),
                        patch_buf + head);
            }
        }
        memmove(patch_buf, patch_buf + head + body, patch_len - head - (size_t)body);
        patch_len -= head + (size_t)body;
        if (close_after) {
            close_patch_connection();
            return;
        }
    }
}

/* ---------- the loop ---------- */

static void poll_once(int timeout_ms) {
    static struct epoll_event events[1024];
    int n = epoll_wait(epfd, events, 1024, timeout_ms);
    if (n < 0) {
        if (errno == EINTR) return;
        die("epoll_wait: %s", strerror(errno));
    }
    for (int i = 0; i < n; i++) {
        double t = now();
        uint32_t tag = events[i].data.u32;
        if (tag == PATCH_TAG) {
            if (patch_fd >= 0) on_patch_event(t);
        } else {
            on_subscriber_event(tag, events[i].events, t);
        }
    }
}

static int remaining_ms(double deadline) {
    double left = deadline - now();
    if (left <= 0) return 0;
    int ms = (int)(left * 1000) + 1;
    return ms > 100 ? 100 : ms;
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted values. */
static double pct(const float *sorted, size_t n, double p) {
    if (n == 0) return NAN;
    size_t rank = (size_t)ceil(p * (double)n);
    if (rank < 1) rank = 1;
    if (rank > n) rank = n;
    return sorted[rank - 1];
}

static void usage(void) {
    fprintf(stderr,
            "usage: fanout [-s setup_timeout_s] [-t round_timeout_s] [-p pause_ms] [-b max_in_flight]\n"
            "              [-g go_wait_s] [-w write_port] [-m prefix] [-a source_address]\n"
            "              [-P first_port-last_port] [-T token_file] [-A patch_token]\n"
            "              port book_id [subscribers=18000] [rounds=20]\n");
    exit(2);
}

int main(int argc, char **argv) {
    int opt;
    while ((opt = getopt(argc, argv, "s:t:p:b:g:w:m:a:P:T:A:")) != -1) {
        switch (opt) {
        case 's': setup_timeout = atof(optarg); break;
        case 't': round_timeout = atof(optarg); break;
        case 'p': pause_ms = atoi(optarg); break;
        case 'b': max_in_flight = atoi(optarg); break;
        case 'g': go_wait = atof(optarg); break;
        case 'w': write_port = atoi(optarg); if (write_port <= 0 || write_port > 65535) usage(); break;
        case 'm':
            prefix = optarg;
            if (strlen(prefix) > 32 || strspn(prefix, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                      "0123456789-_.:") != strlen(prefix))
                die("bad prefix (letters, digits and -_.: only, up to 32 characters)");
            break;
        case 'a':
            if (inet_pton(AF_INET, optarg, &source_addr) != 1 || (ntohl(source_addr.s_addr) >> 24) != 127)
                die("bad source address %s (an IPv4 address in 127.0.0.0/8)", optarg);
            break;
        case 'P':
            if (sscanf(optarg, "%d-%d", &port_lo, &port_hi) != 2 || port_lo < 1024 || port_hi < port_lo ||
                port_hi > 65535)
                die("bad port range %s (first-last, within 1024-65535)", optarg);
            ports_given = 1;
            break;
        case 'T': read_tokens(optarg); break;
        case 'A':
            if (strlen(optarg) > TOKEN_MAX || strpbrk(optarg, "\r\n")) die("bad patch token");
            patch_token = optarg;
            break;
        default: usage();
        }
    }
    if (argc - optind < 2 || argc - optind > 4) usage();
    port = atoi(argv[optind]);
    book_id = argv[optind + 1];
    if (argc - optind > 2) n_subs = atoi(argv[optind + 2]);
    if (argc - optind > 3) n_rounds = atoi(argv[optind + 3]);
    if (port <= 0 || port > 65535 || n_subs <= 0 || n_rounds < 0 || max_in_flight <= 0) usage();
    if (strlen(book_id) > 200 || strpbrk(book_id, " \r\n/?#")) die("bad book id");
    if (write_port == 0) write_port = port;
    if (source_addr.s_addr == 0) source_addr.s_addr = htonl(INADDR_LOOPBACK);
    setvbuf(stdout, NULL, _IOLBF, 0);

    raise_nofile();
    read_port_range();
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigaction(SIGUSR1, &sa, NULL);

    server_addr.sin_family = AF_INET;
    server_addr.sin_port = htons((uint16_t)port);
    server_addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    write_addr = server_addr;
    write_addr.sin_port = htons((uint16_t)write_port);
    request_len = snprintf(request, sizeof request,
                           "GET /books/%s/events?fields=title HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                           "Accept: text/event-stream\r\n\r\n",
                           book_id, port);

    conns = calloc((size_t)n_subs, sizeof *conns);
    retries = calloc((size_t)n_subs, sizeof *retries);
    samples = malloc((size_t)n_subs * (size_t)(n_rounds > 0 ? n_rounds : 1) * sizeof *samples);
    if (!conns || !retries || !samples) die("out of memory");
    for (int i = 0; i < n_subs; i++) conns[i].fd = -1;
    epfd = epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0) die("epoll_create1: %s", strerror(errno));

    printf("fanout: 127.0.0.1:%d book %s, %d subscribers, %d rounds\n", port, book_id, n_subs, n_rounds);
    if (write_port != port || *prefix || source_addr.s_addr != htonl(INADDR_LOOPBACK) || ports_given) {
        char source[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &source_addr, source, sizeof source);
        printf("  PATCH to 127.0.0.1:%d, titles \"%sround-K\", streams from %s ports %d-%d\n", write_port, prefix,
               source, port_lo, port_hi);
    }

    /* Setup: connect everybody and wait for every snapshot. */
    double setup_start = now(), setup_deadline = setup_start + setup_timeout, next_report = setup_start + 5;
    for (;;) {
        pump_connects();
        if (n_subscribed == n_subs) break;
        if (in_flight == 0 && retry_count == 0 && next_fresh == (uint32_t)n_subs) break; /* all failed */
        double t = now();
        if (t >= setup_deadline) break;
        if (t >= next_report) {
            printf("  ... %d subscribed, %d in flight, %zu to retry (%.0f s)\n", n_subscribed, in_flight,
                   retry_count, t - setup_start);
            next_report += 5;
        }
        poll_once(remaining_ms(setup_deadline));
    }
    double setup_time = now() - setup_start;
    /* Whatever is still half-open is given up. */
    long gave_up = 0;
    for (int i = 0; i < n_subs; i++) {
        if (conns[i].state == S_CONNECTING || conns[i].state == S_SENT || conns[i].state == S_IDLE) {
            close_conn((uint32_t)i);
            conns[i].state = S_FAILED;
            gave_up++;
        }
    }
    retry_count = 0;
    printf("subscribers connected: %d/%d in %.2f s (snapshot received)\n", n_subscribed, n_subs, setup_time);
    if (lost_before_rounds) printf("  %ld of them closed again before the rounds\n", lost_before_rounds);
    if (retried || gave_up || fail_status)
        printf("  setup trouble: %ld retries; refused %ld, reset %ld, closed before snapshot %ld, "
               "no source address (EAGAIN/EADDRNOTAVAIL/EADDRINUSE) %ld, other %ld, non-200 status %ld, timed out %ld\n",
               retried, fail_refused, fail_reset, fail_eof, fail_again, fail_other, fail_status, gave_up);
    for (int code = 0; code < 600; code++)
        if (status_counts[code]) printf("  status %d: %ld connections\n", code, status_counts[code]);

    if (go_wait > 0) {
        printf("READY %d\n", n_subscribed);
        double deadline = now() + go_wait;
        while (!go_signal && now() < deadline) poll_once(remaining_ms(deadline));
        if (!go_signal) printf("  (no go signal after %.0f s; starting anyway)\n", go_wait);
        if (lost_before_rounds) printf("  %ld streams closed before the rounds; %d open\n", lost_before_rounds, n_alive);
    }

    /* Rounds. */
    for (int k = 1; k <= n_rounds; k++) {
        float *row = samples + (size_t)(k - 1) * (size_t)n_subs;
        for (int i = 0; i < n_subs; i++) row[i] = NAN;
        current_round = k;
        char value[64];
        snprintf(value, sizeof value, "%sround-%d", prefix, k);
        marker_len = (size_t)snprintf(marker, sizeof marker, "\"%s\"", value);
        pending = n_alive;
        int sent = send_patch(value) == 0;
        if (!sent) {
            patch_failures++;
            fprintf(stderr, "fanout: round %d: could not send the PATCH\n", k);
        }
        double deadline = t0 + round_timeout;
        while (sent && (pending > 0 || patch_waiting) && now() < deadline) poll_once(remaining_ms(deadline));
        double round_end = now();
        /* Stragglers of this round count as missed from here on: the marker moves on. */

        /* Per-round figures. */
        float *sorted = malloc((size_t)n_subs * sizeof *sorted);
        size_t got = 0;
        for (int i = 0; i < n_subs; i++)
            if (!isnan(row[i])) sorted[got++] = row[i];
        qsort(sorted, got, sizeof *sorted, cmp_float);
        printf("round %2d: received %zu/%d  p50 %8.2f ms  p99 %8.2f ms  max %8.2f ms  (PATCH %d in %.2f ms%s)\n", k,
               got, n_subscribed, pct(sorted, got, 0.50), pct(sorted, got, 0.99), got ? sorted[got - 1] : NAN,
               patch_status, patch_waiting ? (round_end - patch_sent) * 1000 : patch_rtt * 1000,
               patch_waiting ? ", no answer yet" : "");
        free(sorted);
        if (patch_waiting) close_patch_connection(); /* its late answer would confuse the next round */
        patch_waiting = 0;

        /* Pause, still reading so nothing backs up. */
        double pause_end = now() + pause_ms / 1000.0;
        while (now() < pause_end) poll_once(remaining_ms(pause_end));
    }
    current_round = n_rounds + 1; /* late events no longer count */

    /* Overall figures over every (subscriber, round) sample of the subscribers that connected. */
    size_t total = (size_t)n_subscribed * (size_t)n_rounds, got = 0;
    float *all = malloc(((size_t)n_subs * (size_t)(n_rounds > 0 ? n_rounds : 1)) * sizeof *all);
    if (!all) die("out of memory");
    for (int k = 0; k < n_rounds; k++)
        for (int i = 0; i < n_subs; i++) {
            float v = samples[(size_t)k * (size_t)n_subs + (size_t)i];
            if (!isnan(v)) all[got++] = v;
        }
    qsort(all, got, sizeof *all, cmp_float);
    size_t missed = total - got;
    double p50 = pct(all, got, 0.50), p90 = pct(all, got, 0.90), p99 = pct(all, got, 0.99),
           mx = got ? all[got - 1] : NAN;
    printf("overall: %zu samples (%d subscribers x %d rounds), %zu received, %zu missed (timeout %.0f s)\n", total,
           n_subscribed, n_rounds, got, missed, round_timeout);
    printf("latency ms: p50 %.2f  p90 %.2f  p99 %.2f  max %.2f\n", p50, p90, p99, mx);
    if (lost_during_rounds) printf("  %ld subscriber streams closed during the rounds\n", lost_during_rounds);
    if (patch_failures) printf("  %ld PATCH requests failed\n", patch_failures);
    printf("RESULT connected=%d subscribers=%d rounds=%d samples=%zu received=%zu missed=%zu p50=%.2f p90=%.2f "
           "p99=%.2f max=%.2f lost=%ld patch_failures=%ld\n",
           n_subscribed, n_subs, n_rounds, total, got, missed, p50, p90, p99, mx, lost_before_rounds + lost_during_rounds,
           patch_failures);

    for (int i = 0; i < n_subs; i++)
        if (conns[i].fd >= 0) close(conns[i].fd);
    close_patch_connection();
    return (n_subscribed == n_subs && missed == 0 && patch_failures == 0) ? 0 : 1;
}
