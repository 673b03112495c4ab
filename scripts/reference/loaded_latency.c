/* Independent loaded-latency reference for `hostbench mem --loaded-latency`: the method of Intel
 * MLC's --loaded_latency, written here from its published description (MLC is closed source).
 *
 * One chase thread, pinned to the first allowed CPU, walks one random cycle (Sattolo's algorithm)
 * over the 64-byte lines of a CHASE_BYTES buffer (2 MiB aligned, madvise(MADV_HUGEPAGE), first
 * touched by the chase thread) with dependent loads `p = *(void **)p`. T-1 traffic threads, pinned
 * to the next allowed CPUs, each stream sequentially over a buffer of their own
 * (max(256 MiB / (T-1), 64 MiB), MADV_HUGEPAGE, first touched by the owning thread) and after each
 * 64-byte line spin DELAY iterations of a one-cycle loop (x86-64 `1: dec; jnz 1b`, aarch64
 * `subs; b.ne`): the larger DELAY, the less traffic. Traffic `read` loads the 8 words of each line
 * and folds them into a checksum (64 B of memory traffic per line); `rw` loads each word and
 * stores word+1 back, a 1:1 read/write mix (128 B per line).
 *
 * For each delay, REPS samples of: start the traffic threads, let them run ~10 ms (the chase goes
 * on untimed meanwhile, so its core is busy, not idle, when timing starts), time LOADS dependent
 * loads of the chase, stop the traffic. Each traffic thread publishes its running byte
 * count on its own cache line every 64 lines; the chase thread reads all of them just before and
 * just after its timed loads, so the bandwidth is the traffic of exactly the chase window (to
 * within 64 lines per thread at each end), plus the chase's own 64 B per load. Printed per delay:
 * the median over samples of ns per load and, separately, of the bandwidth in MB/s (1 MB = 1e6 B).
 * With T = 1 there is no traffic and the figure is the idle latency.
 *
 * Checks (a failure ends the program with an error): after every sample the chase pointer must be
 * on the line the known cycle order predicts; every buffer word starts at 1, so a `read` thread's
 * checksum must be 8 x the lines it loaded, and an `rw` buffer must sum to its word count + 8 x
 * the lines it rewrote. A sample in which the chase thread was preempted (involuntary context
 * switches, getrusage) is counted in a `# warning` line on stderr.
 *
 * Build: gcc -O2 -pthread -o /tmp/loaded scripts/reference/loaded_latency.c
 * Usage: loaded_latency [--threads T (default: all allowed CPUs)]
 *            [--delays LIST (default 0,50,100,200,400,800,1600,3200,6400)] [--traffic read|rw (default read)]
 *            [--chase-bytes SIZE[k|m|g] (default 256m)] [--loads N (default 2000000)] [--reps R (default 3)]
 * Output: TSV on stdout, header `# delay latency_ns bandwidth_MBps`, one line per delay. The setup
 * (CPUs, sizes, huge-page share) and the checks go to stderr as `#` lines.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>

#define LINE 64
#define ALIGN (2UL << 20)
#define PUBLISH 64 /* lines between two byte-count updates */
#define MAX_REPS 1000
#define MAX_DELAYS 256
#define RAMP_LOADS 1024 /* chase loads between two looks at the clock during the ramp */
#define ONE p = *(void **)p;
#define SIXTEEN ONE ONE ONE ONE ONE ONE ONE ONE ONE ONE ONE ONE ONE ONE ONE ONE

struct counter { /* one traffic thread's running byte count, alone on its cache line */
    _Alignas(64) uint64_t bytes;
};

struct worker {
    int id, cpu;
    size_t buf_bytes;
    pthread_t tid;
    uint64_t lines;     /* lines streamed in all, for the checks */
    int check_ok;
    char check_msg[160];
};

static int traffic_rw;                  /* 0: read, 1: rw */
static struct counter *counters;        /* one per traffic thread */
static _Alignas(64) int stop_flag;      /* set by the chase thread to end a sample's traffic */
static _Alignas(64) uint64_t cur_delay; /* written before the start barrier */
static int quit;
static pthread_barrier_t barrier;       /* all T threads: ready, then start/stop of each sample */

static uint64_t rng = 0x9E3779B97F4A7C15ULL;
static uint64_t next_rand(void) { /* splitmix64 */
    uint64_t z = (rng += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}
static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static double median(double *v, int n) {
    qsort(v, n, sizeof v[0], cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void pin_self(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    int e = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    if (e) {
        fprintf(stderr, "loaded_latency: pthread_setaffinity_np(cpu %d): %s\n", cpu, strerror(e));
        exit(1);
    }
}

/* A 2 MiB-aligned anonymous buffer with huge-page advice, not yet touched. */
static void *map_buffer(size_t bytes) {
    char *raw = mmap(NULL, bytes + ALIGN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) { perror("mmap"); exit(1); }
    char *buf = (char *)(((uintptr_t)raw + ALIGN - 1) & ~(ALIGN - 1));
    if (madvise(buf, bytes, MADV_HUGEPAGE)) perror("madvise(MADV_HUGEPAGE)");
    return buf;
}

/* DELAY iterations of a one-cycle loop. */
static inline void spin(uint64_t n) {
    if (!n) return;
#if defined(__x86_64__)
    __asm__ volatile("1: dec %0\n\tjnz 1b" : "+r"(n) : : "cc", "memory");
#elif defined(__aarch64__)
    __asm__ volatile("1: subs %0, %0, #1\n\tb.ne 1b" : "+r"(n) : : "cc", "memory");
#else
#error "the delay loop is written for x86-64 and aarch64"
#endif
}

/* Stream until stop_flag; returns the lines streamed. rw is a constant at each call site, so the
 * compiler makes two loops. */
static inline __attribute__((always_inline)) uint64_t stream(uint64_t *buf, size_t nlines, size_t *pos,
                                                             uint64_t delay, uint64_t *sum, uint64_t *published,
                                                             int rw) {
    uint64_t lines = 0, s = *sum;
    size_t i = *pos;
    const uint64_t per_line = rw ? 2 * LINE : LINE;
    while (!__atomic_load_n(&stop_flag, __ATOMIC_RELAXED)) {
        for (int k = 0; k < PUBLISH; k++) {
            uint64_t *p = buf + i * 8;
            if (rw) {
                for (int j = 0; j < 8; j++) p[j] = p[j] + 1;
            } else {
                s += p[0] + p[1] + p[2] + p[3] + p[4] + p[5] + p[6] + p[7];
            }
            if (++i == nlines) i = 0;
            spin(delay);
        }
        lines += PUBLISH;
        __atomic_store_n(published, __atomic_load_n(published, __ATOMIC_RELAXED) + PUBLISH * per_line,
                         __ATOMIC_RELAXED);
    }
    *pos = i;
    *sum = s;
    return lines;
}

static void *worker_main(void *arg) {
    struct worker *w = arg;
    pin_self(w->cpu);
    uint64_t *buf = map_buffer(w->buf_bytes);
    size_t words = w->buf_bytes / 8, nlines = w->buf_bytes / LINE, pos = 0;
    for (size_t i = 0; i < words; i++) buf[i] = 1; /* first touch by the owning thread */
    uint64_t sum = 0, *published = &counters[w->id].bytes;
    pthread_barrier_wait(&barrier); /* ready */
    for (;;) {
        pthread_barrier_wait(&barrier); /* start */
        if (__atomic_load_n(&quit, __ATOMIC_ACQUIRE)) break;
        uint64_t d = cur_delay;
        w->lines += traffic_rw ? stream(buf, nlines, &pos, d, &sum, published, 1)
                               : stream(buf, nlines, &pos, d, &sum, published, 0);
        pthread_barrier_wait(&barrier); /* stopped */
    }
    if (traffic_rw) {
        uint64_t total = 0;
        for (size_t i = 0; i < words; i++) total += buf[i];
        w->check_ok = total == words + 8 * w->lines;
        snprintf(w->check_msg, sizeof w->check_msg, "rw buffer on cpu %d sums to %llu, expected %llu",
                 w->cpu, (unsigned long long)total, (unsigned long long)(words + 8 * w->lines));
    } else {
        w->check_ok = sum == 8 * w->lines;
        snprintf(w->check_msg, sizeof w->check_msg, "read checksum on cpu %d is %llu, expected %llu", w->cpu,
                 (unsigned long long)sum, (unsigned long long)(8 * w->lines));
    }
    munmap(buf, w->buf_bytes); /* (the alignment slack of the mapping stays; the process ends) */
    return NULL;
}

static __attribute__((noinline)) void *chase(void *p, long loads) {
    for (long i = 0; i < loads; i += 16) { SIXTEEN }
    return p;
}

static size_t parse_size(const char *s) {
    char *end;
    size_t v = strtoull(s, &end, 10);
    if (*end == 'k' || *end == 'K') v <<= 10;
    else if (*end == 'm' || *end == 'M') v <<= 20;
    else if (*end == 'g' || *end == 'G') v <<= 30;
    else if (*end) return 0;
    return v;
}

static void usage(const char *argv0) {
    fprintf(stderr,
            "usage: %s [--threads T] [--delays LIST (default 0,50,100,200,400,800,1600,3200,6400)]\n"
            "       [--traffic read|rw] [--chase-bytes SIZE[k|m|g] (default 256m)] [--loads N (default 2000000)]\n"
            "       [--reps R (default 3)]\n",
            argv0);
    exit(2);
}

int main(int argc, char **argv) {
    int threads = 0, reps = 3, ndelays = 0;
    long loads = 2000000;
    size_t chase_bytes = 256UL << 20;
    uint64_t delays[MAX_DELAYS];
    const char *delays_arg = "0,50,100,200,400,800,1600,3200,6400";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) usage(argv[0]);
        if (!strcmp(a, "--threads")) threads = atoi(v);
        else if (!strcmp(a, "--delays")) delays_arg = v;
        else if (!strcmp(a, "--traffic")) {
            if (!strcmp(v, "read")) traffic_rw = 0;
            else if (!strcmp(v, "rw")) traffic_rw = 1;
            else usage(argv[0]);
        } else if (!strcmp(a, "--chase-bytes")) chase_bytes = parse_size(v);
        else if (!strcmp(a, "--loads")) loads = (long)strtod(v, NULL);
        else if (!strcmp(a, "--reps")) reps = atoi(v);
        else usage(argv[0]);
        i++;
    }
    for (const char *s = delays_arg; *s;) {
        char *end;
        if (*s < '0' || *s > '9' || ndelays == MAX_DELAYS) usage(argv[0]);
        delays[ndelays++] = strtoull(s, &end, 10);
        s = end;
        if (*s == ',') s++;
        else if (*s) usage(argv[0]);
    }
    size_t n = chase_bytes / LINE;
    if (!ndelays || n < 2 || loads < 16 || reps < 1 || reps > MAX_REPS) usage(argv[0]);
    loads = loads / 16 * 16;

    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed)) { perror("sched_getaffinity"); return 1; }
    int cpus[CPU_SETSIZE], ncpus = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &allowed)) cpus[ncpus++] = c;
    if (!threads) threads = ncpus;
    if (threads < 1 || threads > ncpus) {
        fprintf(stderr, "loaded_latency: --threads %d, but %d CPUs are allowed\n", threads, ncpus);
        return 2;
    }
    int ntraffic = threads - 1;
    size_t traffic_bytes = 0;
    if (ntraffic) {
        traffic_bytes = (256UL << 20) / ntraffic;
        if (traffic_bytes < (64UL << 20)) traffic_bytes = 64UL << 20;
        traffic_bytes = (traffic_bytes + ALIGN - 1) & ~(ALIGN - 1);
    }

    pin_self(cpus[0]);
    if (pthread_barrier_init(&barrier, NULL, threads)) { perror("pthread_barrier_init"); return 1; }
    counters = aligned_alloc(64, sizeof *counters * (ntraffic ? ntraffic : 1));
    struct worker *ws = calloc(ntraffic ? ntraffic : 1, sizeof *ws);
    if (!counters || !ws) { perror("malloc"); return 1; }
    memset(counters, 0, sizeof *counters * (ntraffic ? ntraffic : 1));
    for (int t = 0; t < ntraffic; t++) { /* they map and touch their buffers while the chase is built */
        ws[t].id = t;
        ws[t].cpu = cpus[t + 1];
        ws[t].buf_bytes = traffic_bytes;
        int e = pthread_create(&ws[t].tid, NULL, worker_main, &ws[t]);
        if (e) { fprintf(stderr, "loaded_latency: pthread_create: %s\n", strerror(e)); return 1; }
    }

    /* The chase: Sattolo's algorithm gives a uniformly random permutation that is one cycle. */
    char *buf = map_buffer(chase_bytes);
    size_t *order = malloc(n * sizeof *order);
    if (!order) { perror("malloc"); return 1; }
    for (size_t i = 0; i < n; i++) order[i] = i;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = next_rand() % i, t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (size_t i = 0; i < n; i++) *(void **)(buf + i * LINE) = buf + order[i] * LINE;
    /* One lap (the warm-up) records the cycle order: order[k] = the line reached after k loads. */
    void *p = buf;
    for (size_t k = 0; k < n; k++) {
        if (k && p == buf) { fprintf(stderr, "loaded_latency: the chase is not one cycle\n"); return 1; }
        order[k] = (size_t)((char *)p - buf) / LINE;
        p = *(void **)p;
    }
    if (p != buf) { fprintf(stderr, "loaded_latency: the chase is not one cycle\n"); return 1; }
    uint64_t done = 0; /* chase loads since buf */

    pthread_barrier_wait(&barrier); /* ready: every traffic buffer is touched */
    long huge_kb = -1;
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "AnonHugePages: %ld kB", &huge_kb) == 1) break;
    if (f) fclose(f);
    double all_bytes = (double)chase_bytes + (double)traffic_bytes * ntraffic;
    fprintf(stderr, "# loaded_latency: traffic %s threads %d chase_cpu %d traffic_cpus ", traffic_rw ? "rw" : "read",
            threads, cpus[0]);
    for (int t = 0; t < ntraffic; t++) fprintf(stderr, "%s%d", t ? "," : "", ws[t].cpu);
    fprintf(stderr, "%s chase_bytes %zu traffic_bytes_per_thread %zu loads %ld reps %d huge_fraction %.3f\n",
            ntraffic ? "" : "-", chase_bytes, traffic_bytes, loads, reps,
            huge_kb < 0 ? -1.0 : huge_kb * 1024.0 / all_bytes);

    printf("# delay latency_ns bandwidth_MBps\n");
    fflush(stdout);
    double lat[MAX_REPS], bw[MAX_REPS];
    uint64_t *b0 = calloc(ntraffic + 1, sizeof *b0);
    if (!b0) { perror("malloc"); return 1; }
    for (int d = 0; d < ndelays; d++) {
        int preempted = 0; /* samples in which the chase thread lost its CPU */
        for (int r = 0; r < reps; r++) {
            cur_delay = delays[d];
            pthread_barrier_wait(&barrier); /* start */
            /* ~10 ms for the traffic to get going; the chase thread keeps chasing (untimed) meanwhile
             * rather than sleeping, so its core is not idle (clock, caches) when the timed loads start. */
            double ramp_end = now() + 0.010;
            do {
                p = chase(p, RAMP_LOADS);
                done += RAMP_LOADS;
            } while (now() < ramp_end);
            for (int t = 0; t < ntraffic; t++) b0[t] = __atomic_load_n(&counters[t].bytes, __ATOMIC_RELAXED);
            struct rusage ru0, ru1;
            getrusage(RUSAGE_THREAD, &ru0);
            double t0 = now();
            p = chase(p, loads);
            double t1 = now();
            getrusage(RUSAGE_THREAD, &ru1);
            if (ru1.ru_nivcsw != ru0.ru_nivcsw) preempted++;
            uint64_t traffic = 0;
            for (int t = 0; t < ntraffic; t++) {
                uint64_t moved = __atomic_load_n(&counters[t].bytes, __ATOMIC_RELAXED) - b0[t];
                if (!moved)
                    fprintf(stderr, "# warning: delay %llu: the traffic thread on cpu %d published nothing during "
                                    "the chase window (more --loads?)\n",
                            (unsigned long long)delays[d], ws[t].cpu);
                traffic += moved;
            }
            __atomic_store_n(&stop_flag, 1, __ATOMIC_RELAXED);
            pthread_barrier_wait(&barrier); /* stopped */
            stop_flag = 0;
            done += (uint64_t)loads;
            void *expect = buf + order[done % n] * LINE;
            if (p != expect) {
                fprintf(stderr, "loaded_latency: the chase ended at %p, expected %p (line %zu)\n", p, expect,
                        order[done % n]);
                return 1;
            }
            lat[r] = (t1 - t0) * 1e9 / (double)loads;
            bw[r] = ((double)traffic + (double)loads * LINE) / (t1 - t0) / 1e6;
        }
        if (preempted)
            fprintf(stderr,
                    "# warning: delay %llu: the chase thread was preempted (involuntary context switch) in %d of "
                    "%d samples: something else runs on cpu %d\n",
                    (unsigned long long)delays[d], preempted, reps, cpus[0]);
        printf("%llu\t%.2f\t%.0f\n", (unsigned long long)delays[d], median(lat, reps), median(bw, reps));
        fflush(stdout);
    }

    __atomic_store_n(&quit, 1, __ATOMIC_RELEASE);
    pthread_barrier_wait(&barrier); /* start, with quit set */
    int ok = 1;
    for (int t = 0; t < ntraffic; t++) {
        pthread_join(ws[t].tid, NULL);
        if (!ws[t].check_ok) {
            fprintf(stderr, "loaded_latency: check failed: %s\n", ws[t].check_msg);
            ok = 0;
        }
    }
    if (!ok) return 1;
    fprintf(stderr, "# checks: chase end line after every sample ok; %d traffic thread(s): %s ok\n", ntraffic,
            traffic_rw ? "buffer sums" : "checksums");
    return 0;
}
