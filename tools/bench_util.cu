/*
 * bench_util.cu - buffers, routing, problem set-up, output rows and the time budget of
 * `hfp4 bench` (see bench_common.h).
 *
 * Random contents are generated on the device: V4-Pro's w13 alone is 8.5 GB of FP4 codes, which a
 * host loop would take tens of seconds to produce. The distributions are the ones the first
 * version drew on the host: uniform bytes (FP8 NaN codes replaced by 1.5), UE8M0 scale exponents
 * 118..123, activation scales 1/256, so every product is non-zero and finite.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "baselines.h"
#include "bench_common.h"

static uint64_t rng_state = 0x12345678abcdefull;

/* one xorshift64 step of *state (never 0) */
static uint64_t xorshift64(uint64_t *state) {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

uint64_t bench_rng(void) { return xorshift64(&rng_state); }

double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int bench_budget_ok(bench_ctx *c, const char *fmt, ...) {
    if (c->budget_s <= 0) return 1;
    const double elapsed = bench_now() - c->t0;
    if (elapsed < c->budget_s) return 1;
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    fprintf(stderr, "bench: skipped (--seconds-budget %.0f s spent, %.1f s elapsed): %s\n", c->budget_s, elapsed, what);
    c->skipped++;
    return 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double bench_median(double *v, int n) {
    qsort(v, n, sizeof(double), cmp_double);
    return v[n / 2];
}

void bench_row_clear(bench_row *r) {
    memset(r, 0, sizeof *r);
    r->floor_us = -1;
    r->launch_us = -1;
    r->stream_us = -1;
}

void bench_row_experts(bench_row *row, const char *layout, const char *name, const bench_routing *r, int64_t n,
                       int64_t k, int32_t groups, double us, double flops, double bytes, const char *base_name,
                       double base_us, double base_bytes) {
    bench_row_clear(row);
    row->op = "fp8_fp4";
    row->layout = layout;
    row->name = name;
    row->tokens = r->tokens;
    row->m = r->rows;
    row->n = n;
    row->k = k;
    row->groups = groups;
    row->experts_hit = (int32_t)r->hit;
    bench_row_rates(row, us, flops, bytes, base_name, base_us, base_bytes);
}

void bench_row_rates(bench_row *r, double us, double flops, double bytes, const char *base_name, double base_us,
                     double base_bytes) {
    r->us = us;
    r->tflops = flops / us * 1e-6;
    r->tbps = bytes / us * 1e-6;
    r->base_name = base_name;
    r->base_us = base_us;
    r->base_tflops = base_us > 0 ? flops / base_us * 1e-6 : 0;
    r->base_tbps = base_us > 0 ? base_bytes / base_us * 1e-6 : 0;
    r->clock = bench_last_clock; /* (the baselines' timing does not touch it) */
    memset(&r->base_clock, 0, sizeof r->base_clock);
    r->pj_per_flop = r->base_pj_per_flop = 0;
    r->sustained_tflops = r->base_sustained_tflops = 0;
    if (bench_last_energy_mj > 0 && flops > 0) r->pj_per_flop = bench_last_energy_mj * 1e9 / flops;
    if (bench_last_sustained_us > 0) r->sustained_tflops = flops / bench_last_sustained_us * 1e-6;
    bench_last_energy_mj = bench_last_sustained_us = 0; /* (this row's: a row timed otherwise gets none) */
    /* (the baseline timed last, if it is this row's: a layer row's baseline is a sum of two) */
    if (base_us > 0 && base_us == baseline_last_median_us()) {
        baseline_last_clock(&r->base_clock.sm_mhz, &r->base_clock.power_w);
        const double base_mj = baseline_last_energy_mj();
        if (base_mj > 0 && flops > 0) r->base_pj_per_flop = base_mj * 1e9 / flops;
        const double base_sus = baseline_last_sustained_us();
        if (base_sus > 0) r->base_sustained_tflops = flops / base_sus * 1e-6;
    }
}

double bench_floor_us(const bench_ctx *c, double bytes) {
    return c->copy_gbps > 0 ? bytes / (c->copy_gbps * 1e3) : -1;
}

void bench_print_row(const bench_ctx *c, const bench_row *r) {
    if (c->json) {
        printf("{\"op\": \"%s\", \"layout\": \"%s\", \"name\": \"%s\", \"tokens\": ", r->op, r->layout, r->name);
        if (r->tokens < 0) printf("null");
        else printf("%lld", (long long)r->tokens);
        printf(", \"m\": %lld, \"n\": %lld, \"k\": %lld, \"groups\": %d, \"experts_hit\": %d, \"us\": %.2f, \"tflops\": %.1f, "
               "\"tbps\": %.3f, \"baseline\": {\"name\": \"%s\", \"us\": %.2f, \"tflops\": %.1f, \"tbps\": %.3f}",
               (long long)r->m, (long long)r->n, (long long)r->k, r->groups, r->experts_hit, r->us, r->tflops, r->tbps,
               r->base_name ? r->base_name : "", r->base_us, r->base_tflops, r->base_tbps);
        if (r->gran) printf(", \"gran\": %d", r->gran);
        if (r->floor_us >= 0) printf(", \"floor_us\": %.2f", r->floor_us);
        if (r->launch_us >= 0) printf(", \"launch_us\": %.2f", r->launch_us);
        if (r->stream_us >= 0) printf(", \"stream_us\": %.2f", r->stream_us);
        if (r->flush) printf(", \"flush\": \"%s\"", r->flush);
        if (r->tbps_with_padding > 0) printf(", \"tbps_with_padding\": %.3f", r->tbps_with_padding);
        /* the non-default data options, so a row says what it timed */
        if (bench_a_scales_mn_major) printf(", \"a_scales\": \"mn\"");
        if (bench_a_scales_ue8m0) printf(", \"a_scale_dtype\": \"ue8m0\"");
        if (bench_contiguous_hint >= 0 && r->layout && strstr(r->layout, "contiguous"))
            printf(", \"contiguous_hint\": %d", bench_contiguous_hint);
        if (bench_w_scales_drift) printf(", \"w_scales\": \"drift\"");
        if (bench_routing_seed) printf(", \"routing_seed\": %llu", (unsigned long long)bench_routing_seed);
        if (bench_routing_balanced) printf(", \"routing\": \"balanced\"");
        if (r->clock.sm_mhz > 0)
            printf(", \"sm_mhz\": %d, \"power_w\": %d, \"clock_reasons\": \"0x%llx\"", r->clock.sm_mhz, r->clock.power_w,
                   r->clock.reasons);
        if (r->base_clock.sm_mhz > 0)
            printf(", \"base_sm_mhz\": %d, \"base_power_w\": %d", r->base_clock.sm_mhz, r->base_clock.power_w);
        if (r->pj_per_flop > 0) printf(", \"pj_per_flop\": %.3f", r->pj_per_flop);
        if (r->base_pj_per_flop > 0) printf(", \"base_pj_per_flop\": %.3f", r->base_pj_per_flop);
        if (r->sustained_tflops > 0) printf(", \"sustained_tflops\": %.1f", r->sustained_tflops);
        if (r->base_sustained_tflops > 0) printf(", \"base_sustained_tflops\": %.1f", r->base_sustained_tflops);
        printf("}\n");
    } else {
        /* the columns of the first version, then the added figures */
        printf("%-10s %-10s %-8s %6s %7lld %6lld %6lld %4d %9.1f %8.1f %7.3f | %-22s %9.1f %8.1f %7.3f  %5.2fx", r->op,
               r->layout, r->name, r->tokens < 0 ? "-" : "", (long long)r->m, (long long)r->n, (long long)r->k,
               r->experts_hit, r->us, r->tflops, r->tbps, r->base_name ? r->base_name : "-", r->base_us, r->base_tflops,
               r->base_tbps, r->base_us > 0 ? r->base_us / r->us : 0.0);
        if (r->floor_us >= 0) printf("  floor %.1f us (%.0f %%)", r->floor_us, 100.0 * r->floor_us / r->us);
        if (r->launch_us >= 0) printf("  launch %.1f us", r->launch_us);
        if (r->stream_us >= 0) printf("  stream %.1f us", r->stream_us);
        if (r->gran && r->gran != 128) printf("  gran_k %d", r->gran);
        if (r->flush) printf("  [%s]", r->flush);
        if (r->tbps_with_padding > 0) printf("  [%.3f TB/s with D's padding rows]", r->tbps_with_padding);
        if (bench_a_scales_mn_major) printf("  [a scales mn]");
        if (bench_a_scales_ue8m0) printf("  [a scales ue8m0]");
        if (bench_contiguous_hint >= 0 && r->layout && strstr(r->layout, "contiguous")) {
            if (bench_contiguous_hint == 0) printf("  [contiguous: no hint]");
            else printf("  [contiguous hint %d]", bench_contiguous_hint);
        }
        if (bench_w_scales_drift) printf("  [w scales drift]");
        /* (a GPU that runs draws power: 0 W means the device reports none, as one H200 host did,
         * bench/RESULTS.md v38, and then its energy windows measure nothing either) */
        if (r->clock.sm_mhz > 0) {
            if (r->clock.power_w > 0) printf("  [%d MHz %d W 0x%llx]", r->clock.sm_mhz, r->clock.power_w, r->clock.reasons);
            else printf("  [%d MHz, power not reported, 0x%llx]", r->clock.sm_mhz, r->clock.reasons);
        }
        if (r->base_clock.sm_mhz > 0) {
            if (r->base_clock.power_w > 0) printf("  [baseline %d MHz %d W]", r->base_clock.sm_mhz, r->base_clock.power_w);
            else printf("  [baseline %d MHz]", r->base_clock.sm_mhz);
        }
        if (r->pj_per_flop > 0 || r->base_pj_per_flop > 0)
            printf("  [%.3f pJ/FLOP, baseline %.3f]", r->pj_per_flop, r->base_pj_per_flop);
        if (r->sustained_tflops > 0 && r->base_sustained_tflops > 0)
            printf("  [sustained %.0f TFLOP/s, baseline %.0f: %.2fx]", r->sustained_tflops, r->base_sustained_tflops,
                   r->sustained_tflops / r->base_sustained_tflops);
        printf("\n");
        if (r->tokens >= 0) printf("%*s(T = %lld)\n", 29, "", (long long)r->tokens);
    }
    fflush(stdout);
}

/* ---- device fills ---- */

enum { FILL_BYTES = 0, FILL_FP8 = 1, FILL_UE8M0 = 2, FILL_UE8M0_DRIFT = 3, FILL_BF16 = 4, FILL_FP8_NARROW = 5 };

__device__ __forceinline__ uint64_t bench_mix64(uint64_t x) { /* splitmix64's finalizer */
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* p must be 8-byte aligned (every caller passes a cudaMalloc base). */
/* FILL_UE8M0_DRIFT: byte i is the exponent of 32-group i % period of its row; it climbs 3 binades per
 * 128-K chunk (24 over a row, then wraps) with 0..2 of noise, so every chunk folds but no row keeps one
 * base over K: every tile takes the kernels' chunk-by-chunk path instead of the look-ahead loop. */
__global__ void bench_fill_kernel(uint8_t *p, size_t bytes, uint64_t seed, int mode, int64_t period) {
    const size_t words = (bytes + 7) / 8;
    for (size_t w = blockIdx.x * (size_t)blockDim.x + threadIdx.x; w < words; w += (size_t)gridDim.x * blockDim.x) {
        const uint64_t h = bench_mix64(seed + w);
        uint64_t out = 0;
        for (int j = 0; j < 8; j++) {
            uint8_t v = (uint8_t)(h >> (8 * j));
            if (mode == FILL_FP8 && (v & 0x7F) == 0x7F) v = 0x3C; /* e4m3fn NaN -> 1.5 */
            if (mode == FILL_FP8_NARROW) v = (uint8_t)((v & 0x87) | ((6 + (v >> 3) % 3) << 3)); /* |v| 0.5 .. 3.75 */
            if (mode == FILL_UE8M0) v = (uint8_t)(118 + v % 6);    /* 2^-9 .. 2^-4 */
            if (mode == FILL_UE8M0_DRIFT) {
                const int64_t grp = (int64_t)((w * 8 + (size_t)j) % (size_t)period);
                v = (uint8_t)(106 + (3 * (grp / 4)) % 24 + v % 3); /* 2^-21 .. 2^4 */
            }
            out |= (uint64_t)v << (8 * j);
        }
        if (mode == FILL_BF16) /* each 16-bit half: random sign and mantissa, exponent 2^-7 .. 2^3 */
            for (int j = 0; j < 4; j++) {
                const uint64_t hv = (out >> (16 * j)) & 0xFFFFu, e = 120 + ((hv >> 7) & 0xFu) % 11;
                out = (out & ~(0xFFFFull << (16 * j))) | (((hv & 0x807Fu) | (e << 7)) << (16 * j));
            }
        if (w * 8 + 8 <= bytes) {
            ((uint64_t *)p)[w] = out;
        } else {
            for (size_t i = w * 8; i < bytes; i++) p[i] = (uint8_t)(out >> (8 * (i - w * 8)));
        }
    }
}

__global__ void bench_fill_f32_kernel(float *p, size_t count, float value) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x)
        p[i] = value;
}

static unsigned fill_blocks(size_t items) {
    size_t b = (items + 255) / 256;
    return (unsigned)(b < 1 ? 1 : b > 8192 ? 8192 : b);
}

static int fill_mode_period(void *dev, size_t bytes, int mode, int64_t period) {
    if (bytes == 0) return 0;
    if ((uintptr_t)dev % 8 != 0) {
        fprintf(stderr, "bench: internal: fill of %p needs an 8-byte aligned pointer\n", dev);
        return -1;
    }
    bench_fill_kernel<<<fill_blocks((bytes + 7) / 8), 256>>>((uint8_t *)dev, bytes, bench_rng(), mode, period);
    return BENCH_CUDA(cudaGetLastError()) && BENCH_CUDA(cudaDeviceSynchronize()) ? 0 : -1;
}

static int fill_mode(void *dev, size_t bytes, int mode) { return fill_mode_period(dev, bytes, mode, 1); }

int bench_w_scales_drift = 0;

/* HFP4_BENCH_FP8_FILL=narrow: FP8 operands drawn as the cuBLASLt baselines draw theirs (exponent
 * field 6..8, tools/baselines.cu), for A/Bs of data-dependent power at the cap; default: random bytes */
int bench_fill_random(void *dev, size_t bytes, int fp8) {
    const char *env = getenv("HFP4_BENCH_FP8_FILL");
    const int narrow = env && strcmp(env, "narrow") == 0;
    return fill_mode(dev, bytes, !fp8 ? FILL_BYTES : narrow ? FILL_FP8_NARROW : FILL_FP8);
}

int bench_fill_bf16(void *dev, size_t count) { return fill_mode(dev, count * 2, FILL_BF16); }

int bench_fill_w_scales(void *sf, size_t count) { return fill_mode(sf, count, FILL_UE8M0); }

int bench_fill_f32(void *dev, size_t count, float value) {
    if (count == 0) return 0;
    bench_fill_f32_kernel<<<fill_blocks(count), 256>>>((float *)dev, count, value);
    return BENCH_CUDA(cudaGetLastError()) && BENCH_CUDA(cudaDeviceSynchronize()) ? 0 : -1;
}

/* ---- weights ---- */

size_t bench_weights_peak_bytes(int32_t experts, int64_t n, int64_t k) {
    size_t plain = (size_t)experts * n * k / 2, nsf = (size_t)experts * n * (k / 32), rep = 0;
    if (hfp4_sm90_weights_size(experts, n, k, HFP4_DTYPE_UE8M0, &rep) != HFP4_OK) rep = plain + nsf;
    return plain + nsf + rep;
}

int bench_make_weights(int32_t experts, int64_t n, int64_t k, bench_weights *out) {
    memset(out, 0, sizeof *out);
    /* a random plain FP4 matrix with UE8M0 scales on the device, repacked on the device */
    const size_t plain = (size_t)experts * n * k / 2, nsf = (size_t)experts * n * (k / 32);
    void *src = NULL, *sf = NULL;
    int rc = -1;
    hfp4_matrix w;
    hfp4_status st = hfp4_sm90_weights_size(experts, n, k, HFP4_DTYPE_UE8M0, &out->w_bytes);
    if (st != HFP4_OK) {
        fprintf(stderr, "bench: weights %d x %lld x %lld: %s\n", experts, (long long)n, (long long)k, hfp4_last_error());
        goto done;
    }
    if (!BENCH_CUDA(cudaMalloc(&src, plain)) || !BENCH_CUDA(cudaMalloc(&sf, nsf)) ||
        !BENCH_CUDA(cudaMalloc(&out->w, out->w_bytes)))
        goto done;
    if (fill_mode(src, plain, FILL_BYTES) != 0 ||
        fill_mode_period(sf, nsf, bench_w_scales_drift ? FILL_UE8M0_DRIFT : FILL_UE8M0, k / 32) != 0)
        goto done;
    memset(&w, 0, sizeof w);
    w.data = src;
    w.dtype = HFP4_DTYPE_FP4_E2M1;
    w.rows = n;
    w.cols = k;
    w.ld = k / 2;
    w.stride_group = n * k / 2;
    w.scales.data = sf;
    w.scales.dtype = HFP4_DTYPE_UE8M0;
    w.scales.gran_mn = 1;
    w.scales.gran_k = 32;
    w.scales.stride_mn = k / 32;
    w.scales.stride_k = 1;
    w.scales.stride_group = n * (k / 32);
    st = hfp4_repack_sm90(&w, experts, HFP4_DTYPE_UE8M0, out->w, out->w_bytes, &out->b, NULL);
    if (st != HFP4_OK) {
        fprintf(stderr, "bench: hfp4_repack_sm90 (%d experts of %lld x %lld): %s\n", experts, (long long)n, (long long)k,
                hfp4_last_error());
        goto done;
    }
    if (!BENCH_CUDA(cudaDeviceSynchronize())) goto done;
    rc = 0;
done:
    (void)BENCH_CUDA(cudaFree(src));
    (void)BENCH_CUDA(cudaFree(sf));
    if (rc != 0) bench_free_weights(out);
    return rc;
}

void bench_free_weights(bench_weights *w) {
    (void)BENCH_CUDA(cudaFree(w->w));
    memset(w, 0, sizeof *w);
}

/* ---- routing ---- */

uint64_t bench_routing_seed = 0;
int bench_routing_balanced = 0;

/* splitmix64: a well-mixed 64-bit value from any seed (a private xorshift stream's start) */
static uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

int bench_route(int64_t tokens, int32_t experts, int32_t topk, bench_routing *r) {
    memset(r, 0, sizeof *r);
    /* --routing-seed: a stream of this case's own (xorshift64 from a mixed seed, never 0) */
    uint64_t own = 0;
    if (bench_routing_seed) {
        own = splitmix64(bench_routing_seed ^ splitmix64((uint64_t)tokens ^ ((uint64_t)experts << 40) ^ ((uint64_t)topk << 56)));
        if (own == 0) own = 1;
    }
    r->counts = (int64_t *)calloc(experts, sizeof(int64_t));
    int32_t *pick = (int32_t *)malloc(sizeof(int32_t) * topk);
    if (!r->counts || !pick) {
        fprintf(stderr, "bench: out of host memory routing %lld tokens\n", (long long)tokens);
        free(pick);
        bench_routing_free(r);
        return -1;
    }
    for (int64_t t = 0; t < tokens; t++) {
        for (int j = 0; j < topk; j++) { /* top-k distinct experts, uniformly */
            int32_t e;
            int dup;
            if (bench_routing_balanced) { /* distinct while topk <= experts (the caller's shapes) */
                e = (int32_t)(((uint64_t)t * (uint64_t)topk + (uint64_t)j) % (uint64_t)experts);
                pick[j] = e;
                r->counts[e]++;
                continue;
            }
            do {
                const uint64_t v = own ? xorshift64(&own) : bench_rng();
                e = (int32_t)(v % (uint64_t)experts);
                dup = 0;
                for (int i = 0; i < j; i++) dup |= pick[i] == e;
            } while (dup);
            pick[j] = e;
            r->counts[e]++;
        }
    }
    free(pick);
    r->tokens = tokens;
    r->experts = experts;
    r->rows = (int64_t)topk * tokens;
    for (int e = 0; e < experts; e++) {
        r->hit += r->counts[e] > 0;
        if (r->counts[e] > r->max_m) r->max_m = r->counts[e];
        r->padded += (r->counts[e] + 127) / 128 * 128;
    }
    return 0;
}

void bench_routing_free(bench_routing *r) {
    free(r->counts);
    r->counts = NULL;
}

/* ---- activations and problems ---- */

int bench_acts_alloc(bench_acts *x, hfp4_grouping g, const bench_routing *r, int64_t n, int64_t k, int gran) {
    memset(x, 0, sizeof *x);
    x->grouping = g;
    x->n = n;
    x->k = k;
    x->gran = gran;
    const int masked = g == HFP4_GROUPING_MASKED, psum = g == HFP4_GROUPING_CONTIGUOUS_PSUM;
    x->m = masked ? (r->max_m + 7) / 8 * 8 : r->padded;
    const int64_t rows_a = (masked ? r->experts : 1) * x->m, sfk = (k + gran - 1) / gran;
    const int64_t nlay = masked || psum ? r->experts : x->m;
    int32_t *hl = (int32_t *)malloc(sizeof(int32_t) * nlay);
    if (!hl) {
        fprintf(stderr, "bench: out of host memory for a layout of %lld entries\n", (long long)nlay);
        return -1;
    }
    if (masked) {
        for (int e = 0; e < r->experts; e++) hl[e] = (int32_t)r->counts[e];
    } else if (psum) { /* the same rows as the contiguous form: each expert's end row, segments 128-aligned */
        int64_t row = 0;
        for (int e = 0; e < r->experts; e++) {
            hl[e] = (int32_t)(row + r->counts[e]);
            row += (r->counts[e] + 127) / 128 * 128;
        }
    } else { /* each expert's rows start a 128-aligned segment; the rest of the segment is padding */
        int64_t row = 0;
        for (int e = 0; e < r->experts; e++) {
            int64_t seg = (r->counts[e] + 127) / 128 * 128;
            for (int64_t i = 0; i < seg; i++) hl[row + i] = i < r->counts[e] ? e : -1;
            row += seg;
        }
    }
    int rc = -1;
    if (!BENCH_CUDA(cudaMalloc(&x->a, (size_t)rows_a * k)) || !BENCH_CUDA(cudaMalloc(&x->sf, (size_t)rows_a * sfk * 4)) ||
        !BENCH_CUDA(cudaMalloc(&x->d, (size_t)rows_a * n * 2)) || !BENCH_CUDA(cudaMalloc(&x->layout, sizeof(int32_t) * nlay)))
        goto done;
    if (bench_fill_random(x->a, (size_t)rows_a * k, 1) != 0 || bench_fill_a_scales(x->sf, (size_t)rows_a * sfk) != 0)
        goto done;
    if (!BENCH_CUDA(cudaMemcpy(x->layout, hl, sizeof(int32_t) * nlay, cudaMemcpyHostToDevice))) goto done;
    rc = 0;
done:
    free(hl);
    if (rc != 0) bench_acts_free(x);
    return rc;
}

void bench_acts_free(bench_acts *x) {
    (void)BENCH_CUDA(cudaFree(x->a));
    (void)BENCH_CUDA(cudaFree(x->sf));
    (void)BENCH_CUDA(cudaFree(x->d));
    (void)BENCH_CUDA(cudaFree(x->layout));
    x->a = x->sf = x->d = x->layout = NULL;
}

int bench_a_scales_mn_major = 0;

void bench_set_a_scale_strides(hfp4_scales *s, int64_t m, int64_t sfk) {
    const int mn = bench_a_scales_mn_major && m % 4 == 0;
    s->stride_mn = mn ? 1 : sfk;
    s->stride_k = mn ? m : 1;
}
int bench_a_scales_ue8m0 = 0;
int bench_contiguous_hint = -1;

int bench_fill_a_scales(void *sf, size_t count) {
    if (bench_a_scales_ue8m0) return BENCH_CUDA(cudaMemset(sf, 119, count)) ? 0 : -1; /* 2^-8 */
    return bench_fill_f32(sf, count, 1.0f / 256);
}

void bench_fill_problem(hfp4_gemm_problem *p, hfp4_grouping g, int64_t m, int64_t n, int64_t k, int32_t groups, int gran,
                        void *a, void *a_sf, void *d, void *layout, const hfp4_matrix *b, int64_t expected_m) {
    memset(p, 0, sizeof *p);
    p->grouping = g;
    p->m = m;
    p->n = n;
    p->k = k;
    p->num_groups = groups;
    p->layout = (const int32_t *)layout;
    p->expected_m = expected_m;
    const int64_t sfk = (k + gran - 1) / gran;
    p->a.data = a;
    p->a.dtype = HFP4_DTYPE_FP8_E4M3;
    p->a.rows = m;
    p->a.cols = k;
    p->a.ld = k;
    p->a.stride_group = g == HFP4_GROUPING_MASKED ? m * k : 0;
    p->a.scales.data = a_sf;
    p->a.scales.dtype = bench_a_scales_ue8m0 ? HFP4_DTYPE_UE8M0 : HFP4_DTYPE_FP32; /* (the same strides: one value each) */
    p->a.scales.gran_mn = 1;
    p->a.scales.gran_k = gran;
    bench_set_a_scale_strides(&p->a.scales, m, sfk); /* (the same buffer either way, per group) */
    p->a.scales.stride_group = g == HFP4_GROUPING_MASKED ? m * sfk : 0;
    p->b = *b;
    p->d.data = d;
    p->d.dtype = HFP4_DTYPE_BF16;
    p->d.ld = n;
    p->d.stride_group = g == HFP4_GROUPING_MASKED ? m * n : 0;
}

void bench_expert_problem(hfp4_gemm_problem *p, const bench_acts *x, const bench_routing *r, const hfp4_matrix *b) {
    const int64_t hit = r->hit ? r->hit : 1;
    /* the expected_m hint: rows per routed expert (masked rounds up, contiguous down, as before) */
    int64_t expected = x->grouping == HFP4_GROUPING_MASKED ? (r->rows + hit - 1) / hit : r->rows / hit;
    if (bench_contiguous_hint >= 0 && x->grouping == HFP4_GROUPING_CONTIGUOUS) expected = bench_contiguous_hint;
    bench_fill_problem(p, x->grouping, x->m, x->n, x->k, r->experts, x->gran, x->a, x->sf, x->d, x->layout, b, expected);
}

double bench_expert_bytes(int64_t hit, int64_t rows, int64_t n, int64_t k, int gran) {
    const double scale_bytes = bench_a_scales_ue8m0 ? 1.0 : 4.0;
    return hit * n * (k / 2.0 + k / 32.0) + rows * (k + scale_bytes * ((k + gran - 1) / gran)) + rows * n * 2.0;
}

double bench_fp8_expert_bytes(int64_t hit, int64_t rows, int64_t n, int64_t k) {
    return (double)hit * n * k + (double)rows * k + rows * n * 2.0;
}

double bench_padding_bytes(const bench_routing *r, int64_t n) {
    return (double)(r->padded - r->rows) * n * 2.0;
}
