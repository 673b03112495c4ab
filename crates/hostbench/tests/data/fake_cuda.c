/* A stand-in for the NVIDIA driver's libcuda.so, built by tests/burn_driver.rs and put first on
 * LD_LIBRARY_PATH, so `hostbench burn --gpu-backend cuda` goes through its real driver calls
 * (cudarc's dynamic loading, the session, the buffers, the launches, the readbacks) on a host
 * without a GPU. Signatures follow NVIDIA's cuda.h for the entry points cudarc resolves; cudarc
 * panics on a missing symbol, so every entry point hostbench's CUDA backend calls is defined
 * here.
 *
 * The devices: FAKE_CUDA_DEVICES GPUs (default 1) of 4 SMs each, compute capability 6.1 (no
 * tensor cores, so the burn's tensor units are absent by design), PCI 0000:41:00.0 (then :42,
 * ...), 1.5 GiB each, of which the burn's buffers take their share. Device memory is host memory;
 * a CUdeviceptr is its address. A thread's calls go to the device of the context it made
 * current, as in the driver.
 *
 * Kernels run on the host, synchronously, at launch. A launch's arguments are read by the
 * `.param` list of the entry in the PTX text the module was loaded from (type and order), so a
 * host that marshals arguments differently from the PTX it generated reads back wrong results.
 * What each kernel computes is the PTX of crates/hostbench-gpu/src/burn/source.rs transcribed:
 * the chain kernels (8 chains per thread from start (g mod 16)·8 + j + 1, 16 fused steps per
 * turn, at least one turn, an FNV fold), `burn_fill` and `burn_check` (grid-stride, the four
 * patterns). A chain launch computes each of the 16 distinct starts once and hands every thread
 * its start's checksum (a CPU cannot afford 2048 threads per SM). Block b runs on SM b mod 4.
 *
 * Faults, each a real wrong answer from the "device", for the detection path end to end:
 *   FAKE_CUDA_BAD_SM=N       every f32 chain checksum of a block on SM N has bit 3 flipped
 *                            (on device FAKE_CUDA_BAD_DEVICE, default 0)
 *   FAKE_CUDA_BAD_WORD=I     after every fill, word I of the buffer has bit 5 flipped
 *   FAKE_CUDA_FAIL_LAUNCH=N  launch N (from 1) and every call after it fail with
 *                            CUDA_ERROR_ECC_UNCORRECTABLE, as a sticky driver error does
 *   FAKE_CUDA_MAX_ALLOC=B    cuMemAlloc refuses more than B bytes (out of memory)
 *
 * It exports exactly the entry points hostbench's CUDA backend lists (hostbench_gpu::cuda::
 * ENTRY_POINTS; the test compares the two). Pinned host memory, the asynchronous copies and the
 * occupancy query work (host memory, memcpy, 8 blocks per SM), so `hostbench gpu` can measure
 * transfers here; a kernel other than the burn's is refused (CUDA_ERROR_NOT_SUPPORTED), which
 * hostbench reports as unsupported. Built with -DFAKE_CUDA_OLD it lacks
 * cuDevicePrimaryCtxRelease_v2, as a driver older than CUDA 11 does.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;

enum {
	SUCCESS = 0,
	INVALID_VALUE = 1,
	OUT_OF_MEMORY = 2,
	INVALID_DEVICE = 101,
	ECC_UNCORRECTABLE = 214,
	INVALID_PTX = 218,
	INVALID_HANDLE = 400,
	NOT_FOUND = 500,
	NOT_SUPPORTED = 801,
};

#define SMS 4
#define TOTAL (3ULL << 29)
#define FNV 0x01000193u
#define HIGH_MUL 0x9E3779B1u
#define STARTS 16
#define CHAINS 8
#define UNROLL 16
#define MAX_PARAMS 8

struct module {
	char *ptx;
};

struct param {
	char name[32];
	int bytes;
	int is_float;
};

struct function {
	char name[64];
	int nparams;
	struct param params[MAX_PARAMS];
};

#define MAX_DEVICES 4

/* Per device; `current` is the device of the calling thread's current context (cuCtxSetCurrent),
 * as in the driver, where each burn thread sets its own device's primary context. */
static unsigned long long allocated[MAX_DEVICES];
static __thread int current;
static long launches;
static int sticky;
static int ctx_token[MAX_DEVICES], stream_token[MAX_DEVICES];

static long env_long(const char *name, long none)
{
	const char *v = getenv(name);
	return v && *v ? strtol(v, NULL, 0) : none;
}

/* FAKE_CUDA_DEVICES GPUs (default 1, at most 4): device d is on PCI bus 0x41 + d. */
static int devices(void)
{
	long n = env_long("FAKE_CUDA_DEVICES", 1);

	return n < 1 ? 1 : n > MAX_DEVICES ? MAX_DEVICES : (int)n;
}

static int bad_device(CUdevice d)
{
	return d < 0 || d >= devices();
}


/* The sticky error once FAKE_CUDA_FAIL_LAUNCH fired: every later call fails as on a GPU whose
 * context an uncorrectable error destroyed. */
#define STICKY()                                                                               \
	do {                                                                                   \
		if (sticky)                                                                    \
			return ECC_UNCORRECTABLE;                                              \
	} while (0)

CUresult cuInit(unsigned flags)
{
	return flags == 0 ? SUCCESS : INVALID_VALUE;
}

CUresult cuDriverGetVersion(int *v)
{
	*v = 12020;
	return SUCCESS;
}

CUresult cuDeviceGetCount(int *n)
{
	*n = devices();
	return SUCCESS;
}

CUresult cuDeviceGet(CUdevice *d, int ordinal)
{
	if (bad_device(ordinal))
		return INVALID_DEVICE;
	*d = ordinal;
	return SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice d)
{
	if (bad_device(d))
		return INVALID_DEVICE;
	snprintf(name, (size_t)len, "Fake CUDA GPU");
	return SUCCESS;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d)
{
	if (bad_device(d))
		return INVALID_DEVICE;
	*bytes = TOTAL;
	return SUCCESS;
}

CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice d)
{
	if (bad_device(d))
		return INVALID_DEVICE;
	switch (attr) {
	case 16: /* MULTIPROCESSOR_COUNT */
		*v = SMS;
		return SUCCESS;
	case 13: /* CLOCK_RATE, kHz */
		*v = 1000000;
		return SUCCESS;
	case 36: /* MEMORY_CLOCK_RATE, kHz */
		*v = 2000000;
		return SUCCESS;
	case 37: /* GLOBAL_MEMORY_BUS_WIDTH */
		*v = 256;
		return SUCCESS;
	case 38: /* L2_CACHE_SIZE */
		*v = 1 << 20;
		return SUCCESS;
	case 75: /* COMPUTE_CAPABILITY_MAJOR */
		*v = 6;
		return SUCCESS;
	case 76: /* COMPUTE_CAPABILITY_MINOR */
		*v = 1;
		return SUCCESS;
	case 50: /* PCI_DOMAIN_ID */
		*v = 0;
		return SUCCESS;
	case 33: /* PCI_BUS_ID */
		*v = 0x41 + d;
		return SUCCESS;
	case 34: /* PCI_DEVICE_ID */
		*v = 0;
		return SUCCESS;
	default:
		return INVALID_VALUE;
	}
}

CUresult cuDevicePrimaryCtxRetain(void **ctx, CUdevice d)
{
	if (bad_device(d))
		return INVALID_DEVICE;
	*ctx = &ctx_token[d];
	return SUCCESS;
}

#ifndef FAKE_CUDA_OLD
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d)
{
	return bad_device(d) ? INVALID_DEVICE : SUCCESS;
}
#endif

CUresult cuCtxSetCurrent(void *ctx)
{
	for (int d = 0; d < devices(); d++) {
		if (ctx == &ctx_token[d]) {
			current = d;
			return SUCCESS;
		}
	}
	return INVALID_HANDLE;
}

CUresult cuStreamCreate(void **s, unsigned flags)
{
	(void)flags;
	*s = &stream_token[current];
	return SUCCESS;
}

CUresult cuStreamDestroy_v2(void *s)
{
	return s == &stream_token[current] ? SUCCESS : INVALID_HANDLE;
}

CUresult cuStreamSynchronize(void *s)
{
	STICKY();
	return s == &stream_token[current] ? SUCCESS : INVALID_HANDLE;
}

CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
	STICKY();
	*free_bytes = TOTAL - allocated[current];
	*total = TOTAL;
	return SUCCESS;
}

/* Each allocation is preceded by its size, so a free gives the bytes back. */
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t bytes)
{
	long max = env_long("FAKE_CUDA_MAX_ALLOC", -1);
	unsigned long long *b;

	STICKY();
	if (bytes == 0)
		return INVALID_VALUE;
	if ((max >= 0 && bytes > (size_t)max) || allocated[current] + bytes > TOTAL)
		return OUT_OF_MEMORY;
	b = malloc(bytes + 16);
	if (!b)
		return OUT_OF_MEMORY;
	b[0] = bytes;
	b[1] = (unsigned long long)current;
	allocated[current] += bytes;
	*p = (CUdeviceptr)(uintptr_t)(b + 2);
	return SUCCESS;
}

CUresult cuMemFree_v2(CUdeviceptr p)
{
	unsigned long long *b = (unsigned long long *)(uintptr_t)p - 2;

	allocated[b[1]] -= b[0];
	free(b);
	return SUCCESS;
}

CUresult cuMemsetD8_v2(CUdeviceptr p, unsigned char v, size_t n)
{
	STICKY();
	memset((void *)(uintptr_t)p, v, n);
	return SUCCESS;
}

CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
	STICKY();
	memcpy(dst, (const void *)(uintptr_t)src, n);
	return SUCCESS;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
	STICKY();
	memcpy((void *)(uintptr_t)dst, src, n);
	return SUCCESS;
}

CUresult cuMemHostAlloc(void **p, size_t bytes, unsigned flags)
{
	(void)flags;
	STICKY();
	*p = malloc(bytes ? bytes : 1);
	return *p ? SUCCESS : OUT_OF_MEMORY;
}

CUresult cuMemFreeHost(void *p)
{
	free(p);
	return SUCCESS;
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, void *stream)
{
	(void)stream;
	return cuMemcpyHtoD_v2(dst, src, n);
}

CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, void *stream)
{
	(void)stream;
	return cuMemcpyDtoH_v2(dst, src, n);
}

CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, void *stream)
{
	(void)stream;
	STICKY();
	memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
	return SUCCESS;
}

CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *blocks, void *f, int block, size_t shared)
{
	(void)f;
	(void)shared;
	STICKY();
	*blocks = block > 0 && block <= 1024 ? 2048 / block < 32 ? 2048 / block : 32 : 0;
	return SUCCESS;
}

CUresult cuModuleLoadData(void **m, const void *image)
{
	const char *text = image;
	struct module *mod;

	STICKY();
	/* The JIT's first test: a PTX module names its version and target. */
	if (strncmp(text, ".version ", 9) != 0 || !strstr(text, ".target sm_"))
		return INVALID_PTX;
	mod = malloc(sizeof *mod);
	mod->ptx = strdup(text);
	*m = mod;
	return SUCCESS;
}

CUresult cuModuleUnload(void *m)
{
	struct module *mod = m;

	free(mod->ptx);
	free(mod);
	return SUCCESS;
}

/* The entry `name`'s parameters, read from the PTX text: `.param .<type> <name>` in order. */
CUresult cuModuleGetFunction(void **f, void *m, const char *name)
{
	struct module *mod = m;
	struct function *fn;
	char head[96];
	const char *p, *end;

	STICKY();
	snprintf(head, sizeof head, ".entry %s(", name);
	p = strstr(mod->ptx, head);
	if (!p)
		return NOT_FOUND;
	end = strchr(p, ')');
	fn = calloc(1, sizeof *fn);
	snprintf(fn->name, sizeof fn->name, "%s", name);
	while ((p = strstr(p, ".param .")) && p < end && fn->nparams < MAX_PARAMS) {
		struct param *q = &fn->params[fn->nparams++];
		char type[8];

		if (sscanf(p, ".param .%7s %31[A-Za-z0-9_]", type, q->name) != 2)
			return INVALID_PTX;
		q->bytes = atoi(type + 1) / 8;
		q->is_float = type[0] == 'f';
		if (q->bytes != 4 && q->bytes != 8)
			return INVALID_PTX;
		p += 8;
	}
	*f = fn;
	return SUCCESS;
}

/* Kernel arguments by the PTX parameter's name, in the PTX parameter's type. */
struct launch {
	struct function *fn;
	void **params;
	unsigned grid, block;
};

static const struct param *param(const struct launch *l, const char *name, int *i)
{
	for (*i = 0; *i < l->fn->nparams; ++*i)
		if (strcmp(l->fn->params[*i].name, name) == 0)
			return &l->fn->params[*i];
	fprintf(stderr, "fake libcuda: %s has no parameter %s\n", l->fn->name, name);
	abort();
}

static uint64_t int_arg(const struct launch *l, const char *name)
{
	int i;
	const struct param *p = param(l, name, &i);
	uint64_t v64;
	uint32_t v32;

	if (p->bytes == 8) {
		memcpy(&v64, l->params[i], 8);
		return v64;
	}
	memcpy(&v32, l->params[i], 4);
	return v32;
}

static double float_arg(const struct launch *l, const char *name)
{
	int i;
	const struct param *p = param(l, name, &i);
	double d;
	float f;

	if (p->bytes == 8) {
		memcpy(&d, l->params[i], 8);
		return d;
	}
	memcpy(&f, l->params[i], 4);
	return f;
}

static uint32_t fold(uint32_t h, uint32_t bits)
{
	return h * FNV ^ bits;
}

static void chain(const struct launch *l, int dbl)
{
	uint32_t *out = (uint32_t *)(uintptr_t)int_arg(l, "out");
	uint32_t *sm = (uint32_t *)(uintptr_t)int_arg(l, "sm");
	uint32_t iters = (uint32_t)int_arg(l, "iters"), sums[STARTS];
	uint64_t turns = iters ? iters : 1, n = (uint64_t)l->grid * l->block;
	long bad = current == env_long("FAKE_CUDA_BAD_DEVICE", 0) ? env_long("FAKE_CUDA_BAD_SM", -1) : -1;
	double c = float_arg(l, "c"), step = float_arg(l, "step");

	for (unsigned s = 0; s < STARTS; s++) {
		uint32_t h = 0;

		for (unsigned j = 0; j < CHAINS; j++) {
			unsigned k = s * CHAINS + j + 1;

			if (dbl) {
				double x = fma((double)k, step, c);
				uint64_t b;

				for (uint64_t t = 0; t < turns * UNROLL; t++)
					x = fma(x, x, c);
				memcpy(&b, &x, 8);
				h = fold(fold(h, (uint32_t)b), (uint32_t)(b >> 32));
			} else {
				float x = fmaf((float)k, (float)step, (float)c);
				uint32_t b;

				for (uint64_t t = 0; t < turns * UNROLL; t++)
					x = fmaf(x, x, (float)c);
				memcpy(&b, &x, 4);
				h = fold(h, b);
			}
		}
		sums[s] = h;
	}
	for (unsigned b = 0; b < l->grid; b++)
		sm[b] = b % SMS;
	for (uint64_t g = 0; g < n; g++) {
		out[g] = sums[g % STARTS];
		if (!dbl && bad == (long)((g / l->block) % SMS))
			out[g] ^= 1u << 3;
	}
}

static uint32_t pattern(uint64_t i, uint32_t mode, uint32_t seed)
{
	uint32_t lo = (uint32_t)i, hi = (uint32_t)(i >> 32);
	uint32_t v = (mode & 1) ? 1u << ((lo + seed) & 31) : lo ^ (hi * HIGH_MUL) ^ seed;

	return v ^ (0u - ((mode >> 1) & 1));
}

static void fill(const struct launch *l)
{
	uint32_t *buf = (uint32_t *)(uintptr_t)int_arg(l, "buf");
	uint64_t words = int_arg(l, "words");
	uint32_t mode = (uint32_t)int_arg(l, "mode"), seed = (uint32_t)int_arg(l, "seed");
	long bad = env_long("FAKE_CUDA_BAD_WORD", -1);

	for (uint64_t i = 0; i < words; i++)
		buf[i] = pattern(i, mode, seed);
	if (bad >= 0 && (uint64_t)bad < words)
		buf[bad] ^= 1u << 5;
}

/* Per thread (grid-stride: thread g reads words g, g + n, ...): wrong words, the first one's value
 * and index, at out[g·4]. Walked in word order, the threads' records kept side by side. */
static void check(const struct launch *l)
{
	const uint32_t *buf = (const uint32_t *)(uintptr_t)int_arg(l, "buf");
	uint32_t *out = (uint32_t *)(uintptr_t)int_arg(l, "out");
	uint64_t words = int_arg(l, "words"), n = (uint64_t)l->grid * l->block, g = 0;
	uint32_t mode = (uint32_t)int_arg(l, "mode"), seed = (uint32_t)int_arg(l, "seed");

	for (g = 0; g < n; g++) {
		out[g * 4] = 0;
		out[g * 4 + 1] = 0;
		memcpy(&out[g * 4 + 2], &words, 8);
	}
	g = 0;
	for (uint64_t i = 0; i < words; i++, g = g + 1 == n ? 0 : g + 1) {
		uint32_t v = buf[i];

		if (v != pattern(i, mode, seed) && out[g * 4]++ == 0) {
			out[g * 4 + 1] = v;
			memcpy(&out[g * 4 + 2], &i, 8);
		}
	}
}

CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
			unsigned bz, unsigned shared, void *stream, void **params, void **extra)
{
	struct function *fn = f;
	struct launch l = { fn, params, gx, bx };

	(void)shared;
	(void)extra;
	STICKY();
	if (__atomic_add_fetch(&launches, 1, __ATOMIC_SEQ_CST) == env_long("FAKE_CUDA_FAIL_LAUNCH", -1)) {
		sticky = 1;
		return ECC_UNCORRECTABLE;
	}
	if (stream != &stream_token[current] || gy != 1 || gz != 1 || by != 1 || bz != 1 || !gx || !bx ||
	    bx > 1024)
		return INVALID_VALUE;
	if (strcmp(fn->name, "burn_chain_f32") == 0)
		chain(&l, 0);
	else if (strcmp(fn->name, "burn_chain_f64") == 0)
		chain(&l, 1);
	else if (strcmp(fn->name, "burn_fill") == 0)
		fill(&l);
	else if (strcmp(fn->name, "burn_check") == 0)
		check(&l);
	else
		return NOT_SUPPORTED; /* a kernel this stand-in cannot run */
	return SUCCESS;
}
