/*
 * micro_tensor_map.cuh - the driver's cuTensorMapEncodeTiled for the micro-benchmarks that build
 * TMA maps themselves (the library's own lookup, src/runtime/cuda_runtime.cu, is not linked into
 * them).
 */
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>

typedef CUresult (*encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                              const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,
                              CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

/* The encoder, or NULL after a message naming the benchmark when the driver lacks it. */
static encode_fn micro_tensor_map_encoder(const char *name) {
    void *fn = NULL;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess || !fn) {
        fprintf(stderr, "%s: no cuTensorMapEncodeTiled\n", name);
        return NULL;
    }
    return (encode_fn)fn;
}
