/*
 * fp4_experts.h - FP4 expert weights in safetensors checkpoints: finding a weight's scale tensor,
 * checking the pair's dtypes and shapes, loading groups of it as hfp4_matrix descriptors (host), and
 * the fold statistics of the SM90 repack (internal; see docs/CHECKPOINTS.md).
 *
 * Accepted forms (shared/docs/deepseek-v4.md §1.4, §2.2):
 *   weight                                         scale
 *   NAME.weight  I8/U8 [N, K/2]  or F4 [N, K]      NAME.scale     F8_E8M0 or F32 [N, K/32]   (DeepSeek native)
 *   NAME         I8/U8 [E, N, K/2] or F4 [E, N, K] NAME_scale_inv F8_E8M0 or F32 [E, N, K/32] (transformers stacked:
 *                                                  gate_up_proj [E, 2I, H/2], down_proj [E, H, I/2])
 * I8/U8 hold two FP4 e2m1 codes per byte with the even K index in the low nibble (DeepGEMM); F4 is
 * torch.float4_e2m1fn_x2 stored by safetensors with the shape in 4-bit elements, the same bytes.
 * A 3-D tensor is E groups (experts) of [N, K]. The naming decides the scale; the first dimension
 * decides grouping, so a 3-D tensor under either naming is accepted. Row order inside N (gate|up
 * stacked or interleaved) does not matter for repacking: rows are repacked as they are.
 */
#ifndef HFP4_CHECKPOINT_FP4_EXPERTS_H
#define HFP4_CHECKPOINT_FP4_EXPERTS_H

#include "safetensors.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hfp4__fp4_expert {
    const hfp4__st_tensor *weight, *scale;
    int32_t groups;         /* 1 for a 2-D weight, E for a stacked 3-D one          */
    int64_t n, k;           /* rows and logical K of each group                     */
    hfp4_dtype scale_dtype; /* source scales: HFP4_DTYPE_UE8M0 (F8_E8M0) or FP32     */
} hfp4__fp4_expert;

/* The scale tensor name for `weight_name` (rules above) into buf; -1 if it does not fit. */
int hfp4__fp4_scale_name(const char *weight_name, char *buf, size_t cap);

/* 1 if `t` looks like an FP4 expert weight: dtype I8, U8 or F4, 2 or 3 dimensions, and a tensor
 * with its scale name exists. Such a tensor is then either a valid pair or an error worth showing. */
int hfp4__fp4_expert_candidate(const hfp4__st_file *file, const hfp4__st_tensor *t);

/* Finds and checks the pair for `weight_name`. INVALID_ARGUMENT naming the file, tensor and field:
 * missing weight or scale tensor, wrong dtype, rank, shape, K not a multiple of 32, empty tensor,
 * more than INT32_MAX groups. */
hfp4_status hfp4__fp4_expert_pair(const hfp4__st_file *file, const char *weight_name, hfp4__fp4_expert *out);

/* Bytes of `count` groups of weights (count * N * K/2) and of their scales (count * N * K/32 * 1 or 4). */
uint64_t hfp4__fp4_expert_weight_bytes(const hfp4__fp4_expert *e, int32_t count);
uint64_t hfp4__fp4_expert_scale_bytes(const hfp4__fp4_expert *e, int32_t count);

/* Reads groups [first, first + count) into weights / scales (sizes above, host memory) and fills
 * *out: FP4_E2M1, rows N, cols K, ld K/2, stride_group N*K/2, scales UE8M0 or FP32 (1, 32),
 * K-major. Raw bytes: scale values are checked by the statistics and the repack, not here. */
hfp4_status hfp4__fp4_expert_load(hfp4__st_file *file, const hfp4__fp4_expert *e, int32_t first, int32_t count,
                                  void *weights, void *scales, hfp4_matrix *out);

/* Fold statistics, by the SM90 repack's rule (docs/FORMATS.md, "SM90 repacked weights"): a 128-K
 * chunk of a 64-row tile folds (fast path) when in each of its rows the 32-groups that hold a
 * non-zero code have UE8M0 exponents within HFP4_SM90_FOLD_SPAN of the row's largest; groups whose
 * 32 codes are all +-0 do not count. A tile is one-base when that holds for each of its rows over
 * all of K (every chunk then folds, and the kernels take their look-ahead path). Tiles are counted
 * only where they hold a real row (the repack's all-padding tiles are left out). Scales stored as FP32 (any FP32 scale that is not a
 * power of two puts the whole tensor there) never fold. */
typedef struct hfp4__fold_stats {
    int64_t matrices;        /* groups (experts) seen                                        */
    int64_t chunk_tiles;     /* (matrix, 64-row tile, 128-K chunk) triples                   */
    int64_t folded_if_ue8m0; /* of those, the ones whose exponents fold                      */
    int64_t tiles;           /* (matrix, 64-row tile) pairs, counting tiles with a real row    */
    int64_t one_base_if_ue8m0; /* of those, one-base tiles: every row's non-zero groups within
                                HFP4_SM90_FOLD_SPAN over all of K (the kernels' look-ahead path) */
    int64_t k_groups;        /* 32-element groups (rows x K/32)                               */
    int64_t zero_groups;     /* of those, all 32 codes +-0                                     */
    int64_t non_pow2_scales; /* FP32 scales that are not a power of two                        */
    int exp_min, exp_max;    /* UE8M0 exponent byte range over non-zero groups (FP32 scales: the
                                float's exponent field); exp_min > exp_max when there is none */
} hfp4__fold_stats;

void hfp4__fold_stats_init(hfp4__fold_stats *s);
void hfp4__fold_stats_merge(hfp4__fold_stats *into, const hfp4__fold_stats *from);
/* Chunk-tiles that fold as the repack will store them: 0 when any scale forces FP32 storage. */
int64_t hfp4__fold_stats_folded(const hfp4__fold_stats *s);
/* Tiles the repack will mark one-base (chunk-mode bit 1): 0 when any scale forces FP32 storage. */
int64_t hfp4__fold_stats_one_base(const hfp4__fold_stats *s);

/* Adds the statistics of `w` (host FP4_E2M1 [groups, N, K], scales UE8M0 or FP32 with (1, 32)).
 * INVALID_ARGUMENT for a bad descriptor or a scale the repack would reject (UE8M0 255 = NaN; FP32
 * <= 0, NaN or Inf), naming its group, row and K-group; *s is then unchanged. */
hfp4_status hfp4__fold_stats_add(hfp4__fold_stats *s, const hfp4_matrix *w, int32_t groups);

/* The statistics of a whole pair, read one group at a time (memory: one group). */
hfp4_status hfp4__fp4_expert_stats(hfp4__st_file *file, const hfp4__fp4_expert *e, hfp4__fold_stats *out);

/* All 2-D FP4 expert weights whose names match `pattern`, in which one '*' stands for a decimal
 * expert number ("layers.3.ffn.experts.*.w1.weight"), ordered by that number. The numbers must be
 * consecutive (first .. first + count - 1) so that group g is expert first + g, and all pairs must
 * share N, K. *parts is malloc'ed (the caller frees it). INVALID_ARGUMENT naming the pattern and the
 * offending tensor: no '*' or more than one, no match, a gap or a duplicate number, a mismatched
 * shape, a bad pair. */
hfp4_status hfp4__fp4_expert_match(const hfp4__st_file *file, const char *pattern, hfp4__fp4_expert **parts,
                                   int32_t *count, int64_t *first_number);

#ifdef __cplusplus
}
#endif

#endif
