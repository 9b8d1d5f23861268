/*
 * gpu_device.h - whether the GPU tests' current CUDA device runs hfp4's SM90 kernels: the device
 * each test runs on is the current one (harness --devices selects it, tests/gpu/test_devices.cu),
 * so the check asks about that device, not device 0.
 */
#pragma once
#include <cuda_runtime.h>

#include "hfp4.h"

/* The current CUDA device (0 where none can be read): the device the library's per-device state of
 * a test belongs to under --devices */
static inline int gpu_current_device(void) {
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess) {
        cudaGetLastError(); /* (no device: clear the error so the skip leaves a clean state) */
        return 0;
    }
    return device;
}

static inline int gpu_current_is_sm90(void) {
    hfp4_device_info info;
    return hfp4_device_query(gpu_current_device(), &info) == HFP4_OK && info.has_sm90_kernels;
}
