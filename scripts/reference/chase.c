/* Independent memory-latency reference for `hostbench mem --latency`: a plain pointer chase.
 *
 * One random cycle over the 64-byte lines of a SIZE-byte buffer (Sattolo's algorithm, so the
 * walk visits every line before it repeats and no prefetcher can guess the next address), then
 * LOADS dependent loads `p = *(void **)p` timed with clock_gettime, REPS times. Prints the
 * median and best ns/load. Pages are 4 KiB (MADV_NOHUGEPAGE) unless --huge asks for
 * madvise(MADV_HUGEPAGE); the share of the buffer that really got huge pages is printed.
 *
 * Build: gcc -O2 -o /tmp/chase scripts/reference/chase.c
 * Usage: chase SIZE_BYTES[k|m|g (KiB/MiB/GiB)] [LOADS (default 1e7)] [REPS (default 5)] [--huge]
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define LINE 64
#define ALIGN (2UL << 20)
#define ONE p = *(void **)p;
#define SIXTEEN ONE ONE ONE ONE ONE ONE ONE ONE ONE ONE ONE ONE ONE ONE ONE ONE

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

int main(int argc, char **argv) {
    int huge = 0, npos = 0;
    char *pos[3] = {0};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--huge")) huge = 1;
        else if (npos < 3) pos[npos++] = argv[i];
    }
    if (!pos[0]) { fprintf(stderr, "usage: %s SIZE [LOADS] [REPS] [--huge]\n", argv[0]); return 2; }
    char *end;
    size_t size = strtoull(pos[0], &end, 10);
    if (*end == 'k' || *end == 'K') size <<= 10;
    else if (*end == 'm' || *end == 'M') size <<= 20;
    else if (*end == 'g' || *end == 'G') size <<= 30;
    long loads = pos[1] ? (long)strtod(pos[1], NULL) : 10000000L;
    int reps = pos[2] ? atoi(pos[2]) : 5;
    size_t n = size / LINE;
    if (n < 2 || loads < 16 || reps < 1 || reps > 1000) { fprintf(stderr, "bad arguments\n"); return 2; }
    loads = loads / 16 * 16;

    /* 2 MiB-aligned anonymous mapping; the page-size advice is given before the first touch. */
    char *raw = mmap(NULL, size + ALIGN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) { perror("mmap"); return 1; }
    char *buf = (char *)(((uintptr_t)raw + ALIGN - 1) & ~(ALIGN - 1));
    if (madvise(buf, size, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE)) perror("madvise");

    /* Sattolo: a uniformly random permutation that is a single cycle (j < i, never j == i). */
    size_t *perm = malloc(n * sizeof *perm);
    if (!perm) { perror("malloc"); return 1; }
    for (size_t i = 0; i < n; i++) perm[i] = i;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = next_rand() % i, t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (size_t i = 0; i < n; i++) *(void **)(buf + i * LINE) = buf + perm[i] * LINE;
    free(perm);

    void *p = buf;
    long warm = (long)n < loads ? (long)n : loads; /* warm-up: up to one lap; reps continue on */
    for (long i = 0; i < warm; i += 16) { SIXTEEN }
    double ns[1000];
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        for (long i = 0; i < loads; i += 16) { SIXTEEN }
        ns[r] = (now() - t0) * 1e9 / (double)loads;
    }
    qsort(ns, reps, sizeof ns[0], cmp);
    double median = reps % 2 ? ns[reps / 2] : 0.5 * (ns[reps / 2 - 1] + ns[reps / 2]);

    long anon_huge_kb = -1; /* how much of this process really sits on huge pages */
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "AnonHugePages: %ld kB", &anon_huge_kb) == 1) break;
    if (f) fclose(f);
    printf("size_bytes %zu lines %zu loads %ld reps %d pages %s huge_fraction %.3f\n", size, n, loads,
           reps, huge ? "huge" : "4k", anon_huge_kb < 0 ? -1.0 : anon_huge_kb * 1024.0 / size);
    printf("ns_per_load median %.2f min %.2f (end %p)\n", median, ns[0], p);
    return 0;
}
