/*
 * cuda_runtime.h - hfp4's thin layer over the CUDA runtime: error mapping, the current device's
 * properties (cached), and driver entry points fetched without linking libcuda (so libhfp4 loads
 * on machines without a driver).
 */
#ifndef HFP4_CUDA_RUNTIME_H
#define HFP4_CUDA_RUNTIME_H

#include <cuda.h>
#include <cuda_runtime.h>

#include "internal.h"

/* Maps a CUDA runtime error to a status with a message naming `what` and the CUDA error. */
hfp4_status hfp4__cuda_fail(const char *fn, const char *what, cudaError_t err);

#define HFP4_CUDA_TRY(fn, call)                                                                      \
    do {                                                                                             \
        cudaError_t hfp4__e = (call);                                                                \
        if (hfp4__e != cudaSuccess) return hfp4__cuda_fail(fn, #call, hfp4__e);                      \
    } while (0)

typedef struct hfp4_current_device {
    int device;
    int cc_major, cc_minor;
    int num_sms;
    int max_smem_optin;
} hfp4_current_device;

/* The current CUDA device and its properties; NO_DEVICE without a driver/GPU. */
hfp4_status hfp4__current_device(const char *fn, hfp4_current_device *out);

/* Requires an SM90 device (UNSUPPORTED with the device's name and compute capability otherwise). */
hfp4_status hfp4__require_sm90(const char *fn, hfp4_current_device *out);

/* Encodes a 3D uint8 tiled tensor map (128-byte swizzle, zero fill out of bounds). */
hfp4_status hfp4__make_tensor_map_u8_3d(const char *fn, CUtensorMap *map, const void *base, const int64_t dims[3],
                                        const int64_t strides[2], const uint32_t box[3]);
/* The same for BF16 elements (D's TMA stores, the BF16 path's copy of A); strides in bytes; `what`
 * names the operand in the error message. */
hfp4_status hfp4__make_tensor_map_bf16_3d(const char *fn, const char *what, CUtensorMap *map, const void *base,
                                          const int64_t dims[3], const int64_t strides[2], const uint32_t box[3]);
/* The warpgroups' setmaxnreg split of an SM90 kernel assumes the registers per thread it was built
 * with: if a toolkit ever compiled it to fewer, the consumers' setmaxnreg.inc would wait forever (a
 * hang, not an error), so the launchers refuse: UNSUPPORTED unless the kernel's registers times
 * `warpgroups` reach `split` (the producer's plus the consumers'). *cache: the count, read once (0:
 * not yet; the same value from every thread). `what` names the kernel in the message. */
hfp4_status hfp4__require_kernel_regs(const char *fn, const char *what, const void *kernel, int *cache, int warpgroups,
                                      int split);


#endif
