/*
 * bench_timing.cu - how `hfp4 bench` times things (see bench_common.h).
 *
 * Stream launches (bench_time_launches): reading a 256 MB buffer empties the 50-60 MB L2 (l2_flush),
 * then a CUDA event pair brackets one launch; the flush keeps the GPU busy while the host queues the launch,
 * so host launch overhead is not counted. Median of --iters launches after one warm-up launch (and,
 * for launches of >= 1 ms, ~100 ms of settling launches: bench_time_launches).
 *
 * Graph replays (bench_time_graphs): replays are queued in batches behind a 2 ms spin kernel, so
 * the whole batch is queued before the GPU reaches it, and an event pair brackets each replay;
 * the interval is the device's time for the replay, including the launch of each kernel in it.
 * L2 is emptied either by replaying graphs over different weight buffers in turn (back to back,
 * nothing else between replays) or by l2_flush outside the timed interval. Median of --replays.
 *
 * Launch floors: the same two methods applied to an empty kernel with the GEMM's launch shape
 * (one 384-thread CTA per SM with the largest dynamic shared memory), so "time - floor" is what a
 * GEMM spends beyond the fixed cost of being launched; the graph floor back to back, and once more
 * with the flush before each replay, as the rows the flush separates are timed. The masked layout
 * launches one CTA per (expert, tile) item; scheduling those CTAs is part of the GEMM's time, not of
 * the floor.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "baselines.h"
#include "bench_common.h"
#include "sm90/diag_timeline.h" /* (the opt-in launch timeline) */

static void *flush_buf;
static const size_t FLUSH_BYTES = (size_t)256 << 20;

__global__ void __launch_bounds__(384) bench_empty_kernel(void) {}

/* Spins one thread for `ns` nanoseconds of the GPU's global timer. */
__global__ void bench_spin_kernel(uint64_t ns) {
    uint64_t t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}

int bench_timing_init(bench_ctx *c) {
    int dev = 0, l2 = 0;
    c->launch_stream_us = -1;
    for (int i = 0; i <= BENCH_MAX_GRAPH_KERNELS; i++) c->launch_graph_us[i] = -1;
    c->launch_graph_flushed_us = -1;
    if (!BENCH_CUDA(cudaGetDevice(&dev)) ||
        !BENCH_CUDA(cudaDeviceGetAttribute(&c->num_sms, cudaDevAttrMultiProcessorCount, dev)) ||
        !BENCH_CUDA(cudaDeviceGetAttribute(&c->max_smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev)) ||
        !BENCH_CUDA(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev)))
        return -1;
    c->l2_bytes = l2;
    if (!BENCH_CUDA(cudaFuncSetAttribute(bench_empty_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, c->max_smem_optin)))
        return -1;
    if (!BENCH_CUDA(cudaMalloc(&flush_buf, FLUSH_BYTES)) || !BENCH_CUDA(cudaMemset(flush_buf, 0x5A, FLUSH_BYTES)))
        return -1;
    /* graphs cannot be captured on the legacy stream; non-blocking: no implicit sync with it */
    if (!BENCH_CUDA(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking))) return -1;
    return 0;
}

void bench_timing_fini(bench_ctx *c) {
    if (c->stream) (void)BENCH_CUDA(cudaStreamDestroy(c->stream));
    c->stream = NULL;
    (void)BENCH_CUDA(cudaFree(flush_buf));
    flush_buf = NULL;
}

/* Reads `n` 16-byte words; the store that only a sum of -1 would make keeps the loads alive.
 * NOTE: plain L2-cached loads (ld.global.cg), not streaming ones: .cs marks the lines evict-first,
 * so the flush's own lines would be evicted before what it is meant to push out. */
__global__ void bench_read_kernel(const uint4 *__restrict__ src, size_t n, unsigned *sink) {
    unsigned x = 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const uint4 v = __ldcg(src + i);
        x ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (x == 0xFFFFFFFFu && sink) *sink = x;
}

/* Empties L2 of everything a timed launch reads. NOTE: why reading is the default: a memset leaves
 * L2 full of dirty lines (its last ~50 MB), so the next kernel's misses each wait for a write-back
 * and its reads share HBM with up to 50 MB of writes it did not make; in a model the expert GEMMs
 * follow kernels that read weights and caches and write a few KB, so L2 holds clean lines. The
 * read flush leaves L2 holding the flush buffer's clean lines (its dirty lines from the memset at
 * start-up are written back by the first flush). --l2-flush write keeps the memset; none skips the
 * flush (diagnosis: what a launch's start costs with its code and layout data cached). */
static int l2_flush(const bench_ctx *c, cudaStream_t s) {
    if (c->l2_flush == HFP4_BENCH_FLUSH_NONE) return 1;
    if (c->l2_flush == HFP4_BENCH_FLUSH_WRITE) return BENCH_CUDA(cudaMemsetAsync(flush_buf, (int)(bench_rng() & 0xFF), FLUSH_BYTES, s));
    bench_read_kernel<<<c->num_sms * 4, 512, 0, s>>>((const uint4 *)flush_buf, FLUSH_BYTES / 16, NULL);
    return BENCH_CUDA(cudaGetLastError());
}

int bench_launch_gemm(void *arg, cudaStream_t s) {
    const bench_gemm_launch *g = (const bench_gemm_launch *)arg;
    if (hfp4_gemm_flags(g->p, g->flags, s) == HFP4_OK) return 0;
    fprintf(stderr, "bench: %s: %s\n", g->label, hfp4_last_error());
    return -1;
}

/* The clock a launch runs at: once its start event has completed, wait half the previous
 * launch's time and read NVML, and keep the reading only if the launch is still running then.
 * Launches under 1 ms are not sampled (the reading after the case stands for them): their rate
 * hardly depends on a clock that changes over tens of milliseconds, and near the threshold NVML's
 * own latency would keep only the slowest launches' samples (review). */
enum { SAMPLE_MIN_US = 1000 };

static int sample_running_clock(cudaEvent_t started, cudaEvent_t ended, double prev_us, bench_clock *k) {
    if (prev_us < SAMPLE_MIN_US) return 0;
    cudaError_t q;
    while ((q = cudaEventQuery(started)) == cudaErrorNotReady) {
    }
    if (q != cudaSuccess) return 0; /* (the error shows at the synchronize that follows) */
    const double t0 = bench_now();
    while ((bench_now() - t0) * 1e6 < prev_us / 2) {
    }
    *k = bench_read_clock();
    return k->sm_mhz > 0 && cudaEventQuery(ended) == cudaErrorNotReady;
}

static int by_mhz(const void *a, const void *b) {
    return ((const bench_clock *)a)->sm_mhz - ((const bench_clock *)b)->sm_mhz;
}

/* the median clock sampled inside the last bench_time_launches (sm_mhz 0: not sampled), for
 * bench_time_gemm's row */
static bench_clock bench_running_clock;

int bench_time_launches(const bench_ctx *c, bench_launch_fn fn, void *arg, cudaStream_t s, double *us) {
    cudaEvent_t e0 = NULL, e1 = NULL;
    int rc = -1, nsamples = 0;
    double *t = (double *)malloc(sizeof(double) * c->iters);
    bench_clock *samples = (bench_clock *)malloc(sizeof(bench_clock) * c->iters);
    memset(&bench_running_clock, 0, sizeof bench_running_clock);
    if (!t || !samples) goto done;
    if (!BENCH_CUDA(cudaEventCreate(&e0)) || !BENCH_CUDA(cudaEventCreate(&e1))) goto done;
    /* warm-up: one launch, then one timed behind a flush; where that takes >= 1 ms (prefill),
     * launches until ~100 ms have run, as the baselines settle (baselines.cu), so that a row is
     * timed in its own sustained power state (HFP4_BENCH_SETTLE_MS sets the ~100 ms; 0: the one
     * warm-up launch only, as bench/ncu_cycles.sh runs it). NOTE: why: with one warm-up launch, the
     * first row after the cuBLASLt baseline ran at the clock the baseline's power draw had left
     * (V4-Flash T = 16384, H200: contiguous 1380 MHz, then psum 1680 MHz; the two rows' launches
     * are within 0.5 % of each other under ncu; bench/RESULTS.md v11). The settling flushes write a
     * fixed byte: drawn from bench_rng, their varying count would change every later row's routing
     * and weights (review). The decision is taken on the second launch: the first one's interval
     * holds the host's first-call work (module load, attribute queries). */
    if (fn(arg, s) != 0) goto done;
    {
        const char *env = getenv("HFP4_BENCH_SETTLE_MS");
        const double settle_ms = env ? atof(env) : 100.0;
        float ms = 0;
        double settled_ms = 0;
        for (int w = 0; settle_ms > 0 && w < 200 && settled_ms < settle_ms; w++) {
            if (!BENCH_CUDA(cudaMemsetAsync(flush_buf, 0x5A, FLUSH_BYTES, s)) || !BENCH_CUDA(cudaEventRecord(e0, s)))
                goto done;
            if (fn(arg, s) != 0) goto done;
            if (!BENCH_CUDA(cudaEventRecord(e1, s)) || !BENCH_CUDA(cudaEventSynchronize(e1)) ||
                !BENCH_CUDA(cudaEventElapsedTime(&ms, e0, e1)))
                goto done;
            if (w == 0 && ms * 1e3 < SAMPLE_MIN_US) break;
            settled_ms += ms;
        }
    }
    for (int i = 0; i < c->iters; i++) {
        float ms = 0;
        if (!l2_flush(c, s) || !BENCH_CUDA(cudaEventRecord(e0, s))) goto done;
        if (fn(arg, s) != 0) goto done;
        if (!BENCH_CUDA(cudaEventRecord(e1, s))) goto done;
        if (i > 0 && sample_running_clock(e0, e1, t[i - 1], &samples[nsamples])) nsamples++;
        if (!BENCH_CUDA(cudaEventSynchronize(e1)) || !BENCH_CUDA(cudaEventElapsedTime(&ms, e0, e1))) goto done;
        t[i] = ms * 1e3;
    }
    if (!BENCH_CUDA(cudaDeviceSynchronize())) goto done; /* a fault of the last launch shows here */
    if (cudaPeekAtLastError() == cudaErrorNotReady) (void)cudaGetLastError(); /* (an event query's answer, not an error) */
    *us = bench_median(t, c->iters);
    if (nsamples > 0) {
        unsigned long long reasons = 0;
        for (int i = 0; i < nsamples; i++) reasons |= samples[i].reasons;
        qsort(samples, (size_t)nsamples, sizeof *samples, by_mhz);
        bench_running_clock = samples[nsamples / 2];
        bench_running_clock.reasons = reasons; /* every reason seen while the launches ran */
    }
    rc = 0;
done:
    if (e0) (void)BENCH_CUDA(cudaEventDestroy(e0));
    if (e1) (void)BENCH_CUDA(cudaEventDestroy(e1));
    free(t);
    free(samples);
    return rc;
}

static char watched_case[192];

/* (a signal handler: write and _exit only) */
static void watchdog_fired(int sig) {
    (void)sig;
    static const char head[] = "\nbench: a timed case still running after HFP4_BENCH_WATCHDOG_S (a hung kernel?): ";
    size_t n = 0;
    while (n < sizeof watched_case && watched_case[n]) n++;
    ssize_t w = write(2, head, sizeof head - 1);
    w = write(2, watched_case, n);
    w = write(2, "\n", 1);
    (void)w;
    _exit(5); /* (bench's other statuses: 2 usage, 3 no SM90 GPU, 4 set-up) */
}

void bench_watch(const char *case_name) {
    static long limit_s = -1;
    if (limit_s < 0) {
        const char *env = getenv("HFP4_BENCH_WATCHDOG_S");
        limit_s = env ? atol(env) : 120;
        if (limit_s < 0) limit_s = 0;
    }
    if (limit_s == 0) return;
    if (!case_name) {
        alarm(0);
        return;
    }
    snprintf(watched_case, sizeof watched_case, "%s", case_name);
    signal(SIGALRM, watchdog_fired);
    alarm((unsigned)limit_s);
}

double bench_last_energy_mj, bench_last_sustained_us;

/* The energy window of a long case, ms (HFP4_BENCH_ENERGY_MS, default 1000; 0: none). NOTE: why
 * this long: NVML's counter moves in steps; over 200 ms windows the same cuBLASLt shape read 0.52
 * and 0.79 pJ/FLOP in two rounds of one call (H200, bench/RESULTS.md v36) */
double bench_energy_window_ms(void) {
    const char *env = getenv("HFP4_BENCH_ENERGY_MS");
    const double ms = env ? atof(env) : 1000.0;
    return ms > 0 && ms <= 60000 ? ms : 0;
}

/* A bench launch as the energy window's (baseline_energy_window) */
typedef struct bench_window_ctx {
    bench_launch_fn fn;
    void *arg;
} bench_window_ctx;
static int bench_window_step(void *c, void *stream) {
    const bench_window_ctx *w = (const bench_window_ctx *)c;
    return w->fn(w->arg, (cudaStream_t)stream);
}

/* mJ a launch of fn takes: bench_energy_window_ms of launches back to back (no flushes between
 * them, as the baselines run) between two readings of the GPU's energy counter, for launches of >=
 * 0.2 ms (baseline_energy_window, shared with the baselines); 0 where there is no counter, -1 if a
 * launch or CUDA call failed. Why: at the H200's 700 W cap a long GEMM's rate is its energy per
 * FLOP (bench/RESULTS.md v36), which the row then shows next to its baseline's. */
static double energy_per_launch_mj(bench_launch_fn fn, void *arg, cudaStream_t s, double us, double *sustained_us) {
    bench_window_ctx w = {fn, arg};
    char err[256] = "";
    double mj = 0;
    if (baseline_energy_window("energy window", bench_window_step, &w, s, us, bench_energy_window_ms(),
                               bench_read_energy_mj, &mj, sustained_us, err, sizeof err) != 0) {
        if (err[0]) fprintf(stderr, "%s\n", err);
        return -1;
    }
    return mj;
}

int bench_time_gemm(const bench_ctx *c, const hfp4_gemm_problem *p, const char *label, double *us) {
    bench_gemm_launch g = {p, label, 0};
    return bench_time_case(c, bench_launch_gemm, &g, label, us);
}

int bench_time_case(const bench_ctx *c, bench_launch_fn fn, void *arg, const char *label, double *us) {
    bench_watch(label);
    if (getenv("HFP4_DIAG_TIMELINE")) (void)hfp4__diag_phases_print(NULL); /* (make DIAG=1) this case only */
    int rc = bench_time_launches(c, fn, arg, 0, us);
    bench_last_energy_mj = bench_last_sustained_us = 0;
    if (rc == 0) bench_last_energy_mj = energy_per_launch_mj(fn, arg, 0, *us, &bench_last_sustained_us);
    if (bench_last_energy_mj < 0) { /* (a launch of the energy window failed: the case fails) */
        bench_last_energy_mj = bench_last_sustained_us = 0;
        rc = -1;
    }
    bench_watch(NULL);
    /* the clock it ran at (bench_clock.cu), for its row: sampled while it ran where it is long
     * enough, else read right after */
    bench_last_clock = bench_running_clock.sm_mhz > 0 ? bench_running_clock : bench_read_clock();
    if (rc == 0 && getenv("HFP4_DIAG_TIMELINE")) { /* (a library built with make DIAG=1) */
        fprintf(stderr, "%s: ", label);
        const int t = hfp4__diag_timeline_print(stderr);
        if (t == -1) fprintf(stderr, "no timeline: build with make DIAG=1\n");
        else if (t == -2) fprintf(stderr, "no timeline: the 128-token tile records none\n");
        else if (t != 0) fprintf(stderr, "no timeline: a CUDA error\n");
        if (t != -1) (void)hfp4__diag_phases_print(stderr);
    }
    return rc;
}

int bench_capture(bench_ctx *c, bench_launch_fn fn, void *const *args, int count, cudaGraphExec_t *exec,
                  size_t *kernels) {
    cudaGraph_t g = NULL;
    int launched = 0, rc = -1;
    *exec = NULL;
    /* relaxed: what hfp4_gemm does besides launching (attribute queries, cached after the warm-up
     * launch every caller makes first) must not invalidate the capture */
    if (!BENCH_CUDA(cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeRelaxed))) return -1;
    while (launched < count && fn(args[launched], c->stream) == 0) launched++;
    /* end the capture whatever happened, or the stream stays in capture mode */
    if (!BENCH_CUDA(cudaStreamEndCapture(c->stream, &g)) || launched < count) goto done;
    if (kernels && !BENCH_CUDA(cudaGraphGetNodes(g, NULL, kernels))) goto done;
    if (!BENCH_CUDA(cudaGraphInstantiate(exec, g, 0))) goto done;
    rc = 0;
done:
    if (g) (void)BENCH_CUDA(cudaGraphDestroy(g));
    return rc;
}

int bench_time_graphs(const bench_ctx *c, const cudaGraphExec_t *execs, int nexec, int flush, cudaGraphExec_t warm,
                      double *us) {
    enum { BATCH = 32 };
    /* 2 ms covers queueing a batch (flush + warm replay + 2 events + graph launch, ~10 us each on the
     * host: ~1.6 ms for 32; the replays behind the spin then take longer on the GPU than to queue) */
    const uint64_t spin_ns = 2000000;
    cudaEvent_t ev[2 * BATCH];
    int nev = 0, rc = -1, done_n = 0, next = 0;
    double *t = (double *)malloc(sizeof(double) * c->replays);
    if (!t) return -1;
    for (; nev < 2 * BATCH; nev++)
        if (!BENCH_CUDA(cudaEventCreate(&ev[nev]))) goto done;
    for (int e = 0; e < nexec; e++) /* warm-up: the first launch of an exec also uploads it */
        if (!BENCH_CUDA(cudaGraphLaunch(execs[e], c->stream))) goto done;
    if (warm && !BENCH_CUDA(cudaGraphLaunch(warm, c->stream))) goto done;
    if (!BENCH_CUDA(cudaStreamSynchronize(c->stream))) goto done;
    while (done_n < c->replays) {
        const int b = c->replays - done_n < BATCH ? c->replays - done_n : BATCH;
        bench_spin_kernel<<<1, 1, 0, c->stream>>>(spin_ns);
        if (!BENCH_CUDA(cudaGetLastError())) goto done;
        for (int j = 0; j < b; j++) {
            if (flush && !l2_flush(c, c->stream)) goto done;
            if (warm && !BENCH_CUDA(cudaGraphLaunch(warm, c->stream))) goto done; /* (untimed) */
            if (!BENCH_CUDA(cudaEventRecord(ev[2 * j], c->stream)) ||
                !BENCH_CUDA(cudaGraphLaunch(execs[next++ % nexec], c->stream)) ||
                !BENCH_CUDA(cudaEventRecord(ev[2 * j + 1], c->stream)))
                goto done;
        }
        if (!BENCH_CUDA(cudaStreamSynchronize(c->stream))) goto done;
        for (int j = 0; j < b; j++) {
            float ms = 0;
            if (!BENCH_CUDA(cudaEventElapsedTime(&ms, ev[2 * j], ev[2 * j + 1]))) goto done;
            t[done_n + j] = ms * 1e3;
        }
        done_n += b;
    }
    *us = bench_median(t, c->replays);
    rc = 0;
done:
    if (rc != 0) (void)BENCH_CUDA(cudaStreamSynchronize(c->stream)); /* nothing queued outlives the call */
    for (int i = 0; i < nev; i++) (void)BENCH_CUDA(cudaEventDestroy(ev[i]));
    free(t);
    bench_last_clock = bench_read_clock();
    bench_last_energy_mj = bench_last_sustained_us = 0; /* (graph rows: not measured) */
    return rc;
}

/* ---- launch floors ---- */

static int launch_empty(void *arg, cudaStream_t s) {
    const bench_ctx *c = (const bench_ctx *)arg;
    bench_empty_kernel<<<c->num_sms, 384, c->max_smem_optin, s>>>();
    return BENCH_CUDA(cudaGetLastError()) ? 0 : -1;
}

static void print_floor(const bench_ctx *c, const char *layout, int kernels, double us) {
    if (c->json)
        printf("{\"op\": \"launch_floor\", \"layout\": \"%s\", \"name\": \"empty\", \"tokens\": null, \"kernels\": %d, "
               "\"grid\": %d, \"threads\": 384, \"smem\": %d, \"us\": %.2f, \"us_per_kernel\": %.2f}\n",
               layout, kernels, c->num_sms, c->max_smem_optin, us, us / kernels);
    else
        printf("%-12s %-8s empty kernel x%d (%d CTAs x 384 threads, %d KB smem): %6.2f us, %5.2f us per kernel\n",
               "launch_floor", layout, kernels, c->num_sms, c->max_smem_optin / 1024, us, us / kernels);
    fflush(stdout);
}

/* -1: not measured yet; -2: measuring failed (not retried) */
double bench_launch_floor_stream(bench_ctx *c) {
    if (c->launch_stream_us != -1) return c->launch_stream_us < 0 ? -1 : c->launch_stream_us;
    double us = 0;
    if (bench_time_launches(c, launch_empty, c, 0, &us) != 0) {
        fprintf(stderr, "bench: launch floor (stream) failed\n");
        c->failed++;
        c->launch_stream_us = -2;
        return -1;
    }
    c->launch_stream_us = us;
    print_floor(c, "stream", 1, us);
    return us;
}

/* Times a graph of `kernels` empty launches, the L2 flush before each replay if `flush`, into *us;
 * 0 on success, else says so naming `what` and counts the failure. */
static int time_empty_graph(bench_ctx *c, int kernels, int flush, const char *what, double *us) {
    void *args[BENCH_MAX_GRAPH_KERNELS];
    for (int i = 0; i < kernels; i++) args[i] = c;
    cudaGraphExec_t exec = NULL;
    const int ok = bench_capture(c, launch_empty, args, kernels, &exec, NULL) == 0 &&
                   bench_time_graphs(c, &exec, 1, flush, NULL, us) == 0;
    if (exec) (void)BENCH_CUDA(cudaGraphExecDestroy(exec));
    if (ok) return 0;
    fprintf(stderr, "bench: launch floor (%s) failed\n", what);
    c->failed++;
    return -1;
}

double bench_launch_floor_graph(bench_ctx *c, size_t kernels) {
    if (kernels < 1 || kernels > BENCH_MAX_GRAPH_KERNELS) return -1;
    double *slot = &c->launch_graph_us[kernels];
    if (*slot != -1) return *slot < 0 ? -1 : *slot;
    char what[48];
    snprintf(what, sizeof what, "graph of %d kernels", (int)kernels);
    double us = 0;
    if (time_empty_graph(c, (int)kernels, 0, what, &us) != 0) {
        *slot = -2;
        return -1;
    }
    *slot = us;
    print_floor(c, "graph", (int)kernels, us);
    return us;
}

/* The one-kernel graph replayed as the rows whose replays the L2 flush separates (T = 1's), printed
 * only: the fixed cost those rows carry. NOTE: H200 (bench/RESULTS.md v52, one run): 3.97-4.13 us
 * after the flush against 2.78-2.88 back to back, so the plain graph floor understates a flushed
 * row's fixed cost by ~1.2 us. */
static void launch_floor_graph_flushed(bench_ctx *c) {
    if (c->l2_flush == HFP4_BENCH_FLUSH_NONE || c->launch_graph_flushed_us != -1) return;
    c->launch_graph_flushed_us = -2; /* (measured once, failed or not) */
    double us = 0;
    if (time_empty_graph(c, 1, 1, "graph after the L2 flush", &us) != 0) return;
    c->launch_graph_flushed_us = us;
    print_floor(c, "graph_flushed", 1, us);
}

void bench_launch_floors(bench_ctx *c) {
    if (c->launch_stream_us != -1 && c->launch_graph_us[1] != -1 && c->launch_graph_us[2] != -1 &&
        c->launch_graph_flushed_us != -1)
        return;
    if (!bench_budget_ok(c, "launch floors")) return;
    bench_launch_floor_stream(c);
    bench_launch_floor_graph(c, 1);
    bench_launch_floor_graph(c, 2);
    launch_floor_graph_flushed(c);
}
