/*
 * check_problem.c - hfp4_check_problem: the one argument validation of a GEMM request, shared by
 * the CPU reference (host pointers, the grouping layout is read) and the GPU calls (device
 * pointers, the layout is not read).
 *
 * Every rule here is a contract rule (INVALID_ARGUMENT). Whether a well-formed request can be
 * served (a dtype pair without a kernel, repacked weights in the reference) is decided by the
 * callers and reported as UNSUPPORTED, so that a malformed request never looks "merely
 * unsupported".
 *
 * Edge semantics decided here:
 *  - m, n, k must all be >= 1. DeepGEMM returns early for M == 0 (and copies C for K == 0); hfp4's
 *    C API does not: empty tensors are the caller's (e.g. the Python layer's) business, and a zero
 *    here is far more often an uninitialised field than a real empty batch.
 *  - The layout of a dense problem is ignored (NULL or not).
 *  - PSUM: group g covers [align(layout[g-1], a), layout[g]); a group whose end lies before that
 *    start is rejected. So an empty group that follows an unaligned end must repeat the aligned
 *    start (layout[g] = align(layout[g-1], a)), which is what DeepGEMM's own psum construction
 *    (start + count) produces.
 *  - CONTIGUOUS: only what DeepGEMM's kernels rely on is enforced: ids in [-1, G) and every row
 *    that starts a new run of a real id starts at a multiple of the alignment (the kernel reads the
 *    id of the first row of each BLOCK_M = alignment block only). An expert appearing in two
 *    separate segments is allowed.
 */
#include "internal.h"
#include "scale_access.h"
#include "../weights/sm90_layout.h"

#include <stddef.h>

#define BIT(d) (1u << (unsigned)(d))

/* The largest m, n or k: the bound the repacked layout has (sm90_layout.h), far past any real GEMM */
#define MAX_DIM ((int64_t)1 << 40)

static const char *fn_name(int device_pointers) { return device_pointers ? "hfp4_gemm" : "hfp4_ref_gemm"; }

static const char *grouping_name(hfp4_grouping g) {
    switch (g) {
    case HFP4_GROUPING_NONE: return "dense";
    case HFP4_GROUPING_CONTIGUOUS: return "contiguous";
    case HFP4_GROUPING_CONTIGUOUS_PSUM: return "contiguous psum";
    case HFP4_GROUPING_MASKED: return "masked";
    }
    return "unknown";
}

/* d_padding took the 4 bytes of alignment padding before expected_m: callers built against the
 * header without it (zero-initialized structs) keep working, and see the default */
_Static_assert(offsetof(hfp4_gemm_problem, m_alignment) % 8 == 0 &&
                   offsetof(hfp4_gemm_problem, d_padding) == offsetof(hfp4_gemm_problem, m_alignment) + 4 &&
                   offsetof(hfp4_gemm_problem, expected_m) == offsetof(hfp4_gemm_problem, m_alignment) + 8,
               "hfp4_gemm_problem.d_padding must sit in the 4 bytes of padding that followed m_alignment");

/* The shape fields and the grouping scalars (everything but the operands and the layout data). */
static hfp4_status check_shape(const char *fn, const hfp4_gemm_problem *p) {
    HFP4_CHECK_ARG(p->grouping >= HFP4_GROUPING_NONE && p->grouping <= HFP4_GROUPING_MASKED,
                   "%s: problem->grouping = %d is not a valid hfp4_grouping", fn, (int)p->grouping);
    HFP4_CHECK_ARG(p->m >= 1, "%s: problem->m = %lld must be >= 1 (empty problems are handled by the caller)", fn,
                   (long long)p->m);
    HFP4_CHECK_ARG(p->n >= 1, "%s: problem->n = %lld must be >= 1 (empty problems are handled by the caller)", fn,
                   (long long)p->n);
    HFP4_CHECK_ARG(p->k >= 1, "%s: problem->k = %lld must be >= 1", fn, (long long)p->k);
    /* (named here: past 2^40 a garbage size would otherwise surface as an operand's span passing
     * 2^60, a message that blames ld or stride_group) */
    HFP4_CHECK_ARG(p->m <= MAX_DIM, "%s: problem->m = %lld must be <= 2^40", fn, (long long)p->m);
    HFP4_CHECK_ARG(p->n <= MAX_DIM, "%s: problem->n = %lld must be <= 2^40", fn, (long long)p->n);
    HFP4_CHECK_ARG(p->k <= MAX_DIM, "%s: problem->k = %lld must be <= 2^40", fn, (long long)p->k);
    HFP4_CHECK_ARG(p->num_groups >= 1, "%s: problem->num_groups = %d must be >= 1", fn, (int)p->num_groups);
    if (p->grouping == HFP4_GROUPING_NONE) {
        HFP4_CHECK_ARG(p->num_groups == 1, "%s: problem->num_groups = %d must be 1 for a dense (ungrouped) GEMM", fn,
                       (int)p->num_groups);
    } else {
        HFP4_CHECK_ARG(p->layout != NULL, "%s: problem->layout is NULL but the grouping is %s", fn,
                       grouping_name(p->grouping));
        /* int32 loads from a misaligned device pointer are a sticky device fault, not a status */
        HFP4_CHECK_ARG((uintptr_t)p->layout % 4 == 0, "%s: problem->layout = %p must be 4-byte aligned (int32)", fn,
                       (const void *)p->layout);
    }
    if (p->grouping == HFP4_GROUPING_CONTIGUOUS || p->grouping == HFP4_GROUPING_CONTIGUOUS_PSUM) {
        HFP4_CHECK_ARG(p->m_alignment == 0 || (p->m_alignment > 0 && p->m_alignment % 8 == 0),
                       "%s: problem->m_alignment = %d must be 0 (default %d) or a positive multiple of 8", fn,
                       (int)p->m_alignment, HFP4_DEFAULT_M_ALIGNMENT);
    }
    HFP4_CHECK_ARG(p->expected_m >= 0, "%s: problem->expected_m = %lld must be >= 0 (0 = unknown)", fn,
                   (long long)p->expected_m);
    HFP4_CHECK_ARG(p->d_padding == HFP4_D_PADDING_ZERO ||
                       (p->d_padding == HFP4_D_PADDING_ANY && (p->grouping == HFP4_GROUPING_CONTIGUOUS ||
                                                               p->grouping == HFP4_GROUPING_CONTIGUOUS_PSUM)),
                   "%s: problem->d_padding = %d must be HFP4_D_PADDING_ZERO (0), or HFP4_D_PADDING_ANY (1) with a "
                   "contiguous grouping (the grouping is %s)",
                   fn, (int)p->d_padding, grouping_name(p->grouping));
    return HFP4_OK;
}

/* A: [M, K] (masked: [G, M, K]) FP8 with per-token scales, or BF16 without scales. */
static hfp4_status check_a(const char *fn, const hfp4_gemm_problem *p) {
    const hfp4_matrix *a = &p->a;
    int64_t groups = p->grouping == HFP4_GROUPING_MASKED ? p->num_groups : 1;
    HFP4_CHECK_ARG(a->data != NULL, "%s: problem->a.data is NULL", fn);
    HFP4_CHECK_ARG(a->dtype == HFP4_DTYPE_FP8_E4M3 || a->dtype == HFP4_DTYPE_BF16,
                   "%s: problem->a.dtype = %s (%d) must be fp8_e4m3 or bf16", fn, hfp4_dtype_name(a->dtype),
                   (int)a->dtype);
    HFP4_CHECK_ARG(a->rows == p->m, "%s: problem->a.rows = %lld must equal m = %lld", fn, (long long)a->rows,
                   (long long)p->m);
    HFP4_CHECK_ARG(a->cols == p->k, "%s: problem->a.cols = %lld must equal k = %lld", fn, (long long)a->cols,
                   (long long)p->k);
    HFP4_CHECK_ARG(a->dtype != HFP4_DTYPE_BF16 || (uintptr_t)a->data % 2 == 0,
                   "%s: problem->a.data = %p must be 2-byte aligned for bf16", fn, a->data);
    HFP4_CHECK_ARG(a->ld >= p->k, "%s: problem->a.ld = %lld must be >= k = %lld", fn, (long long)a->ld,
                   (long long)p->k);
    HFP4_CHECK_ARG(a->stride_group >= 0, "%s: problem->a.stride_group = %lld must be >= 0 (0 when one group)", fn,
                   (long long)a->stride_group);
    /* m * ld <= stride_group, written without the product so that huge values cannot overflow */
    if (groups > 1)
        HFP4_CHECK_ARG(a->stride_group >= 1 && a->ld <= a->stride_group / p->m,
                       "%s: problem->a.stride_group = %lld must be >= m * a.ld = %lld * %lld (one group of A)", fn,
                       (long long)a->stride_group, (long long)p->m, (long long)a->ld);
    HFP4_CHECK_ARG(hfp4__array_span(groups, a->stride_group, p->m, a->ld, p->k) >= 0,
                   "%s: problem->a.ld = %lld, stride_group = %lld: A's last element lies past 2^60 elements", fn,
                   (long long)a->ld, (long long)a->stride_group);
    if (a->dtype == HFP4_DTYPE_BF16) {
        HFP4_CHECK_ARG(a->scales.dtype == HFP4_DTYPE_NONE,
                       "%s: problem->a.scales.dtype = %s (%d) must be none for bf16 activations", fn,
                       hfp4_dtype_name(a->scales.dtype), (int)a->scales.dtype);
        return HFP4_OK;
    }
    HFP4_CHECK_ARG(a->scales.gran_k == 32 || a->scales.gran_k == 128,
                   "%s: problem->a.scales.gran_k = %d must be 32 or 128 for fp8 activations", fn,
                   (int)a->scales.gran_k);
    return hfp4__check_scales(fn, "problem->a.scales", &a->scales,
                              BIT(HFP4_DTYPE_FP32) | BIT(HFP4_DTYPE_UE8M0) | BIT(HFP4_DTYPE_UE8M0_PACKED), groups,
                              p->m, p->k, 1, a->scales.gran_k);
}

/* Bytes of one row of a plain B (packed FP4: K/2; FP8: K) */
static int64_t b_row_bytes(const hfp4_gemm_problem *p) { return p->b.dtype == HFP4_DTYPE_FP4_E2M1 ? p->k / 2 : p->k; }

/* B: [G, N, K] FP4 (packed, (1,32) scales), FP8 ((128,128) or (1,128) scales) or repacked SM90. */
static hfp4_status check_b(const char *fn, const hfp4_gemm_problem *p) {
    const hfp4_matrix *b = &p->b;
    HFP4_CHECK_ARG(b->data != NULL, "%s: problem->b.data is NULL", fn);
    HFP4_CHECK_ARG(b->dtype == HFP4_DTYPE_FP4_E2M1 || b->dtype == HFP4_DTYPE_FP8_E4M3 ||
                       b->dtype == HFP4_DTYPE_FP4_E2M1_SM90,
                   "%s: problem->b.dtype = %s (%d) must be fp4_e2m1, fp8_e4m3 or fp4_e2m1_sm90", fn,
                   hfp4_dtype_name(b->dtype), (int)b->dtype);
    HFP4_CHECK_ARG(b->rows == p->n, "%s: problem->b.rows = %lld must equal n = %lld", fn, (long long)b->rows,
                   (long long)p->n);
    HFP4_CHECK_ARG(b->cols == p->k, "%s: problem->b.cols = %lld must equal k = %lld", fn, (long long)b->cols,
                   (long long)p->k);
    if (b->dtype != HFP4_DTYPE_FP8_E4M3)
        HFP4_CHECK_ARG(p->k % 32 == 0, "%s: problem->k = %lld must be a multiple of 32 for FP4 weights", fn,
                       (long long)p->k);

    if (b->dtype == HFP4_DTYPE_FP4_E2M1_SM90) {
        /* The buffer's internal layout belongs to the repack code (src/weights/sm90_layout.h); ld
         * and the scale strides are not used by this form, scales.data points into the buffer. */
        HFP4_CHECK_ARG(b->scales.data != NULL,
                       "%s: problem->b.scales.data is NULL; describe repacked weights with the hfp4_matrix the repack "
                       "returned", fn);
        HFP4_CHECK_ARG(b->scales.dtype == HFP4_DTYPE_UE8M0 || b->scales.dtype == HFP4_DTYPE_FP32,
                       "%s: problem->b.scales.dtype = %s (%d) must be ue8m0 or fp32 for repacked sm90 weights", fn,
                       hfp4_dtype_name(b->scales.dtype), (int)b->scales.dtype);
        /* The geometry follows from (G, N, K, scale dtype); a buffer repacked for other values
         * would be read at the wrong offsets without any error, so the descriptor the repack
         * returned must match the problem exactly. */
        HFP4_CHECK_ARG(hfp4_sm90_geometry_fits(p->num_groups, p->n, p->k),
                       "%s: num_groups = %d, n = %lld, k = %lld: repacked weights of this shape would pass 2^59 bytes",
                       fn, (int)p->num_groups, (long long)p->n, (long long)p->k);
        hfp4_sm90_geometry geo =
            hfp4_sm90_geometry_make(p->num_groups, p->n, p->k, b->scales.dtype == HFP4_DTYPE_FP32);
        HFP4_CHECK_ARG(((uintptr_t)b->data) % 16 == 0, "%s: problem->b.data = %p must be 16-byte aligned", fn, b->data);
        HFP4_CHECK_ARG((const uint8_t *)b->scales.data == (const uint8_t *)b->data + geo.scale_offset &&
                           b->stride_group == geo.n_pad * geo.k_pad / 2 &&
                           b->scales.stride_group == geo.scale_bytes_per_group / 4,
                       "%s: problem->b does not describe weights repacked for num_groups = %d, n = %lld, k = %lld "
                       "(%s scales): pass the hfp4_matrix the repack returned for this shape",
                       fn, (int)p->num_groups, (long long)p->n, (long long)p->k, hfp4_dtype_name(b->scales.dtype));
        return HFP4_OK;
    }

    int fp4 = b->dtype == HFP4_DTYPE_FP4_E2M1;
    const int64_t row_units = b_row_bytes(p);
    HFP4_CHECK_ARG(b->ld >= row_units, "%s: problem->b.ld = %lld must be >= %lld (%s)", fn, (long long)b->ld,
                   (long long)row_units, fp4 ? "k/2 bytes of packed fp4" : "k");
    HFP4_CHECK_ARG(b->stride_group >= 0, "%s: problem->b.stride_group = %lld must be >= 0 (0 when one group)", fn,
                   (long long)b->stride_group);
    if (p->num_groups > 1)
        HFP4_CHECK_ARG(b->stride_group >= 1 && b->ld <= b->stride_group / p->n,
                       "%s: problem->b.stride_group = %lld must be >= n * b.ld = %lld * %lld (one expert's weights)",
                       fn, (long long)b->stride_group, (long long)p->n, (long long)b->ld);
    HFP4_CHECK_ARG(hfp4__array_span(p->num_groups, b->stride_group, p->n, b->ld, row_units) >= 0,
                   "%s: problem->b.ld = %lld, stride_group = %lld: B's last byte lies past 2^60", fn, (long long)b->ld,
                   (long long)b->stride_group);
    if (fp4)
        return hfp4__check_scales(fn, "problem->b.scales", &b->scales,
                                  BIT(HFP4_DTYPE_FP32) | BIT(HFP4_DTYPE_UE8M0) | BIT(HFP4_DTYPE_UE8M0_PACKED),
                                  p->num_groups, p->n, p->k, 1, 32);
    HFP4_CHECK_ARG(b->scales.gran_mn == 1 || b->scales.gran_mn == 128,
                   "%s: problem->b.scales.gran_mn = %d must be 1 or 128 for fp8 weights", fn,
                   (int)b->scales.gran_mn);
    return hfp4__check_scales(fn, "problem->b.scales", &b->scales, BIT(HFP4_DTYPE_FP32) | BIT(HFP4_DTYPE_UE8M0),
                              p->num_groups, p->n, p->k, b->scales.gran_mn, 128);
}

/* D (and C, which shares D's dtype and layout): [M, N], masked [G, M, N]. */
static hfp4_status check_d(const char *fn, const hfp4_gemm_problem *p) {
    const hfp4_output *d = &p->d;
    HFP4_CHECK_ARG(d->data != NULL, "%s: problem->d.data is NULL", fn);
    HFP4_CHECK_ARG(d->dtype == HFP4_DTYPE_BF16 || d->dtype == HFP4_DTYPE_FP32,
                   "%s: problem->d.dtype = %s (%d) must be bf16 or fp32", fn, hfp4_dtype_name(d->dtype),
                   (int)d->dtype);
    /* the kernels store D and load C as whole elements: a misaligned pointer would be a sticky
     * device fault after HFP4_OK */
    const uintptr_t d_elem = d->dtype == HFP4_DTYPE_FP32 ? 4 : 2;
    HFP4_CHECK_ARG((uintptr_t)d->data % d_elem == 0, "%s: problem->d.data = %p must be %d-byte aligned for %s", fn,
                   d->data, (int)d_elem, hfp4_dtype_name(d->dtype));
    HFP4_CHECK_ARG((uintptr_t)d->c % d_elem == 0, "%s: problem->d.c = %p must be %d-byte aligned for %s", fn, d->c,
                   (int)d_elem, hfp4_dtype_name(d->dtype));
    HFP4_CHECK_ARG(d->ld >= p->n, "%s: problem->d.ld = %lld must be >= n = %lld", fn, (long long)d->ld,
                   (long long)p->n);
    HFP4_CHECK_ARG(d->stride_group >= 0, "%s: problem->d.stride_group = %lld must be >= 0 (0 when one group)", fn,
                   (long long)d->stride_group);
    const int64_t d_groups = p->grouping == HFP4_GROUPING_MASKED ? p->num_groups : 1;
    if (d_groups > 1)
        HFP4_CHECK_ARG(d->stride_group >= 1 && d->ld <= d->stride_group / p->m,
                       "%s: problem->d.stride_group = %lld must be >= m * d.ld = %lld * %lld (one group of D)", fn,
                       (long long)d->stride_group, (long long)p->m, (long long)d->ld);
    HFP4_CHECK_ARG(hfp4__array_span(d_groups, d->stride_group, p->m, d->ld, p->n) >= 0,
                   "%s: problem->d.ld = %lld, stride_group = %lld: D's last element lies past 2^60 elements", fn,
                   (long long)d->ld, (long long)d->stride_group);
    return HFP4_OK;
}

/* The host-side grouping layout (only when its pointer is host memory). */
static hfp4_status check_layout(const char *fn, const hfp4_gemm_problem *p) {
    const int32_t *l = p->layout;
    int64_t align = p->m_alignment ? p->m_alignment : HFP4_DEFAULT_M_ALIGNMENT;
    int32_t groups = p->num_groups;
    switch (p->grouping) {
    case HFP4_GROUPING_NONE: break;
    case HFP4_GROUPING_CONTIGUOUS: {
        int32_t prev = -1;
        for (int64_t r = 0; r < p->m; r++) {
            int32_t id = l[r];
            HFP4_CHECK_ARG(id >= -1 && id < groups,
                           "%s: problem->layout[%lld] = %d (expert of row %lld) is outside [-1, %d)", fn,
                           (long long)r, (int)id, (long long)r, (int)groups);
            HFP4_CHECK_ARG(id == -1 || id == prev || r % align == 0,
                           "%s: problem->layout[%lld] = %d starts a segment of expert %d at row %lld, which is not "
                           "a multiple of m_alignment = %lld",
                           fn, (long long)r, (int)id, (int)id, (long long)r, (long long)align);
            prev = id;
        }
        break;
    }
    case HFP4_GROUPING_CONTIGUOUS_PSUM: {
        int64_t start = 0;
        for (int32_t g = 0; g < groups; g++) {
            int64_t end = l[g];
            HFP4_CHECK_ARG(end >= 0 && end <= p->m, "%s: problem->layout[%d] = %lld (psum end of group %d) is outside [0, m = %lld]",
                           fn, (int)g, (long long)end, (int)g, (long long)p->m);
            HFP4_CHECK_ARG(end >= start,
                           "%s: problem->layout[%d] = %lld (psum end of group %d) is before the group's start %lld "
                           "(= align(layout[%d], m_alignment = %lld)); psum must be non-decreasing after aligning",
                           fn, (int)g, (long long)end, (int)g, (long long)start, (int)g - 1, (long long)align);
            start = hfp4__align(end, align);
        }
        break;
    }
    case HFP4_GROUPING_MASKED:
        for (int32_t g = 0; g < groups; g++)
            HFP4_CHECK_ARG(l[g] >= 0 && l[g] <= p->m, "%s: problem->layout[%d] = %d (masked_m of group %d) is outside [0, m = %lld]",
                           fn, (int)g, (int)l[g], (int)g, (long long)p->m);
        break;
    }
    return HFP4_OK;
}

/* The int32 entries of the layout the grouping reads (0 when dense: the layout is ignored). */
static int64_t layout_entries(const hfp4_gemm_problem *p) {
    switch (p->grouping) {
    case HFP4_GROUPING_CONTIGUOUS: return p->m;
    case HFP4_GROUPING_CONTIGUOUS_PSUM:
    case HFP4_GROUPING_MASKED: return p->num_groups;
    case HFP4_GROUPING_NONE: break;
    }
    return 0;
}

/* Whether D's bytes overlap an input's (A's or B's data or scales, the layout, or a C that is not D
 * itself): a GEMM that writes what it still reads computes garbage. Checked for the reference's
 * host pointers; every span was checked above, so the byte counts cannot overflow. */
static hfp4_status check_no_alias(const char *fn, const hfp4_gemm_problem *p) {
    const int64_t groups = p->grouping == HFP4_GROUPING_MASKED ? p->num_groups : 1; /* (A's and D's) */
    const int64_t a_elem = p->a.dtype == HFP4_DTYPE_BF16 ? 2 : 1, d_elem = p->d.dtype == HFP4_DTYPE_FP32 ? 4 : 2;
    const int64_t a_bytes = hfp4__array_span(groups, p->a.stride_group, p->m, p->a.ld, p->k) * a_elem;
    const int64_t d_bytes = hfp4__array_span(groups, p->d.stride_group, p->m, p->d.ld, p->n) * d_elem;
    const void *d = p->d.data;
    HFP4_CHECK_ARG(!hfp4__ranges_overlap(d, d_bytes, p->a.data, a_bytes),
                   "%s: problem->d.data = %p overlaps a.data = %p", fn, d, p->a.data);
    if (p->a.dtype != HFP4_DTYPE_BF16) {
        const int64_t sa_bytes = hfp4__scales_bytes(&p->a.scales, groups, p->m, p->k);
        HFP4_CHECK_ARG(!hfp4__ranges_overlap(d, d_bytes, p->a.scales.data, sa_bytes),
                       "%s: problem->d.data = %p overlaps a.scales.data = %p", fn, d, p->a.scales.data);
    }
    if (p->b.dtype != HFP4_DTYPE_FP4_E2M1_SM90) {
        const int64_t b_bytes = hfp4__array_span(p->num_groups, p->b.stride_group, p->n, p->b.ld, b_row_bytes(p));
        HFP4_CHECK_ARG(!hfp4__ranges_overlap(d, d_bytes, p->b.data, b_bytes),
                       "%s: problem->d.data = %p overlaps b.data = %p", fn, d, p->b.data);
        const int64_t sb_bytes = hfp4__scales_bytes(&p->b.scales, p->num_groups, p->n, p->k);
        HFP4_CHECK_ARG(!hfp4__ranges_overlap(d, d_bytes, p->b.scales.data, sb_bytes),
                       "%s: problem->d.data = %p overlaps b.scales.data = %p", fn, d, p->b.scales.data);
    } else { /* (the repacked buffer holds the weights, their scales and the chunk modes) */
        const hfp4_sm90_geometry geo =
            hfp4_sm90_geometry_make(p->num_groups, p->n, p->k, p->b.scales.dtype == HFP4_DTYPE_FP32);
        HFP4_CHECK_ARG(!hfp4__ranges_overlap(d, d_bytes, p->b.data, geo.total_bytes),
                       "%s: problem->d.data = %p overlaps the repacked weights b.data = %p (%lld bytes)", fn, d,
                       p->b.data, (long long)geo.total_bytes);
    }
    HFP4_CHECK_ARG(!hfp4__ranges_overlap(d, d_bytes, p->layout, layout_entries(p) * 4),
                   "%s: problem->d.data = %p overlaps layout = %p", fn, d, (const void *)p->layout);
    /* C is read element by element as D is written: only C == D (read then overwritten in place)
     * gives each output its own C (include/hfp4.h: "c may equal d") */
    HFP4_CHECK_ARG(p->d.c == NULL || p->d.c == d || !hfp4__ranges_overlap(d, d_bytes, p->d.c, d_bytes),
                   "%s: problem->d.c = %p overlaps d.data = %p without being equal to it (C may be D, or apart from it)",
                   fn, p->d.c, d);
    return HFP4_OK;
}

hfp4_status hfp4_check_problem(const hfp4_gemm_problem *p, int device_pointers) {
    /* The two callers are the reference (host) and the GPU calls (device): name them in messages. */
    const char *fn = fn_name(device_pointers);
    HFP4_CHECK_ARG(p != NULL, "%s: problem is NULL", fn);
    HFP4_TRY(check_shape(fn, p));
    HFP4_TRY(check_a(fn, p));
    HFP4_TRY(check_b(fn, p));
    HFP4_TRY(check_d(fn, p));
    if (!device_pointers) { /* (the GPU calls' plan tests describe every operand with one dummy buffer) */
        HFP4_TRY(check_no_alias(fn, p));
        HFP4_TRY(check_layout(fn, p));
    }
    return HFP4_OK;
}
