/*
 * json.h - a minimal, strict JSON parser: exactly what a safetensors header needs (objects, arrays,
 * strings, integers), nothing more.
 *
 * Why our own: hfp4 is a dependency-free C library, and a safetensors header is a small, fixed
 * schema. Strict means RFC 8259 syntax with these restrictions, each rejected with a message that
 * gives the byte offset: no true/false/null, no fractions or exponents, integers within int64, no
 * nesting deeper than HFP4__JSON_MAX_DEPTH, nothing but whitespace after the top-level value, no
 * more values than one per HFP4__JSON_BYTES_PER_VALUE bytes of text (plus 64), no array longer
 * than HFP4__JSON_MAX_ARRAY, text of at most HFP4__JSON_MAX_TEXT bytes.
 * The input must already be valid UTF-8 (hfp4__utf8_valid); \u escapes (with surrogate pairs)
 * are decoded to UTF-8. Duplicate object keys are kept: the schema layer decides about them.
 */
#ifndef HFP4_CHECKPOINT_JSON_H
#define HFP4_CHECKPOINT_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HFP4__JSON_NONE UINT32_MAX
#define HFP4__JSON_MAX_DEPTH 32 /* a safetensors header needs 3; the cap keeps recursion bounded */
/* NOTE: the memory bounds. A node costs 32 bytes, so text made of nothing but values ("[0,0,...",
 * one per 2 bytes) once took 40 bytes of nodes per byte (4 GB for a 100 MB header). A safetensors
 * header needs at most one value per 3.7 bytes (its densest valid entry, 16 one-digit dimensions
 * and a one-character name, is 83 bytes for 22 values), so one per 3 bytes never rejects a valid
 * header and caps the nodes at ~11 bytes per byte of text. Its longest array is a shape (16
 * entries): 64 makes the common bogus case fail at once, long before the node cap. */
#define HFP4__JSON_BYTES_PER_VALUE 3
#define HFP4__JSON_MAX_ARRAY 64
#define HFP4__JSON_MAX_TEXT ((size_t)1 << 30) /* node fields and arena offsets are 32-bit */

typedef enum hfp4__json_kind {
    HFP4__JSON_OBJECT = 1,
    HFP4__JSON_ARRAY = 2,
    HFP4__JSON_STRING = 3,
    HFP4__JSON_INTEGER = 4
} hfp4__json_kind;

/* One value (32 bytes: see the memory bounds above). Children (object members, array elements)
 * form a list through first_child/next in source order; an object member's key is stored on the
 * member node itself. Strings live in the document's string arena (NUL-terminated; `len` counts
 * bytes and can exceed strlen when the text held \u0000). Only the union member of the node's kind
 * is meaningful. */
typedef struct hfp4__json_node {
    size_t pos;                /* byte offset of the value in the parsed text (for messages)  */
    uint32_t next;             /* next sibling, HFP4__JSON_NONE at the end                     */
    uint32_t key, key_len;     /* object members: key in the arena; HFP4__JSON_NONE otherwise  */
    hfp4__json_kind kind;
    union {
        struct {
            uint32_t first_child; /* OBJECT, ARRAY: HFP4__JSON_NONE if none                    */
            uint32_t count;       /* members / elements                                        */
        };
        struct {
            uint32_t str, str_len; /* STRING: value in the arena                               */
        };
        int64_t integer; /* INTEGER                                                             */
    };
} hfp4__json_node;

typedef struct hfp4__json_doc {
    hfp4__json_node *nodes; /* nodes[0] is the top-level value */
    size_t count, cap, max_count;
    char *strings;
    size_t str_used, str_cap;
} hfp4__json_doc;

/* Parses text[0..len) into *doc (which the caller zero-initializes and later frees with
 * hfp4__json_free, also after a failure). Errors: INVALID_ARGUMENT "<what>: JSON <problem> at byte
 * N"; OUT_OF_MEMORY. */
hfp4_status hfp4__json_parse(const char *what, const char *text, size_t len, hfp4__json_doc *doc);
void hfp4__json_free(hfp4__json_doc *doc);

/* Key / string value of a node (pointers into the arena, valid until hfp4__json_free). */
static inline const char *hfp4__json_key(const hfp4__json_doc *doc, const hfp4__json_node *n) {
    return n->key == HFP4__JSON_NONE ? NULL : doc->strings + n->key;
}
static inline const char *hfp4__json_str(const hfp4__json_doc *doc, const hfp4__json_node *n) {
    return doc->strings + n->str;
}

/* 1 if text[0..len) is valid UTF-8 (no overlongs, no surrogates, <= U+10FFFF); else 0 and *bad is
 * the offset of the first invalid byte. */
int hfp4__utf8_valid(const char *text, size_t len, size_t *bad);

#ifdef __cplusplus
}
#endif

#endif
