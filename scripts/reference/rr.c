/* Independent TCP request/response reference for hostbench's TCP round-trip figures: the method of
 * netperf's TCP_RR and TCP_CRR tests (netperf is not packaged in Debian), written from scratch here
 * from its published description, not from its code.
 *
 * Both modes use blocking IPv4 TCP sockets with TCP_NODELAY set on every one of them (listeners,
 * accepted and connected sockets). A request is REQUEST bytes all equal to one byte b (b = the
 * pair's transaction sequence number mod 256); the server reads exactly REQUEST bytes, checks they
 * are all equal, and answers with RESPONSE bytes all equal to b ^ 0xA5. The client checks every
 * response byte against the byte of the request it answers, so a missing, stale, short, misframed
 * or echoed reply ends the run with an error.
 *
 * --mode rr (TCP_RR): each of PAIRS client threads has one long-lived connection, served by its own
 * server thread. The client writes OUTSTANDING requests (each its own write()), then for every
 * response it reads (exactly RESPONSE bytes) it writes one more request, so OUTSTANDING stay in
 * flight (netperf's --enable-burst with burst size OUTSTANDING-1; OUTSTANDING=1 is plain
 * TCP_RR). After the timed span it writes no more requests and drains the ones still in flight.
 * The server thread reads one request (read() of at most REQUEST bytes until complete) and writes
 * one response, over and over. Before the timing, each rr connection opens with a 4-byte pair
 * number from the client and a 1-byte ack from the server thread once it is pinned; after that
 * only requests and responses cross it. OUTSTANDING x max(REQUEST, RESPONSE) must fit in the
 * socket buffers (as in netperf), or both ends block in write(); the stall check below catches that.
 * --mode crr (TCP_CRR): each client thread loops serially over: socket(), TCP_NODELAY, connect(),
 * write the request, read the full response, read until EOF, close(). The SERVER closes first,
 * right after writing its response (HTTP/1.0 order), so TIME_WAIT lands on the server side and not
 * on the client's ephemeral ports; a transaction counts only once the client has seen that EOF
 * (more bytes than RESPONSE is an error). PAIRS server threads all block in accept() on one
 * listening socket; each accepts, sets TCP_NODELAY, reads the request, writes the response,
 * close()s. If connect() fails with EADDRNOTAVAIL (ephemeral ports exhausted) the run stops with an
 * error saying so instead of retrying.
 *
 * Timing: all client threads set up (pin, and in rr connect and handshake), then start together
 * at t0. Transactions that complete in [t0, t0 + WARMUP) are warm-up; those that complete in the
 * timed span [t0 + WARMUP, t0 + WARMUP + SECONDS) are counted; clients start no new transaction
 * after the span ends. transactions_per_s = transactions counted (summed over pairs) / SECONDS.
 * Latency per counted transaction, clock_gettime(CLOCK_MONOTONIC) in ns: in rr from just before
 * the write() of a request to just after the read() that completes its response (with OUTSTANDING
 * > 1 this includes the time the request waits behind the ones ahead of it); in crr the whole
 * transaction, from just before socket() to just after close() (connect handshake, request,
 * response, EOF, close), which is netperf's CRR transaction time. The latencies of all pairs go
 * into one log-linear histogram in memory: exact 1 ns buckets below 256 ns, above that 128 buckets
 * per power of two (bucket width <= 1/128 = 0.78% of its value; reported at the bucket midpoint,
 * so within 0.4%). p50/p90/p99 are nearest-rank percentiles; max is the exact maximum.
 *
 * Checks (a failure prints `rr: ...` naming the call and errno string and exits 1): every socket
 * call; every request and response byte; EOF inside a message; at the end the server reports how
 * many transactions it served and that must equal the number the client completed (warm-up, timed
 * and drained ones together); client threads still running 30 s after the timed span ended are a
 * stall. A pair with no transaction in the timed span gets a `# warning` line on stderr.
 *
 * Process layout: by default one process runs both ends on 127.0.0.1: a server thread listens on
 * an ephemeral control port, the client connects to it as a remote client would. `--server --port
 * P` runs only the server, on 0.0.0.0:P, until killed; `--host H --port P` runs only the client
 * against such a server (e.g. across two network namespaces). Per run the client opens a control
 * connection and sends mode, pairs, sizes; the server opens a data listener on an ephemeral port of
 * the same address, starts its threads, answers with that port; at the end the client sends `done`
 * and reads back the served count. Nothing on the control connection happens during the timing.
 * --cpus LIST pins client thread i to the (i mod n)-th CPU of LIST and, in rr, the server thread
 * of pair i to the same CPU (each process uses its own --cpus in split mode); `--cpus 0` puts both
 * ends of every pair on CPU 0. In crr, server thread i is pinned to the (i mod n)-th CPU but
 * connections from any pair may reach any server thread (one shared accept queue). Without
 * --cpus nothing is pinned. A server-side error (including a client vanishing mid-transaction)
 * also exits 1: the whole process in the default layout; with --server each control connection is
 * served by a forked child process, so the error ends that run's child and the server goes on.
 *
 * Build: gcc -O2 -pthread -Wall -Wextra -o /tmp/rr scripts/reference/rr.c
 * Usage: rr [--mode rr|crr (default rr)] [--pairs P (default 1)] [--outstanding N (rr only, default 1)]
 *           [--request BYTES (default 1)] [--response BYTES (default 1)] [--seconds T (default 5)]
 *           [--warmup W (default 0.5)] [--runs K (default 1)] [--cpus LIST (e.g. 0 or 0-3,8)]
 *           [--host H --port P (client only, against `rr --server`)]
 *        rr --server [--port P (default 0 = ephemeral)] [--cpus LIST]
 * Output: TSV on stdout, one line per run under the header
 * `# mode pairs outstanding request response seconds transactions transactions_per_s p50_us p90_us p99_us max_us`.
 * Setup messages and warnings go to stderr as `#` lines.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define MAX_PAIRS 1024
#define MAX_OUTSTANDING 65536
#define MAX_MSG (64L << 20)
#define MAGIC 0x52524231u /* "RRB1" */
#define DONE 0x444f4e45u  /* "DONE" */
#define STALL_S 30
#define RESPONSE_XOR 0xA5

enum { MODE_RR = 1, MODE_CRR = 2 };

/* ---- options (one process: the server side uses the same --cpus list) ---- */
static int g_ncpus, g_cpus[CPU_SETSIZE];

/* Print `rr: MESSAGE` in one write and exit 1; when several threads fail at once (one error often
 * causes others), only the first one speaks. */
static void die(const char *fmt, ...) {
    static int dying;
    if (__atomic_exchange_n(&dying, 1, __ATOMIC_ACQ_REL))
        for (;;) pause(); /* the first one is on its way to exit() */
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg + 4, sizeof msg - 5, fmt, ap);
    va_end(ap);
    memcpy(msg, "rr: ", 4);
    n = n < 0 ? 4 : (n > (int)sizeof msg - 6 ? (int)sizeof msg - 2 : n + 4);
    msg[n++] = '\n';
    fflush(stdout);
    if (write(2, msg, (size_t)n) < 0) { /* nothing more to do */
    }
    exit(1);
}

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void pin_self(int slot, const char *who) {
    if (!g_ncpus) return;
    int cpu = g_cpus[slot % g_ncpus];
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    int e = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    if (e) die("%s: pthread_setaffinity_np(cpu %d): %s", who, cpu, strerror(e));
    if (sched_getcpu() != cpu) die("%s: thread is not running on cpu %d it was pinned to", who, cpu);
}

/* ---- histogram: exact below 256 ns, then 128 log-linear buckets per power of two ---- */
#define SUB_BITS 7
#define MAX_EXP 40 /* values clamped below 2^41 ns (~36 min) */
#define HIST_BUCKETS ((MAX_EXP - SUB_BITS + 2) << SUB_BITS)

static inline unsigned hist_index(uint64_t v) {
    if (v >= (1ull << (MAX_EXP + 1))) v = (1ull << (MAX_EXP + 1)) - 1;
    if (v < (2u << SUB_BITS)) return (unsigned)v;
    unsigned shift = (unsigned)(63 - __builtin_clzll(v)) - SUB_BITS;
    return (shift << SUB_BITS) + (unsigned)(v >> shift);
}
static double hist_mid(unsigned idx) {
    if (idx < (2u << SUB_BITS)) return idx;
    unsigned shift = (idx >> SUB_BITS) - 1;
    uint64_t m = idx - (shift << SUB_BITS), low = m << shift, width = 1ull << shift;
    return (double)low + (double)(width - 1) / 2;
}
/* Nearest-rank percentile q (0 < q <= 1) of n values, in ns, clamped to the exact maximum. */
static double hist_pct(const uint64_t *h, uint64_t n, double q, uint64_t max) {
    uint64_t rank = (uint64_t)(q * (double)n);
    if ((double)rank < q * (double)n) rank++;
    if (rank < 1) rank = 1;
    uint64_t cum = 0;
    for (unsigned i = 0; i < HIST_BUCKETS; i++) {
        cum += h[i];
        if (cum >= rank) {
            double v = hist_mid(i);
            return v > (double)max ? (double)max : v;
        }
    }
    return (double)max;
}

/* ---- socket helpers ---- */
static void set_nodelay(int fd, const char *who) {
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one))
        die("%s: setsockopt(TCP_NODELAY): %s", who, strerror(errno));
}
/* Read exactly n bytes; fewer only at end of stream (the caller decides whether that is an error). */
static size_t read_full(int fd, void *buf, size_t n, const char *who, const char *what) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (char *)buf + got, n - got);
        if (r > 0) got += (size_t)r;
        else if (r == 0) break;
        else if (errno != EINTR) die("%s: read (%s): %s", who, what, strerror(errno));
    }
    return got;
}
static void read_exact(int fd, void *buf, size_t n, const char *who, const char *what) {
    size_t got = read_full(fd, buf, n, who, what);
    if (got != n) die("%s: read (%s): end of stream after %zu of %zu bytes", who, what, got, n);
}
static void write_full(int fd, const void *buf, size_t n, const char *who, const char *what) {
    size_t put = 0;
    while (put < n) {
        ssize_t r = write(fd, (const char *)buf + put, n - put);
        if (r > 0) put += (size_t)r;
        else if (r < 0 && errno != EINTR) die("%s: write (%s): %s", who, what, strerror(errno));
    }
}
static void send_u32(int fd, const uint32_t *v, int n, const char *what) {
    uint32_t b[8];
    for (int i = 0; i < n; i++) b[i] = htonl(v[i]);
    write_full(fd, b, (size_t)n * 4, "control", what);
}
static void recv_u32(int fd, uint32_t *v, int n, const char *who, const char *what) {
    read_exact(fd, v, (size_t)n * 4, who, what);
    for (int i = 0; i < n; i++) v[i] = ntohl(v[i]);
}
static int tcp_listen(struct sockaddr_in *addr, int backlog, const char *who) {
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    if (fd < 0) die("%s: socket: %s", who, strerror(errno));
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one))
        die("%s: setsockopt(SO_REUSEADDR): %s", who, strerror(errno));
    set_nodelay(fd, who);
    if (bind(fd, (struct sockaddr *)addr, sizeof *addr))
        die("%s: bind(%s:%d): %s", who, inet_ntoa(addr->sin_addr), ntohs(addr->sin_port), strerror(errno));
    if (listen(fd, backlog)) die("%s: listen: %s", who, strerror(errno));
    socklen_t len = sizeof *addr;
    if (getsockname(fd, (struct sockaddr *)addr, &len)) die("%s: getsockname: %s", who, strerror(errno));
    return fd;
}
static void check_request(const unsigned char *req, size_t n, const char *who) {
    for (size_t i = 1; i < n; i++)
        if (req[i] != req[0])
            die("%s: request byte %zu is 0x%02x, byte 0 is 0x%02x (misframed request)", who, i, req[i], req[0]);
}
static void check_response(const unsigned char *resp, size_t n, unsigned char want, const char *who, uint64_t seq) {
    for (size_t i = 0; i < n; i++)
        if (resp[i] != want)
            die("%s: transaction %llu: response byte %zu is 0x%02x, expected 0x%02x (stale, misframed or wrong reply)",
                who, (unsigned long long)seq, i, resp[i], want);
}

/* ---- server ---- */
struct session;
struct server_thread {
    struct session *s;
    int idx, fd; /* rr: the accepted connection; crr: unused */
    uint64_t served;
    pthread_t th;
};
struct session {
    int cfd, lfd, mode, pairs, stop;
    size_t request, response;
    struct server_thread *t;
};

static void serve_one(int fd, unsigned char *req, unsigned char *resp, size_t R, size_t S,
                      unsigned char *last, const char *who) {
    check_request(req, R, who);
    unsigned char b = req[0] ^ RESPONSE_XOR;
    if (b != *last) {
        memset(resp, b, S);
        *last = b;
    }
    write_full(fd, resp, S, who, "response");
}

static void *rr_server_main(void *p) {
    struct server_thread *t = p;
    struct session *s = t->s;
    char who[48];
    uint32_t hello;
    recv_u32(t->fd, &hello, 1, "server", "rr hello");
    if (hello >= (uint32_t)s->pairs) die("server: rr hello names pair %u of %d", hello, s->pairs);
    snprintf(who, sizeof who, "server pair %u", hello);
    pin_self((int)hello, who);
    unsigned char ack = 1, last;
    write_full(t->fd, &ack, 1, who, "rr hello ack");
    unsigned char *req = malloc(s->request), *resp = malloc(s->response);
    if (!req || !resp) die("%s: out of memory", who);
    memset(resp, 0, s->response);
    last = 0;
    for (;;) {
        size_t got = read_full(t->fd, req, s->request, who, "request");
        if (got == 0) break; /* the client closed between requests: end of run */
        if (got != s->request) die("%s: read (request): end of stream after %zu of %zu bytes", who, got, s->request);
        serve_one(t->fd, req, resp, s->request, s->response, &last, who);
        t->served++;
    }
    if (close(t->fd)) die("%s: close: %s", who, strerror(errno));
    free(req);
    free(resp);
    return NULL;
}

static void *crr_server_main(void *p) {
    struct server_thread *t = p;
    struct session *s = t->s;
    char who[48];
    snprintf(who, sizeof who, "server thread %d", t->idx);
    pin_self(t->idx, who);
    unsigned char *req = malloc(s->request), *resp = malloc(s->response), last;
    if (!req || !resp) die("%s: out of memory", who);
    memset(resp, 0, s->response);
    last = 0;
    for (;;) {
        int fd = accept(s->lfd, NULL, NULL);
        if (fd < 0) {
            if (__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) break; /* listener shut down: end of run */
            if (errno == EINTR || errno == ECONNABORTED) continue;
            die("%s: accept: %s", who, strerror(errno));
        }
        set_nodelay(fd, who);
        read_exact(fd, req, s->request, who, "request");
        serve_one(fd, req, resp, s->request, s->response, &last, who);
        if (close(fd)) die("%s: close: %s", who, strerror(errno)); /* the server closes first */
        t->served++;
    }
    free(req);
    free(resp);
    return NULL;
}

/* One control connection = one run. */
static void *session_main(void *p) {
    struct session *s = p;
    uint32_t m[6];
    recv_u32(s->cfd, m, 6, "server", "control: config");
    /* m: magic, mode, pairs, outstanding, request, response */
    if (m[0] != MAGIC || (m[1] != MODE_RR && m[1] != MODE_CRR) || m[2] < 1 || m[2] > MAX_PAIRS || m[4] < 1 ||
        m[4] > MAX_MSG || m[5] < 1 || m[5] > MAX_MSG) {
        fprintf(stderr, "# rr: server: rejected a control connection with a bad config "
                        "(another program or version?)\n");
        uint32_t r[3] = {MAGIC, 1, 0};
        send_u32(s->cfd, r, 3, "config reply");
        close(s->cfd);
        free(s);
        return NULL;
    }
    s->mode = (int)m[1];
    s->pairs = (int)m[2];
    s->request = m[4];
    s->response = m[5];
    s->t = calloc((size_t)s->pairs, sizeof *s->t);
    if (!s->t) die("server: out of memory");

    struct sockaddr_in a;
    socklen_t len = sizeof a;
    if (getsockname(s->cfd, (struct sockaddr *)&a, &len)) die("server: getsockname: %s", strerror(errno));
    a.sin_port = 0;
    s->lfd = tcp_listen(&a, 4096, "server data listener");
    if (s->mode == MODE_CRR)
        for (int i = 0; i < s->pairs; i++) {
            s->t[i] = (struct server_thread){.s = s, .idx = i, .fd = -1};
            int e = pthread_create(&s->t[i].th, NULL, crr_server_main, &s->t[i]);
            if (e) die("server: pthread_create: %s", strerror(e));
        }
    uint32_t r[3] = {MAGIC, 0, ntohs(a.sin_port)};
    send_u32(s->cfd, r, 3, "config reply");

    if (s->mode == MODE_RR)
        for (int i = 0; i < s->pairs;) {
            struct pollfd pf[2] = {{.fd = s->lfd, .events = POLLIN}, {.fd = s->cfd, .events = POLLIN}};
            if (poll(pf, 2, -1) < 0) {
                if (errno == EINTR) continue;
                die("server: poll: %s", strerror(errno));
            }
            if (pf[1].revents)
                die("server: control connection closed before all %d rr connections arrived (%d did)", s->pairs, i);
            if (!pf[0].revents) continue;
            int fd = accept(s->lfd, NULL, NULL);
            if (fd < 0) {
                if (errno == EINTR || errno == ECONNABORTED) continue;
                die("server: accept: %s", strerror(errno));
            }
            set_nodelay(fd, "server");
            s->t[i] = (struct server_thread){.s = s, .idx = i, .fd = fd};
            int e = pthread_create(&s->t[i].th, NULL, rr_server_main, &s->t[i]);
            if (e) die("server: pthread_create: %s", strerror(e));
            i++;
        }

    uint32_t done;
    recv_u32(s->cfd, &done, 1, "server", "control: done");
    if (done != DONE) die("server: control: expected DONE, got 0x%08x", done);
    if (s->mode == MODE_CRR) {
        __atomic_store_n(&s->stop, 1, __ATOMIC_RELEASE);
        if (shutdown(s->lfd, SHUT_RDWR)) die("server: shutdown(data listener): %s", strerror(errno));
    }
    uint64_t served = 0;
    for (int i = 0; i < s->pairs; i++) {
        pthread_join(s->t[i].th, NULL);
        served += s->t[i].served;
    }
    close(s->lfd);
    uint32_t rep[3] = {DONE, (uint32_t)(served >> 32), (uint32_t)served};
    send_u32(s->cfd, rep, 3, "served count");
    close(s->cfd);
    free(s->t);
    free(s);
    return NULL;
}

static int g_fork_sessions; /* --server: each session in a forked child, so its errors end only that run */

static void *server_loop(void *p) {
    int lfd = *(int *)p;
    for (;;) {
        int cfd = accept(lfd, NULL, NULL);
        if (cfd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            die("server: accept (control): %s", strerror(errno));
        }
        set_nodelay(cfd, "server control");
        struct session *s = calloc(1, sizeof *s);
        if (!s) die("server: out of memory");
        s->cfd = cfd;
        s->lfd = -1;
        if (g_fork_sessions) { /* the parent is single-threaded here, so fork() is safe */
            pid_t pid = fork();
            if (pid < 0) die("server: fork: %s", strerror(errno));
            if (pid == 0) {
                close(lfd);
                session_main(s);
                exit(0);
            }
            close(cfd);
            free(s);
            continue;
        }
        pthread_t th;
        int e = pthread_create(&th, NULL, session_main, s);
        if (e) die("server: pthread_create: %s", strerror(e));
        pthread_detach(th);
    }
    return NULL;
}

/* ---- client ---- */
struct run {
    int mode, pairs, outstanding;
    size_t request, response;
    struct sockaddr_in data;
    uint64_t t0, tw, te;
    pthread_barrier_t ready, go;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int finished;
};
struct client {
    struct run *r;
    int idx;
    pthread_t th;
    uint64_t counted, total, max_ns;
    uint64_t *hist;
};

static inline void record(struct client *c, uint64_t t_start, uint64_t t_end) {
    c->total++;
    if (t_end >= c->r->tw && t_end < c->r->te) {
        uint64_t d = t_end - t_start;
        c->hist[hist_index(d)]++;
        c->counted++;
        if (d > c->max_ns) c->max_ns = d;
    }
}

static void client_rr(struct client *c, const char *who) {
    struct run *r = c->r;
    size_t R = r->request, S = r->response;
    int N = r->outstanding;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) die("%s: socket: %s", who, strerror(errno));
    set_nodelay(fd, who);
    if (connect(fd, (struct sockaddr *)&r->data, sizeof r->data)) die("%s: connect: %s", who, strerror(errno));
    uint32_t hello = htonl((uint32_t)c->idx);
    write_full(fd, &hello, 4, who, "rr hello");
    unsigned char ack;
    read_exact(fd, &ack, 1, who, "rr hello ack");
    unsigned char *req = malloc(R), *resp = malloc(S);
    uint64_t *sent = malloc((size_t)N * sizeof *sent);
    if (!req || !resp || !sent) die("%s: out of memory", who);

    pthread_barrier_wait(&r->ready);
    pthread_barrier_wait(&r->go);

    uint64_t seq = 0, head = 0; /* next request to write, oldest request in flight */
    for (int k = 0; k < N; k++, seq++) {
        memset(req, (int)(seq & 0xff), R);
        sent[seq % (uint64_t)N] = now_ns();
        write_full(fd, req, R, who, "request");
    }
    while (head < seq) {
        read_exact(fd, resp, S, who, "response");
        uint64_t t = now_ns();
        check_response(resp, S, (unsigned char)((head & 0xff) ^ RESPONSE_XOR), who, head);
        record(c, sent[head % (uint64_t)N], t);
        head++;
        if (t < r->te) { /* keep N in flight until the span ends, then drain */
            memset(req, (int)(seq & 0xff), R);
            sent[seq % (uint64_t)N] = t;
            write_full(fd, req, R, who, "request");
            seq++;
        }
    }
    if (close(fd)) die("%s: close: %s", who, strerror(errno));
    free(req);
    free(resp);
    free(sent);
}

static void client_crr(struct client *c, const char *who) {
    struct run *r = c->r;
    size_t R = r->request, S = r->response;
    unsigned char *req = malloc(R), *resp = malloc(S);
    if (!req || !resp) die("%s: out of memory", who);

    pthread_barrier_wait(&r->ready);
    pthread_barrier_wait(&r->go);

    for (uint64_t seq = 0;; seq++) {
        uint64_t t = now_ns();
        if (t >= r->te) break;
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0) die("%s: socket: %s", who, strerror(errno));
        set_nodelay(fd, who);
        while (connect(fd, (struct sockaddr *)&r->data, sizeof r->data)) {
            if (errno == EINTR) continue;
            if (errno == EADDRNOTAVAIL)
                die("%s: connect: %s: the client's ephemeral ports are exhausted after %llu connections on "
                    "this pair (see net.ipv4.ip_local_port_range; are client sockets lingering in TIME_WAIT?)",
                    who, strerror(errno), (unsigned long long)seq);
            die("%s: connect: %s", who, strerror(errno));
        }
        memset(req, (int)(seq & 0xff), R);
        write_full(fd, req, R, who, "request");
        read_exact(fd, resp, S, who, "response");
        check_response(resp, S, (unsigned char)((seq & 0xff) ^ RESPONSE_XOR), who, seq);
        unsigned char extra;
        ssize_t n;
        while ((n = read(fd, &extra, 1)) < 0 && errno == EINTR) {
        }
        if (n < 0) die("%s: read (waiting for the server's EOF): %s", who, strerror(errno));
        if (n > 0)
            die("%s: transaction %llu: server sent more than %zu response bytes", who, (unsigned long long)seq, S);
        if (close(fd)) die("%s: close: %s", who, strerror(errno));
        record(c, t, now_ns());
    }
    free(req);
    free(resp);
}

static void *client_main(void *p) {
    struct client *c = p;
    char who[48];
    snprintf(who, sizeof who, "client pair %d", c->idx);
    pin_self(c->idx, who);
    if (c->r->mode == MODE_RR) client_rr(c, who);
    else client_crr(c, who);
    pthread_mutex_lock(&c->r->mu);
    c->r->finished++;
    pthread_cond_signal(&c->r->cv);
    pthread_mutex_unlock(&c->r->mu);
    return NULL;
}

static void run_client(struct sockaddr_in *server, int mode, int pairs, int outstanding, size_t request,
                       size_t response, double seconds, double warmup, int run_no, int runs) {
    int cfd = socket(AF_INET, SOCK_STREAM, 0);
    if (cfd < 0) die("control: socket: %s", strerror(errno));
    set_nodelay(cfd, "control");
    if (connect(cfd, (struct sockaddr *)server, sizeof *server))
        die("control: connect(%s:%d): %s", inet_ntoa(server->sin_addr), ntohs(server->sin_port), strerror(errno));
    uint32_t cfg[6] = {MAGIC, (uint32_t)mode, (uint32_t)pairs, (uint32_t)outstanding, (uint32_t)request,
                       (uint32_t)response};
    send_u32(cfd, cfg, 6, "config");
    uint32_t rep[3];
    recv_u32(cfd, rep, 3, "control", "config reply");
    if (rep[0] != MAGIC || rep[1] != 0) die("control: the server rejected the run's config");

    static struct run r;
    memset(&r, 0, sizeof r);
    r.mode = mode;
    r.pairs = pairs;
    r.outstanding = outstanding;
    r.request = request;
    r.response = response;
    r.data = *server;
    r.data.sin_port = htons((uint16_t)rep[2]);
    fprintf(stderr, "# rr: run %d/%d: %s, %d pair(s), %d outstanding, request %zu B, response %zu B, warm-up %g s, "
                    "timed %g s, server %s:%d (data port %u)\n",
            run_no, runs, mode == MODE_RR ? "rr" : "crr", pairs, outstanding, request, response, warmup, seconds,
            inet_ntoa(server->sin_addr), ntohs(server->sin_port), rep[2]);
    pthread_barrier_init(&r.ready, NULL, (unsigned)pairs + 1);
    pthread_barrier_init(&r.go, NULL, (unsigned)pairs + 1);
    pthread_mutex_init(&r.mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&r.cv, &ca);

    struct client *c = calloc((size_t)pairs, sizeof *c);
    if (!c) die("out of memory");
    for (int i = 0; i < pairs; i++) {
        c[i].r = &r;
        c[i].idx = i;
        c[i].hist = calloc(HIST_BUCKETS, sizeof(uint64_t));
        if (!c[i].hist) die("out of memory");
        int e = pthread_create(&c[i].th, NULL, client_main, &c[i]);
        if (e) die("pthread_create: %s", strerror(e));
    }
    pthread_barrier_wait(&r.ready);
    r.t0 = now_ns();
    r.tw = r.t0 + (uint64_t)(warmup * 1e9);
    r.te = r.tw + (uint64_t)(seconds * 1e9);
    pthread_barrier_wait(&r.go);

    /* Wait for the clients, but not forever: a stalled connection is an error. */
    uint64_t deadline = r.te + (uint64_t)STALL_S * 1000000000u;
    struct timespec dl = {.tv_sec = (time_t)(deadline / 1000000000u), .tv_nsec = (long)(deadline % 1000000000u)};
    pthread_mutex_lock(&r.mu);
    while (r.finished < pairs) {
        int e = pthread_cond_timedwait(&r.cv, &r.mu, &dl);
        if (e == ETIMEDOUT && r.finished < pairs)
            die("%d of %d client threads still running %d s after the timed span ended (stalled connection; with "
                "--outstanding, do outstanding x size exceed the socket buffers?)",
                pairs - r.finished, pairs, STALL_S);
    }
    pthread_mutex_unlock(&r.mu);

    uint64_t *h = calloc(HIST_BUCKETS, sizeof(uint64_t)), counted = 0, total = 0, max = 0;
    if (!h) die("out of memory");
    for (int i = 0; i < pairs; i++) {
        pthread_join(c[i].th, NULL);
        for (unsigned b = 0; b < HIST_BUCKETS; b++) h[b] += c[i].hist[b];
        counted += c[i].counted;
        total += c[i].total;
        if (c[i].max_ns > max) max = c[i].max_ns;
        if (!c[i].counted)
            fprintf(stderr, "# warning: pair %d completed no transaction in the timed span (%llu in all)\n", i,
                    (unsigned long long)c[i].total);
        free(c[i].hist);
    }
    free(c);

    uint32_t done = DONE, srv[3];
    send_u32(cfd, &done, 1, "done");
    recv_u32(cfd, srv, 3, "control", "served count");
    if (close(cfd)) die("control: close: %s", strerror(errno));
    uint64_t served = ((uint64_t)srv[1] << 32) | srv[2];
    if (srv[0] != DONE || served != total)
        die("the server served %llu transactions, the clients completed %llu", (unsigned long long)served,
            (unsigned long long)total);
    if (!counted) die("no transaction completed in the timed span");

    printf("%s\t%d\t%d\t%zu\t%zu\t%.3f\t%llu\t%.1f\t%.2f\t%.2f\t%.2f\t%.2f\n", mode == MODE_RR ? "rr" : "crr",
           pairs, outstanding, request, response, seconds, (unsigned long long)counted, (double)counted / seconds,
           hist_pct(h, counted, 0.50, max) / 1e3, hist_pct(h, counted, 0.90, max) / 1e3,
           hist_pct(h, counted, 0.99, max) / 1e3, (double)max / 1e3);
    fflush(stdout);
    free(h);
    pthread_barrier_destroy(&r.ready);
    pthread_barrier_destroy(&r.go);
    pthread_cond_destroy(&r.cv);
    pthread_mutex_destroy(&r.mu);
}

/* ---- arguments ---- */
/* Parse "0-3,8" into an ordered CPU list; 0 on success. */
static int parse_cpus(const char *s) {
    g_ncpus = 0;
    while (*s) {
        char *end;
        long lo = strtol(s, &end, 10), hi = lo;
        if (end == s) return -1;
        s = end;
        if (*s == '-') {
            const char *q = s + 1;
            hi = strtol(q, &end, 10);
            if (end == q) return -1;
            s = end;
        }
        if (lo < 0 || hi < lo || hi >= CPU_SETSIZE) return -1;
        for (long c = lo; c <= hi; c++) {
            if (g_ncpus == CPU_SETSIZE) return -1;
            g_cpus[g_ncpus++] = (int)c;
        }
        if (*s == ',') s++;
        else if (*s) return -1;
    }
    return g_ncpus ? 0 : -1;
}

static void usage(const char *why, const char *arg) {
    fprintf(stderr,
            "rr: %s%s%s; usage: rr [--mode rr|crr] [--pairs P] [--outstanding N] [--request BYTES] "
            "[--response BYTES] [--seconds T] [--warmup W] [--runs K] [--cpus LIST] [--host H --port P] | "
            "rr --server [--port P] [--cpus LIST]\n",
            why, arg ? " " : "", arg ? arg : "");
    exit(2);
}
static long parse_long(const char *opt, const char *s, long lo, long hi) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno || v < lo || v > hi) {
        char why[96];
        snprintf(why, sizeof why, "bad %s (want an integer in %ld..%ld):", opt, lo, hi);
        usage(why, s);
    }
    return v;
}
static double parse_double(const char *opt, const char *s, double lo, double hi) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !(v >= lo && v <= hi)) {
        char why[96];
        snprintf(why, sizeof why, "bad %s (want a number in %g..%g):", opt, lo, hi);
        usage(why, s);
    }
    return v;
}

int main(int argc, char **argv) {
    int mode = MODE_RR, pairs = 1, outstanding = 1, runs = 1, server_only = 0, port = -1;
    long request = 1, response = 1;
    double seconds = 5, warmup = 0.5;
    const char *host = NULL, *cpus_arg = NULL;
    int client_opts = 0; /* options that make no sense with --server */
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "--server")) {
            server_only = 1;
            continue;
        }
        if (strncmp(o, "--", 2)) usage("unexpected argument", o);
        if (i + 1 >= argc) usage("missing value for", o);
        const char *v = argv[++i];
        if (!strcmp(o, "--mode")) {
            if (!strcmp(v, "rr")) mode = MODE_RR;
            else if (!strcmp(v, "crr")) mode = MODE_CRR;
            else usage("bad --mode (want rr or crr):", v);
            client_opts++;
        } else if (!strcmp(o, "--pairs")) pairs = (int)parse_long(o, v, 1, MAX_PAIRS), client_opts++;
        else if (!strcmp(o, "--outstanding")) outstanding = (int)parse_long(o, v, 1, MAX_OUTSTANDING), client_opts++;
        else if (!strcmp(o, "--request")) request = parse_long(o, v, 1, MAX_MSG), client_opts++;
        else if (!strcmp(o, "--response")) response = parse_long(o, v, 1, MAX_MSG), client_opts++;
        else if (!strcmp(o, "--seconds")) seconds = parse_double(o, v, 0.001, 86400), client_opts++;
        else if (!strcmp(o, "--warmup")) warmup = parse_double(o, v, 0, 86400), client_opts++;
        else if (!strcmp(o, "--runs")) runs = (int)parse_long(o, v, 1, 1000000), client_opts++;
        else if (!strcmp(o, "--host")) host = v, client_opts++;
        else if (!strcmp(o, "--port")) port = (int)parse_long(o, v, 0, 65535);
        else if (!strcmp(o, "--cpus")) cpus_arg = v;
        else usage("unknown option", o);
    }
    if (server_only && client_opts) usage("--server takes only --port and --cpus", NULL);
    if (!server_only && (host != NULL) != (port >= 0)) usage("--host and --port go together (client only)", NULL);
    if (host && port == 0) usage("bad --port for a client:", "0");
    if (mode == MODE_CRR && outstanding != 1) usage("--outstanding is for --mode rr only", NULL);
    if (cpus_arg) {
        if (parse_cpus(cpus_arg)) usage("bad --cpus list:", cpus_arg);
        cpu_set_t allowed;
        if (sched_getaffinity(0, sizeof allowed, &allowed)) die("sched_getaffinity: %s", strerror(errno));
        for (int k = 0; k < g_ncpus; k++)
            if (!CPU_ISSET(g_cpus[k], &allowed)) {
                fprintf(stderr, "rr: cpu %d is not in this process's affinity mask\n", g_cpus[k]);
                return 2;
            }
    }
    signal(SIGPIPE, SIG_IGN); /* a peer that goes away shows up as EPIPE from write() */

    if (server_only) {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY),
                                .sin_port = htons((uint16_t)(port < 0 ? 0 : port))};
        int lfd = tcp_listen(&a, 128, "server control listener");
        fprintf(stderr, "# rr: server listening on 0.0.0.0:%d%s%s\n", ntohs(a.sin_port), cpus_arg ? ", cpus " : "",
                cpus_arg ? cpus_arg : "");
        signal(SIGCHLD, SIG_IGN); /* session children reap themselves */
        g_fork_sessions = 1;
        server_loop(&lfd);
        return 0;
    }

    struct sockaddr_in server = {.sin_family = AF_INET};
    static int lfd;
    if (host) {
        struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai;
        int e = getaddrinfo(host, NULL, &hints, &ai);
        if (e) die("getaddrinfo(%s): %s", host, gai_strerror(e));
        server = *(struct sockaddr_in *)ai->ai_addr;
        server.sin_port = htons((uint16_t)port);
        freeaddrinfo(ai);
    } else { /* in-process server on an ephemeral loopback port */
        server.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        server.sin_port = 0;
        lfd = tcp_listen(&server, 128, "server control listener");
        pthread_t th;
        int e = pthread_create(&th, NULL, server_loop, &lfd);
        if (e) die("pthread_create: %s", strerror(e));
        pthread_detach(th);
        fprintf(stderr, "# rr: in-process server on 127.0.0.1:%d\n", ntohs(server.sin_port));
    }
    if (cpus_arg)
        fprintf(stderr, "# rr: client thread i%s pinned to cpu number i mod %d of %s\n",
                host ? "" : " (and in rr the server thread of pair i, in crr server thread i)", g_ncpus, cpus_arg);
    printf("# mode pairs outstanding request response seconds transactions transactions_per_s p50_us p90_us p99_us "
           "max_us\n");
    fflush(stdout);
    for (int k = 1; k <= runs; k++)
        run_client(&server, mode, pairs, outstanding, (size_t)request, (size_t)response, seconds, warmup, k, runs);
    return 0;
}
