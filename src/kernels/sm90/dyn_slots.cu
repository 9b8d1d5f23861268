/*
 * dyn_slots.cu - see dyn_slots.h.
 */
#include "dyn_slots.h"
#include "fp8_fp4_gemm_params.h" /* HFP4_SM90_DYN_SLOTS, HFP4_SM90_DYN_STREAM_SLOTS */

int32_t hfp4__sm90_dyn_slot(int device, cudaStream_t stream) {
    enum { MAX_DEVICES = 64, N = HFP4_SM90_DYN_STREAM_SLOTS };
    static uintptr_t stream_keys[MAX_DEVICES][N]; /* 0: free, else the stream's key (odd) */
    static int32_t captured_next[MAX_DEVICES];
    static __thread char per_thread_marker; /* its address keys this thread's cudaStreamPerThread */
    if (device < 0 || device >= MAX_DEVICES) return -1;
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) {
        /* (e.g. the legacy stream while another thread captures in global mode): the error is this
         * query's own, so it is not left behind for the caller to find */
        (void)cudaGetLastError();
        return -1;
    }
    if (status == cudaStreamCaptureStatusActive) {
        const int32_t v = __atomic_fetch_add(&captured_next[device], 1, __ATOMIC_RELAXED);
        return v >= 0 && v < HFP4_SM90_DYN_SLOTS - N ? N + v : -1;
    }
    if (status != cudaStreamCaptureStatusNone) return -1; /* (an invalidated capture) */
    /* handles are pointers, or NULL / cudaStreamLegacy for the one legacy stream: shifted and made odd,
     * a key is never 0, the free mark */
    uintptr_t key = stream == cudaStreamPerThread ? (uintptr_t)&per_thread_marker : (uintptr_t)stream;
    if (stream == cudaStreamLegacy) key = 0;
    key = (key << 1) | 1u;
    const uint32_t h = (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 40) % N;
    for (uint32_t i = 0; i < N; i++) { /* linear probing; entries are never removed */
        uintptr_t *k = &stream_keys[device][(h + i) % N];
        uintptr_t cur = __atomic_load_n(k, __ATOMIC_ACQUIRE);
        if (cur == 0 && __atomic_compare_exchange_n(k, &cur, key, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            return (int32_t)((h + i) % N);
        if (cur == key) return (int32_t)((h + i) % N); /* (also when another thread just inserted it) */
    }
    return -1;
}
