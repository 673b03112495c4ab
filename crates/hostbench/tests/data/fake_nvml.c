/* A stand-in for the driver's libnvidia-ml.so.1, built by tests/burn_nvml.rs and put first on
 * LD_LIBRARY_PATH, so `hostbench burn` goes through its real NVML calls on a host without a GPU.
 * Signatures and the nvmlEventData_t layout follow NVIDIA's nvml.h; what it answers is the fault
 * under test: one GPU (0000:41:00.0) whose volatile uncorrectable ECC count reads 0 the first time
 * and 2 after (with $FAKE_NVML_MARK set), and whose event set hands out XID 13 then XID 79, then only timeouts
 * ($FAKE_NVML_XIDS=none: timeouts from the start). It is found by its PCI address too, and reads
 * a steady SM clock, temperature and power, for the burn's timeline (tests/burn_cuda.rs).
 * Any function not defined here is absent, as in an older driver. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef void *nvmlDevice_t;
typedef void *nvmlEventSet_t;
typedef int nvmlReturn_t;

typedef struct {
	char busIdLegacy[16];
	unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
	char busId[32];
} nvmlPciInfo_t;

typedef struct {
	nvmlDevice_t device;
	unsigned long long eventType;
	unsigned long long eventData;
	unsigned int gpuInstanceId;
	unsigned int computeInstanceId;
} nvmlEventData_t;

#define DEV ((nvmlDevice_t)0x1650)
#define SET ((nvmlEventSet_t)0xe5e7)
#define TIMEOUT 10

/* With $FAKE_NVML_LOG set, each initialisation and shutdown appends a line to that file (the
 * library is loaded afresh by each user, so a count in memory would not add up). */
static void log_call(const char *what)
{
	const char *path = getenv("FAKE_NVML_LOG");
	FILE *f;

	if (path && (f = fopen(path, "a"))) {
		fprintf(f, "%s\n", what);
		fclose(f);
	}
}

nvmlReturn_t nvmlInit_v2(void)
{
	log_call("init");
	return 0;
}

nvmlReturn_t nvmlShutdown(void)
{
	log_call("shutdown");
	return 0;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n)
{
	*n = 1;
	return 0;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d)
{
	if (i != 0)
		return 2;
	*d = DEV;
	return 0;
}

/* NVML takes "domain:bus:device.function" with any width of hex domain. */
nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *id, nvmlDevice_t *d)
{
	unsigned int domain, bus, device, function;

	if (sscanf(id, "%x:%x:%x.%x", &domain, &bus, &device, &function) != 4 || domain != 0 ||
	    bus != 0x41 || device != 0 || function != 0)
		return 6; /* NVML_ERROR_NOT_FOUND */
	*d = DEV;
	return 0;
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned int *mhz)
{
	if (d != DEV)
		return 2;
	*mhz = type == 1 ? 1410 : 2619; /* NVML_CLOCK_SM, else memory */
	return 0;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned int *c)
{
	if (d != DEV || sensor != 0)
		return 2;
	*c = 47;
	return 0;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *mw)
{
	if (d != DEV)
		return 2;
	*mw = 312000;
	return 0;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int len)
{
	if (d != DEV || len < 9)
		return 2;
	strcpy(name, "Fake GPU");
	return 0;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *p)
{
	if (d != DEV)
		return 2;
	memset(p, 0, sizeof *p);
	p->bus = 0x41;
	return 0;
}

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t d, int error, int counter,
					 unsigned long long *count)
{
	/* The count lives in the driver, not in the library, which hostbench loads and unloads
	 * around each reading: a marker file ($FAKE_NVML_MARK) tells a later read from the first. */
	const char *mark = getenv("FAKE_NVML_MARK");
	FILE *f;

	if (d != DEV)
		return 2;
	*count = 0;
	if (error == 1 && counter == 0 && mark) {
		if (access(mark, F_OK) == 0)
			*count = 2;
		else if ((f = fopen(mark, "w")))
			fclose(f);
	}
	return 0;
}

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *s)
{
	*s = SET;
	return 0;
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t d, unsigned long long types, nvmlEventSet_t s)
{
	return d == DEV && s == SET && types == 0x8ULL ? 0 : 2;
}

nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t s, nvmlEventData_t *e, unsigned int ms)
{
	static const unsigned long long xids[] = { 13, 79 };
	static unsigned int next;

	const char *which = getenv("FAKE_NVML_XIDS");

	if (s != SET)
		return 2;
	if (which && strcmp(which, "none") == 0)
		next = sizeof xids / sizeof xids[0];
	if (next < sizeof xids / sizeof xids[0]) {
		memset(e, 0, sizeof *e);
		e->device = DEV;
		e->eventType = 0x8ULL;
		e->eventData = xids[next++];
		return 0;
	}
	usleep((ms < 50 ? ms : 50) * 1000);
	return TIMEOUT;
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t s)
{
	return s == SET ? 0 : 2;
}
