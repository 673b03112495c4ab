/* Issue 36: does a triad's bandwidth level on a VM follow where its pages lie in the guest's
 * physical memory?
 *
 * Allocates three arrays of N doubles, touches them with the same static OpenMP split as STREAM
 * (so each thread first-touches the part it streams), reads /proc/self/pagemap (root only: the
 * physical frame numbers are zero otherwise) to find where each 4 KiB page landed, then runs the
 * STREAM triad a = b + s*c REPS times and prints one line of JSON: the best and median rate
 * (24 bytes per element, GB/s = 1e9 B/s, as STREAM counts), the share of pages in each GiB of
 * guest-physical memory, and the checksum that keeps the compiler from deleting the loop.
 *
 *   gcc -O3 -march=native -fopenmp scripts/reference/triad_pfn.c -o /tmp/triad_pfn
 *   OMP_NUM_THREADS=2 OMP_PROC_BIND=spread OMP_PLACES=cores /tmp/triad_pfn 80000000 10
 *
 * A new process gets new pages, so running it again and again samples the allocator; whatever
 * the level is a property of, the pages or the moment, the correlation shows it.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096UL
#define BUCKETS 64 /* GiB of guest-physical address space tracked */

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmp(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

/* Count the pages of [p, p + bytes) per GiB of physical address; returns pages seen. */
static long pfn_histogram(int fd, const void *p, size_t bytes, long *hist, long *absent) {
  uintptr_t v0 = (uintptr_t)p & ~(PAGE - 1), v1 = (uintptr_t)p + bytes;
  long seen = 0;
  uint64_t buf[512];
  for (uintptr_t v = v0; v < v1; v += 512 * PAGE) {
    size_t n = (v1 - v + PAGE - 1) / PAGE;
    if (n > 512) n = 512;
    ssize_t got = pread(fd, buf, n * 8, (off_t)(v / PAGE) * 8);
    if (got != (ssize_t)(n * 8)) return -1;
    for (size_t i = 0; i < n; i++) {
      uint64_t e = buf[i];
      uint64_t pfn = e & ((1ULL << 55) - 1);
      if (!(e >> 63) || pfn == 0) {
        (*absent)++;
        continue;
      }
      uint64_t gib = (pfn * PAGE) >> 30;
      hist[gib < BUCKETS ? gib : BUCKETS - 1]++;
      seen++;
    }
  }
  return seen;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 80000000;
  int reps = argc > 2 ? atoi(argv[2]) : 10;
  if (n <= 0 || reps <= 0) {
    fprintf(stderr, "usage: triad_pfn N REPS\n");
    return 2;
  }
  size_t bytes = (size_t)n * sizeof(double);
  double *a, *b, *c;
  if (posix_memalign((void **)&a, 1 << 21, bytes) || posix_memalign((void **)&b, 1 << 21, bytes) ||
      posix_memalign((void **)&c, 1 << 21, bytes)) {
    fprintf(stderr, "triad_pfn: cannot allocate 3 x %zu bytes\n", bytes);
    return 1;
  }
#pragma omp parallel for schedule(static)
  for (long i = 0; i < n; i++) {
    a[i] = 1.0;
    b[i] = 2.0;
    c[i] = 0.5;
  }
  long hist[BUCKETS] = {0}, absent = 0, seen = 0;
  int fd = open("/proc/self/pagemap", O_RDONLY);
  if (fd >= 0) {
    double *arrs[3] = {a, b, c};
    for (int k = 0; k < 3; k++) {
      long s = pfn_histogram(fd, arrs[k], bytes, hist, &absent);
      if (s < 0) {
        seen = 0;
        break;
      }
      seen += s;
    }
    close(fd);
  }
  double *rate = malloc(reps * sizeof(double));
  const double s = 3.0;
  for (int r = 0; r < reps; r++) {
    double t = now();
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) a[i] = b[i] + s * c[i];
    rate[r] = 24.0 * n / (now() - t) / 1e9;
  }
  /* every a[i] is 2 + 3 * 0.5 = 3.5 after any triad */
  double sum = 0;
  for (long i = 0; i < n; i += 4096) sum += a[i];
  long checked = (n + 4095) / 4096;
  if (sum != 3.5 * checked) {
    fprintf(stderr, "triad_pfn: checksum %g, want %g\n", sum, 3.5 * checked);
    return 1;
  }
  double best = 0;
  for (int r = 0; r < reps; r++) best = rate[r] > best ? rate[r] : best;
  /* the rates in the order they ran, before sorting: a level that changes within one process
   * (same pages) is a property of the moment, not of the allocation */
  double *series = malloc(reps * sizeof(double));
  memcpy(series, rate, reps * sizeof(double));
  qsort(rate, reps, sizeof(double), cmp);
  printf("{\"threads\": %d, \"n\": %ld, \"best_gbs\": %.3f, \"median_gbs\": %.3f, \"min_gbs\": %.3f, "
         "\"pages\": %ld, \"absent\": %ld, \"gib_share\": {",
         omp_get_max_threads(), n, best, rate[reps / 2], rate[0], seen, absent);
  int first = 1;
  for (int g = 0; g < BUCKETS; g++) {
    if (!hist[g]) continue;
    printf("%s\"%d\": %.4f", first ? "" : ", ", g, seen ? (double)hist[g] / seen : 0.0);
    first = 0;
  }
  printf("}, \"series\": [");
  for (int r = 0; r < reps; r++) printf("%s%.2f", r ? ", " : "", series[r]);
  printf("]}\n");
  return 0;
}
