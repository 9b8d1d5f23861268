/*
 * sf_cpu.c - host execution of a planned layout operation: the data checks (psum and K-group layout
 * contents, UE8M0 exactness) and the writes. The loops are the plain definitions of the layouts;
 * sf_gpu.cu must produce the same bytes.
 *
 * Work is split over "units" (rows or row blocks) and run on worker threads only when the input is
 * large, so the many tiny calls of the tests and of offline tools pay no thread start-up.
 */
#include <stdio.h>
#include <string.h>

#include "sf_internal.h"

/* Below this many elements everything runs on the calling thread. */
#define SF_PARALLEL_MIN_ELEMS ((int64_t)1 << 18)

static int worker_threads(const hfp4_sf_options *opts, int64_t elems, int64_t units) {
    if (elems < SF_PARALLEL_MIN_ELEMS) return 1;
    return hfp4__thread_count(opts ? opts->num_threads : 0, units);
}

static uint32_t load_bits(const hfp4_sf_tensor *t, int64_t g, int64_t r, int64_t j) {
    return ((const uint32_t *)t->data)[g * t->stride_group + r * t->stride_mn + j * t->stride_k];
}

/* ---- psum / K-group layout ------------------------------------------------------------------- */

/* Is output row r read (inside a psum group, or every row < mn without psum)? */
static int row_read(const hfp4__sf_plan *p, int64_t r) {
    if (r >= p->mn) return 0;
    return !p->has_psum || hfp4__sf_psum_row_valid(p->psum.ends, p->psum.num_groups, p->psum.alignment, r);
}

/* Is input row i of the packing read by at least one output row? */
static int input_row_read(const hfp4__sf_plan *p, int64_t i) {
    int64_t r0 = i * p->gran_mn, r1 = r0 + p->gran_mn;
    if (r1 > p->mn) r1 = p->mn;
    if (!p->has_psum) return r0 < r1;
    for (int64_t r = r0; r < r1; r++)
        if (row_read(p, r)) return 1;
    return 0;
}

static hfp4_status check_psum(const char *fn, const hfp4__sf_plan *p) {
    const int32_t *e = p->psum.ends;
    for (int32_t g = 0; g < p->psum.num_groups; g++) {
        HFP4_CHECK_ARG(e[g] >= 0 && e[g] <= p->mn, "%s: psum.ends[%d] = %d must be in [0, mn = %lld]", fn, (int)g,
                       (int)e[g], (long long)p->mn);
        HFP4_CHECK_ARG(g == 0 || e[g] >= e[g - 1], "%s: psum.ends[%d] = %d is below psum.ends[%d] = %d (must not decrease)",
                       fn, (int)g, (int)e[g], (int)g - 1, (int)e[g - 1]);
    }
    return HFP4_OK;
}

/* Group g of a K-grouped plan: n = ceil(k_g / gran_k) input rows. Walks the layout from the start:
 * O(G) per call, which is nothing next to the rows it then packs. */
static int64_t k_group_rows(const hfp4__sf_plan *p, int32_t g) {
    const hfp4_sf_k_groups *kg = &p->kg;
    int64_t prev = g > 0 ? kg->layout[g - 1] : 0;
    return hfp4__ceil_div(hfp4__sf_k_group_size(kg->use_psum, kg->layout[g], prev, kg->k_alignment), kg->gran_k);
}

static hfp4_status check_k_groups(const char *fn, const hfp4__sf_plan *p) {
    const hfp4_sf_k_groups *kg = &p->kg;
    int64_t rows = 0, packed = 0;
    for (int32_t g = 0; g < kg->num_groups; g++) {
        int32_t v = kg->layout[g];
        HFP4_CHECK_ARG(v >= 0, "%s: groups.layout[%d] = %d must be >= 0", fn, (int)g, (int)v);
        int64_t k = v;
        if (kg->use_psum) {
            int64_t prev = g > 0 ? kg->layout[g - 1] : 0;
            int64_t start = hfp4__sf_align_up(prev, kg->k_alignment);
            HFP4_CHECK_ARG(v >= prev, "%s: groups.layout[%d] = %d is below groups.layout[%d] = %lld (psum ends must not decrease)",
                           fn, (int)g, (int)v, (int)g - 1, (long long)prev);
            HFP4_CHECK_ARG(v == prev || v >= start,
                           "%s: groups.layout[%d] = %d ends before its group starts at align(%lld, %d) = %lld", fn,
                           (int)g, (int)v, (long long)prev, (int)kg->k_alignment, (long long)start);
            k = hfp4__sf_k_group_size(1, v, prev, kg->k_alignment);
        }
        HFP4_CHECK_ARG(kg->ks == NULL || kg->ks[g] == k,
                       "%s: groups.ks[%d] = %d disagrees with groups.layout, which gives group %d a K of %lld", fn,
                       (int)g, kg->ks ? (int)kg->ks[g] : 0, (int)g, (long long)k);
        int64_t n = hfp4__ceil_div(k, kg->gran_k);
        rows += n;
        packed += hfp4__ceil_div(n, 4);
    }
    HFP4_CHECK_ARG(rows <= p->in.sf_k, "%s: the groups need %lld K-group rows of scales but sf.sf_k = %lld", fn,
                   (long long)rows, (long long)p->in.sf_k);
    HFP4_CHECK_ARG(packed <= p->out.sf_k, "%s: the groups need %lld packed rows but the output has %lld", fn,
                   (long long)packed, (long long)p->out.sf_k);
    return HFP4_OK;
}

/* ---- UE8M0 exactness scan -------------------------------------------------------------------- */

/* Units and the inner index of a scan:
 *   PACK:      unit = g * in.mn + i (input row i of group g), inner = K-group j;
 *   K_GROUPED: unit = input row (K-group) of the stacked groups, inner = mn column.
 * Each chunk of units records its first inexact value; the lowest chunk with one wins, which is
 * the first in (unit, inner) order, i.e. row-major order of DeepGEMM's tensor. */
typedef struct scan_job {
    const hfp4__sf_plan *plan;
    int64_t units, chunks, read_rows;
    int64_t *hit_unit, *hit_inner;
    int kinds; /* the HFP4__SF_INEXACT / HFP4__SF_INVALID bits that count as a hit */
} scan_job;

static int64_t scan_unit(const hfp4__sf_plan *p, int64_t u, int64_t read_rows, int kinds) {
    int inexact = 0;
    if (p->op == HFP4__SF_OP_PACK) {
        int64_t g = u / p->in.mn, i = u % p->in.mn;
        if (!input_row_read(p, i)) return -1;
        for (int64_t j = 0; j < p->in.sf_k; j++) {
            hfp4__sf_ue8m0_byte(load_bits(&p->in, g, i, j), &inexact);
            if (inexact & kinds) return j;
        }
    } else {
        if (u >= read_rows) return -1;
        for (int64_t c = 0; c < p->in.mn; c++) {
            hfp4__sf_ue8m0_byte(load_bits(&p->in, 0, c, u), &inexact);
            if (inexact & kinds) return c;
        }
    }
    return -1;
}

static void scan_chunk(void *arg, int64_t chunk) {
    scan_job *job = (scan_job *)arg;
    int64_t u0 = job->units * chunk / job->chunks, u1 = job->units * (chunk + 1) / job->chunks;
    job->hit_unit[chunk] = -1;
    for (int64_t u = u0; u < u1; u++) {
        int64_t inner = scan_unit(job->plan, u, job->read_rows, job->kinds);
        if (inner >= 0) {
            job->hit_unit[chunk] = u;
            job->hit_inner[chunk] = inner;
            return;
        }
    }
}

/* Fails on the first value whose kind is in `kinds` (sf_common.h): without HFP4_SF_ROUND_UP every
 * value UE8M0 cannot hold exactly; with it NaN, Inf and values <= 0 still, since rounding up is
 * only defined for finite positive values (a NaN scale packed as 2^127 silently became finite). */
static hfp4_status check_exact(const char *fn, const hfp4__sf_plan *p, const hfp4_sf_options *opts, int kinds) {
    enum { MAX_CHUNKS = 256 };
    int64_t hit_unit[MAX_CHUNKS], hit_inner[MAX_CHUNKS];
    scan_job job = {p, 0, 1, 0, hit_unit, hit_inner, kinds};
    if (p->op == HFP4__SF_OP_PACK) {
        job.units = (p->in.num_groups > 0 ? p->in.num_groups : 1) * p->in.mn;
    } else {
        for (int32_t g = 0; g < p->kg.num_groups; g++) job.read_rows += k_group_rows(p, g);
        job.units = job.read_rows;
    }
    int threads = worker_threads(opts, hfp4__sf_numel(&p->in), job.units);
    job.chunks = threads > 1 ? (job.units < MAX_CHUNKS ? job.units : MAX_CHUNKS) : 1;
    hfp4__parallel_for(threads, job.chunks, scan_chunk, &job);
    for (int64_t c = 0; c < job.chunks; c++) {
        if (hit_unit[c] < 0) continue;
        int64_t g = 0, row, j;
        if (p->op == HFP4__SF_OP_PACK) {
            g = hit_unit[c] / p->in.mn;
            row = hit_unit[c] % p->in.mn;
            j = hit_inner[c];
        } else {
            row = hit_inner[c];
            j = hit_unit[c];
        }
        uint32_t bits = load_bits(&p->in, g, row, j);
        float v;
        memcpy(&v, &bits, sizeof v);
        char where[96];
        if (p->in.num_groups > 0)
            snprintf(where, sizeof where, "group = %lld, mn = %lld, sf_k = %lld", (long long)g, (long long)row,
                     (long long)j);
        else
            snprintf(where, sizeof where, "mn = %lld, sf_k = %lld", (long long)row, (long long)j);
        int kind = 0;
        hfp4__sf_ue8m0_byte(bits, &kind);
        if (kind & HFP4__SF_INVALID)
            return hfp4__fail(HFP4_ERR_INVALID_ARGUMENT,
                              "%s: sf(%s) = %.9g (bits 0x%08x) is not a finite positive value, so no UE8M0 scale "
                              "means it (HFP4_SF_ROUND_UP rounds up finite positive values only)",
                              fn, where, (double)v, (unsigned)bits);
        return hfp4__fail(HFP4_ERR_INVALID_ARGUMENT,
                          "%s: sf(%s) = %.9g (bits 0x%08x) is not a power of two in [2^-127, 2^127], so UE8M0 cannot "
                          "hold it exactly; pass HFP4_SF_ROUND_UP to round it up (ceil_to_ue8m0)",
                          fn, where, (double)v, (unsigned)bits);
    }
    return HFP4_OK;
}

hfp4_status hfp4__sf_check_data_cpu(const char *fn, const hfp4__sf_plan *plan, const hfp4_sf_options *opts) {
    const int round_up = opts != NULL && (opts->flags & HFP4_SF_ROUND_UP);
    const int kinds = round_up ? HFP4__SF_INVALID : HFP4__SF_INEXACT | HFP4__SF_INVALID;
    HFP4_TRY(hfp4__sf_check_options(fn, opts));
    if (plan->op == HFP4__SF_OP_PACK) {
        if (plan->has_psum) HFP4_TRY(check_psum(fn, plan));
        HFP4_TRY(check_exact(fn, plan, opts, kinds));
    } else if (plan->op == HFP4__SF_OP_K_GROUPED) {
        HFP4_TRY(check_k_groups(fn, plan));
        HFP4_TRY(check_exact(fn, plan, opts, kinds));
    }
    return HFP4_OK;
}

/* ---- writes ---------------------------------------------------------------------------------- */

typedef struct exec_job {
    const hfp4__sf_plan *plan;
    int64_t units, chunks;
} exec_job;

/* MN_MAJOR unit: output column (g, j), all T rows. */
static void exec_mn_major(const hfp4__sf_plan *p, int64_t u) {
    const hfp4_sf_tensor *in = &p->in, *out = &p->out;
    int64_t g = u / in->sf_k, j = u % in->sf_k, t = out->stride_k;
    uint32_t *dst = (uint32_t *)out->data + g * out->stride_group + j * t;
    for (int64_t r = 0; r < t; r++) dst[r] = r < in->mn ? load_bits(in, g, r, j) : 0;
}

/* PACK unit: a block of 16 output rows of group g, all packed words (reads each input row in K
 * order, which is memory order for the usual K-major scales). */
#define SF_PACK_ROWS 16
static void exec_pack(const hfp4__sf_plan *p, int64_t u) {
    const hfp4_sf_tensor *in = &p->in, *out = &p->out;
    int64_t t = out->stride_k, blocks = hfp4__ceil_div(t, SF_PACK_ROWS);
    int64_t g = u / blocks, r0 = (u % blocks) * SF_PACK_ROWS;
    uint32_t *dst = (uint32_t *)out->data + g * out->stride_group;
    for (int64_t r = r0; r < r0 + SF_PACK_ROWS && r < t; r++) {
        const int read = row_read(p, r);
        for (int64_t q = 0; q < out->sf_k; q++) {
            uint32_t w = 0;
            if (read) {
                uint32_t v[4];
                int count = (int)(in->sf_k - 4 * q < 4 ? in->sf_k - 4 * q : 4), inexact = 0;
                for (int b = 0; b < count; b++) v[b] = load_bits(in, g, r / p->gran_mn, 4 * q + b);
                w = hfp4__sf_pack4(v, count, &inexact);
            }
            dst[q * t + r] = w;
        }
    }
}

/* K_GROUPED unit: output row q (zeros past the last group). */
static void exec_k_grouped(const hfp4__sf_plan *p, int64_t q) {
    const hfp4_sf_tensor *in = &p->in;
    int64_t mn = in->mn, row0 = 0, n = 0, q0 = 0;
    int found = 0;
    for (int32_t g = 0; g < p->kg.num_groups && !found; g++) {
        n = k_group_rows(p, g);
        int64_t pg = hfp4__ceil_div(n, 4);
        if (q < q0 + pg) {
            found = 1;
            row0 += 4 * (q - q0);
            n -= 4 * (q - q0);
        } else {
            q0 += pg;
            row0 += n;
        }
    }
    uint32_t *dst = (uint32_t *)p->out.data + q * mn;
    for (int64_t c = 0; c < mn; c++) {
        uint32_t w = 0;
        if (found) {
            uint32_t v[4];
            int count = (int)(n < 4 ? n : 4), inexact = 0;
            for (int b = 0; b < count; b++) v[b] = load_bits(in, 0, c, row0 + b);
            w = hfp4__sf_pack4(v, count, &inexact);
        }
        dst[c] = w;
    }
}

/* UTCCP unit: output column (g, word j): out row c*128 + 4i + b <- input row c*128 + 32b + i. */
static void exec_utccp(const hfp4__sf_plan *p, int64_t u) {
    const hfp4_sf_tensor *in = &p->in, *out = &p->out;
    int64_t g = u / in->sf_k, j = u % in->sf_k;
    uint32_t *dst = (uint32_t *)out->data + g * out->stride_group + j * out->stride_k;
    for (int64_t r = 0; r < in->mn; r++) {
        int64_t c = r / 128, o = r % 128;
        dst[r] = load_bits(in, g, c * 128 + 32 * (o % 4) + o / 4, j);
    }
}

static void exec_chunk(void *arg, int64_t chunk) {
    exec_job *job = (exec_job *)arg;
    int64_t u0 = job->units * chunk / job->chunks, u1 = job->units * (chunk + 1) / job->chunks;
    for (int64_t u = u0; u < u1; u++) {
        switch (job->plan->op) {
        case HFP4__SF_OP_MN_MAJOR: exec_mn_major(job->plan, u); break;
        case HFP4__SF_OP_PACK: exec_pack(job->plan, u); break;
        case HFP4__SF_OP_K_GROUPED: exec_k_grouped(job->plan, u); break;
        case HFP4__SF_OP_UTCCP: exec_utccp(job->plan, u); break;
        case HFP4__SF_OP_NONE: break;
        }
    }
}

void hfp4__sf_execute_cpu(const hfp4__sf_plan *plan, const hfp4_sf_options *opts) {
    const hfp4_sf_tensor *in = &plan->in, *out = &plan->out;
    const int64_t groups = out->num_groups > 0 ? out->num_groups : 1;
    exec_job job = {plan, 0, 1};
    switch (plan->op) {
    case HFP4__SF_OP_NONE: return;
    case HFP4__SF_OP_MN_MAJOR: job.units = groups * in->sf_k; break;
    case HFP4__SF_OP_PACK: job.units = groups * hfp4__ceil_div(out->stride_k, SF_PACK_ROWS); break;
    case HFP4__SF_OP_K_GROUPED: job.units = out->sf_k; break;
    case HFP4__SF_OP_UTCCP: job.units = groups * in->sf_k; break;
    }
    int64_t elems = (int64_t)(plan->bytes / 4) > hfp4__sf_numel(in) ? (int64_t)(plan->bytes / 4) : hfp4__sf_numel(in);
    int threads = worker_threads(opts, elems, job.units);
    job.chunks = threads > 1 ? (job.units < 4 * threads ? job.units : 4 * threads) : 1;
    hfp4__parallel_for(threads, job.chunks, exec_chunk, &job);
}
