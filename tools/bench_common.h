/*
 * bench_common.h - what the files of `hfp4 bench` share (C-style host code, compiled by nvcc):
 *   bench.cu          options, the order of the sections, the copy-rate measurement
 *   bench_util.cu     device buffers with random contents, routing, problem set-up, rows, budget
 *   bench_timing.cu   L2 flush, stream-launch timing, CUDA-graph capture and replay timing,
 *                     launch floors (empty kernels)
 *   bench_experts.cu  m-grouped expert GEMMs, each GEMM launched on its own (masked, contiguous)
 *   bench_graph.cu    one MoE layer's w13 + w2 GEMMs as CUDA-graph replays
 *   bench_dense.cu    dense 8192^3, single-token GEMV, scale-factor layout transforms
 *
 * Every CUDA call is checked; a failing case prints why (hfp4_last_error() for hfp4 calls, the
 * CUDA error otherwise), counts itself in bench_ctx.failed and the run goes on with the next case.
 */
#ifndef HFP4_TOOLS_BENCH_COMMON_H
#define HFP4_TOOLS_BENCH_COMMON_H

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

#include "hfp4.h"

/* 1 if `e` is cudaSuccess; otherwise prints the call and the error and returns 0. */
static inline int bench_cuda_ok(cudaError_t e, const char *call, const char *file, int line) {
    if (e == cudaSuccess) return 1;
    fprintf(stderr, "bench: %s:%d: %s failed: %s (%s)\n", file, line, call, cudaGetErrorName(e), cudaGetErrorString(e));
    return 0;
}
#define BENCH_CUDA(call) bench_cuda_ok((call), #call, __FILE__, __LINE__)

/* Largest number of kernels per graph whose empty-kernel replay floor is cached. */
#define BENCH_MAX_GRAPH_KERNELS 16

/* One run: its options and the reference points measured once. */
/* --l2-flush: READ a 256 MB buffer (leaves clean lines, as another kernel's reads do; default), WRITE
 * it (a memset: leaves ~50 MB of dirty lines the launch then writes back), or NONE (diagnosis only:
 * L2 keeps what the launch before left, so the figures read cached weights; the header says so) */
enum { HFP4_BENCH_FLUSH_READ = 0, HFP4_BENCH_FLUSH_WRITE = 1, HFP4_BENCH_FLUSH_NONE = 2 };

typedef struct bench_ctx {
    int json;
    int iters;          /* stream-launched cases: median of this many launches              */
    int replays;        /* graph cases: median of this many replays                          */
    int gran;           /* activation scale gran_k of every FP8 x FP4 case (32 or 128)       */
    double copy_gbps;   /* device-to-device copy rate of this run, read + write, GB/s        */
    double budget_s;    /* --seconds-budget; <= 0: none                                       */
    double t0;          /* bench_now() when the run started                                   */
    int skipped, failed;
    int num_sms, max_smem_optin;
    int64_t l2_bytes;
    int l2_flush; /* how L2 is emptied before a timed launch (--l2-flush): HFP4_BENCH_FLUSH_* */
    cudaStream_t stream; /* non-blocking stream the graphs are captured on and replayed in    */
    /* launch floors, measured on first use (< 0: not yet; index = kernels per graph) */
    double launch_stream_us;
    double launch_graph_us[BENCH_MAX_GRAPH_KERNELS + 1];
    double launch_graph_flushed_us; /* the one-kernel graph after the L2 flush (printed only) */
} bench_ctx;

/* One output row. The first group of fields are the keys of the first recorded results and keep
 * their names and meaning; the second group was added later and is printed after "baseline",
 * each only when set. */
/* ---- bench_clock.cu ---- */
/* The SM clock (MHz), power draw (W) and NVML's clock-event reasons (bit mask: 0x4 software power
 * cap, 0x8 hardware slowdown, 0x20 / 0x40 software / hardware thermal, 0x80 power brake) while a
 * timed case runs (stream launches of 1 ms or more; shorter ones and graph replays: right after
 * it); sm_mhz = 0 where NVML is not available. */
typedef struct bench_clock {
    int sm_mhz, power_w;
    unsigned long long reasons;
} bench_clock;
bench_clock bench_read_clock(void);
/* registers bench_read_clock and bench_read_energy_mj with the baselines, once */
void bench_clock_for_baselines(void);
/* the GPU's energy counter (mJ since the driver loaded); 0 where NVML has none */
int bench_read_energy_mj(unsigned long long *mj);
/* mJ a launch of the last case bench_time_gemm timed, from a window of back-to-back launches after
 * its timing (0: not measured); bench_row_rates takes it once */
extern double bench_last_energy_mj;
extern double bench_last_sustained_us; /* the same window's mean launch time (0: not measured) */
double bench_energy_window_ms(void); /* HFP4_BENCH_ENERGY_MS (default 1000; 0: no energy windows) */
extern bench_clock bench_last_clock; /* set by bench_time_gemm and bench_time_graphs */

typedef struct bench_row {
    const char *op, *layout, *name;
    int64_t tokens; /* -1: dense (JSON null) */
    int64_t m, n, k;
    int32_t groups, experts_hit;
    double us, tflops, tbps;
    const char *base_name;
    double base_us, base_tflops, base_tbps;

    int32_t gran;       /* activation scale gran_k; 0: not printed                          */
    double floor_us;    /* bytes that must move / copy rate of this run; < 0: not printed    */
    double launch_us;   /* empty-kernel cost of the same launch method; < 0: not printed     */
    double stream_us;   /* graph rows: the same GEMM(s) launched on a stream; < 0: not printed */
    const char *flush;  /* graph rows: how L2 was emptied between replays; NULL: not printed */
    double tbps_with_padding; /* contiguous rows (> 0: printed): tbps with D's padding rows counted,
                               * the zeros the layout's contract has the GEMM write (deepgemm-compat.md
                               * 4.3); tbps counts useful bytes only */
    bench_clock clock;  /* the GPU's clock while (or right after) the case ran (bench_row_rates takes bench_last_clock) */
    bench_clock base_clock; /* the baseline's, sampled while it ran (baseline_last_clock; sm_mhz 0: none) */
    double pj_per_flop, base_pj_per_flop; /* energy a FLOP of the case and of its baseline (0: not measured) */
    double sustained_tflops, base_sustained_tflops; /* their rates over the energy windows (0: not measured) */
} bench_row;

/* ---- bench_util.cu ---- */
uint64_t bench_rng(void);
double bench_now(void);
/* 1 if the case described by fmt may start; 0 (printing that it is skipped) once the budget is spent. */
int bench_budget_ok(bench_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
double bench_median(double *v, int n); /* sorts v */
void bench_row_clear(bench_row *r);
/* us, TFLOP/s and TB/s of the row from flops and bytes, and the baseline's (base_us <= 0: none) from
 * flops and base_bytes */
void bench_row_rates(bench_row *r, double us, double flops, double bytes, const char *base_name, double base_us,
                     double base_bytes);
void bench_print_row(const bench_ctx *c, const bench_row *r);
/* bytes / copy rate in microseconds; -1 when the copy rate is unknown */
double bench_floor_us(const bench_ctx *c, double bytes);

/* device fills (stream 0, synchronized): uniform random bytes (FP8: NaN codes replaced), a constant */
int bench_fill_random(void *dev, size_t bytes, int fp8);
int bench_fill_f32(void *dev, size_t count, float value);
/* count BF16 values with random signs and mantissas, magnitudes 2^-7 .. 2^4 (activations' range) */
int bench_fill_bf16(void *dev, size_t count);
/* count UE8M0 weight scales, exponents 118..123 (2^-9 .. 2^-4: any 128 x 128 block converts to FP8 exactly) */
int bench_fill_w_scales(void *sf, size_t count);

/* Repacked random FP4 weights of `experts` experts [n, k] with power-of-two UE8M0 scales. */
typedef struct bench_weights {
    void *w;
    size_t w_bytes;
    hfp4_matrix b;
} bench_weights;
/* Device bytes bench_make_weights needs at its peak (plain source + scales + repacked). */
size_t bench_weights_peak_bytes(int32_t experts, int64_t n, int64_t k);
int bench_make_weights(int32_t experts, int64_t n, int64_t k, bench_weights *out); /* 0 or -1 (printed) */
void bench_free_weights(bench_weights *w);

/* T tokens routed uniformly at random to top-k of E experts. */
typedef struct bench_routing {
    int64_t tokens, rows, hit, max_m, padded; /* rows = topk * tokens; padded: 128-aligned segments */
    int32_t experts;
    int64_t *counts;                          /* rows per expert */
} bench_routing;
int bench_route(int64_t tokens, int32_t experts, int32_t topk, bench_routing *r);
void bench_routing_free(bench_routing *r);
/* A cleared row of an FP8 x FP4 expert GEMM (or layer) timed at `us`: its shape and routing, TFLOP/s
 * and TB/s from flops and bytes, and the baseline's (base_us <= 0: none) from flops and base_bytes. */
void bench_row_experts(bench_row *row, const char *layout, const char *name, const bench_routing *r, int64_t n,
                       int64_t k, int32_t groups, double us, double flops, double bytes, const char *base_name,
                       double base_us, double base_bytes);

/* Activations (FP8, FP32 scales 1/256), outputs (BF16) and layout of one grouped GEMM:
 * masked: A [E, m, k], D [E, m, n], layout = masked_m; contiguous: A [m, k], D [m, n], layout =
 * expert id per row (-1 in the padding of each 128-row segment); psum: the same rows, layout =
 * each expert's end row (segments start 128-aligned). */
typedef struct bench_acts {
    hfp4_grouping grouping;
    int64_t m, n, k;
    int gran;
    void *a, *sf, *d, *layout;
} bench_acts;
int bench_acts_alloc(bench_acts *x, hfp4_grouping g, const bench_routing *r, int64_t n, int64_t k, int gran);
void bench_acts_free(bench_acts *x);
/* The grouped problem on x and weights b, with the expected_m hint from the routing. */
void bench_expert_problem(hfp4_gemm_problem *p, const bench_acts *x, const bench_routing *r, const hfp4_matrix *b);
/* --sf-layout mn: FP32 activation scales MN-major (DeepGEMM's TMA-aligned layout) where the rows
 * of a group are a multiple of 4, else K-major (the default) */
extern int bench_a_scales_mn_major;
/* An activation-scale buffer of m rows x sfk K-groups (a group's, for grouped problems): K-major
 * strides, or MN-major ([sfk][m]) under --sf-layout mn where m % 4 == 0 */
void bench_set_a_scale_strides(hfp4_scales *s, int64_t m, int64_t sfk);
extern int bench_a_scales_ue8m0; /* --a-scales ue8m0: activation scales as UE8M0 bytes (2^-8), else FP32 */
/* --contiguous-hint: the contiguous cases' expected_m: -1 rows per routed expert (default), 0 none (as
 * DeepGEMM's API calls them), else that value */
extern int bench_contiguous_hint;
/* The activation scales of a bench case (count values): FP32 1/256, or UE8M0 bytes of the same value */
int bench_fill_a_scales(void *sf, size_t count);
/* --w-scales drift: expert weight scales whose row base climbs over K (bench_util.cu), so no tile is
 * one-base and the kernels go chunk by chunk; default: exponents 118..123 (every tile one-base) */
extern int bench_w_scales_drift;
/* --routing-seed S (S >= 1): each token count's routing comes from a stream of its own seeded by
 * (S, T, experts, top-k), so it is the same whatever the --tokens list and the cases before it,
 * and S picks another uniform draw (the T = 8 figures swing ~5 % between draws: bench/RESULTS.md
 * v12). 0 (the default): the bench's one stream, as before (a row's routing then depends on every
 * draw before it) */
extern uint64_t bench_routing_seed;
/* --routing balanced: token t's j-th expert is (t * topk + j) mod experts, so every expert gets the
 * same rows where experts divides T * topk (no expert ends in a part-filled token tile); default 0:
 * uniform random top-k */
extern int bench_routing_balanced;
void bench_fill_problem(hfp4_gemm_problem *p, hfp4_grouping g, int64_t m, int64_t n, int64_t k, int32_t groups, int gran,
                        void *a, void *a_sf, void *d, void *layout, const hfp4_matrix *b, int64_t expected_m);
/* Bytes that must move for an expert GEMM: FP4 weights + UE8M0 scales of the experts hit, FP8
 * activations + FP32 scales, BF16 outputs. And the bytes the FP8 baseline would move. */
double bench_expert_bytes(int64_t hit, int64_t rows, int64_t n, int64_t k, int gran);
double bench_fp8_expert_bytes(int64_t hit, int64_t rows, int64_t n, int64_t k);
/* the contiguous layout's padding rows of D (BF16 zeros the GEMM must write): (padded - rows) x n x 2 */
double bench_padding_bytes(const bench_routing *r, int64_t n);

/* ---- bench_timing.cu ---- */
int bench_timing_init(bench_ctx *c); /* 0 or -1 (printed) */
void bench_timing_fini(bench_ctx *c);
/* One launch (or several) on stream s: 0, or -1 after printing why. */
typedef int (*bench_launch_fn)(void *arg, cudaStream_t s);
typedef struct bench_gemm_launch {
    const hfp4_gemm_problem *p;
    const char *label; /* names the case in error messages */
    uint32_t flags;    /* hfp4_gemm_flags' (0: hfp4_gemm) */
} bench_gemm_launch;
int bench_launch_gemm(void *arg, cudaStream_t s); /* arg: bench_gemm_launch */
/* Median microseconds of c->iters launches on stream s, each preceded by a 256 MB memset that
 * empties L2, with a CUDA event pair around the launch; warm-up launches first (~100 ms of them
 * where a launch takes >= 1 ms). */
int bench_time_launches(const bench_ctx *c, bench_launch_fn fn, void *arg, cudaStream_t s, double *us);
int bench_time_gemm(const bench_ctx *c, const hfp4_gemm_problem *p, const char *label, double *us);
/* bench_time_gemm's timing for any launch sequence (the median, then the energy window: the row's
 * sustained rate and energy a FLOP, via bench_last_energy_mj / bench_last_sustained_us) */
int bench_time_case(const bench_ctx *c, bench_launch_fn fn, void *arg, const char *label, double *us);
/* The watchdog of a timed case: a hung kernel never returns from the synchronization, and the
 * caller's timeout would end the process with no word of which case it was. bench_watch(name) arms
 * it (past HFP4_BENCH_WATCHDOG_S seconds, 120 by default, the process prints the name to stderr and
 * exits with status 5; 0 turns it off, as under a profiler, which replays a launch many times),
 * bench_watch(NULL) disarms it. */
void bench_watch(const char *case_name);
/* Captures fn(args[0]), ..., fn(args[count-1]) on c->stream into one graph; *kernels: its nodes. */
int bench_capture(bench_ctx *c, bench_launch_fn fn, void *const *args, int count, cudaGraphExec_t *exec,
                  size_t *kernels);
/* Median microseconds per replay over c->replays replays. nexec >= 2: replay execs[0], execs[1], ...
 * in turn (each reads other buffers than the one before, which must be large enough to evict it);
 * flush: L2 emptied before each replay (c->l2_flush: how), outside the timed interval; warm (or
 * NULL): a graph replayed untimed after the flush, before each timed replay (bench_graph.cu's warm
 * start: the same GEMMs over the other weight set, so that only the timed replay's weights are
 * cold). */
int bench_time_graphs(const bench_ctx *c, const cudaGraphExec_t *execs, int nexec, int flush, cudaGraphExec_t warm,
                      double *us);
/* Whether graph replays over nsets weight sets alternate between two of them (each replay's weights,
 * weight_bytes, at least twice L2, so the other set's replay evicts them), or are separated by the
 * L2 flush instead; the GEMM rows and their read-only floors decide alike (bench_graph.cu). */
static inline int bench_alternate_sets(const bench_ctx *c, int nsets, double weight_bytes) {
    return nsets == 2 && weight_bytes >= 2.0 * (double)c->l2_bytes;
}
/* Launch floors; measured and printed as "launch_floor" rows once per run. -1 on failure. */
double bench_launch_floor_stream(bench_ctx *c);
double bench_launch_floor_graph(bench_ctx *c, size_t kernels);
void bench_launch_floors(bench_ctx *c); /* the stream floor and graphs of 1 and 2 kernels */

/* ---- bench_experts.cu ---- */
typedef struct bench_expert_case {
    const char *name; /* row name, e.g. "v4f-w13" */
    int32_t experts, topk;
    int64_t n, k;
    const int64_t *tokens;
    int ntok;
    /* at these T the case is also timed with the other gran_k (masked up to T = 256, contiguous
     * above); none: n_alt_gran = 0 */
    const int64_t *alt_gran_tokens;
    int n_alt_gran;
} bench_expert_case;
void bench_experts(bench_ctx *c, const bench_expert_case *ec);

/* ---- bench_graph.cu ---- */
typedef struct bench_moe_model {
    const char *prefix; /* row names are prefix-w13, prefix-w2, prefix-layer */
    int32_t experts, topk;
    int64_t n13, k13, n2, k2;
} bench_moe_model;
void bench_layer_graphs(bench_ctx *c, const bench_moe_model *m, const int64_t *tokens, int ntok);
/* The stream floor of a masked graph row (bench_stream_floor.cu): a graph of nb kernels (b[s * nb +
 * i]: weight set s, GEMM i) that read masked_m and only the hit experts' weights and scales, timed
 * as the row was; printed next to the GEMM's time (gemm_us) and bytes; with gemm_warm_us > 0 (the
 * row's warm start, bench_graph.cu) also timed so. 0, or -1 (printed). */
int bench_stream_floor(bench_ctx *c, const char *name, const char *layout, int64_t tokens, const int32_t *masked_m,
                       int32_t groups, const hfp4_matrix *const *b, int nb, int nsets, double weight_bytes,
                       double gemm_bytes, double gemm_us, double gemm_warm_us);

/* ---- bench_dense.cu ---- */
void bench_dense(bench_ctx *c, int64_t m, int64_t n, int64_t k);
void bench_gemv(bench_ctx *c, int64_t n, int64_t k);
void bench_sf_layout(bench_ctx *c, const char *name, int32_t groups, int64_t mn, int64_t sf_k);
/* ---- bench_moe.cu ---- */
void bench_moe_glue(bench_ctx *c, const int64_t *tokens, int ntok);

#endif
