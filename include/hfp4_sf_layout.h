/*
 * hfp4_sf_layout.h - the scale-factor (SF) layout toolkit, byte-compatible with DeepGEMM.
 * Part of the public API: include/hfp4.h includes it (include either one).
 *
 * Every block-scaled GEMM loads its scales through TMA in one fixed layout. These calls turn the
 * scales a quantizer produced into that layout, for a target architecture given explicitly, so
 * the work can be done offline on a CPU (hfp4_sf_*) or on the GPU (hfp4_sf_*_gpu, byte-identical
 * output). They mirror DeepGEMM's utilities (deep_gemm/utils, csrc/apis/layout.hpp) name for name;
 * docs/SF_LAYOUT.md has the layouts, the branch table per architecture, the error mapping and
 * worked examples.
 *
 * Conventions (on top of hfp4.h's: status codes, last error, nothing written on failure)
 *  - A scale tensor is described by hfp4_sf_tensor: logical axes (group, mn, sf_k) with element
 *    strides, exactly what torch's .shape/.stride() report. The axes are named, not positional: a
 *    torch tensor [G, mn, sf_k] maps field by field; the K-grouped tensor [sf_k, mn] maps with
 *    stride_mn = 1 and stride_k = mn.
 *  - "T" is align(mn, 4): the TMA-aligned row count of 4-byte scales (16-byte TMA strides).
 *  - Size first, then work (zstd style): every producing call has a *_query form that fills the
 *    output description and its size in bytes without touching data, so the caller allocates first.
 *    The query and the call agree on the output description and on every status that does not
 *    depend on the data.
 *  - Outputs are always fully defined: padding rows mn..T-1, unused K bytes and rows outside every
 *    group are written as zeros. (DeepGEMM leaves padding rows uninitialized; the values of the
 *    rows it does write are identical.)
 *  - When the input already has the required layout, DeepGEMM returns it unchanged; so do these
 *    calls ("pass-through"): the query reports bytes = 0 and out->data = sf->data, and the call
 *    writes nothing and sets out->data = sf->data. A pass-through output aliases the input.
 *  - UE8M0 safety: packing FP32 scales into UE8M0 keeps only the exponent. A value that is not
 *    exactly a UE8M0 value (a positive power of two in [2^-127, 2^127]) is never silently rounded:
 *    the CPU calls fail with HFP4_ERR_INVALID_ARGUMENT naming the first such value and its index,
 *    unless HFP4_SF_ROUND_UP is passed, which applies DeepGEMM's ceil_to_ue8m0 to such values if
 *    they are finite and positive. NaN, Inf, zero and negative scales fail with or without it.
 *  - Errors: HFP4_ERR_INVALID_ARGUMENT when the caller broke a contract (null pointers, negative
 *    sizes, a tensor whose sizes do not match mn/k/granularity, overlapping strides, dst too small
 *    or overlapping the input, a malformed recipe, a pass-through branch whose input is not in the
 *    layout it promises). HFP4_ERR_UNSUPPORTED when the request is well-formed but no layout exists
 *    for it (DeepGEMM's "Unknown SF transformation"): the message names the dtype, gran_mn, gran_k
 *    and architecture. The GPU calls also return HFP4_ERR_CUDA / HFP4_ERR_NO_DEVICE.
 *  - Threads: re-entrant; the CPU calls may use worker threads (hfp4_sf_options.num_threads).
 *  - GPU calls (*_gpu): every pointer is device memory except the descriptors, options, recipes and
 *    `ks` (host). Stream-ordered on `stream`; they allocate nothing, never synchronize and never read
 *    device memory from the host, so they can be captured in a CUDA graph. Checks that need the
 *    data (power-of-two scales, psum/grouped-layout contents) cannot run there: see each call.
 *    Kernel faults surface at the next synchronization, as with any CUDA library.
 *  - In a build without the CUDA toolkit the *_gpu calls validate their arguments and then return
 *    HFP4_ERR_NO_DEVICE.
 */
#ifndef HFP4_SF_LAYOUT_H
#define HFP4_SF_LAYOUT_H

#include "hfp4.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------- */
/* Descriptions                                                                                 */
/* ------------------------------------------------------------------------------------------- */

/* A 2D [mn, sf_k] or 3D [num_groups, mn, sf_k] scale tensor. Element (g, r, j) lives at
 *     data + g*stride_group + r*stride_mn + j*stride_k        (elements of 4 bytes)
 * dtype: HFP4_DTYPE_FP32 (one scale per element), or HFP4_DTYPE_INT32 (packed UE8M0: byte b of
 * word j holds the exponent of K-group 4j+b; HFP4_DTYPE_UE8M0_PACKED is accepted as a synonym on
 * input, outputs say INT32 as torch does).
 * Inputs: strides must be >= 0 and must not overlap (dims of size > 1 each step over the extent of
 * the dims with smaller strides; a size-1 dim's stride is ignored); data 4-byte aligned and non-NULL
 * unless the tensor is empty (queries never dereference it). stride_group is ignored when
 * num_groups = 0. */
typedef struct hfp4_sf_tensor {
    void *data;           /* host (CPU calls) or device (GPU calls) memory; read-only for inputs */
    hfp4_dtype dtype;     /* HFP4_DTYPE_FP32 or HFP4_DTYPE_INT32                                 */
    int32_t num_groups;   /* 0: 2D tensor; G >= 1: 3D tensor with G groups                       */
    int64_t mn;           /* rows (M or N; scale rows when gran_mn > 1)                          */
    int64_t sf_k;         /* K-groups (FP32) or packed words (INT32)                             */
    int64_t stride_group; /* elements between groups (3D only; outputs set 0 when 2D)            */
    int64_t stride_mn;    /* elements between rows                                              */
    int64_t stride_k;     /* elements between K-groups / packed words                           */
} hfp4_sf_tensor;

/* DeepGEMM's recipe: an optional tuple of granularities (rows x K-elements per scale).
 *   size 0: not given.
 *   size 3: (gran_mn_a, gran_mn_b, gran_k), e.g. (1, 128, 128) (legacy: per-token A, 128x128 B)
 *           or (1, 1, 128) (per-row A and B); one gran_k for both operands.
 *   size 2: (gran_mn, gran_k) of one operand, e.g. recipe_a = (1, 128), recipe_b = (1, 32).
 * Zero-initialize for "not given"; hfp4_sf_recipe2/3 below build the others. */
typedef struct hfp4_sf_recipe {
    int32_t size;
    int32_t gran[3];
} hfp4_sf_recipe;

static inline hfp4_sf_recipe hfp4_sf_recipe2(int32_t gran_mn, int32_t gran_k) {
    hfp4_sf_recipe r = {2, {gran_mn, gran_k, 0}};
    return r;
}
static inline hfp4_sf_recipe hfp4_sf_recipe3(int32_t gran_mn_a, int32_t gran_mn_b, int32_t gran_k) {
    hfp4_sf_recipe r = {3, {gran_mn_a, gran_mn_b, gran_k}};
    return r;
}

/* The prefix-sum ("psum") grouping of a contiguous A (DeepGEMM's psum_layout, int32 [G]).
 * Group g covers rows [start_g, end_g) with end_g = ends[g], start_0 = 0 and
 * start_g = align(ends[g-1], alignment). Rows outside every group (alignment gaps and the tail)
 * are written as zeros and their scales are never read (they may be garbage, even NaN).
 * Contract: 0 <= ends[0] <= ends[1] <= ... <= mn (checked by the CPU calls; the GPU calls clamp
 * to [0, mn] and treat an end below its start as an empty group). */
typedef struct hfp4_sf_psum {
    const int32_t *ends;  /* G cumulative end rows: host (CPU calls) or device (GPU calls)       */
    int32_t num_groups;   /* G >= 1                                                              */
    int32_t alignment;    /* group starts are aligned to this (DeepGEMM's mk alignment); 0 = 128 */
} hfp4_sf_psum;

/* Flags for hfp4_sf_options.flags. */
#define HFP4_SF_ROUND_UP 1u /* pack finite positive non-UE8M0 FP32 scales as ceil_to_ue8m0(x)
                               (2^ceil(log2 x), exponent clamped to 1..254) instead of failing.
                               Exact UE8M0 values (2^-127..2^127, 2^-127 included as byte 0) are
                               always kept exactly; NaN, Inf, zero and negative values still fail. */

/* Execution options shared by every producing call. NULL means all defaults (zero-initialized). */
typedef struct hfp4_sf_options {
    uint32_t flags;       /* HFP4_SF_ROUND_UP or 0                                              */
    int32_t num_threads;  /* CPU calls: worker threads, 0 = one per online CPU (small inputs run
                             on the calling thread). Ignored by GPU calls.                        */
    int32_t *error_flag;  /* GPU calls only (device memory, may be NULL): set to 1 by a packing
                             kernel that met a non-UE8M0 FP32 value without HFP4_SF_ROUND_UP, or
                             a NaN, Inf, zero or negative one with or without it (it then wrote
                             ceil_to_ue8m0(|x|), exponent clamped to 1..254). Only ever written
                             with 1: zero it before the call. Ignored by CPU calls, which fail
                             instead.                                                             */
} hfp4_sf_options;

/* Which operand a 3-tuple recipe is applied to (DeepGEMM's optional is_sfa). */
typedef enum hfp4_sf_operand {
    HFP4_SF_OPERAND_UNSET = 0, /* is_sfa = None: the recipe must be a 2-tuple                    */
    HFP4_SF_OPERAND_A = 1,     /* is_sfa = True: gran_mn = recipe.gran[0]                        */
    HFP4_SF_OPERAND_B = 2      /* is_sfa = False: gran_mn = recipe.gran[1]                       */
} hfp4_sf_operand;

/* ------------------------------------------------------------------------------------------- */
/* Sizes, recipes and checks (pure host logic, no data read)                                    */
/* ------------------------------------------------------------------------------------------- */

/* hfp4_sf_get_tma_aligned_size: *aligned = align(x, 16 / element_size), the row count whose stride
 * keeps TMA's 16-byte alignment (4-byte scales: align(x, 4); BF16: align(x, 8); FP8: align(x, 16)).
 * Errors: INVALID_ARGUMENT if x is outside [0, 2^56), aligned is NULL, or element_size is not 1,
 * 2, 4, 8 or 16. */
HFP4_API hfp4_status hfp4_sf_get_tma_aligned_size(int64_t x, int64_t element_size, int64_t *aligned);

/* hfp4_sf_get_default_recipe: DeepGEMM's get_default_recipe(sfa_dtype, sfb_dtype) for target
 * `arch` (SM version, major*10 + minor: 90, 100, 103, 120, 121...):
 *   sm_9x: both FP32 -> (1, 128, 128); otherwise UNSUPPORTED (no default for packed scales).
 *   sm_10x and sm_12x: sfb FP32 -> (1, 128, 128) (legacy), sfb INT32 -> (1, 1, 128) (1D1D).
 *   other architectures: UNSUPPORTED ("unknown recipe").
 * Errors: INVALID_ARGUMENT for a dtype that is neither FP32 nor INT32, an arch outside [50, 999]
 * (pass 90, not 9), or recipe NULL. */
HFP4_API hfp4_status hfp4_sf_get_default_recipe(hfp4_dtype sfa_dtype, hfp4_dtype sfb_dtype, int32_t arch,
                                                hfp4_sf_recipe *recipe);

/* Checks for hfp4_sf_check_layout. */
#define HFP4_SF_CHECK_TMA_STRIDE 1u /* MN-major TMA-aligned: stride_mn = 1 (or mn = 1), stride_k =
                                       align(mn, 4), 3D: stride_group = stride_k * sf_k          */
#define HFP4_SF_CHECK_SM90_SFB 2u   /* contiguous K-major or MN-major without padding, 3D groups dense */

/* hfp4_sf_check_layout: DeepGEMM's check_sf_layout. Checks, in order: dtype == type_check (unless
 * HFP4_DTYPE_NONE) and dtype FP32/INT32; rank (num_groups = 0: 2D; G >= 1: 3D with G groups);
 * sf->mn == ceil(mn / gran_mn); sf->sf_k == ceil(k / (gran_k * (FP32 ? 1 : 4))), k being the
 * logical (unpacked) K; then the `checks` flags above. Reads no data.
 * Returns HFP4_OK, or INVALID_ARGUMENT naming the first failed check (also for gran <= 0, mn < 0,
 * k < 0, unknown flags, a type_check other than NONE, FP32, INT32 or UE8M0_PACKED, or a malformed
 * descriptor). */
HFP4_API hfp4_status hfp4_sf_check_layout(const hfp4_sf_tensor *sf, int64_t mn, int64_t k, int32_t gran_mn,
                                          int32_t gran_k, int32_t num_groups, uint32_t checks,
                                          hfp4_dtype type_check);

/* ------------------------------------------------------------------------------------------- */
/* Layout primitives                                                                            */
/* ------------------------------------------------------------------------------------------- */

/* hfp4_sf_get_mn_major_tma_aligned_tensor: DeepGEMM's get_mn_major_tma_aligned_tensor. Copies a
 * 4-byte scale tensor [(G,) mn, sf_k] of any strides into the MN-major TMA-aligned layout:
 * same shape and dtype, strides (T*sf_k, 1, T) (2D: stride_mn 1, stride_k T), T = align(mn, 4);
 * `bytes` = max(G,1) * T * sf_k * 4; padding rows are zeros. Pass-through (bytes 0) when the input
 * already has those strides (3D: also stride_group == T*sf_k), as DeepGEMM does.
 * dtype: FP32, or INT32 (a bit-exact copy; DeepGEMM takes FP32 only, hfp4's SM90 branch for
 * pre-packed scales needs the int32 form).
 * _query: fills *out (data NULL, or sf->data for pass-through) and *bytes; reads no data.
 * Call: dst (>= bytes bytes, 4-byte aligned, not overlapping sf) receives the output; *out describes
 * it. Errors: INVALID_ARGUMENT (descriptor, dtype, dst NULL/small/misaligned/overlapping). */
HFP4_API hfp4_status hfp4_sf_get_mn_major_tma_aligned_tensor_query(const hfp4_sf_tensor *sf, hfp4_sf_tensor *out,
                                                                   size_t *bytes);
HFP4_API hfp4_status hfp4_sf_get_mn_major_tma_aligned_tensor(const hfp4_sf_tensor *sf, const hfp4_sf_options *opts,
                                                             void *dst, size_t dst_bytes, hfp4_sf_tensor *out);

/* hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor: DeepGEMM's function of the same name, with
 * the row broadcast of transform_sf_into_required_layout folded in. Packs FP32 scales
 * sf [(G,) ceil(mn/gran_mn), sf_k] (any strides) into int32 [(G,) mn, P], P = ceil(sf_k/4),
 * strides (T*P, 1, T): byte b of out[g, r, p] is the exponent of sf[g, r / gran_mn, 4p + b], or 0
 * when 4p + b >= sf_k or row r >= mn (padding) or r is outside every psum group.
 * mn: logical rows of the output; gran_mn >= 1 rows share one input row (1: no broadcast; the
 * input must then have exactly mn rows). psum: NULL, or the psum grouping (only for G <= 1).
 * UE8M0 safety: see the header comment; only scales that are read are checked (not those of rows
 * outside psum groups), in (group, row, k) order. Never pass-through.
 * Errors: INVALID_ARGUMENT (descriptor, dtype not FP32, gran_mn < 1, sf->mn != ceil(mn/gran_mn),
 * psum with G > 1, psum ends out of order or beyond mn, a non-UE8M0 scale without
 * HFP4_SF_ROUND_UP, dst problems as above). */
HFP4_API hfp4_status hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor_query(const hfp4_sf_tensor *sf, int64_t mn,
                                                                                int32_t gran_mn,
                                                                                const hfp4_sf_psum *psum,
                                                                                hfp4_sf_tensor *out, size_t *bytes);
HFP4_API hfp4_status hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor(const hfp4_sf_tensor *sf, int64_t mn,
                                                                          int32_t gran_mn, const hfp4_sf_psum *psum,
                                                                          const hfp4_sf_options *opts, void *dst,
                                                                          size_t dst_bytes, hfp4_sf_tensor *out);

/* The K-grouped (MoE wgrad) grouping for hfp4_sf_get_k_grouped_*: K is the concatenation of G
 * groups. */
typedef struct hfp4_sf_k_groups {
    const int32_t *layout; /* grouped_layout, int32 [G]: group K sizes, or (use_psum) cumulative end
                              offsets; group g then has k_g = ends[g] - align(ends[g-1], k_alignment)
                              (ends[-1] = 0; a negative k_g counts as an empty group). Host for the
                              CPU call (read), device for the GPU call; never read by _query.     */
    int32_t num_groups;    /* G >= 0                                                              */
    const int32_t *ks;     /* host int32 [G] with each group's K size (DeepGEMM's ks_cpu), or NULL
                              (allowed only with use_psum: the output is then sized by the bound
                              (sf_k + 3G) / 4 rows)                                               */
    int32_t gran_k;        /* 32 or 128                                                           */
    int32_t k_alignment;   /* > 0, a multiple of 32                                              */
    int32_t use_psum;      /* 1: layout holds cumulative ends                                     */
} hfp4_sf_k_groups;

/* hfp4_sf_get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor: DeepGEMM's function of the same
 * name. sf: FP32 2D, axes mn and sf_k (DeepGEMM's contiguous [sf_k, mn] is stride_mn = 1,
 * stride_k = mn; other strides are accepted too), the K-groups of all groups stacked: group g owns
 * n_g = ceil(k_g / gran_k) rows starting at R_g = sum_{h<g} n_h. Each group is packed on its own
 * into P_g = ceil(n_g / 4) output rows starting at Q_g = sum_{h<g} P_h: byte b of word
 * (row Q_g + p, column c) is the exponent of sf(mn = c, sf_k = R_g + 4p + b), or 0 when
 * 4p + b >= n_g. Output: int32 with out->mn = mn, out->sf_k = packed rows, stride_mn = 1,
 * stride_k = mn (torch: contiguous [packed, mn]); packed = sum_g ceil(k_g / (4 gran_k)) with ks,
 * else (sf_k + 3G) / 4; rows past the last group are zeros. With ks and without use_psum,
 * sum_g ceil(ks[g] / gran_k) must equal sf->sf_k.
 * Errors: INVALID_ARGUMENT (descriptor, dtype, 3D sf, G < 0, layout NULL with G > 0 on the CPU,
 * ks NULL without use_psum, ks[g] < 0, k_alignment <= 0, the sum rule above, and on the CPU: layout
 * values negative / out of order / disagreeing with ks, groups needing more rows than sf has, a
 * non-UE8M0 scale without HFP4_SF_ROUND_UP); UNSUPPORTED for gran_k not 32/128, k_alignment not a
 * multiple of 32, or mn % 4 != 0 (the unpadded output would not be TMA-aligned). */
HFP4_API hfp4_status hfp4_sf_get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor_query(
    const hfp4_sf_tensor *sf, const hfp4_sf_k_groups *groups, hfp4_sf_tensor *out, size_t *bytes);
HFP4_API hfp4_status hfp4_sf_get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor(
    const hfp4_sf_tensor *sf, const hfp4_sf_k_groups *groups, const hfp4_sf_options *opts, void *dst,
    size_t dst_bytes, hfp4_sf_tensor *out);

/* hfp4_sf_transpose_for_utccp: the SM100 UTCCP row permutation (deep_gemm.mega's
 * _transpose_sf_for_utccp): within each 128-row chunk, row 32*j + i (j < 4, i < 32) moves to row
 * 4*i + j. sf: int32 [(G,) mn, P], any strides, mn % 128 == 0. Output: same shape, MN-major
 * TMA-aligned strides (mn*P, 1, mn) (DeepGEMM's empty_like keeps the input's strides, which are
 * these for the output of the packing calls). Never pass-through.
 * Errors: INVALID_ARGUMENT (descriptor, dtype not INT32, dst problems); UNSUPPORTED if mn % 128. */
HFP4_API hfp4_status hfp4_sf_transpose_for_utccp_query(const hfp4_sf_tensor *sf, hfp4_sf_tensor *out, size_t *bytes);
HFP4_API hfp4_status hfp4_sf_transpose_for_utccp(const hfp4_sf_tensor *sf, const hfp4_sf_options *opts, void *dst,
                                                 size_t dst_bytes, hfp4_sf_tensor *out);

/* ------------------------------------------------------------------------------------------- */
/* Transforms: scales -> the layout a GEMM on `arch` consumes                                   */
/* ------------------------------------------------------------------------------------------- */

/* One operand's transform request (DeepGEMM's transform_sf_into_required_layout arguments).
 * Zero-initialize, then fill. */
typedef struct hfp4_sf_transform_request {
    const hfp4_sf_tensor *sf; /* the scales                                                     */
    int64_t mn;               /* logical rows of the operand (M or N per group), >= 0           */
    int64_t k;                /* logical (unpacked) K, >= 0                                     */
    hfp4_sf_recipe recipe;    /* required: a 3-tuple with is_sfa set, or a 2-tuple without      */
    int32_t num_groups;       /* 0: sf must be 2D (DeepGEMM None); G >= 1: sf must be 3D with G  */
    hfp4_sf_operand is_sfa;   /* see hfp4_sf_operand                                             */
    int32_t disable_ue8m0_cast; /* keep FP32 scales FP32 (SM90-style kernels)                    */
    const hfp4_sf_psum *psum; /* NULL, or the psum grouping of A; used by the SM100/SM120 packing
                                 branch only (ignored by the others, as in DeepGEMM)             */
    int32_t arch;             /* target SM version, major*10 + minor: 90, 100, 103, 120, 121...  */
} hfp4_sf_transform_request;

/* hfp4_sf_transform_into_required_layout: DeepGEMM's transform_sf_into_required_layout for an
 * explicit target architecture. Resolves (gran_mn, gran_k) from the recipe, checks the shape like
 * hfp4_sf_check_layout (no stride checks), then takes the first matching branch (major = arch/10):
 *  1. FP32, (1, 128), major 9 or disable_ue8m0_cast -> FP32 MN-major TMA-aligned (copy or pass-through)
 *  2. FP32, (128, 128), major 9 or disable_ue8m0_cast -> pass-through; the input must be contiguous
 *     K-major or MN-major without padding (HFP4_SF_CHECK_SM90_SFB), else INVALID_ARGUMENT
 *  3. [hfp4] FP32, (1, 32), major 9 -> FP32 MN-major TMA-aligned (hfp4's SM90 FP4 kernels)
 *  4. [hfp4] INT32, (1, 32) or (1, 128), major 9 -> INT32 MN-major TMA-aligned (copy or pass-through)
 *  5. FP32, gran_k 32 or 128, any gran_mn, major 10 or 12 -> UNSUPPORTED if disable_ue8m0_cast
 *     (those kernels take UE8M0 only); else rows broadcast by gran_mn and packed: INT32
 *     [(G,) mn, ceil(k / (4 gran_k))], strides (P*T, 1, T), with psum if given (requires G <= 1)
 *  6. INT32, (1, 32) or (1, 128), major 10 or 12 -> pass-through; the input must already be
 *     MN-major TMA-aligned (HFP4_SF_CHECK_TMA_STRIDE), else INVALID_ARGUMENT
 *  -  anything else -> UNSUPPORTED, "no SF layout for <dtype> scales with gran_mn = .., gran_k = ..
 *     on sm_<arch>" (DeepGEMM's "Unknown SF transformation").
 * Branches 1, 2, 5 and 6 are DeepGEMM's (5 and 6 on major 12 as in DeepGEMM PR #447).
 * _query: fills *out (data NULL, or sf->data for pass-through) and *bytes; reads no data.
 * Call: as the primitives (dst >= bytes, may be NULL when bytes is 0).
 * Errors (INVALID_ARGUMENT): req/sf NULL, arch outside [50, 999], recipe not given or of the wrong
 * size for is_sfa (3-tuple needs is_sfa, 2-tuple forbids it), a granularity <= 0, mn or k < 0,
 * dtype not FP32/INT32, wrong rank/group count, sf->mn != ceil(mn/gran_mn), sf->sf_k !=
 * ceil(k/(gran_k*(FP32 ? 1 : 4))), the pass-through layout rules above, psum with G > 1, plus the
 * primitives' errors. UNSUPPORTED as listed. */
HFP4_API hfp4_status hfp4_sf_transform_into_required_layout_query(const hfp4_sf_transform_request *req,
                                                                  hfp4_sf_tensor *out, size_t *bytes);
HFP4_API hfp4_status hfp4_sf_transform_into_required_layout(const hfp4_sf_transform_request *req,
                                                            const hfp4_sf_options *opts, void *dst, size_t dst_bytes,
                                                            hfp4_sf_tensor *out);

/* Both operands of a GEMM (DeepGEMM's transform_sf_pair_into_required_layout, which its GEMM APIs
 * call). Zero-initialize, then fill. */
typedef struct hfp4_sf_pair_request {
    const hfp4_sf_tensor *sfa, *sfb;
    int64_t m, n, k;
    hfp4_sf_recipe recipe;      /* 3-tuple, or not given                                          */
    hfp4_sf_recipe recipe_a;    /* 2-tuple, or not given                                          */
    hfp4_sf_recipe recipe_b;    /* 2-tuple, or not given                                          */
    int32_t num_groups_a;       /* 0 = None (dense, m-grouped contiguous A); G for masked A        */
    int32_t num_groups_b;       /* 0 = None (dense B); G for grouped B                              */
    int32_t disable_ue8m0_cast;
    const hfp4_sf_psum *psum;   /* SFA only (B is weights without gaps)                           */
    hfp4_dtype a_dtype;         /* operand data dtypes (HFP4_DTYPE_NONE = not known): with FP4
                                   (FP4_E2M1 or FP4_E2M1_SM90) k must be a multiple of 32, as in
                                   hfp4_ref_gemm. Otherwise NONE, FP8_E4M3 or BF16.             */
    hfp4_dtype b_dtype;
    int32_t arch;
} hfp4_sf_pair_request;

/* What a pair transform produces. */
typedef struct hfp4_sf_pair_result {
    hfp4_sf_tensor sfa, sfb;    /* the outputs (pass-through ones alias the inputs)               */
    size_t sfa_bytes, sfb_bytes; /* bytes each needs at its dst (0: pass-through or empty)        */
    int32_t gran_k_a, gran_k_b; /* the K granularities the GEMM must use                          */
} hfp4_sf_pair_result;

/* hfp4_sf_transform_pair_into_required_layout: both operands, DeepGEMM's rules (§2.4):
 *  - recipe_a and recipe_b must both be given or both not (else INVALID_ARGUMENT);
 *  - recipe together with recipe_a/recipe_b is INVALID_ARGUMENT;
 *  - with none given, recipe = hfp4_sf_get_default_recipe(sfa->dtype, sfb->dtype, arch);
 *  - SFA: transform(sfa, m, k, recipe with is_sfa A | recipe_a, num_groups_a, psum);
 *    SFB: transform(sfb, n, k, recipe with is_sfa B | recipe_b, num_groups_b, no psum);
 *  - gran_k_a = recipe_a[1] or recipe[2]; gran_k_b = recipe_b[1] or recipe[2].
 * Both operands are checked (data included, on the CPU) before either output is written.
 * _query fills *res (data NULL or the input's for pass-through). Call: dst_a / dst_b receive the
 * outputs (each >= its bytes, not overlapping each other or the inputs).
 * Errors: the rules above, FP4 with k % 32 != 0 (INVALID_ARGUMENT), a_dtype/b_dtype not one of the
 * listed, and every error of hfp4_sf_transform_into_required_layout for either operand; the message
 * says which operand. */
HFP4_API hfp4_status hfp4_sf_transform_pair_into_required_layout_query(const hfp4_sf_pair_request *req,
                                                                       hfp4_sf_pair_result *res);
HFP4_API hfp4_status hfp4_sf_transform_pair_into_required_layout(const hfp4_sf_pair_request *req,
                                                                 const hfp4_sf_options *opts, void *dst_a,
                                                                 size_t dst_a_bytes, void *dst_b, size_t dst_b_bytes,
                                                                 hfp4_sf_pair_result *res);

/* ------------------------------------------------------------------------------------------- */
/* GPU forms: device pointers, stream-ordered, byte-identical output                            */
/* ------------------------------------------------------------------------------------------- */

/* Each *_gpu call takes the same arguments as its CPU form plus `stream`, validates everything that
 * does not need the data exactly as the CPU form does (same statuses; messages name the _gpu call),
 * and launches kernels whose output is byte-identical to the CPU form's, padding included.
 * Differences, because the GPU cannot report data-dependent errors without a host read:
 *  - A non-UE8M0 FP32 scale without HFP4_SF_ROUND_UP is written rounded up (the value the CPU form
 *    writes with the flag) and sets *opts->error_flag to 1 if given; so does a NaN, Inf, zero or
 *    negative scale, flag or not (the CPU form rejects those always). Callers must pass power-of-two
 *    scales (or the flag); check a host copy with the CPU form when in doubt.
 *  - psum ends and K-grouped layouts are not validated: out-of-range values are clamped (no read or
 *    write outside the tensors); the output for such values is unspecified.
 * Extra errors: NO_DEVICE (no CUDA device/driver), UNSUPPORTED (the current device is not sm_90:
 * the kernels are built for sm_90a only), CUDA (a launch failed: the CUDA error's name is in the
 * message). Performance and kernel design: docs/SF_LAYOUT.md. Kernels are named hfp4_sf_*transpose_fp32* and hfp4_sf_*pack_fp32_into_ue8m0*
 * (the substrings DeepGEMM's benchmarks look for); none contains "gemm_". */
HFP4_API hfp4_status hfp4_sf_get_mn_major_tma_aligned_tensor_gpu(const hfp4_sf_tensor *sf, const hfp4_sf_options *opts,
                                                                 void *dst, size_t dst_bytes, hfp4_sf_tensor *out,
                                                                 hfp4_stream stream);
HFP4_API hfp4_status hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor_gpu(const hfp4_sf_tensor *sf, int64_t mn,
                                                                              int32_t gran_mn,
                                                                              const hfp4_sf_psum *psum,
                                                                              const hfp4_sf_options *opts, void *dst,
                                                                              size_t dst_bytes, hfp4_sf_tensor *out,
                                                                              hfp4_stream stream);
HFP4_API hfp4_status hfp4_sf_get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor_gpu(
    const hfp4_sf_tensor *sf, const hfp4_sf_k_groups *groups, const hfp4_sf_options *opts, void *dst,
    size_t dst_bytes, hfp4_sf_tensor *out, hfp4_stream stream);
HFP4_API hfp4_status hfp4_sf_transpose_for_utccp_gpu(const hfp4_sf_tensor *sf, const hfp4_sf_options *opts,
                                                     void *dst, size_t dst_bytes, hfp4_sf_tensor *out,
                                                     hfp4_stream stream);
HFP4_API hfp4_status hfp4_sf_transform_into_required_layout_gpu(const hfp4_sf_transform_request *req,
                                                                const hfp4_sf_options *opts, void *dst,
                                                                size_t dst_bytes, hfp4_sf_tensor *out,
                                                                hfp4_stream stream);
HFP4_API hfp4_status hfp4_sf_transform_pair_into_required_layout_gpu(const hfp4_sf_pair_request *req,
                                                                     const hfp4_sf_options *opts, void *dst_a,
                                                                     size_t dst_a_bytes, void *dst_b,
                                                                     size_t dst_b_bytes, hfp4_sf_pair_result *res,
                                                                     hfp4_stream stream);

#ifdef __cplusplus
}
#endif

#endif /* HFP4_SF_LAYOUT_H */
