/*
 * dyn_slots.cu - see dyn_slots.h.
 *
 * Captured launches' slots go back to a per-device free list when CUDA destroys the user object that
 * the capturing graph holds for each of them. What CUDA promises about that object's lifetime (CUDA
 * C++ Programming Guide, "CUDA User Objects"; cuda_runtime_api.h, cudaUserObjectCreate and
 * cudaStreamGetCaptureInfo):
 * - a cloned cudaGraph_t retains a copy of every reference the source graph owns, and an
 *   instantiated cudaGraphExec_t retains a copy of every reference in its source graph, so the slot
 *   stays held while the graph, any clone of it or any instance of either exists;
 * - "When a cudaGraphExec_t is destroyed without being synchronized, the references are retained
 *   until the execution is completed"; likewise references that cudaGraphExecUpdate or
 *   cudaGraphExecChildGraphNodeSetParams replace "are held until the launches have finished
 *   executing". References of a child graph node belong to the child graph (a copy of the graph
 *   added), so they follow it the same way;
 * - the destructor then runs asynchronously, on a shared CUDA-internal thread, and may make no CUDA
 *   API call (hence the free list is plain atomics; nothing in CUDA can wait on it either);
 * - the capturing graph (cudaStreamGetCaptureInfo's graph_out) permits every operation but destroy
 *   and node removal during the capture. (Not stated, inferred: a capture that ends invalidated,
 *   cudaStreamEndCapture giving no graph, destroys the graph and so returns its slots too.)
 * So a slot comes back only after every launch that used it has completed, and each of those
 * launches zeroed its counter before completing (dynamic_walk.cuh, dyn_finish; a launch that never
 * ran never touched it): a slot taken again is clean and no launch still uses it.
 */
#include "dyn_slots.h"
#include "fp8_fp4_gemm_params.h" /* HFP4_SM90_DYN_SLOTS, HFP4_SM90_DYN_STREAM_SLOTS */

#include <pthread.h>

enum {
    MAX_DEVICES = 64,
    N = HFP4_SM90_DYN_STREAM_SLOTS,       /* slots [0, N): streams' */
    PLAIN = HFP4_SM90_DYN_PLAIN_SLOTS,    /* slots [N + CAPTURED, HFP4_SM90_DYN_SLOTS): captured, never returned */
    CAPTURED = HFP4_SM90_DYN_SLOTS - N - PLAIN, /* slots [N, N + CAPTURED): captured launches', returned */
    CAPTURED_WORDS = (CAPTURED + 63) / 64
};
/* (the user object's pointer carries device and slot + 1, never NULL, so no context is allocated,
 * and none leaks) */
static_assert(CAPTURED < (1 << 16), "a captured slot's index + 1 must fit in 16 bits of the user object's pointer");
static_assert(PLAIN >= 0 && CAPTURED >= 64, "HFP4_SM90_DYN_PLAIN_SLOTS leaves too few returned slots");

/* Per device: captured slots never handed out yet ([captured_fresh, CAPTURED)), and those returned
 * (a bit each in captured_free; captured_free_count: bits set and not yet claimed by a taker). The
 * destructor sets the bit before it counts it, and a taker claims a count before it clears a bit, so
 * a taker that claimed a count always finds a bit set (bits set >= counts + claims in flight). */
static int32_t captured_fresh[MAX_DEVICES];
static int32_t captured_plain[MAX_DEVICES]; /* plain slots handed out ([N + CAPTURED, N + CAPTURED + PLAIN)) */
static uint64_t captured_free[MAX_DEVICES][CAPTURED_WORDS];
static int32_t captured_free_count[MAX_DEVICES];

/* Runs on CUDA's internal thread (or in the releasing call): no CUDA API, no blocking. Counts only a
 * bit it set, so a slot given back twice (were CUDA ever to run a destructor for a failed create)
 * cannot leave a count without a bit, on which a taker would spin. */
static void captured_give_back(int device, int32_t v) {
    const uint64_t bit = 1ull << (v % 64);
    if (!(__atomic_fetch_or(&captured_free[device][v / 64], bit, __ATOMIC_RELEASE) & bit))
        __atomic_fetch_add(&captured_free_count[device], 1, __ATOMIC_RELEASE);
}

static void CUDART_CB captured_destroy(void *ptr) {
    const uintptr_t u = (uintptr_t)ptr;
    captured_give_back((int)(u >> 16), (int32_t)(u & 0xFFFFu) - 1);
}

/* A captured slot (index from N), or -1 when all CAPTURED are held by live graphs */
static int32_t captured_take(int device) {
    int32_t c = __atomic_load_n(&captured_free_count[device], __ATOMIC_ACQUIRE);
    while (c > 0) {
        if (!__atomic_compare_exchange_n(&captured_free_count[device], &c, c - 1, true, __ATOMIC_ACQ_REL,
                                         __ATOMIC_ACQUIRE))
            continue;
        /* a bit is ours; other takers may clear the one seen first, so scan until one is won */
        for (;;) {
            for (int w = 0; w < CAPTURED_WORDS; w++) {
                uint64_t b = __atomic_load_n(&captured_free[device][w], __ATOMIC_ACQUIRE);
                while (b != 0) {
                    const uint64_t bit = b & (~b + 1);
                    if (__atomic_compare_exchange_n(&captured_free[device][w], &b, b & ~bit, true, __ATOMIC_ACQ_REL,
                                                    __ATOMIC_ACQUIRE))
                        return w * 64 + __builtin_ctzll(bit);
                }
            }
        }
    }
    /* none returned: a never-used one (never counted past CAPTURED, so the count cannot wrap around
     * into slots still held however many captures fail for want of one) */
    int32_t f = __atomic_load_n(&captured_fresh[device], __ATOMIC_RELAXED);
    while (f < CAPTURED)
        if (__atomic_compare_exchange_n(&captured_fresh[device], &f, f + 1, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
            return f;
    return -1;
}

/* The slot of a launch being captured on `stream`, held by the capturing graph (see the top) */
static int32_t captured_slot(int device, cudaStream_t stream) {
    /* NOTE: a graph that holds a user object replays ~2 us slower (H200, a graph of one decode
     * GEMM: V4-Flash w2 T = 1 21.1 -> 23.4 us; bench/RESULTS.md v15), so the first PLAIN captured
     * launches of a device take slots that are never given back and need no object */
    int32_t pf = __atomic_load_n(&captured_plain[device], __ATOMIC_RELAXED);
    while (pf < PLAIN)
        if (__atomic_compare_exchange_n(&captured_plain[device], &pf, pf + 1, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
            return N + CAPTURED + pf;
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    cudaGraph_t graph = NULL;
    /* (the first four parameters, the same in CUDA 12 and 13) */
    if (cudaStreamGetCaptureInfo(stream, &status, NULL, &graph) != cudaSuccess) {
        (void)cudaGetLastError(); /* (this query's own error, not the caller's) */
        return -1;
    }
    if (status != cudaStreamCaptureStatusActive || graph == NULL) return -1; /* (invalidated meanwhile) */
    const int32_t v = captured_take(device);
    if (v < 0) return -1;
    cudaUserObject_t obj;
    if (cudaUserObjectCreate(&obj, (void *)((uintptr_t)device << 16 | (uintptr_t)(v + 1)), captured_destroy, 1,
                             cudaUserObjectNoDestructorSync) != cudaSuccess) {
        (void)cudaGetLastError();
        captured_give_back(device, v); /* (no object: nothing else will) */
        return -1;
    }
    /* The graph takes a reference of its own (flags 0) and ours is released after, rather than ours
     * moved (cudaGraphUserObjectMove): the API does not say whether a failed move still consumed the
     * caller's reference, and this way a failure leaves ours for certain, whose release runs the
     * destructor and so gives the slot back. */
    /* (a cudaGraph_t is not internally synchronized: two threads whose streams capture into one
     * graph could call this at once; serialized here) */
    static pthread_mutex_t retain_lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&retain_lock);
    const cudaError_t retained = cudaGraphRetainUserObject(graph, obj, 1, 0);
    pthread_mutex_unlock(&retain_lock);
    if (retained != cudaSuccess) {
        (void)cudaGetLastError();
        (void)cudaUserObjectRelease(obj, 1);
        (void)cudaGetLastError();
        return -1;
    }
    /* (fails only for an invalid handle or count; then the slot stays held: lost, never shared) */
    if (cudaUserObjectRelease(obj, 1) != cudaSuccess) (void)cudaGetLastError();
    return N + v;
}

int32_t hfp4__sm90_dyn_slot(int device, cudaStream_t stream) {
    static uintptr_t stream_keys[MAX_DEVICES][N]; /* 0: free, else the stream's key (odd) */
    static __thread char per_thread_marker; /* its address keys this thread's cudaStreamPerThread */
    if (device < 0 || device >= MAX_DEVICES) return -1;
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) {
        /* (e.g. the legacy stream while another thread captures in global mode): the error is this
         * query's own, so it is not left behind for the caller to find */
        (void)cudaGetLastError();
        return -1;
    }
    if (status == cudaStreamCaptureStatusActive) return captured_slot(device, stream);
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

void hfp4__sm90_dyn_plain_slots_spend(int device) {
    if (device >= 0 && device < MAX_DEVICES) __atomic_store_n(&captured_plain[device], (int32_t)PLAIN, __ATOMIC_RELAXED);
}
