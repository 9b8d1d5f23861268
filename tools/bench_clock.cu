/*
 * bench_clock.cu - the GPU's SM clock, power draw and clock-event reasons, read through NVML loaded
 * at run time (no link-time dependency; without NVML the rows simply carry no clock): while a long
 * case runs (bench_timing.cu samples it) or right after a short one.
 *
 * NOTE: why the bench records them: on the H200 (700 W limit) a 4-minute bench run slows down in
 * its later sections (v8: w2 prefill 620 TFLOP/s alone under ncu at 1.77 GHz, 452-537 in the bench
 * after the w13 section), so a row's rate means little without the clock it ran at.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include <cuda_runtime.h>

#include "baselines.h"
#include "bench_common.h"

typedef struct nvml_device_st *nvml_device; /* NVML's opaque nvmlDevice_t */
typedef int (*nvml_init_fn)(void);
typedef int (*nvml_handle_by_pci_fn)(const char *, nvml_device *);
typedef int (*nvml_clock_fn)(nvml_device, int, unsigned int *);
typedef int (*nvml_power_fn)(nvml_device, unsigned int *);
typedef int (*nvml_reasons_fn)(nvml_device, unsigned long long *);
typedef int (*nvml_energy_fn)(nvml_device, unsigned long long *);

enum { NVML_SUCCESS = 0, NVML_CLOCK_SM = 1 };

static struct {
    int state; /* 0: not tried, 1: ready, -1: unavailable */
    nvml_device dev;
    nvml_clock_fn clock;
    nvml_power_fn power;
    nvml_reasons_fn reasons;
    nvml_energy_fn energy; /* the total energy since the driver loaded, mJ (Volta and later) */
} nvml;

/* Opens NVML for the current CUDA device, matched by PCI bus id (NVML's device order need not be
 * CUDA's). */
static int nvml_open(void) {
    if (nvml.state != 0) return nvml.state;
    nvml.state = -1;
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return -1;
    nvml_init_fn init = (nvml_init_fn)dlsym(lib, "nvmlInit_v2");
    nvml_handle_by_pci_fn by_pci = (nvml_handle_by_pci_fn)dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
    nvml.clock = (nvml_clock_fn)dlsym(lib, "nvmlDeviceGetClockInfo");
    nvml.power = (nvml_power_fn)dlsym(lib, "nvmlDeviceGetPowerUsage");
    nvml.reasons = (nvml_reasons_fn)dlsym(lib, "nvmlDeviceGetCurrentClocksEventReasons");
    nvml.energy = (nvml_energy_fn)dlsym(lib, "nvmlDeviceGetTotalEnergyConsumption");
    if (!nvml.reasons) nvml.reasons = (nvml_reasons_fn)dlsym(lib, "nvmlDeviceGetCurrentClocksThrottleReasons");
    int device = 0;
    char bus[64];
    if (!init || !by_pci || !nvml.clock || init() != NVML_SUCCESS || cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetPCIBusId(bus, (int)sizeof bus, device) != cudaSuccess || by_pci(bus, &nvml.dev) != NVML_SUCCESS)
        return -1;
    nvml.state = 1;
    return 1;
}

bench_clock bench_read_clock(void) {
    bench_clock k;
    memset(&k, 0, sizeof k);
    if (nvml_open() != 1) return k;
    unsigned int mhz = 0, mw = 0;
    unsigned long long reasons = 0;
    if (nvml.clock(nvml.dev, NVML_CLOCK_SM, &mhz) == NVML_SUCCESS) k.sm_mhz = (int)mhz;
    if (nvml.power && nvml.power(nvml.dev, &mw) == NVML_SUCCESS) k.power_w = (int)(mw / 1000);
    if (nvml.reasons && nvml.reasons(nvml.dev, &reasons) == NVML_SUCCESS) k.reasons = reasons;
    return k;
}

bench_clock bench_last_clock;

int bench_read_energy_mj(unsigned long long *mj) {
    return nvml_open() == 1 && nvml.energy && nvml.energy(nvml.dev, mj) == NVML_SUCCESS;
}

static void read_for_baselines(int *sm_mhz, int *power_w) {
    const bench_clock k = bench_read_clock();
    *sm_mhz = k.sm_mhz;
    *power_w = k.power_w;
}

void bench_clock_for_baselines(void) {
    baseline_set_clock_reader(read_for_baselines);
    baseline_set_energy_reader(bench_read_energy_mj, bench_energy_window_ms());
}
