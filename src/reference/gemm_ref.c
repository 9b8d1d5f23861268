/*
 * gemm_ref.c - hfp4_ref_gemm: the CPU ground truth of every GEMM form (dense, contiguous,
 * contiguous psum, masked).
 *
 * Shape of the computation: every output row ("flat row": masked problems number G*M of them) is
 * first given an action by a row plan - compute it against expert g, write zeros, or leave it
 * untouched - so the groupings differ only in how the plan is built. Workers then take blocks of
 * consecutive flat rows, dequantize the block's A rows once, and for each B row dequantize it once
 * and dot it with every A row of the block that uses that expert. Each output element is one
 * ascending-K double sum (plus C), rounded once (ref_operands.c).
 *
 * Semantics of the rows that are not computed (the header's grouping comments, made exact):
 *  - CONTIGUOUS: a row with id -1 gets D = +0 exactly; C is not added to it.
 *  - CONTIGUOUS_PSUM: rows [psum[g], min(align(psum[g], a), m)) - the rest of group g's last
 *    alignment block - get +0 (C not added); every row outside all groups and those tails is
 *    untouched.
 *  - MASKED: rows >= masked_m[g] of group g are untouched.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "internal.h"
#include "ref_operands.h"

enum {
    ROWS_PER_BLOCK = 16, /* A rows sharing each dequantized B row: amortizes B decoding 16x */
    PLAN_UNTOUCHED = -2,
    PLAN_ZERO = -1
};

typedef struct ref_job {
    const hfp4_gemm_problem *p;
    hfp4__ref_tables tables;
    const int32_t *plan;    /* per flat row: expert (>= 0), PLAN_ZERO or PLAN_UNTOUCHED */
    int64_t flat_rows;      /* m, or G*m for masked */
    int64_t rows_per_group; /* m for masked (flat row = g*m + r); flat_rows otherwise */
    int64_t blocks;
    double **scratch;       /* per worker: ROWS_PER_BLOCK A rows then one B row, k doubles each */
    atomic_llong next_block;
} ref_job;

/* Builds the per-flat-row plan from the (validated) grouping layout. */
static void build_plan(const hfp4_gemm_problem *p, int32_t *plan, int64_t flat_rows) {
    const int32_t *l = p->layout;
    int64_t align = p->m_alignment ? p->m_alignment : HFP4_DEFAULT_M_ALIGNMENT;
    switch (p->grouping) {
    case HFP4_GROUPING_NONE:
        for (int64_t r = 0; r < flat_rows; r++) plan[r] = 0;
        break;
    case HFP4_GROUPING_CONTIGUOUS:
        for (int64_t r = 0; r < flat_rows; r++) plan[r] = l[r] < 0 ? PLAN_ZERO : l[r];
        break;
    case HFP4_GROUPING_CONTIGUOUS_PSUM: {
        for (int64_t r = 0; r < flat_rows; r++) plan[r] = PLAN_UNTOUCHED;
        int64_t start = 0;
        for (int32_t g = 0; g < p->num_groups; g++) {
            int64_t end = l[g];
            /* the next group starts at align(end), so this tail never reaches into it */
            int64_t tail_end = hfp4__align(end, align) < p->m ? hfp4__align(end, align) : p->m;
            for (int64_t r = start; r < end; r++) plan[r] = g;
            for (int64_t r = end; r < tail_end; r++) plan[r] = PLAN_ZERO;
            start = hfp4__align(end, align);
        }
        break;
    }
    case HFP4_GROUPING_MASKED:
        for (int64_t i = 0; i < flat_rows; i++)
            plan[i] = i % p->m < l[i / p->m] ? (int32_t)(i / p->m) : PLAN_UNTOUCHED;
        break;
    }
}

/* Stores one computed element: the dot product plus C (read before the write: c may be d). */
static void store_elem(const hfp4_output *d, int64_t idx, double acc) {
    if (d->c) acc += hfp4__ref_load_c(d->c, d->dtype, idx);
    hfp4__ref_store_d(d->data, d->dtype, idx, acc);
}

/* Computes flat rows [r0, r1) with the scratch `s`. */
static void run_block(ref_job *job, double *s, int64_t r0, int64_t r1) {
    const hfp4_gemm_problem *p = job->p;
    const hfp4_output *d = &p->d;
    int64_t k = p->k, n = p->n, per = job->rows_per_group;
    double *brow = s + (int64_t)ROWS_PER_BLOCK * k;
    int done[ROWS_PER_BLOCK];

    for (int64_t i = r0; i < r1; i++) {
        int64_t g = i / per, r = i % per; /* group of A and D (masked), row inside it */
        int32_t action = job->plan[i];
        done[i - r0] = action < 0;
        if (action >= 0) {
            hfp4__ref_decode_row(&job->tables, &p->a, g, r, k, s + (i - r0) * k);
        } else if (action == PLAN_ZERO) {
            for (int64_t j = 0; j < n; j++) hfp4__ref_store_d(d->data, d->dtype, g * d->stride_group + r * d->ld + j, 0.0);
        }
    }
    /* One pass per expert present in the block (usually one; a segment boundary gives two). */
    for (int64_t first = r0; first < r1; first++) {
        if (done[first - r0]) continue;
        int32_t expert = job->plan[first];
        int64_t rows[ROWS_PER_BLOCK], out[ROWS_PER_BLOCK]; /* block rows of this expert, their D offsets */
        int count = 0;
        for (int64_t i = first; i < r1; i++) {
            if (done[i - r0] || job->plan[i] != expert) continue;
            done[i - r0] = 1;
            rows[count] = i - r0;
            out[count++] = (i / per) * d->stride_group + (i % per) * d->ld;
        }
        for (int64_t j = 0; j < n; j++) {
            hfp4__ref_decode_row(&job->tables, &p->b, expert, j, k, brow);
            int q = 0;
            /* Four rows at a time: four independent add chains keep the FPU busy, while each
             * element is still its own ascending-K sum, bit-identical to the one-row loop. */
            for (; q + 4 <= count; q += 4) {
                const double *a0 = s + rows[q] * k, *a1 = s + rows[q + 1] * k;
                const double *a2 = s + rows[q + 2] * k, *a3 = s + rows[q + 3] * k;
                double c0 = 0.0, c1 = 0.0, c2 = 0.0, c3 = 0.0;
                for (int64_t kk = 0; kk < k; kk++) {
                    double bv = brow[kk];
                    c0 += a0[kk] * bv;
                    c1 += a1[kk] * bv;
                    c2 += a2[kk] * bv;
                    c3 += a3[kk] * bv;
                }
                store_elem(d, out[q] + j, c0);
                store_elem(d, out[q + 1] + j, c1);
                store_elem(d, out[q + 2] + j, c2);
                store_elem(d, out[q + 3] + j, c3);
            }
            for (; q < count; q++) {
                const double *a0 = s + rows[q] * k;
                double c0 = 0.0;
                for (int64_t kk = 0; kk < k; kk++) c0 += a0[kk] * brow[kk];
                store_elem(d, out[q] + j, c0);
            }
        }
    }
}

/* Worker `index` owns scratch[index] and takes blocks until none is left (balances uneven rows). */
static void worker(void *arg, int64_t index) {
    ref_job *job = (ref_job *)arg;
    double *s = job->scratch[index];
    for (;;) {
        int64_t blk = (int64_t)atomic_fetch_add(&job->next_block, 1);
        if (blk >= job->blocks) return;
        int64_t r0 = blk * ROWS_PER_BLOCK;
        int64_t r1 = r0 + ROWS_PER_BLOCK < job->flat_rows ? r0 + ROWS_PER_BLOCK : job->flat_rows;
        run_block(job, s, r0, r1);
    }
}

hfp4_status hfp4_ref_gemm(const hfp4_gemm_problem *p, int num_threads) {
    HFP4_TRY(hfp4_check_problem(p, 0));
    HFP4_CHECK_ARG(num_threads >= 0, "hfp4_ref_gemm: num_threads = %d must be >= 0 (0 = one per CPU)", num_threads);

    int64_t groups_of_rows = p->grouping == HFP4_GROUPING_MASKED ? p->num_groups : 1;
    /* Sizes that cannot be allocated are reported as what they are: out of host memory. */
    if (p->m > INT64_MAX / groups_of_rows || p->m * groups_of_rows > (int64_t)(SIZE_MAX / sizeof(int32_t)) ||
        p->k > (int64_t)(SIZE_MAX / sizeof(double) / (ROWS_PER_BLOCK + 1)))
        return hfp4__fail(HFP4_ERR_OUT_OF_MEMORY, "hfp4_ref_gemm: m = %lld x %lld groups, k = %lld is too large for host scratch",
                          (long long)p->m, (long long)groups_of_rows, (long long)p->k);

    ref_job job;
    job.p = p;
    job.flat_rows = p->m * groups_of_rows;
    job.rows_per_group = p->grouping == HFP4_GROUPING_MASKED ? p->m : job.flat_rows;
    job.blocks = hfp4__ceil_div(job.flat_rows, ROWS_PER_BLOCK);
    atomic_init(&job.next_block, 0);
    hfp4__ref_tables_init(&job.tables);
    job.tables.num_groups = p->num_groups;
    int threads = hfp4__thread_count(num_threads, job.blocks);

    /* Everything is allocated before the first write, so running out of memory leaves D untouched. */
    size_t scratch_bytes = (size_t)p->k * (ROWS_PER_BLOCK + 1) * sizeof(double);
    int32_t *plan = (int32_t *)malloc((size_t)job.flat_rows * sizeof(int32_t));
    double **scratch = (double **)calloc((size_t)threads, sizeof(double *));
    int ok = plan != NULL && scratch != NULL;
    for (int t = 0; ok && t < threads; t++) ok = (scratch[t] = (double *)malloc(scratch_bytes)) != NULL;
    hfp4_status status = HFP4_OK;
    if (!ok) {
        status = hfp4__fail(HFP4_ERR_OUT_OF_MEMORY,
                            "hfp4_ref_gemm: out of host memory (%d x %zu bytes of scratch, %lld-row plan)", threads,
                            scratch_bytes, (long long)job.flat_rows);
    } else {
        build_plan(p, plan, job.flat_rows);
        job.plan = plan;
        job.scratch = scratch;
        hfp4__parallel_for(threads, threads, worker, &job); /* -1 means it ran inline: still complete */
    }
    if (scratch)
        for (int t = 0; t < threads; t++) free(scratch[t]);
    free(scratch);
    free(plan);
    return status;
}
