/*
 * safetensors.h - a validating reader of the safetensors format (internal; the `hfp4` command and
 * the tests use it; docs/CHECKPOINTS.md describes what it accepts).
 *
 * File = 8-byte little-endian header length H, H bytes of UTF-8 JSON, then the data section. The
 * JSON is an object: "__metadata__" (optional, string -> string) and one entry per tensor,
 * {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]} with offsets relative to the data
 * section. Opening reads and checks the header only; tensor bytes are read on demand with plain
 * stdio (64-bit offsets), a range at a time into the caller's buffer, so multi-GB shards never sit
 * in memory.
 *
 * Validation matches the reference implementation (huggingface/safetensors) so that a file we
 * accept is one transformers can load: H <= 100,000,000; valid UTF-8 and strict JSON; every entry
 * has exactly dtype, shape and data_offsets; known dtype; shape entries >= 0; begin <= end; end -
 * begin == bytes of dtype x shape (sub-byte dtypes such as F4 must fill whole bytes); tensors do
 * not overlap and cover the data section exactly (no gap, no trailing bytes: a gap or a tail means
 * a damaged or truncated file), each, empty ones included, beginning where the previous one in
 * offset order ends; no NUL in names, field keys or metadata. Every failure is HFP4_ERR_INVALID_ARGUMENT with a message
 * "safetensors '<path>': [tensor '<name>': ]<field> ..." naming the value.
 *
 * I/O errors other than bad content (a read or stat failing half way) are HFP4_ERR_IO with the
 * system's reason.
 *
 * Not thread-safe per file: reads seek the shared FILE. Use one hfp4__st_file per thread.
 */
#ifndef HFP4_CHECKPOINT_SAFETENSORS_H
#define HFP4_CHECKPOINT_SAFETENSORS_H

#include <stdint.h>
#include <stdio.h>

#include "internal.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HFP4__ST_MAX_HEADER 100000000ull /* the reference implementation's limit */
#define HFP4__ST_MAX_DIMS 16             /* more dimensions are rejected (torch stops at 25; no model has 16) */

typedef enum hfp4__st_dtype {
    HFP4__ST_BOOL,
    HFP4__ST_U8,
    HFP4__ST_I8,
    HFP4__ST_F8_E5M2,
    HFP4__ST_F8_E4M3,
    HFP4__ST_F8_E8M0, /* torch.float8_e8m0fnu: UE8M0 scale bytes */
    HFP4__ST_I16,
    HFP4__ST_U16,
    HFP4__ST_F16,
    HFP4__ST_BF16,
    HFP4__ST_I32,
    HFP4__ST_U32,
    HFP4__ST_F32,
    HFP4__ST_F64,
    HFP4__ST_I64,
    HFP4__ST_U64,
    HFP4__ST_C64,
    HFP4__ST_F4,      /* torch.float4_e2m1fn_x2; shape counts 4-bit elements */
    HFP4__ST_F6_E2M3, /* 6-bit elements */
    HFP4__ST_F6_E3M2,
    HFP4__ST_DTYPE_COUNT
} hfp4__st_dtype;

/* The header spelling ("F8_E8M0") and bits per element of a dtype. */
const char *hfp4__st_dtype_name(hfp4__st_dtype dtype);
int hfp4__st_dtype_bits(hfp4__st_dtype dtype);

typedef struct hfp4__st_tensor {
    char *name;
    hfp4__st_dtype dtype;
    int ndim;                            /* 0 = scalar (one element)          */
    int64_t shape[HFP4__ST_MAX_DIMS];
    uint64_t begin, end;                 /* data_offsets (data-section relative) */
    uint64_t numel, bytes;               /* bytes == end - begin               */
} hfp4__st_tensor;

typedef struct hfp4__st_file {
    char *path;
    FILE *f;
    uint64_t file_bytes, header_bytes, data_start, data_bytes; /* data_start = 8 + header_bytes */
    hfp4__st_tensor *tensors;  /* in data-offset (file) order */
    size_t count;
    const hfp4__st_tensor **by_name; /* into tensors, sorted by name (for lookup) */
    char **meta_keys, **meta_values; /* "__metadata__", in header order */
    size_t meta_count;
} hfp4__st_file;

/* Opens `path` for reading (binary) into *out, only if it is a regular file: a FIFO, device or
 * directory is refused before any read ("<what> '<path>': not a regular file"), as opening a FIFO
 * would otherwise wait for a writer. INVALID_ARGUMENT (missing, unreadable or not regular), IO. */
hfp4_status hfp4__open_regular(const char *what, const char *path, FILE **out);

/* Opens and validates `path`. On success *out owns the open FILE; close with hfp4__st_close.
 * INVALID_ARGUMENT (missing/unreadable file, any format violation), OUT_OF_MEMORY. */
hfp4_status hfp4__st_open(const char *path, hfp4__st_file **out);
void hfp4__st_close(hfp4__st_file *file); /* NULL is fine */

/* The tensor called `name`, or NULL. */
const hfp4__st_tensor *hfp4__st_find(const hfp4__st_file *file, const char *name);

/* Reads `bytes` bytes starting `offset` bytes into tensor `t`'s data into dst.
 * INVALID_ARGUMENT if the range is not inside the tensor or the file is shorter than its header
 * promised (changed since opening); IO for a failing seek or read. */
hfp4_status hfp4__st_read(hfp4__st_file *file, const hfp4__st_tensor *t, uint64_t offset, uint64_t bytes, void *dst);

/* "[2048, 128]" into buf (truncated to cap); returns buf. */
char *hfp4__st_shape_string(const hfp4__st_tensor *t, char *buf, size_t cap);

/* Writes s to out as text a terminal shows as is: control bytes (below 0x20, and 0x7F) and the
 * backslash as \xNN escapes, the UTF-8 of C1 controls (U+0080-U+009F) and of bidi controls
 * (U+202A-U+202E, U+2066-U+2069) as \uNNNN; other bytes (UTF-8 included) unchanged. For names and
 * metadata read from a file, which may hold anything. */
void hfp4__st_fputs_printable(FILE *out, const char *s);

#ifdef __cplusplus
}
#endif

#endif
