/*
 * test_devices.cu - the GPU tests on more than one CUDA device: how the harness selects a device
 * (--devices, tests/harness.h: each test's body once per listed device, in one process), and the
 * library driving two GPUs from one process, as transformers does with device_map="auto" (a
 * model's layers over several GPUs of one process).
 * Why: the library keeps per-device state (device properties, the dynamic walk's counter slots,
 * the route's cluster answer, kernel attributes set at launch); a value set up for the first device
 * and reused on the second would fail only there. Run: hfp4_gpu_tests --fork --devices 0,1.
 */
#include <cuda_runtime.h>
#include <stdio.h>

#include "gemm_fixture.h"
#include "gpu_device.h"
#include "harness.h"

/* The harness's device hook: device must exist (a message otherwise); whether it runs the SM90
 * kernels is each test's own check (gpu_current_is_sm90), so a non-Hopper device skips */
static int select_device(int device) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        cudaGetLastError();
        count = 0;
    }
    if (device < 0 || device >= count) {
        printf("    --devices: device %d does not exist (this machine has %d CUDA devices)\n", device, count);
        return 1;
    }
    const cudaError_t err = cudaSetDevice(device);
    if (err != cudaSuccess) {
        printf("    --devices: cudaSetDevice(%d): %s\n", device, cudaGetErrorString(err));
        return 1;
    }
    return 0;
}

__attribute__((constructor)) static void register_device_hook(void) { hfp4_test_set_device_hook(select_device); }

static void run_on(int device, gemm_case c, const char *label) {
    CHECK_MSG(cudaSetDevice(device) == cudaSuccess, "cudaSetDevice(%d)", device);
    gemm_host h;
    fx_build(&h, &c);
    const gemm_result r = fx_run(&h);
    int now = -1;
    cudaGetDevice(&now);
    printf("    device %d: %-28s relF %.2e bad %lld\n", device, label, r.rel_frob, (long long)r.bad_elements);
    CHECK_MSG(r.status == HFP4_OK, "device %d, %s: %s: %s", device, label, hfp4_status_name(r.status),
              hfp4_last_error());
    CHECK_MSG(r.status != HFP4_OK || (r.bad_elements == 0 && r.repack_match), "device %d, %s: %lld bad elements",
              device, label, (long long)r.bad_elements);
    CHECK_MSG(now == device, "device %d, %s: the current device is %d afterwards", device, label, now);
    fx_free(&h);
}

static int both_sm90(void) {
    for (int d = 0; d < 2; d++)
        if (cudaSetDevice(d) != cudaSuccess || !gpu_current_is_sm90()) return 0;
    return 1;
}

/* Alternating devices in one process, each launch family's first use on device 1 after device 0:
 * the 128-token tile (dense), the two-CTA 8-token tile with the dynamic walk (masked, expected_m),
 * the contiguous layout's narrow-block split, 1x32 activation scales */
TEST(gpu_two_devices_one_process) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count < 2) {
        cudaGetLastError();
        SKIP("needs two CUDA devices");
    }
    const int entry = gpu_current_device(); /* (restored on every way out: later tests ask the current one) */
    const int ok = both_sm90();
    cudaSetDevice(entry);
    if (!ok) SKIP("needs two SM90 (Hopper) GPUs");
    static const int order[] = {0, 1, 0, 1};
    for (int i = 0; i < 4; i++) {
        const int d = order[i];
        gemm_case c;
        memset(&c, 0, sizeof c);
        c.a_gran = 128;
        c.a_scale = HFP4_DTYPE_FP32;
        c.w_pow2 = 1;
        c.d_dtype = HFP4_DTYPE_BF16;
        c.grouping = HFP4_GROUPING_NONE;
        c.m = 300, c.n = 512, c.k = 1024, c.groups = 1, c.seed = 4100 + i;
        run_on(d, c, "dense, 128-token tile");
        c.grouping = HFP4_GROUPING_MASKED;
        c.m = 8, c.n = 1024, c.k = 1024, c.groups = 24, c.expected_m = 3, c.seed = 4110 + i;
        run_on(d, c, "masked, 8-token tile");
        c.grouping = HFP4_GROUPING_CONTIGUOUS;
        c.m = 2048, c.n = 1024, c.k = 512, c.groups = 32, c.expected_m = 0, c.alignment = 128, c.seed = 4120 + i;
        run_on(d, c, "contiguous");
        c.grouping = HFP4_GROUPING_MASKED;
        c.m = 16, c.n = 512, c.k = 1024, c.groups = 8, c.expected_m = 14, c.a_gran = 32, c.alignment = 0;
        c.seed = 4130 + i;
        run_on(d, c, "masked, 1x32 scales");
    }
    cudaSetDevice(entry);
}
