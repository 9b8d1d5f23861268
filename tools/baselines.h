/*
 * baselines.h - the reference points `hfp4 bench` times in the same run as hfp4's kernels:
 * device-to-device copy bandwidth (the memory roofline), cuBLASLt FP8 GEMM with row-wise scales
 * (what torch._scaled_mm row-wise does) and cuBLASLt BF16 GEMM.
 *
 * cuBLASLt is loaded with dlopen at run time, never linked: the hfp4 command must start on
 * machines without cuBLAS and without a GPU. Where it (or the GPU) is missing, the calls return
 * non-zero with a message in `err`; they never abort.
 *
 * GEMM shapes follow hfp4's convention: D[m,n] (BF16, row-major) = A[m,k] * B[n,k]^T, A and B both
 * K-innermost. Inputs are random non-zero values (zeros would under-report power-limited speed).
 * Timings are GPU time per launch (a CUDA event pair around each launch), the median over `iters`
 * launches after warm-up (>= 3 launches and ~100 ms of work, at most 1000 launches). Launches are queued in batches behind
 * a short spin kernel, so host launch overhead is not counted, and they reuse the same buffers
 * (whatever fits in L2 stays warm). Time hfp4's kernels the same way for a fair comparison.
 * Before timing, each GEMM baseline checks 64 sampled outputs against a double-precision dot
 * product on the GPU (a wrong layout or scale mapping fails rather than timing the wrong thing).
 *
 * Plain C interface (callable from tools/hfp4.c); implemented in baselines.cu.
 */
#ifndef HFP4_TOOLS_BASELINES_H
#define HFP4_TOOLS_BASELINES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Return codes of every baseline_* call. UNAVAILABLE: nothing to time here (no GPU or driver,
 * cuBLASLt not found, no cuBLASLt algorithm for the shape): print "skipped", not a failure. */
enum { BASELINE_OK = 0, BASELINE_ERR = 1, BASELINE_UNAVAILABLE = 2 };

/* The message of the most recent failing baseline_* call on this thread ("" if none); the only
 * message channel of baseline_copy_gbps. Valid until the next baseline_* call on this thread. */
const char *baseline_last_error(void);

/* Copies `bytes` device-to-device with cudaMemcpyAsync. *gbps counts bytes read + written
 * (2 * bytes per copy) in 1e9 bytes per second; *us is the median copy time in microseconds.
 * Returns 0 on success, non-zero on a CUDA error or bad argument (bytes == 0, iters < 1); the
 * reason is in baseline_last_error(). */
int baseline_copy_gbps(size_t bytes, int iters, double *gbps, double *us);

/* cuBLASLt FP8 GEMM: A e4m3 [m,k], B e4m3 [n,k], per-row FP32 scales of A (m of them) and
 * per-row-of-B (i.e. per output column, n of them) FP32 scales, BF16 D [m,n], FP32 accumulation
 * without fast accumulation (torch._scaled_mm's default). *us is the median time per GEMM.
 * Returns 0 on success; err then is "" or a note, e.g. that row-wise scaling was rejected by this
 * cuBLASLt and tensor-wise scaling was timed instead (its speed is a proxy, not the same kernel).
 * Non-zero on failure with the reason in err (cuBLASLt not found, no GPU, no algorithm...).
 * cuBLASLt's FP8 kernels need k a multiple of 16 (and m, n for 16-byte aligned rows of D). */
int baseline_cublaslt_fp8_rowwise(int64_t m, int64_t n, int64_t k, int iters, double *us, char *err, size_t errlen);

/* cuBLASLt BF16 GEMM: A bf16 [m,k], B bf16 [n,k], FP32 compute, BF16 D [m,n]. Same conventions. */
int baseline_cublaslt_bf16(int64_t m, int64_t n, int64_t k, int iters, double *us, char *err, size_t errlen);

/* The clock a GEMM baseline ran at. The bench registers how to read the GPU's SM clock and power
 * (NVML: bench_clock.cu); each baseline whose timed batches take >= 5 ms then reads them a quarter,
 * half and three quarters into each batch, and baseline_last_clock gives the median reading (sm_mhz
 * 0: none taken, e.g. short batches or no reader). Why: on the H200 a long GEMM runs at its 700 W cap, where the rate
 * it reaches is set by its energy per FLOP, so a row compares both kernels' clocks and power draws
 * as well as their times (bench/RESULTS.md v36). */
typedef void (*baseline_clock_reader)(int *sm_mhz, int *power_w);
void baseline_set_clock_reader(baseline_clock_reader fn);
void baseline_last_clock(int *sm_mhz, int *power_w);
/* The energy a launch of the last baseline took, in mJ: the bench registers the GPU's energy counter
 * (NVML, returning 1 on success) and a window; after its timed batches each baseline of >= 0.2 ms a
 * launch runs window_ms of launches back to back between two readings. 0: not measured. */
typedef int (*baseline_energy_reader)(unsigned long long *mj);
void baseline_set_energy_reader(baseline_energy_reader fn, double window_ms);
/* The energy window itself, which the bench's own rows use too: window_ms of launches of `launch`
 * (ctx, the stream; 0 on success) back to back on `stream` (a cudaStream_t; 5 to 5000 launches, sized
 * by median_us) between two readings of `reader`, the GPU idle at both, for launches of median_us >=
 * 200 only. Sets *mj (a launch's energy) and *sustained_us (the window's mean launch time), both 0
 * where nothing was measured (no reader or window, a short launch, a counter that did not move).
 * Returns 0, a launch's nonzero return, or BASELINE_ERR / BASELINE_UNAVAILABLE when a CUDA call
 * failed (err says which). */
typedef int (*baseline_window_launch)(void *ctx, void *stream);
int baseline_energy_window(const char *fn, baseline_window_launch launch, void *ctx, void *stream, double median_us,
                           double window_ms, baseline_energy_reader reader, double *mj, double *sustained_us,
                           char *err, size_t errlen);
double baseline_last_energy_mj(void);
/* the same window's mean launch time, us (0: not measured) */
double baseline_last_sustained_us(void);
/* the last GEMM or copy baseline's median time, us: which baseline the three above belong to (a row
 * whose baseline time is another, or a sum of several, takes none of them) */
double baseline_last_median_us(void);

/* Which cuBLASLt was loaded, e.g. "/path/libcublasLt.so.13 (version 130100)", loading it on first
 * use; "" with the reason in err (returns non-zero) if it cannot be loaded. Static storage. */
int baseline_cublaslt_info(const char **info, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
