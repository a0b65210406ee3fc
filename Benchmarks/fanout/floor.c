/*
 * floor: the least a server can do to fan one change out to every subscriber on this machine.
 *
 * It speaks just enough HTTP/1.1 for Benchmarks/fanout.sh and Benchmarks/fanout/fanout.c, which
 * drive it exactly as they drive library-server:
 *
 *   POST /libraries, POST /books    -> 201 {"id":"1"} (the setup's calls; nothing is stored)
 *   GET  /books/{id}/events...      -> an event stream: its head and one snapshot event
 *   PATCH /books/{id} {"title":"T"} -> the event `{"title":"T"}` encoded once, then one send()
 *                                      per subscriber, in the order they came, then 200 {}
 *   anything else                   -> 404
 *
 * Nothing else: no database, no JSON beyond finding the title, no per-subscriber state but the
 * socket, no heartbeats. One thread reads requests (epoll); the sends are spread over one thread
 * per core (`--threads`, default the number of online CPUs), each sending to its share of the
 * subscribers when woken through an eventfd, as a server with a loop per core would. What it costs per subscriber and event is the kernel's
 * loopback send and the receivers' wake-ups: the physical limit that a real server's fan-out is
 * measured against (Benchmarks/fanout-floor.sh runs both in the same rounds). A subscriber whose
 * socket buffer is full loses the event (counted on stderr at exit); with one small event per
 * round that never happens here.
 *
 * With --uring (built with -DFLOOR_URING and Debian's liburing-dev), each sending thread submits
 * its sends through an io_uring of its own, 4,096 at a time, instead of one send() system call
 * each: what batching the system calls is worth when the kernel's work per send stays the same.
 *
 *   cc -O2 -pthread -o floor floor.c
 *   cc -O2 -pthread -DFLOOR_URING -o floor floor.c -luring
 *   floor [--port P] [--threads T] [--uring] [any other library-server flags, ignored]
 *
 * Prints "listening on http://127.0.0.1:PORT" when ready; stops on SIGTERM or SIGINT.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>
#ifdef FLOOR_URING
#include <liburing.h>
#endif

#define MAX_FDS 65536
#define REQUEST_MAX 4096

struct connection {
    char *buf; /* the request read so far (until it is answered) */
    int len;
    int subscriber; /* 1 once it is an event stream */
};

static struct connection conns[MAX_FDS];
static int *subscribers;
static int n_subscribers;
static long event_id;
static atomic_long dropped;

/* The sending threads: each owns the subscribers at indexes i with i % n_senders == its index. */
#define MAX_SENDERS 64
static int n_senders;
static int sender_wake[MAX_SENDERS];
static int sender_done; /* eventfd the senders signal when they have sent one event */
static char event_buf[256];
static int event_len;
static int event_subscribers; /* how many of `subscribers` the current event goes to */

static int use_uring; /* --uring: the sends submitted through io_uring in batches */

#ifdef FLOOR_URING
#define URING_ENTRIES 4096

/* Counts the completions waiting in the ring (a send that did not take the whole event is a
 * dropped event); returns how many there were. */
static unsigned reap(struct io_uring *ring) {
    struct io_uring_cqe *cqe;
    unsigned head, count = 0;
    io_uring_for_each_cqe(ring, head, cqe) {
        if (cqe->res != event_len) atomic_fetch_add(&dropped, 1);
        count++;
    }
    io_uring_cq_advance(ring, count);
    return count;
}

/* One event to this thread's share of the subscribers: a send request each, submitted
 * URING_ENTRIES at a time (one system call per batch instead of one per subscriber; the sockets
 * take a small event at once, so each send completes within the submission). */
static void send_uring(struct io_uring *ring, int index) {
    unsigned pending = 0;
    for (int i = index; i < event_subscribers; i += n_senders) {
        struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
        if (!sqe) {
            io_uring_submit(ring);
            pending -= reap(ring);
            sqe = io_uring_get_sqe(ring);
            if (!sqe) {  /* cannot happen once the submit has emptied the queue; never write through NULL */
                fprintf(stderr, "floor: io_uring submission queue still full after a submit\n");
                exit(1);
            }
        }
        io_uring_prep_send(sqe, subscribers[i], event_buf, (size_t)event_len, MSG_NOSIGNAL | MSG_DONTWAIT);
        pending++;
    }
    io_uring_submit(ring);
    while (pending > 0) {
        unsigned got = reap(ring);
        if (got == 0) {
            struct io_uring_cqe *cqe;
            io_uring_wait_cqe(ring, &cqe);
        }
        pending -= got;
    }
}
#endif

static void *sender(void *arg) {
    int index = (int)(intptr_t)arg;
    uint64_t value;
#ifdef FLOOR_URING
    struct io_uring ring;
    if (use_uring && io_uring_queue_init(URING_ENTRIES, &ring, 0) != 0) {
        perror("floor: io_uring_queue_init");
        exit(1);
    }
#endif
    for (;;) {
        if (read(sender_wake[index], &value, sizeof value) != sizeof value) continue;
#ifdef FLOOR_URING
        if (use_uring) {
            send_uring(&ring, index);
            value = 1;
            (void)write(sender_done, &value, sizeof value);
            continue;
        }
#endif
        for (int i = index; i < event_subscribers; i += n_senders) {
            if (send(subscribers[i], event_buf, (size_t)event_len, MSG_NOSIGNAL | MSG_DONTWAIT) != event_len)
                atomic_fetch_add(&dropped, 1);
        }
        value = 1;
        (void)write(sender_done, &value, sizeof value);
    }
    return NULL;
}
static volatile sig_atomic_t stopping;

static void on_signal(int sig) {
    (void)sig;
    stopping = 1;
}

static void drop(int epfd, int fd) {
    epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
    close(fd);
    free(conns[fd].buf);
    conns[fd].buf = NULL;
    conns[fd].len = 0;
    if (conns[fd].subscriber) {
        conns[fd].subscriber = 0;
        for (int i = 0; i < n_subscribers; i++) {
            if (subscribers[i] == fd) {
                memmove(&subscribers[i], &subscribers[i + 1], (size_t)(n_subscribers - i - 1) * sizeof(int));
                n_subscribers--;
                break;
            }
        }
    }
}

static void reply(int fd, const char *status, const char *body) {
    char out[512];
    int len = snprintf(out, sizeof out,
                       "HTTP/1.1 %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s", status,
                       strlen(body), body);
    (void)send(fd, out, (size_t)len, MSG_NOSIGNAL);
}

/* The event of a PATCH, encoded once and sent to every subscriber, one send() each, by the
 * sending threads at once; returns when all of them are done (the subscriber list is not changed
 * meanwhile: this thread is the only one that changes it). */
static void fan_out(const char *title, int title_len) {
    event_len = snprintf(event_buf, sizeof event_buf, "event: change\nid: %ld\ndata: {\"title\":\"%.*s\"}\n\n",
                         ++event_id, title_len, title);
    event_subscribers = n_subscribers;
    uint64_t one = 1, value;
    for (int i = 0; i < n_senders; i++) (void)write(sender_wake[i], &one, sizeof one);
    for (int done = 0; done < n_senders;) {
        if (read(sender_done, &value, sizeof value) == sizeof value) done += (int)value;
    }
}

/* Handles every complete request in the connection's buffer; returns 0 to keep the connection. */
static int handle(int epfd, int fd) {
    struct connection *c = &conns[fd];
    for (;;) {
        char *end = memmem(c->buf, (size_t)c->len, "\r\n\r\n", 4);
        if (!end) return c->len >= REQUEST_MAX ? -1 : 0;
        int head = (int)(end - c->buf) + 4;
        long body = 0;
        for (char *p = c->buf; p < end; p++) {
            if (*p == '\n' && strncasecmp(p + 1, "content-length:", 15) == 0) body = strtol(p + 16, NULL, 10);
        }
        if (body < 0 || head + body > REQUEST_MAX) return -1;
        if (c->len < head + body) return 0;
        if (strncmp(c->buf, "GET ", 4) == 0 && memmem(c->buf, (size_t)head, "/events", 7)) {
            static const char stream[] =
                "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\n\r\n"
                "retry: 2000\n\nevent: snapshot\nid: 0\ndata: {\"title\":\"initial\"}\n\n";
            if (send(fd, stream, sizeof stream - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof stream - 1)) return -1;
            c->subscriber = 1;
            subscribers[n_subscribers++] = fd;
            free(c->buf);
            c->buf = NULL;
            c->len = 0;
            return 0; /* a stream sends no more requests */
        } else if (strncmp(c->buf, "PATCH ", 6) == 0) {
            char *title = memmem(c->buf + head, (size_t)body, "\"title\":\"", 9);
            if (title) {
                title += 9;
                char *close = memchr(title, '"', (size_t)(c->buf + head + body - title));
                if (close) fan_out(title, (int)(close - title));
            }
            reply(fd, "200 OK", "{}");
        } else if (strncmp(c->buf, "POST ", 5) == 0) {
            reply(fd, "201 Created", "{\"id\":\"1\"}");
        } else {
            reply(fd, "404 Not Found", "{}");
        }
        memmove(c->buf, c->buf + head + body, (size_t)(c->len - head - body));
        c->len -= head + (int)body;
    }
    (void)epfd;
}

int main(int argc, char **argv) {
    int port = 0;
    n_senders = (int)sysconf(_SC_NPROCESSORS_ONLN);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--port") == 0 && i + 1 < argc) port = atoi(argv[++i]);
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) n_senders = atoi(argv[++i]);
        if (strcmp(argv[i], "--uring") == 0) use_uring = 1;
    }
#ifndef FLOOR_URING
    if (use_uring) {
        fprintf(stderr, "floor: built without io_uring (cc -DFLOOR_URING ... -luring)\n");
        return 64;
    }
#endif
    if (n_senders < 1) n_senders = 1;
    if (n_senders > MAX_SENDERS) n_senders = MAX_SENDERS;
    sender_done = eventfd(0, EFD_CLOEXEC);
    for (int i = 0; i < n_senders; i++) {
        sender_wake[i] = eventfd(0, EFD_CLOEXEC);
        pthread_t thread;
        pthread_create(&thread, NULL, sender, (void *)(intptr_t)i);
        pthread_detach(thread);
    }
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    subscribers = malloc(MAX_FDS * sizeof(int));
    if (!subscribers) return 1;

    int listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(listener, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(listener, 4096) != 0) {
        perror("floor: bind/listen");
        return 1;
    }
    socklen_t addr_len = sizeof addr;
    getsockname(listener, (struct sockaddr *)&addr, &addr_len);
    printf("listening on http://127.0.0.1:%d\n", ntohs(addr.sin_port));
    fflush(stdout);

    int epfd = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = listener};
    epoll_ctl(epfd, EPOLL_CTL_ADD, listener, &ev);
    struct epoll_event events[512];
    while (!stopping) {
        int n = epoll_wait(epfd, events, 512, 1000);
        for (int i = 0; i < n; i++) {
            int fd = events[i].data.fd;
            if (fd == listener) {
                int client;
                while ((client = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                    if (client >= MAX_FDS) {
                        close(client);
                        continue;
                    }
                    setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    struct epoll_event cev = {.events = EPOLLIN | EPOLLRDHUP, .data.fd = client};
                    epoll_ctl(epfd, EPOLL_CTL_ADD, client, &cev);
                }
                continue;
            }
            struct connection *c = &conns[fd];
            if (!c->buf && !c->subscriber) c->buf = malloc(REQUEST_MAX);
            char scratch[512];
            char *into = c->subscriber ? scratch : c->buf + c->len;
            size_t room = c->subscriber ? sizeof scratch : (size_t)(REQUEST_MAX - c->len);
            ssize_t got = read(fd, into, room);
            if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) {
                drop(epfd, fd);
                continue;
            }
            if (got < 0 || c->subscriber) continue;
            c->len += (int)got;
            if (handle(epfd, fd) != 0) drop(epfd, fd);
        }
    }
    fprintf(stderr, "floor: %d subscribers at exit, %ld events, %ld sends dropped, %d sending threads%s\n",
            n_subscribers, event_id, atomic_load(&dropped), n_senders, use_uring ? " (io_uring)" : "");
    return 0;
}
