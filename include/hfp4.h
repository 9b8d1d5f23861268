/*
 * hfp4.h - the public C API of hfp4: FP4-weight GEMMs for NVIDIA Hopper (SM90).
 *
 * hfp4 computes D = C + A * B^T ("NT": A is [M,K], B is [N,K], both K-innermost) where B holds
 * FP4 e2m1 weights (two per byte, one scale per 32 K-elements per row) and A holds FP8 e4m3
 * activations with per-token scales, as DeepSeek-V4's MoE experts need. Every operation has a CPU
 * reference (hfp4_ref_*), the ground truth the tests use, and SM90 kernels (hfp4_gemm etc.).
 *
 * Conventions (they hold for every call below unless the call says otherwise)
 *  - C11, no CUDA header needed. Streams are passed as `hfp4_stream` (the same type as cudaStream_t).
 *  - Every call returns an hfp4_status. On failure nothing is written to any output, and
 *    hfp4_last_error() holds a message naming the offending argument and its value. No call
 *    aborts, exits or prints.
 *  - HFP4_ERR_INVALID_ARGUMENT means the caller broke the contract; HFP4_ERR_UNSUPPORTED means a
 *    well-formed request that this build or this device cannot serve (fall back to another path).
 *  - Sizes are int64_t element counts; strides are in storage units of the tensor's dtype (the
 *    numbers torch's .stride() reports): floats for FP32, bytes for FP8, UE8M0 and packed FP4
 *    (one byte holds two FP4 values), int32 words for packed UE8M0.
 *  - "host" pointers are CPU memory; "device" pointers are CUDA device memory.
 *  - Thread safety: every call is re-entrant; the last-error message is per thread.
 *
 * Formats are specified bit for bit in docs/FORMATS.md; the CPU reference is their executable form.
 */
#ifndef HFP4_H
#define HFP4_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define HFP4_API
#elif defined(__GNUC__)
#define HFP4_API __attribute__((visibility("default")))
#else
#define HFP4_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------- */
/* Version                                                                                      */
/* ------------------------------------------------------------------------------------------- */

#define HFP4_VERSION_MAJOR 0 /* same major => ABI compatible */
#define HFP4_VERSION_MINOR 1
#define HFP4_VERSION_PATCH 0
#define HFP4_VERSION_NUMBER (HFP4_VERSION_MAJOR * 10000 + HFP4_VERSION_MINOR * 100 + HFP4_VERSION_PATCH)

/* hfp4_version_number: HFP4_VERSION_NUMBER of the library actually loaded (may differ from the
 * header's when linked dynamically). hfp4_version_string: "MAJOR.MINOR.PATCH", static storage. */
HFP4_API unsigned hfp4_version_number(void);
HFP4_API const char *hfp4_version_string(void);

/* ------------------------------------------------------------------------------------------- */
/* Status                                                                                       */
/* ------------------------------------------------------------------------------------------- */

/* Values are explicit and are never renumbered; new codes are only appended. */
typedef enum hfp4_status {
    HFP4_OK = 0,
    HFP4_ERR_INVALID_ARGUMENT = 1, /* caller bug: null pointer, bad size, stride, id...         */
    HFP4_ERR_UNSUPPORTED = 2,      /* valid request with no kernel here (device, dtype combo)   */
    HFP4_ERR_CUDA = 3,             /* a CUDA runtime/driver call failed (name in last error)    */
    HFP4_ERR_OUT_OF_MEMORY = 4,    /* host or device allocation failed                          */
    HFP4_ERR_NO_DEVICE = 5,        /* no CUDA driver or no GPU: the normal case on a CPU box    */
    HFP4_ERR_INTERNAL = 6,         /* a bug in hfp4; please report with hfp4_last_error()       */
    HFP4_ERR_IO = 7                /* a file could not be opened, read or written (checkpoints) */
} hfp4_status;

/* hfp4_status_name: "HFP4_ERR_UNSUPPORTED" etc.; hfp4_status_string: a short English sentence.
 * Both return static storage; an unknown value gives "HFP4_STATUS_UNKNOWN" / "unknown status". */
HFP4_API const char *hfp4_status_name(hfp4_status status);
HFP4_API const char *hfp4_status_string(hfp4_status status);

/* hfp4_last_error: detail of the most recent failing hfp4 call on this thread, e.g.
 * "hfp4_ref_gemm: b.cols (K) = 100 must be a multiple of 32 for FP4 weights".
 * Empty string if no call on this thread has failed. Valid until the next failing call on this
 * thread. hfp4_clear_error resets it to "". */
HFP4_API const char *hfp4_last_error(void);
HFP4_API void hfp4_clear_error(void);

/* ------------------------------------------------------------------------------------------- */
/* Data types                                                                                   */
/* ------------------------------------------------------------------------------------------- */

typedef enum hfp4_dtype {
    HFP4_DTYPE_NONE = 0,
    HFP4_DTYPE_FP32 = 1,          /* IEEE binary32                                               */
    HFP4_DTYPE_BF16 = 2,          /* bfloat16, stored as uint16_t                                */
    HFP4_DTYPE_FP8_E4M3 = 3,      /* OCP e4m3fn: bias 7, max 448, 0x7F/0xFF NaN, no Inf         */
    HFP4_DTYPE_FP4_E2M1 = 4,      /* OCP e2m1, two per byte, even index in the low nibble       */
    HFP4_DTYPE_UE8M0 = 5,         /* one byte e per scale, value 2^(e-127); 255 is NaN          */
    HFP4_DTYPE_UE8M0_PACKED = 6,  /* int32 words; byte j of word p is the scale of K-group 4p+j */
    HFP4_DTYPE_INT32 = 7,         /* plain int32 (grouped layouts)                              */
    HFP4_DTYPE_FP4_E2M1_SM90 = 8  /* FP4 weights repacked by hfp4_repack_sm90 (scales inside)   */
} hfp4_dtype;

/* Bytes of one storage unit of `dtype` (FP4: 1 byte holds two values; 0 for NONE/unknown). */
HFP4_API size_t hfp4_dtype_storage_bytes(hfp4_dtype dtype);
/* "fp32", "bf16", "fp8_e4m3", "fp4_e2m1", "ue8m0", "ue8m0_packed", "int32", "fp4_e2m1_sm90". */
HFP4_API const char *hfp4_dtype_name(hfp4_dtype dtype);

/* ------------------------------------------------------------------------------------------- */
/* Exact scalar codecs (host). Specified in docs/FORMATS.md.                                    */
/* ------------------------------------------------------------------------------------------- */

/* FP4 e2m1: `code` uses its low 4 bits (s e1 e0 m); magnitudes {0,.5,1,1.5,2,3,4,6}; 0x8 (-0)
 * decodes to +0. Encode follows DeepGEMM's quantizer: round to nearest with ties toward the
 * smaller magnitude (0.25->0, 0.75->0.5, 1.75->1.5, 2.5->2, 3.5->3, 5->4), |x|>5 -> 6 (saturating),
 * NaN -> 0, never returns 0x8 (-0). */
HFP4_API float hfp4_fp4_decode(uint8_t code);
HFP4_API uint8_t hfp4_fp4_encode(float x);

/* FP8 e4m3fn: decode is exact (0x7F and 0xFF give NaN). Encode rounds to nearest even and
 * saturates finite values beyond +-448 to +-448 (DeepGEMM scales never overflow, so saturation
 * only matters for callers' own data); NaN -> 0x7F; +-Inf -> +-448; -0 -> 0x80. */
HFP4_API float hfp4_fp8_decode(uint8_t byte);
HFP4_API uint8_t hfp4_fp8_encode(float x);

/* UE8M0: decode(e) = 2^(e-127) for e in 0..254 (e = 0 is 2^-127, a subnormal float), NaN for 255.
 * hfp4_ceil_to_ue8m0(x): DeepGEMM's ceil_to_ue8m0, 2^ceil(log2|x|) clamped to [2^-126, 2^127]
 * (exponent byte clamped to 1..254) for finite x; NaN (the UE8M0 NaN, byte 255) for NaN or +-Inf;
 * returns the value as a float. hfp4_ue8m0_from_float(x, &e):
 * exact conversion of a power-of-two float to its byte; returns 0 on success, -1 (e untouched) if
 * x is not a positive power of two in [2^-127, 2^127] or e is NULL. */
HFP4_API float hfp4_ue8m0_decode(uint8_t e);
HFP4_API float hfp4_ceil_to_ue8m0(float x);
HFP4_API int hfp4_ue8m0_from_float(float x, uint8_t *e);

/* BF16: encode rounds to nearest even (NaN stays a quiet NaN); decode is exact. */
HFP4_API float hfp4_bf16_decode(uint16_t bits);
HFP4_API uint16_t hfp4_bf16_encode(float x);

/* ------------------------------------------------------------------------------------------- */
/* Tensor descriptions shared by the reference, the quantizers and the GPU calls               */
/* ------------------------------------------------------------------------------------------- */

/* Scale factors of one operand. One scale covers gran_mn rows x gran_k K-elements.
 * Element (row r, K-group j) of group g lives at
 *     data + g*stride_group + (r/gran_mn)*stride_mn + j*stride_k            (FP32, UE8M0)
 *     byte (j%4) of word  g*stride_group + (r/gran_mn)*stride_mn + (j/4)*stride_k (UE8M0_PACKED)
 * in storage units (floats, bytes, int32 words). K-major is stride_k = 1; DeepGEMM's MN-major
 * TMA-aligned layout is stride_mn = 1, stride_k = align(rows, 4). */
typedef struct hfp4_scales {
    const void *data;     /* NULL only with dtype HFP4_DTYPE_NONE                          */
    hfp4_dtype dtype;     /* FP32, UE8M0, UE8M0_PACKED, or NONE (BF16 operands)            */
    int32_t gran_mn;      /* rows per scale: 1 (per row) or 128 (128x128 blocks)           */
    int32_t gran_k;       /* K-elements per scale: 32 or 128                               */
    int64_t stride_mn;    /* storage units between consecutive scale rows                  */
    int64_t stride_k;     /* storage units between consecutive K-groups (packed: words)    */
    int64_t stride_group; /* storage units between groups (grouped B, masked A); 0 if none */
} hfp4_scales;

/* A matrix operand, row-major with K innermost: rows x cols logical elements (cols = K).
 * Row r of group g starts at data + g*stride_group + r*ld (storage units). For packed FP4 both
 * ld and stride_group count bytes, and cols must be even. */
typedef struct hfp4_matrix {
    const void *data;
    hfp4_dtype dtype;     /* FP8_E4M3, BF16, FP4_E2M1 or FP4_E2M1_SM90 (repacked weights) */
    int64_t rows;         /* M or N (per group)                                            */
    int64_t cols;         /* K, in logical elements                                        */
    int64_t ld;           /* storage units between rows (>= cols for FP8/BF16, >= cols/2 FP4) */
    int64_t stride_group; /* storage units between groups; 0 when the operand has one group */
    hfp4_scales scales;
} hfp4_matrix;

/* The output D (and optional accumulate input C, same dtype and layout as D; c may equal d). */
typedef struct hfp4_output {
    void *data;
    hfp4_dtype dtype;     /* BF16 or FP32                                                  */
    int64_t ld;           /* elements between rows (>= N)                                  */
    int64_t stride_group; /* elements between groups (masked layout); 0 otherwise          */
    const void *c;        /* NULL, or C with the same ld/stride_group: D = C + A*B^T        */
} hfp4_output;

/* How the rows of A and D are grouped onto the G weight matrices of B ([G, N, K]). */
typedef enum hfp4_grouping {
    HFP4_GROUPING_NONE = 0,            /* dense: D[M,N] = A[M,K] B[N,K]^T, G = 1                */
    HFP4_GROUPING_CONTIGUOUS = 1,      /* A rows sorted by expert; layout[r] = expert of row r,
                                          -1 for padding rows; a row that starts a run of a real
                                          id sits at a multiple of m_alignment. Padding rows of D
                                          are exactly +0 (C is not added to them), unless
                                          d_padding = HFP4_D_PADDING_ANY. Padding rows of A and
                                          their scales may hold anything, NaN included: no other
                                          row's result depends on them (no fill needed).          */
    HFP4_GROUPING_CONTIGUOUS_PSUM = 2, /* layout[g] = end row of group g (cumulative, exclusive);
                                          group g covers [align(layout[g-1], m_alignment),
                                          layout[g]), and align(layout[g-1]) <= layout[g] <= m.
                                          Scales of rows outside every group are not read (TMA
                                          may read their FP8 bytes, inside A). D rows in
                                          [layout[g], align(layout[g])) (and < m) are written as
                                          +0 without C (unless d_padding = HFP4_D_PADDING_ANY);
                                          rows after all groups are untouched.                   */
    HFP4_GROUPING_MASKED = 3           /* A [G, M, K], D [G, M, N]; layout[g] = masked_m[g]: only
                                          rows < masked_m[g] are computed and written; A's rows
                                          and scales past it may hold anything (NaN included).    */
} hfp4_grouping;

/* A complete GEMM request. Zero-initialize, then fill; unused fields stay 0. */
typedef struct hfp4_gemm_problem {
    hfp4_grouping grouping;
    int64_t m;              /* rows of A (masked: max rows per group)                           */
    int64_t n;              /* rows of B per group = columns of D                               */
    int64_t k;              /* reduction length                                                 */
    int32_t num_groups;     /* G: 1 for dense                                                   */
    const int32_t *layout;  /* grouping data described above (host for hfp4_ref_*, device for
                               GPU calls); NULL for dense                                       */
    int32_t m_alignment;    /* contiguous forms: segment alignment; 0 means the default (128)   */
    int32_t d_padding;      /* contiguous forms: what D's padding rows get (hfp4_d_padding; it
                               fills what was alignment padding before expected_m, so the
                               struct's size and the other fields' offsets are unchanged)       */
    int64_t expected_m;     /* masked/psum: rows per group expected (a hint; 0 = unknown)       */
    hfp4_matrix a;          /* activations: FP8 e4m3 with per-token scales (gran_mn 1, gran_k 32
                               or 128), or BF16 without scales                                  */
    hfp4_matrix b;          /* weights [G, N, K]: FP4 with (1,32) scales, FP8 with (128,128) or
                               (1,128) scales, or FP4_E2M1_SM90 for the GPU kernels             */
    hfp4_output d;
} hfp4_gemm_problem;

/* hfp4_gemm_problem.d_padding. ZERO (the default): D's padding rows in the contiguous forms are
 * written as +0, as DeepGEMM's SM90 kernels do. ANY: their contents are unspecified afterwards
 * (left as they were, or +0): for callers that drop those rows, e.g. after un-padding the experts'
 * output, which saves the GPU kernels the stores (at decode, ~128 rows an expert: most of D).
 * DeepGEMM's ensure_zero_padding=False. Only the contiguous forms take ANY. */
typedef enum hfp4_d_padding {
    HFP4_D_PADDING_ZERO = 0,
    HFP4_D_PADDING_ANY = 1
} hfp4_d_padding;

/* The default segment alignment of the contiguous layouts (DeepGEMM's mk alignment, 128). */
#define HFP4_DEFAULT_M_ALIGNMENT 128

/* ------------------------------------------------------------------------------------------- */
/* CPU quantizers (host memory), DeepGEMM's semantics (deep_gemm/utils/math.py)                 */
/* ------------------------------------------------------------------------------------------- */

/* Per-token FP8 cast of x [m, k] (FP32 or BF16 per x_dtype, row stride ldx elements):
 * groups of gran_k (32 or 128) along K, zero-padded; sf = max(amax, 1e-4) / 448, rounded up to a
 * power of two if use_ue8m0; q = fp8(x * (1/sf)). Writes q [m, k] (row stride ldq bytes) and the
 * scales as described by `sf` (its data, dtype FP32/UE8M0/UE8M0_PACKED, gran_mn 1, gran_k and
 * strides; UE8M0 and UE8M0_PACKED require use_ue8m0; packed words pad missing groups with byte
 * 127 (1.0) like DeepGEMM). */
HFP4_API hfp4_status hfp4_quantize_fp8_per_token(const void *x, hfp4_dtype x_dtype, int64_t m, int64_t k,
                                                 int64_t ldx, int use_ue8m0, uint8_t *q, int64_t ldq,
                                                 const hfp4_scales *sf);

/* Per-block 128x128 FP8 cast of x [m, k] (weights): sf[m/128, k/128] = max(amax,1e-4)/448 per
 * zero-padded block (power of two if use_ue8m0). sf describes the output (FP32 or UE8M0, gran 128/128). */
HFP4_API hfp4_status hfp4_quantize_fp8_per_block(const void *x, hfp4_dtype x_dtype, int64_t m, int64_t k,
                                                 int64_t ldx, int use_ue8m0, uint8_t *q, int64_t ldq,
                                                 const hfp4_scales *sf);

/* Per-token FP4 cast of x [m, k] (k even; gran_k = 32): sf = max(amax,1e-4)/6 (power of two if
 * use_ue8m0), codes by hfp4_fp4_encode(x * (1/sf)), packed two per byte (even index low nibble)
 * into q [m, k/2] (row stride ldq bytes). Scales as described by sf (FP32, UE8M0, UE8M0_PACKED). */
HFP4_API hfp4_status hfp4_quantize_fp4_per_token(const void *x, hfp4_dtype x_dtype, int64_t m, int64_t k,
                                                 int64_t ldx, int use_ue8m0, uint8_t *q, int64_t ldq,
                                                 const hfp4_scales *sf);

/* ------------------------------------------------------------------------------------------- */
/* CPU reference GEMMs (host memory): the ground truth                                          */
/* ------------------------------------------------------------------------------------------- */

/* hfp4_ref_gemm: computes the problem as specified above with every operand decoded exactly
 * (FP4/FP8/BF16 codes times their scales, in double), each product rounded at most once in double
 * and accumulated in double, the result rounded once to D's dtype (BF16: round to nearest even).
 * Sizes: 1 <= m, n, k <= 2^40 (a zero-sized problem is INVALID_ARGUMENT: callers skip empty work). All pointers, including problem->layout, are
 * host memory. Supported operand pairs:
 *   A: FP8 e4m3 with (1, 32) or (1, 128) scales as FP32, UE8M0 or UE8M0_PACKED; or BF16 (no scales).
 *   B: FP4 e2m1 with (1, 32) scales (FP32, UE8M0, UE8M0_PACKED); FP8 with (128,128) or (1,128)
 *      scales; FP4_E2M1_SM90 (repacked, for checking the repack).
 * num_threads: worker threads to use; 0 means one per online CPU.
 * Errors: INVALID_ARGUMENT for any contract violation (null pointers, sizes <= 0, K not a multiple
 * of 32 with FP4 B, strides too small, scale shapes, pointers not aligned to their storage unit
 * (D and C: 2 bytes BF16, 4 FP32; BF16 A: 2; FP32 and UE8M0_PACKED scales: 4; a grouping's
 * layout: 4), D overlapping an input (A's or B's data or scales, the layout, or a C other than D
 * itself), group count mismatches, contiguous ids outside
 * [-1, G) or a segment not starting at a multiple of m_alignment, psum not non-decreasing or
 * beyond m, masked_m outside [0, m]); UNSUPPORTED for well-formed combinations the reference does
 * not implement. On error D is untouched. */
HFP4_API hfp4_status hfp4_ref_gemm(const hfp4_gemm_problem *problem, int num_threads);

/* hfp4_check_problem: the argument validation hfp4_ref_gemm and hfp4_gemm share, alone.
 * device_pointers: 0 = host pointers (problem->layout is read and checked), 1 = device pointers
 * (layout is not read; messages then name hfp4_gemm). Returns HFP4_OK or INVALID_ARGUMENT. */
HFP4_API hfp4_status hfp4_check_problem(const hfp4_gemm_problem *problem, int device_pointers);

/* ------------------------------------------------------------------------------------------- */
/* SM90 weight repack: FP4 weights in the layout hfp4's Hopper kernels load fastest             */
/* ------------------------------------------------------------------------------------------- */

/* Layout version of HFP4_DTYPE_FP4_E2M1_SM90 buffers (docs/FORMATS.md, "SM90 repacked weights").
 * A buffer's geometry is fully determined by (num_groups, n, k, scale dtype). */
#define HFP4_SM90_WEIGHTS_VERSION 3 /* 3: chunk-mode bit 1 (one base per row for all of K) */

/* hfp4_sm90_weights_size: bytes of the repacked buffer for G groups of [n, k] FP4 weights whose
 * scales are stored as `scale_dtype` (HFP4_DTYPE_UE8M0: one byte per 32-group, exact for
 * power-of-two scales; HFP4_DTYPE_FP32: any positive finite scale). */
HFP4_API hfp4_status hfp4_sm90_weights_size(int32_t num_groups, int64_t n, int64_t k, hfp4_dtype scale_dtype,
                                            size_t *bytes);

/* hfp4_sm90_weights_scale_dtype: the scale storage to ask hfp4_ref_repack_sm90 for, for `w` (host):
 * UE8M0 when every scale is a power of two (or already UE8M0), else FP32. */
HFP4_API hfp4_status hfp4_sm90_weights_scale_dtype(const hfp4_matrix *w, int32_t num_groups, hfp4_dtype *scale_dtype);

/* hfp4_ref_repack_sm90 (host): repacks `w` (FP4 e2m1 [G, n, k] with (1,32) scales, host memory)
 * into dst (host, dst_bytes >= hfp4_sm90_weights_size(...)) in the layout of docs/FORMATS.md ("SM90
 * repacked weights"), storing scales as scale_dtype; exact for every accepted input. Chunks of 128 K
 * whose UE8M0 scales lie within 11 binades of their row's largest are stored "folded" (the kernels
 * then chain 4 wgmmas per chunk); others keep per-32 scales (slower, still exact).
 * INVALID_ARGUMENT if scale_dtype is UE8M0 but a scale is not a positive power of two (names the
 * first), if an FP32 scale is NaN or Inf, if a UE8M0 scale is the NaN byte 255, or if dst overlaps
 * the source weights or scales (no in-place repack). On success *out
 * describes dst as a B operand for hfp4_gemm (dtype FP4_E2M1_SM90, rows n, cols k, scales.dtype =
 * scale_dtype); pass it unchanged: hfp4_gemm checks that it matches the problem's G, n and k. */
HFP4_API hfp4_status hfp4_ref_repack_sm90(const hfp4_matrix *w, int32_t num_groups, hfp4_dtype scale_dtype,
                                          void *dst, size_t dst_bytes, hfp4_matrix *out);

/* ------------------------------------------------------------------------------------------- */
/* GPU: devices, contexts and the SM90 GEMMs                                                    */
/* ------------------------------------------------------------------------------------------- */

typedef struct CUstream_st *hfp4_stream; /* identical to cudaStream_t; NULL = legacy stream */

typedef struct hfp4_device_info {
    int32_t device;          /* CUDA ordinal                                               */
    int32_t cc_major, cc_minor;
    int32_t num_sms;
    int32_t has_sm90_kernels; /* 1 when this device can run hfp4's SM90 kernels (cc 9.0)    */
    int64_t global_mem_bytes;
    char name[96];
} hfp4_device_info;

/* hfp4_device_query: fills *info for CUDA device `device`. NO_DEVICE when there is no driver or
 * no such GPU (the normal answer on a CPU-only machine), INVALID_ARGUMENT for info == NULL. */
HFP4_API hfp4_status hfp4_device_query(int device, hfp4_device_info *info);

/* hfp4_gemm: the GPU form of hfp4_ref_gemm on device memory. A: FP8 e4m3 with (1,32) or (1,128)
 * scales (FP32, UE8M0 or UE8M0_PACKED, any strides), a.data 16-byte aligned and a.ld (and, masked,
 * a.stride_group) a multiple of 16 bytes, as the TMA loads need; B: FP4_E2M1_SM90 produced by a
 * repack, or FP8 e4m3 with (128,128) scales (dense, 1x128 activation scales, k a multiple of 128;
 * or in the contiguous grouping with segments aligned to a multiple of 128, or masked;
 * HFP4_SM90_FP8_WEIGHTS=0 switches this path off); D: BF16 or FP32, optional C. The result matches
 * hfp4_ref_gemm within the bound of
 * docs/TESTING.md (FP8 tensor cores accumulate each 128-K chunk with ~13 bits, as DeepGEMM's do). Stream-ordered: allocates nothing, never synchronizes and never
 * reads device memory from the host, so it may be captured in a CUDA graph. (Opt-in exception,
 * environment HFP4_SM90_BF16=1: prefill problems with 1x32 UE8M0 activation scales outside a
 * capture run through BF16 tensor cores on a BF16 copy of A that the call allocates and frees on
 * the stream, cudaMallocAsync / cudaFreeAsync, up to 2 GiB; docs/SM90_KERNEL.md.) problem->layout is a
 * device pointer. Errors: INVALID_ARGUMENT (as hfp4_ref_gemm, minus checks that would need to read
 * device memory), UNSUPPORTED (no SM90 device, operand combination without a kernel: the message
 * names why), NO_DEVICE, CUDA.
 * Devices: the call runs on the current CUDA device (cudaGetDevice); the problem's pointers and the
 * stream must belong to it (call cudaSetDevice first, as for any CUDA library). This is not checked
 * yet: memory of another device is a device fault, or with peer access a slow read unordered with
 * that device's streams; another device's stream fails the launch (HFP4_ERR_CUDA).
 * Concurrency: decode-sized launches, and FP8 x FP4 prefill launches of the contiguous and psum
 * layouts, hand their work items out through a small counter in the library's module memory, one
 * per stream, and one of its own for each launch captured into a CUDA graph, so launches on
 * different streams, and the branches of a graph, may run at the same time.
 * Not covered: copies of one captured graph that run at the same time (two instances of it, a
 * cudaGraphClone, the graph added twice as child graphs) would share their counters and compute
 * wrong results; run such copies one after the other, or set HFP4_SM90_DYNAMIC=0. */
HFP4_API hfp4_status hfp4_gemm(const hfp4_gemm_problem *problem, hfp4_stream stream);

/* hfp4_gemm_flags: hfp4_gemm with options; flags 0 is hfp4_gemm. Other bits: INVALID_ARGUMENT.
 * HFP4_GEMM_OVERLAP_PREVIOUS: the call's kernel may read the weights (problem->b and its scales) and
 * the grouping data (problem->layout), and start loading its first weights, while the kernel
 * enqueued just before it on the stream is still running (programmatic dependent launch): a decode
 * GEMM's start-up (~5 us on an H200) and first weights then overlap that kernel's tail. A, its
 * scales, C and D are touched only after that kernel has completed, as always.
 * Set it only when neither that kernel nor anything that may still run beside it writes b or
 * layout: e.g. a MoE layer's second GEMM right after its first on the same routing, or any GEMM
 * whose b and layout were complete before an hfp4 GEMM that runs just before it (hfp4's GEMM
 * kernels let the next kernel start only once everything enqueued before them has completed).
 * Never directly after a kernel that writes them, whether or not it lets its dependents start
 * early (hfp4_repack_sm90 included: a kernel launched this way may start as soon as the blocks of
 * the one before have exited, before their writes are visible): the call would read stale data.
 * Only decode launches
 * start early (the 8-token tile at two CTAs an SM, UE8M0 weight scales: what the plan picks for
 * DeepSeek-V4's experts up to a few hundred tokens); the rest ignore the flag, as does
 * HFP4_SM90_PDL=0. Flag every GEMM of such a chain: on an H200 a decode layer whose w2 alone took
 * the flag ran 13 % slower than with neither; with both, 7 % faster at T = 1 (bench/RESULTS.md v33). */
#define HFP4_GEMM_OVERLAP_PREVIOUS 1u
HFP4_API hfp4_status hfp4_gemm_flags(const hfp4_gemm_problem *problem, uint32_t flags, hfp4_stream stream);

/* hfp4_gemm_supported: what hfp4_gemm would answer for `problem` without launching anything
 * (pointers are not dereferenced). Returns HFP4_OK, or the status hfp4_gemm would return
 * (INVALID_ARGUMENT, UNSUPPORTED, NO_DEVICE) with the same message. */
HFP4_API hfp4_status hfp4_gemm_supported(const hfp4_gemm_problem *problem);

/* hfp4_repack_sm90: GPU form of hfp4_ref_repack_sm90 (device pointers, stream-ordered, allocates
 * nothing, byte-identical output). Source scales given as FP32 can only be stored as FP32 here
 * (UNSUPPORTED otherwise: proving they are powers of two would need a host read); UE8M0 or packed
 * UE8M0 sources can be stored either way. dst must be 16-byte aligned and apart from the source
 * (INVALID_ARGUMENT otherwise). */
HFP4_API hfp4_status hfp4_repack_sm90(const hfp4_matrix *w, int32_t num_groups, hfp4_dtype scale_dtype,
                                      void *dst, size_t dst_bytes, hfp4_matrix *out, hfp4_stream stream);

/* FP4 weights as FP8 under 128 x 128 block scales, exactly (docs/FP8_ROUTE.md): the library's
 * FP8 x FP8 GEMM then takes them (hfp4_gemm with b.dtype FP8_E4M3). w: [n, k] FP4_E2M1 (one group,
 * k a multiple of 128) with (1, 32) scales that are powers of two (UE8M0, UE8M0_PACKED, or FP32
 * holding 2^e). Writes q [n, k] e4m3 (row stride ldq bytes) and sf (FP32 or UE8M0, gran_mn 128,
 * gran_k 128, its strides as given): block (i, j)'s scale is 2^(e_max - 6), e_max the largest
 * exponent among the block's (row, 32-K) scales, and a value c 2^e (c an e2m1 value) becomes the
 * e4m3 value c 2^(e - e_max + 6): exact while e >= e_max - 14 (2^-9, e4m3's smallest step, is
 * 0.5 2^-8). A block whose scales span more binades returns HFP4_ERR_UNSUPPORTED naming it (keep
 * the FP4 GEMM, which is exact for any scales), as does an FP32 scale that is not a power of two
 * or a block scale outside UE8M0's range; q and sf are then unspecified. Host memory. */
HFP4_API hfp4_status hfp4_fp4_weights_to_fp8(const hfp4_matrix *w, uint8_t *q, int64_t ldq, const hfp4_scales *sf);

/* The same on the GPU (device pointers; stream-ordered on `stream`, no synchronization): the
 * blocks the host form refuses are written as e4m3 NaN (0x7F, scale 1), so a GEMM on them gives
 * NaN rather than a rounded result, and counted into *inexact_blocks (a device int32 the call
 * sets): read it before trusting q. Rows of w and q 16-byte aligned (ld and data), else
 * HFP4_ERR_UNSUPPORTED. */
HFP4_API hfp4_status hfp4_fp4_weights_to_fp8_gpu(const hfp4_matrix *w, uint8_t *q, int64_t ldq, const hfp4_scales *sf,
                                                 int32_t *inexact_blocks, hfp4_stream stream);

/* ------------------------------------------------------------------------------------------- */
/* MoE glue: routing, quantization into the layout, and the combine around the grouped GEMMs    */
/* ------------------------------------------------------------------------------------------- */

/* An experts layer on the contiguous layout runs: route the tokens' top-k expert ids onto the
 * layout, quantize the routed rows into it, the first grouped GEMM, the activation (the caller's,
 * or the clamped SwiGLU below, fused with the next step), quantize its rows, the second grouped
 * GEMM, and combine each token's rows. Each of these steps takes one pass. The plain forms work on host memory and are the reference of the _gpu forms
 * (device memory, stream-ordered, no allocation, no synchronization: capturable in a CUDA graph;
 * NO_DEVICE without a GPU or in a build without CUDA, UNSUPPORTED on a GPU other than SM90), which
 * give the same bits except NaN payloads (a NaN stays a NaN; the GPU's is the canonical one).
 * Routed row i is ids[i] of tokens x top_k ids (token i / top_k). */

/* Rows of a layout that holds `routed_rows` ids over num_experts experts, each expert's segment
 * starting at a multiple of alignment, without reading the ids: routed_rows + min(routed_rows,
 * num_experts) x (alignment - 1). -1 for arguments outside 0 <= routed_rows <= 2^40,
 * num_experts >= 1, alignment >= 1. */
HFP4_API int64_t hfp4_moe_layout_rows(int64_t routed_rows, int32_t num_experts, int32_t alignment);

/* ids [routed_rows] (int32, or int64 when ids_int64) -> row_pos [routed_rows]: routed row i's row of
 * the layout, or -1 where ids[i] is outside [0, num_experts) (expert-parallel sentinels: not
 * computed, not combined); layout [layout_rows >= hfp4_moe_layout_rows(...)] (int32, the expert of
 * each row or -1: hfp4_gemm's CONTIGUOUS layout with m_alignment = alignment). Expert e's rows form
 * one segment starting at a multiple of alignment, experts in increasing order; the order of rows
 * inside a segment is unspecified (the GPU form's may differ between runs: no row's result depends
 * on it). num_experts <= 65536 (the GPU form: <= 4096); alignment a positive multiple of 8. */
HFP4_API hfp4_status hfp4_moe_route(const void *ids, int ids_int64, int64_t routed_rows, int32_t num_experts,
                                    int32_t alignment, int32_t *row_pos, int32_t *layout, int64_t layout_rows);
HFP4_API hfp4_status hfp4_moe_route_gpu(const void *ids, int ids_int64, int64_t routed_rows, int32_t num_experts,
                                        int32_t alignment, int32_t *row_pos, int32_t *layout, int64_t layout_rows,
                                        hfp4_stream stream);

/* Quantizes the routed rows into the layout as hfp4_quantize_fp8_per_token does with FP32 scales
 * (use_ue8m0 = 0; bit for bit): routed row i with row_pos[i] >= 0 is row i / row_div of x (BF16 or
 * FP32, [x_rows, k], ldx elements apart) and goes to row row_pos[i] of a (FP8 e4m3, lda bytes apart)
 * and of sf (FP32, K-major [layout_rows][ceil(k / gran_k)]). row_div: top_k for the tokens' hidden
 * states (each token feeds its top_k rows), 1 for rows already one per routed row. Nothing else of
 * a and sf is written. gran_k: 32 or 128. */
HFP4_API hfp4_status hfp4_moe_quantize_rows(const void *x, hfp4_dtype x_dtype, int64_t x_rows, int64_t k,
                                            int64_t ldx, int32_t row_div, const int32_t *row_pos,
                                            int64_t routed_rows, int32_t gran_k, uint8_t *a, int64_t lda, float *sf,
                                            int64_t layout_rows);
HFP4_API hfp4_status hfp4_moe_quantize_rows_gpu(const void *x, hfp4_dtype x_dtype, int64_t x_rows, int64_t k,
                                                int64_t ldx, int32_t row_div, const int32_t *row_pos,
                                                int64_t routed_rows, int32_t gran_k, uint8_t *a, int64_t lda,
                                                float *sf, int64_t layout_rows, hfp4_stream stream);

/* Where the first GEMM's rows hold gate and up (hfp4_moe_swiglu_quantize_rows) */
typedef enum hfp4_gate_up {
    HFP4_GATE_UP_STACKED = 0,     /* gate in columns [0, n), up in [n, 2n): transformers' chunk(2)      */
    HFP4_GATE_UP_INTERLEAVED = 1, /* gate in column 2c, up in 2c + 1: newer transformers' 0::2 / 1::2    */
} hfp4_gate_up;

/* The activation between the two GEMMs fused with the second one's quantization: for each routed
 * row i with p = row_pos[i] >= 0, row p of y (BF16, the first GEMM's D on the layout: 2n columns
 * of gate and up as gate_up says, ldy >= 2n elements apart) becomes
 *     h = silu(min(gate, limit)) x clamp(up, -limit, limit)
 * (the clamped SwiGLU of DeepSeek-V4 and of transformers' FP8Experts._apply_gate without
 * swiglu_alpha; each step rounded to BF16, as torch computes it on BF16 tensors; limit > 0, or
 * INFINITY for none), and h [n] is quantized into row p of a and sf exactly as
 * hfp4_moe_quantize_rows quantizes a BF16 row (FP32 scales per gran_k, 32 or 128). It replaces a
 * gather of the routed rows, the activation's elementwise steps and the quantization. Nothing else
 * of a and sf is written. */
HFP4_API hfp4_status hfp4_moe_swiglu_quantize_rows(const void *y, int64_t ldy, int64_t n, hfp4_gate_up gate_up,
                                                   float limit, const int32_t *row_pos, int64_t routed_rows, int32_t gran_k,
                                                   uint8_t *a, int64_t lda, float *sf, int64_t layout_rows);
HFP4_API hfp4_status hfp4_moe_swiglu_quantize_rows_gpu(const void *y, int64_t ldy, int64_t n,
                                                       hfp4_gate_up gate_up, float limit, const int32_t *row_pos, int64_t routed_rows, int32_t gran_k,
                                                       uint8_t *a, int64_t lda, float *sf, int64_t layout_rows,
                                                       hfp4_stream stream);

/* out[t] = sum over j < top_k with p = row_pos[t top_k + j] >= 0 of weights[t top_k + j] x y[p]:
 * FP32 fused multiply-adds in order of j from 0, rounded once to out's dtype. y BF16 [layout_rows, n]
 * (ldy elements apart); weights FP32 or BF16 [tokens x top_k]; out BF16 or FP32 [tokens, n] (ldo
 * elements apart); a token with no routed row gets zeros. out may not overlap y, row_pos or weights
 * (INVALID_ARGUMENT, both forms: a token's sum would read rows already overwritten). */
HFP4_API hfp4_status hfp4_moe_combine(const void *y, int64_t ldy, int64_t layout_rows, int64_t n,
                                      const int32_t *row_pos, const void *weights, hfp4_dtype weights_dtype,
                                      int64_t tokens, int32_t top_k, void *out, hfp4_dtype out_dtype, int64_t ldo);
HFP4_API hfp4_status hfp4_moe_combine_gpu(const void *y, int64_t ldy, int64_t layout_rows, int64_t n,
                                          const int32_t *row_pos, const void *weights, hfp4_dtype weights_dtype,
                                          int64_t tokens, int32_t top_k, void *out, hfp4_dtype out_dtype, int64_t ldo,
                                          hfp4_stream stream);

/* A whole experts layer in one call, for steps whose host time counts (an eager decode step: one
 * call where the steps above take seven): route, quantize the tokens' rows, the grouped GEMM over
 * w13 (gate|up, 2I rows an expert, K = H), the clamped SwiGLU fused with the second quantization,
 * the grouped GEMM over w2 (H rows an expert, K = I), combine; both GEMMs with D's padding rows left
 * alone and the rows-per-expert hint ceil(T top_k / min(T top_k, E)). Everything between x and out
 * lives in the caller's workspace (hfp4_moe_forward_workspace_size; no allocation inside). The
 * plain form runs each step's CPU form (hfp4_ref_gemm for the GEMMs, w13/w2 as hfp4_ref_gemm
 * takes them) and is the reference of the _gpu form (device memory, stream-ordered, capturable;
 * the GEMMs as hfp4_gemm: w13/w2 repacked by hfp4_repack_sm90, the results within hfp4_gemm's
 * bound of the reference). Errors name the field (hfp4_moe_forward: ...) or the step. */
typedef struct hfp4_moe_forward_problem {
    int64_t tokens;           /* T >= 0                                                           */
    int32_t top_k;            /* k >= 1: routed rows a token                                      */
    int32_t num_experts;      /* E >= 1; ids outside [0, E) are not routed (<= 4096 on the GPU)   */
    const void *x;            /* [T, H] BF16 or FP32 (x_dtype), rows ldx elements apart           */
    hfp4_dtype x_dtype;
    int64_t ldx;
    const void *ids;          /* [T x k] expert ids, int32 (int64 with ids_int64)                  */
    int ids_int64;
    const void *weights;      /* [T x k] routing weights, FP32 or BF16 (weights_dtype)            */
    hfp4_dtype weights_dtype;
    hfp4_matrix w13;          /* E groups of [2I, H] FP4 weights with (1, 32) scales              */
    hfp4_matrix w2;           /* E groups of [H, I]                                               */
    hfp4_gate_up gate_up;     /* where w13's output holds gate and up                             */
    float swiglu_limit;       /* > 0, or INFINITY for no clamp                                    */
    int32_t gran_k;           /* the activations' scale granularity: 32 or 128                    */
    int32_t m_alignment;      /* segment alignment, a multiple of 8 (0: 128)                      */
    void *out;                /* [T, H] BF16 or FP32 (out_dtype), rows ldo elements apart         */
    hfp4_dtype out_dtype;
    int64_t ldo;
    void *workspace;          /* 256-byte aligned, workspace_bytes >= the size below              */
    size_t workspace_bytes;
} hfp4_moe_forward_problem;

/* The workspace hfp4_moe_forward(_gpu) needs for this problem's T, k, E, H, I, gran_k and
 * m_alignment (the pointers are not read). */
HFP4_API hfp4_status hfp4_moe_forward_workspace_size(const hfp4_moe_forward_problem *problem, size_t *bytes);
HFP4_API hfp4_status hfp4_moe_forward(const hfp4_moe_forward_problem *problem);
HFP4_API hfp4_status hfp4_moe_forward_gpu(const hfp4_moe_forward_problem *problem, hfp4_stream stream);

#ifdef __cplusplus
}
#endif

#include "hfp4_sf_layout.h"

#endif /* HFP4_H */
