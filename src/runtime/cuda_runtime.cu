/*
 * cuda_runtime.cu - see cuda_runtime.h; also hfp4_device_query.
 */
#include <stdio.h>
#include <string.h>

#include "cuda_runtime.h"

hfp4_status hfp4__cuda_fail(const char *fn, const char *what, cudaError_t err) {
    hfp4_status s = HFP4_ERR_CUDA;
    if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver || err == cudaErrorInvalidDevice)
        s = HFP4_ERR_NO_DEVICE;
    else if (err == cudaErrorMemoryAllocation)
        s = HFP4_ERR_OUT_OF_MEMORY;
    return hfp4__fail(s, "%s: %s failed: %s (%s)", fn, what, cudaGetErrorName(err), cudaGetErrorString(err));
}

hfp4_status hfp4__current_device(const char *fn, hfp4_current_device *out) {
    enum { MAX_DEVICES = 64 };
    static hfp4_current_device cache[MAX_DEVICES];
    static int cached[MAX_DEVICES];
    int dev = 0;
    HFP4_CUDA_TRY(fn, cudaGetDevice(&dev));
    /* NOTE: published with release/acquire so a thread that sees the flag sees the values */
    if (dev >= 0 && dev < MAX_DEVICES && __atomic_load_n(&cached[dev], __ATOMIC_ACQUIRE)) {
        *out = cache[dev];
        return HFP4_OK;
    }
    hfp4_current_device d;
    d.device = dev;
    HFP4_CUDA_TRY(fn, cudaDeviceGetAttribute(&d.cc_major, cudaDevAttrComputeCapabilityMajor, dev));
    HFP4_CUDA_TRY(fn, cudaDeviceGetAttribute(&d.cc_minor, cudaDevAttrComputeCapabilityMinor, dev));
    HFP4_CUDA_TRY(fn, cudaDeviceGetAttribute(&d.num_sms, cudaDevAttrMultiProcessorCount, dev));
    HFP4_CUDA_TRY(fn, cudaDeviceGetAttribute(&d.max_smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    if (dev >= 0 && dev < MAX_DEVICES) {
        cache[dev] = d; /* concurrent first calls all write the same values */
        __atomic_store_n(&cached[dev], 1, __ATOMIC_RELEASE);
    }
    *out = d;
    return HFP4_OK;
}

hfp4_status hfp4__require_sm90(const char *fn, hfp4_current_device *out) {
    HFP4_TRY(hfp4__current_device(fn, out));
    HFP4_REQUIRE(out->cc_major == 9 && out->cc_minor == 0,
                 "%s: device %d has compute capability %d.%d; hfp4's kernels need a Hopper GPU (9.0, sm_90a)", fn,
                 out->device, out->cc_major, out->cc_minor);
    return HFP4_OK;
}

typedef CUresult (*encode_tiled_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                                    const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,
                                    CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

/* NOTE: fetched through the runtime so libhfp4 never links libcuda (it must load on CPU-only CI). */
static hfp4_status get_encode_tiled(const char *fn, encode_tiled_fn *out) {
    static encode_tiled_fn cached;
    if (cached) {
        *out = cached;
        return HFP4_OK;
    }
    void *ptr = NULL;
    cudaDriverEntryPointQueryResult q;
    HFP4_CUDA_TRY(fn, cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &ptr, 12000, cudaEnableDefault, &q));
    HFP4_REQUIRE(q == cudaDriverEntryPointSuccess && ptr != NULL,
                 "%s: the CUDA driver does not provide cuTensorMapEncodeTiled (driver too old?)", fn);
    cached = (encode_tiled_fn)ptr;
    *out = cached;
    return HFP4_OK;
}

/* A 3D tensor map of 1-byte (bf16 = 0) or BF16 (bf16 = 1) elements with the 128-byte swizzle;
 * what: the operand's name in the error message. */
static hfp4_status make_tensor_map_3d(const char *fn, CUtensorMap *map, const void *base, int bf16, const char *what,
                                      const int64_t dims[3], const int64_t strides[2], const uint32_t box[3]) {
    encode_tiled_fn encode = NULL;
    HFP4_TRY(get_encode_tiled(fn, &encode));
    cuuint64_t gdim[3] = {(cuuint64_t)dims[0], (cuuint64_t)dims[1], (cuuint64_t)dims[2]};
    cuuint64_t gstride[2] = {(cuuint64_t)strides[0], (cuuint64_t)strides[1]};
    cuuint32_t bdim[3] = {box[0], box[1], box[2]};
    cuuint32_t estride[3] = {1, 1, 1};
    CUresult r = encode(map, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, (void *)base,
                        gdim, gstride, bdim, estride,
                        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS)
        return hfp4__fail(HFP4_ERR_UNSUPPORTED,
                          "%s: cuTensorMapEncodeTiled rejected %s (dims %lld x %lld x %lld, strides %lld, %lld bytes): "
                          "CUresult %d",
                          fn, what, (long long)dims[0], (long long)dims[1], (long long)dims[2], (long long)strides[0],
                          (long long)strides[1], (int)r);
    return HFP4_OK;
}

hfp4_status hfp4__make_tensor_map_u8_3d(const char *fn, CUtensorMap *map, const void *base, const int64_t dims[3],
                                        const int64_t strides[2], const uint32_t box[3]) {
    return make_tensor_map_3d(fn, map, base, 0, "A", dims, strides, box);
}

hfp4_status hfp4__make_tensor_map_bf16_3d(const char *fn, const char *what, CUtensorMap *map, const void *base,
                                          const int64_t dims[3], const int64_t strides[2], const uint32_t box[3]) {
    return make_tensor_map_3d(fn, map, base, 1, what, dims, strides, box);
}

hfp4_status hfp4__require_kernel_regs(const char *fn, const char *what, const void *kernel, int *cache, int warpgroups,
                                      int split) {
    int regs = __atomic_load_n(cache, __ATOMIC_RELAXED);
    if (regs == 0) {
        cudaFuncAttributes attr;
        HFP4_CUDA_TRY(fn, cudaFuncGetAttributes(&attr, kernel));
        regs = attr.numRegs;
        __atomic_store_n(cache, regs, __ATOMIC_RELAXED);
    }
    HFP4_REQUIRE(regs * warpgroups >= split,
                 "%s: %s built with %d registers per thread, its register split needs %d (rebuild hfp4)", fn, what, regs,
                 (split + warpgroups - 1) / warpgroups);
    return HFP4_OK;
}

extern "C" hfp4_status hfp4_device_query(int device, hfp4_device_info *info) {
    const char *fn = "hfp4_device_query";
    HFP4_CHECK_ARG(info != NULL, "%s: info is NULL", fn);
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky-free error so later calls start clean */
        return hfp4__fail(HFP4_ERR_NO_DEVICE, "%s: no CUDA driver or device (%s: %s)", fn, cudaGetErrorName(err),
                          cudaGetErrorString(err));
    }
    if (device < 0 || device >= count)
        return hfp4__fail(HFP4_ERR_NO_DEVICE, "%s: device = %d, but %d CUDA device(s) are present", fn, device, count);
    cudaDeviceProp prop;
    HFP4_CUDA_TRY(fn, cudaGetDeviceProperties(&prop, device));
    memset(info, 0, sizeof *info);
    info->device = device;
    info->cc_major = prop.major;
    info->cc_minor = prop.minor;
    info->num_sms = prop.multiProcessorCount;
    info->has_sm90_kernels = prop.major == 9 && prop.minor == 0;
    info->global_mem_bytes = (int64_t)prop.totalGlobalMem;
    memcpy(info->name, prop.name, sizeof info->name - 1);
    info->name[sizeof info->name - 1] = '\0';
    return HFP4_OK;
}
