/* Independent core-to-core latency reference for `hostbench mem --c2c`: the classic single-line
 * compare-and-swap ping-pong, a different protocol from hostbench's two-line round trip, so that
 * agreement means something.
 *
 * For every unordered pair of CPUs a < b, thread A is pinned to a and thread B to b
 * (pthread_setaffinity_np, checked with sched_getcpu). They share one 64-bit word alone on its own
 * page (so 64-byte aligned, no neighbour on its line or the next), first written by A. A waits
 * (plain loads) until the word reads 2k, then compare-and-swaps it 2k -> 2k+1; B waits until it
 * reads 2k+1, then compare-and-swaps it 2k+1 -> 2k+2. One round trip is these two handoffs: the
 * line travels A -> B -> A. Both threads are released together once pinned; a warm-up of BOUNCES
 * round trips, then REPS samples of BOUNCES round trips each, timed by A with
 * clock_gettime(CLOCK_MONOTONIC) from the moment it sees 2k to the moment it sees 2(k + BOUNCES).
 * Printed per pair: the median over samples of round_trip_ns (time per round trip) and
 * one_way_ns = round_trip_ns / 2 (one handoff; derived, not measured on its own).
 * Then, with the same threads, the two-line request/reply exchange (hostbench's round_trip shape,
 * written independently here): A stores k to a request word and waits for k on a reply word 128
 * bytes away (another line, and not the adjacent-line prefetcher's pair); B waits for k on the
 * request word and stores k to the reply word. Printed as two_line_ns, the median time per
 * exchange; both words must end at BOUNCES x (1 + REPS).
 * A compare-and-swap that fails, a thread that does not run on its CPU, or a final word other than
 * 2 x BOUNCES x (1 + REPS) ends the program with an error. A thread that was preempted
 * (involuntary context switches, getrusage) gets a `# warning` line on stderr.
 *
 * Build: gcc -O2 -pthread -o /tmp/c2c scripts/reference/c2c.c
 * Usage: c2c [--cpus LIST (default: all allowed CPUs; e.g. 0-3,8)] [--bounces N (default 20000)]
 *            [--reps R (default 7)]
 * Output: TSV, one line per pair a < b under the header
 * `# cpu_a cpu_b round_trip_ns one_way_ns two_line_ns`.
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
#include <unistd.h>

#define MAX_REPS 1000

struct pair {
    int cpu[2];
    long bounces;
    int reps;
    uint64_t *word; /* alone on its own page */
    int ready;      /* threads pinned and set up, atomic */
    long preempted[2]; /* involuntary context switches of A and B while they bounced */
    double ns[MAX_REPS];
    double ns2[MAX_REPS]; /* two-line exchange */
};

struct thread_arg {
    struct pair *pair;
    int id; /* 0 = A, 1 = B */
};

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}
static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static void die(const char *msg, int cpu) {
    fprintf(stderr, "c2c: %s (cpu %d)\n", msg, cpu);
    exit(1);
}

static void pin_self(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    int e = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    if (e) {
        fprintf(stderr, "c2c: pthread_setaffinity_np(cpu %d): %s\n", cpu, strerror(e));
        exit(1);
    }
    if (sched_getcpu() != cpu) die("thread is not running on the CPU it was pinned to", cpu);
}

static inline void wait_for(uint64_t *w, uint64_t v) {
    while (__atomic_load_n(w, __ATOMIC_ACQUIRE) != v) {
    }
}
static inline void hand_over(uint64_t *w, uint64_t v, int cpu) {
    uint64_t expected = v;
    if (!__atomic_compare_exchange_n(w, &expected, v + 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        fprintf(stderr, "c2c: compare-and-swap %llu -> %llu failed on cpu %d: the word held %llu\n",
                (unsigned long long)v, (unsigned long long)v + 1, cpu, (unsigned long long)expected);
        exit(1);
    }
}

static void *thread_main(void *p) {
    struct thread_arg *a = p;
    struct pair *P = a->pair;
    int cpu = P->cpu[a->id];
    uint64_t *w = P->word;
    pin_self(cpu);
    if (a->id == 0) __atomic_store_n(w, 0, __ATOMIC_RELAXED); /* first touch by A */
    __atomic_add_fetch(&P->ready, 1, __ATOMIC_ACQ_REL);
    while (__atomic_load_n(&P->ready, __ATOMIC_ACQUIRE) != 2) {
    }
    struct rusage ru0, ru1;
    getrusage(RUSAGE_THREAD, &ru0);

    if (a->id == 0) { /* A: even -> odd; times the samples */
        uint64_t v = 0;
        for (int s = 0; s <= P->reps; s++) { /* s == 0: warm-up */
            wait_for(w, v);
            double t0 = now();
            for (long i = 0; i < P->bounces; i++) {
                hand_over(w, v, cpu);
                v += 2;
                wait_for(w, v);
            }
            double t1 = now();
            if (s) P->ns[s - 1] = (t1 - t0) * 1e9 / (double)P->bounces;
        }
    } else { /* B: odd -> even */
        uint64_t total = (uint64_t)P->bounces * (uint64_t)(P->reps + 1), v = 1;
        for (uint64_t i = 0; i < total; i++) {
            wait_for(w, v);
            hand_over(w, v, cpu);
            v += 2;
        }
    }
    /* The two-line exchange: request at w[32], reply at w[48] (128 bytes apart, both off w[0]'s line). */
    uint64_t *req = w + 32, *rep = w + 48, k = 0;
    for (int s = 0; s <= P->reps; s++) { /* s == 0: warm-up */
        double t0 = now();
        for (long i = 0; i < P->bounces; i++) {
            k++;
            if (a->id == 0) {
                __atomic_store_n(req, k, __ATOMIC_RELEASE);
                wait_for(rep, k);
            } else {
                wait_for(req, k);
                __atomic_store_n(rep, k, __ATOMIC_RELEASE);
            }
        }
        double t1 = now();
        if (s && a->id == 0) P->ns2[s - 1] = (t1 - t0) * 1e9 / (double)P->bounces;
    }
    getrusage(RUSAGE_THREAD, &ru1);
    P->preempted[a->id] = ru1.ru_nivcsw - ru0.ru_nivcsw;
    return NULL;
}

/* Parse "0-3,8" into a CPU set; 0 on success. */
static int parse_cpus(const char *s, cpu_set_t *set) {
    CPU_ZERO(set);
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
        for (long c = lo; c <= hi; c++) CPU_SET((int)c, set);
        if (*s == ',') s++;
        else if (*s) return -1;
    }
    return 0;
}

static void usage(const char *argv0) {
    fprintf(stderr, "usage: %s [--cpus LIST (e.g. 0-3,8)] [--bounces N (default 20000)] [--reps R (default 7)]\n",
            argv0);
    exit(2);
}

int main(int argc, char **argv) {
    const char *cpus_arg = NULL;
    long bounces = 20000;
    int reps = 7;
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && !strcmp(argv[i], "--cpus")) cpus_arg = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--bounces")) bounces = (long)strtod(argv[++i], NULL);
        else if (i + 1 < argc && !strcmp(argv[i], "--reps")) reps = atoi(argv[++i]);
        else usage(argv[0]);
    }
    if (bounces < 1 || reps < 1 || reps > MAX_REPS) usage(argv[0]);

    cpu_set_t allowed, want;
    if (sched_getaffinity(0, sizeof allowed, &allowed)) { perror("sched_getaffinity"); return 1; }
    if (cpus_arg) {
        if (parse_cpus(cpus_arg, &want)) { fprintf(stderr, "c2c: bad --cpus list '%s'\n", cpus_arg); return 2; }
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &want) && !CPU_ISSET(c, &allowed)) {
                fprintf(stderr, "c2c: cpu %d is not in this process's affinity mask\n", c);
                return 2;
            }
    } else {
        want = allowed;
    }
    int cpus[CPU_SETSIZE], n = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &want)) cpus[n++] = c;
    if (n < 2) { fprintf(stderr, "c2c: need at least 2 CPUs, have %d\n", n); return 2; }

    long page = sysconf(_SC_PAGESIZE);
    static struct pair P; /* one pair at a time */
    printf("# cpu_a cpu_b round_trip_ns one_way_ns two_line_ns\n");
    fflush(stdout);
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            memset(&P, 0, sizeof P);
            P.cpu[0] = cpus[i];
            P.cpu[1] = cpus[j];
            P.bounces = bounces;
            P.reps = reps;
            void *m = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (m == MAP_FAILED) { perror("mmap"); return 1; }
            P.word = m;
            pthread_t t[2];
            struct thread_arg args[2] = {{&P, 0}, {&P, 1}};
            for (int k = 0; k < 2; k++) {
                int e = pthread_create(&t[k], NULL, thread_main, &args[k]);
                if (e) { fprintf(stderr, "c2c: pthread_create: %s\n", strerror(e)); return 1; }
            }
            for (int k = 0; k < 2; k++) pthread_join(t[k], NULL);
            uint64_t expect = 2 * (uint64_t)bounces * (uint64_t)(reps + 1), got = *P.word;
            if (got != expect) {
                fprintf(stderr, "c2c: pair %d-%d: counted %llu handoffs, expected %llu\n", cpus[i], cpus[j],
                        (unsigned long long)got, (unsigned long long)expect);
                return 1;
            }
            uint64_t two = (uint64_t)bounces * (uint64_t)(reps + 1);
            if (P.word[32] != two || P.word[48] != two) {
                fprintf(stderr, "c2c: pair %d-%d: two-line words hold %llu/%llu, expected %llu\n", cpus[i], cpus[j],
                        (unsigned long long)P.word[32], (unsigned long long)P.word[48], (unsigned long long)two);
                return 1;
            }
            munmap(m, page);
            qsort(P.ns, reps, sizeof P.ns[0], cmp);
            qsort(P.ns2, reps, sizeof P.ns2[0], cmp);
            double rt = reps % 2 ? P.ns[reps / 2] : 0.5 * (P.ns[reps / 2 - 1] + P.ns[reps / 2]);
            double rt2 = reps % 2 ? P.ns2[reps / 2] : 0.5 * (P.ns2[reps / 2 - 1] + P.ns2[reps / 2]);
            if (P.preempted[0] || P.preempted[1])
                fprintf(stderr,
                        "# warning: pair %d-%d: involuntary context switches A %ld, B %ld (something else runs on "
                        "these CPUs; the median of %d samples may or may not have escaped it)\n",
                        cpus[i], cpus[j], P.preempted[0], P.preempted[1], reps);
            printf("%d\t%d\t%.2f\t%.2f\t%.2f\n", cpus[i], cpus[j], rt, rt / 2, rt2);
            fflush(stdout);
        }
    return 0;
}
