/*
 * safetensors.c - see safetensors.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "json.h"
#include "safetensors.h"

static const struct {
    const char *name;
    int bits;
} st_dtypes[HFP4__ST_DTYPE_COUNT] = {
    [HFP4__ST_BOOL] = {"BOOL", 8},       [HFP4__ST_U8] = {"U8", 8},           [HFP4__ST_I8] = {"I8", 8},
    [HFP4__ST_F8_E5M2] = {"F8_E5M2", 8}, [HFP4__ST_F8_E4M3] = {"F8_E4M3", 8}, [HFP4__ST_F8_E8M0] = {"F8_E8M0", 8},
    [HFP4__ST_I16] = {"I16", 16},        [HFP4__ST_U16] = {"U16", 16},        [HFP4__ST_F16] = {"F16", 16},
    [HFP4__ST_BF16] = {"BF16", 16},      [HFP4__ST_I32] = {"I32", 32},        [HFP4__ST_U32] = {"U32", 32},
    [HFP4__ST_F32] = {"F32", 32},        [HFP4__ST_F64] = {"F64", 64},        [HFP4__ST_I64] = {"I64", 64},
    [HFP4__ST_U64] = {"U64", 64},        [HFP4__ST_C64] = {"C64", 64},        [HFP4__ST_F4] = {"F4", 4},
    [HFP4__ST_F6_E2M3] = {"F6_E2M3", 6}, [HFP4__ST_F6_E3M2] = {"F6_E3M2", 6},
};

const char *hfp4__st_dtype_name(hfp4__st_dtype dtype) {
    return (unsigned)dtype < HFP4__ST_DTYPE_COUNT ? st_dtypes[dtype].name : "?";
}

int hfp4__st_dtype_bits(hfp4__st_dtype dtype) { return (unsigned)dtype < HFP4__ST_DTYPE_COUNT ? st_dtypes[dtype].bits : 0; }

char *hfp4__st_shape_string(const hfp4__st_tensor *t, char *buf, size_t cap) {
    size_t used = 0;
    if (cap == 0) return buf;
    buf[0] = '\0';
    used += (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < t->ndim && used < cap; d++)
        used += (size_t)snprintf(buf + used, cap - used, d ? ", %lld" : "%lld", (long long)t->shape[d]);
    if (used < cap) snprintf(buf + used, cap - used, "]");
    return buf;
}

void hfp4__st_fputs_printable(FILE *out, const char *s) {
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c < 0x20 || *c == 0x7F || *c == '\\') {
            fprintf(out, "\\x%02X", *c);
        } else if (c[0] == 0xC2 && c[1] >= 0x80 && c[1] <= 0x9F) {
            /* C1 controls (U+0080-U+009F): U+009B is CSI, as ESC [ is */
            fprintf(out, "\\u%04X", c[1]);
            c++;
        } else if (c[0] == 0xE2 && ((c[1] == 0x80 && c[2] >= 0xAA && c[2] <= 0xAE) ||
                                    (c[1] == 0x81 && c[2] >= 0xA6 && c[2] <= 0xA9))) {
            /* bidi embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069): they reorder
             * the text shown after them, so a name could display as another one */
            fprintf(out, "\\u%04X", 0x2000 | (c[1] & 0x3F) << 6 | (c[2] & 0x3F));
            c += 2;
        } else {
            fputc(*c, out);
        }
    }
}

hfp4_status hfp4__open_regular(const char *what, const char *path, FILE **out) {
    *out = NULL;
    errno = 0;
    /* O_NONBLOCK: fopen of a FIFO waits for a writer, forever if none comes; without it the type
     * check below would come too late. Reads are blocking again once the file is known regular. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return hfp4__fail(HFP4_ERR_INVALID_ARGUMENT, "%s '%s': cannot open: %s", what, HFP4__SHOWN(path),
                          errno ? strerror(errno) : "unknown error");
    struct stat info;
    if (fstat(fd, &info) != 0) {
        hfp4_status st = hfp4__fail(HFP4_ERR_IO, "%s '%s': cannot stat: %s", what, HFP4__SHOWN(path), strerror(errno));
        close(fd);
        return st;
    }
    /* directories, pipes and devices cannot be sized or seeked (and a device may never end) */
    if (!S_ISREG(info.st_mode)) {
        close(fd);
        return hfp4__fail(HFP4_ERR_INVALID_ARGUMENT, "%s '%s': not a regular file", what, HFP4__SHOWN(path));
    }
    int flags = fcntl(fd, F_GETFL);
    FILE *f = flags >= 0 && fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == 0 ? fdopen(fd, "rb") : NULL;
    if (!f) {
        hfp4_status st = hfp4__fail(HFP4_ERR_IO, "%s '%s': cannot open: %s", what, HFP4__SHOWN(path),
                                    errno ? strerror(errno) : "unknown error");
        close(fd);
        return st;
    }
    *out = f;
    return HFP4_OK;
}

void hfp4__st_close(hfp4__st_file *file) {
    if (!file) return;
    if (file->f) fclose(file->f);
    for (size_t i = 0; i < file->count; i++) free(file->tensors[i].name);
    for (size_t i = 0; i < file->meta_count; i++) {
        free(file->meta_keys[i]);
        free(file->meta_values[i]);
    }
    free(file->tensors);
    free((void *)file->by_name);
    free(file->meta_keys);
    free(file->meta_values);
    free(file->path);
    free(file);
}

/* Little-endian u64 regardless of the host. */
static uint64_t le64(const unsigned char *b) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | b[i];
    return v;
}

/* Reads exactly n bytes at the current position; names what was being read on failure. */
static hfp4_status read_exact(hfp4__st_file *sf, void *dst, size_t n, const char *what) {
    clearerr(sf->f);
    errno = 0;
    size_t got = fread(dst, 1, n, sf->f);
    if (got == n) return HFP4_OK;
    if (ferror(sf->f))
        return hfp4__fail(errno == EISDIR ? HFP4_ERR_INVALID_ARGUMENT : HFP4_ERR_IO, "safetensors '%s': cannot read %s: %s",
                          HFP4__SHOWN(sf->path), what, errno ? strerror(errno) : "read error");
    return hfp4__fail(HFP4_ERR_INVALID_ARGUMENT,
                      "safetensors '%s': the file ended after %zu of the %zu bytes of %s (it changed since it was opened?)",
                      HFP4__SHOWN(sf->path), got, n, what);
}

static hfp4_status parse_metadata(hfp4__st_file *sf, const hfp4__json_doc *doc, const hfp4__json_node *meta) {
    char shown_path[HFP4__SHOWN_CAP];
    const char *p = hfp4__shown(sf->path, shown_path);
    HFP4_CHECK_ARG(meta->kind == HFP4__JSON_OBJECT, "safetensors '%s': \"__metadata__\" is not a JSON object (header byte %zu)",
                   p, meta->pos);
    if (meta->count == 0) return HFP4_OK;
    sf->meta_keys = calloc(meta->count, sizeof(char *));
    sf->meta_values = calloc(meta->count, sizeof(char *));
    if (!sf->meta_keys || !sf->meta_values)
        return hfp4__fail(HFP4_ERR_OUT_OF_MEMORY, "safetensors '%s': out of memory for the metadata", p);
    for (size_t c = meta->first_child; c != HFP4__JSON_NONE; c = doc->nodes[c].next) {
        const hfp4__json_node *m = &doc->nodes[c];
        HFP4_CHECK_ARG(m->kind == HFP4__JSON_STRING,
                       "safetensors '%s': \"__metadata__\" value of key '%s' is not a string (header byte %zu)", p,
                       HFP4__SHOWN(hfp4__json_key(doc, m)), m->pos);
        /* kept as C strings: a \u0000 would cut them short without a word */
        HFP4_CHECK_ARG(strlen(hfp4__json_key(doc, m)) == m->key_len && strlen(hfp4__json_str(doc, m)) == m->str_len,
                       "safetensors '%s': \"__metadata__\" key '%s' or its value contains a NUL character (header byte %zu)", p,
                       HFP4__SHOWN(hfp4__json_key(doc, m)), m->pos);
        char *k = strdup(hfp4__json_key(doc, m)), *v = strdup(hfp4__json_str(doc, m));
        sf->meta_keys[sf->meta_count] = k;
        sf->meta_values[sf->meta_count] = v;
        sf->meta_count++;
        if (!k || !v) return hfp4__fail(HFP4_ERR_OUT_OF_MEMORY, "safetensors '%s': out of memory for the metadata", p);
    }
    return HFP4_OK;
}

/* One tensor entry: exactly the three fields, each well-typed, and bytes consistent. */
static hfp4_status parse_entry(hfp4__st_file *sf, const hfp4__json_doc *doc, const hfp4__json_node *e, hfp4__st_tensor *t) {
    char shown_path[HFP4__SHOWN_CAP], shown_name[HFP4__SHOWN_CAP];
    const char *p = hfp4__shown(sf->path, shown_path), *name = hfp4__shown(t->name, shown_name);
    HFP4_CHECK_ARG(e->kind == HFP4__JSON_OBJECT,
                   "safetensors '%s': tensor '%s': entry is not a JSON object with dtype, shape and data_offsets (header byte %zu)",
                   p, name, e->pos);
    const hfp4__json_node *dtype = NULL, *shape = NULL, *offsets = NULL;
    for (size_t c = e->first_child; c != HFP4__JSON_NONE; c = doc->nodes[c].next) {
        const hfp4__json_node *m = &doc->nodes[c];
        const char *key = hfp4__json_key(doc, m);
        /* "dtype\u0000junk" must not pass for "dtype" */
        HFP4_CHECK_ARG(strlen(key) == m->key_len,
                       "safetensors '%s': tensor '%s': field key '%s' contains a NUL character (header byte %zu)", p, name,
                       HFP4__SHOWN(key), m->pos);
        const hfp4__json_node **slot = !strcmp(key, "dtype") ? &dtype
                                       : !strcmp(key, "shape") ? &shape
                                       : !strcmp(key, "data_offsets") ? &offsets
                                                                      : NULL;
        HFP4_CHECK_ARG(slot != NULL,
                       "safetensors '%s': tensor '%s': unknown field '%s' (entries hold dtype, shape and data_offsets only)", p,
                       name, HFP4__SHOWN(key));
        HFP4_CHECK_ARG(*slot == NULL, "safetensors '%s': tensor '%s': field '%s' appears twice", p, name, HFP4__SHOWN(key));
        *slot = m;
    }
    HFP4_CHECK_ARG(dtype != NULL, "safetensors '%s': tensor '%s': missing field 'dtype'", p, name);
    HFP4_CHECK_ARG(shape != NULL, "safetensors '%s': tensor '%s': missing field 'shape'", p, name);
    HFP4_CHECK_ARG(offsets != NULL, "safetensors '%s': tensor '%s': missing field 'data_offsets'", p, name);

    HFP4_CHECK_ARG(dtype->kind == HFP4__JSON_STRING, "safetensors '%s': tensor '%s': dtype is not a string", p, name);
    const char *ds = hfp4__json_str(doc, dtype);
    int found = -1;
    for (int d = 0; d < HFP4__ST_DTYPE_COUNT; d++)
        if (!strcmp(ds, st_dtypes[d].name) && strlen(ds) == dtype->str_len) found = d;
    HFP4_CHECK_ARG(strlen(ds) == dtype->str_len, "safetensors '%s': tensor '%s': dtype '%s' contains a NUL character", p,
                   name, HFP4__SHOWN(ds));
    HFP4_CHECK_ARG(found >= 0, "safetensors '%s': tensor '%s': dtype '%s' is not a safetensors dtype", p, name,
                   HFP4__SHOWN(ds));
    t->dtype = (hfp4__st_dtype)found;

    HFP4_CHECK_ARG(shape->kind == HFP4__JSON_ARRAY, "safetensors '%s': tensor '%s': shape is not an array", p, name);
    HFP4_CHECK_ARG(shape->count <= HFP4__ST_MAX_DIMS, "safetensors '%s': tensor '%s': shape has %zu dimensions (at most %d)",
                   p, name, (size_t)shape->count, HFP4__ST_MAX_DIMS);
    uint64_t numel = 1;
    int overflow = 0;
    t->ndim = 0;
    for (size_t c = shape->first_child; c != HFP4__JSON_NONE; c = doc->nodes[c].next) {
        const hfp4__json_node *s = &doc->nodes[c];
        HFP4_CHECK_ARG(s->kind == HFP4__JSON_INTEGER && s->integer >= 0,
                       "safetensors '%s': tensor '%s': shape[%d] is not an integer >= 0", p, name, t->ndim);
        t->shape[t->ndim++] = s->integer;
        overflow |= __builtin_mul_overflow(numel, (uint64_t)s->integer, &numel);
    }
    uint64_t bits = 0;
    overflow |= __builtin_mul_overflow(numel, (uint64_t)st_dtypes[found].bits, &bits);
    char sh[160];
    HFP4_CHECK_ARG(!overflow, "safetensors '%s': tensor '%s': shape %s overflows 64-bit sizes", p, name,
                   hfp4__st_shape_string(t, sh, sizeof sh));
    HFP4_CHECK_ARG(bits % 8 == 0, "safetensors '%s': tensor '%s': shape %s of %d-bit dtype %s is %llu bits, not whole bytes", p,
                   name, hfp4__st_shape_string(t, sh, sizeof sh), st_dtypes[found].bits, ds, (unsigned long long)bits);
    t->numel = numel;
    t->bytes = bits / 8;

    HFP4_CHECK_ARG(offsets->kind == HFP4__JSON_ARRAY && offsets->count == 2,
                   "safetensors '%s': tensor '%s': data_offsets is not an array of two integers", p, name);
    const hfp4__json_node *b = &doc->nodes[offsets->first_child], *en = &doc->nodes[b->next];
    HFP4_CHECK_ARG(b->kind == HFP4__JSON_INTEGER && en->kind == HFP4__JSON_INTEGER && b->integer >= 0 && en->integer >= 0,
                   "safetensors '%s': tensor '%s': data_offsets entries must be integers >= 0", p, name);
    t->begin = (uint64_t)b->integer;
    t->end = (uint64_t)en->integer;
    HFP4_CHECK_ARG(t->begin <= t->end, "safetensors '%s': tensor '%s': data_offsets [%llu, %llu] end before they begin", p,
                   name, (unsigned long long)t->begin, (unsigned long long)t->end);
    HFP4_CHECK_ARG(t->end - t->begin == t->bytes,
                   "safetensors '%s': tensor '%s': data_offsets [%llu, %llu] span %llu bytes but dtype %s x shape %s needs %llu",
                   p, name, (unsigned long long)t->begin, (unsigned long long)t->end,
                   (unsigned long long)(t->end - t->begin), ds, hfp4__st_shape_string(t, sh, sizeof sh),
                   (unsigned long long)t->bytes);
    HFP4_CHECK_ARG(t->end <= sf->data_bytes,
                   "safetensors '%s': tensor '%s': data_offsets end %llu is beyond the data section (%llu bytes after the "
                   "header; a truncated file?)",
                   p, name, (unsigned long long)t->end, (unsigned long long)sf->data_bytes);
    return HFP4_OK;
}

static int by_offset(const void *a, const void *b) {
    const hfp4__st_tensor *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int by_name(const void *a, const void *b) {
    const hfp4__st_tensor *x = *(const hfp4__st_tensor *const *)a, *y = *(const hfp4__st_tensor *const *)b;
    return strcmp(x->name, y->name);
}

static int find_name(const void *key, const void *elem) {
    return strcmp((const char *)key, (*(const hfp4__st_tensor *const *)elem)->name);
}

const hfp4__st_tensor *hfp4__st_find(const hfp4__st_file *file, const char *name) {
    if (!file || !name || file->count == 0) return NULL;
    const hfp4__st_tensor *const *hit = bsearch(name, file->by_name, file->count, sizeof *file->by_name, find_name);
    return hit ? *hit : NULL;
}

/* Names unique; tensors disjoint and covering the data section exactly. */
static hfp4_status check_layout(hfp4__st_file *sf) {
    char shown_path[HFP4__SHOWN_CAP];
    const char *p = hfp4__shown(sf->path, shown_path);
    qsort(sf->tensors, sf->count, sizeof *sf->tensors, by_offset);
    sf->by_name = malloc((sf->count ? sf->count : 1) * sizeof *sf->by_name);
    if (!sf->by_name) return hfp4__fail(HFP4_ERR_OUT_OF_MEMORY, "safetensors '%s': out of memory", p);
    const hfp4__st_tensor **names = sf->by_name;
    for (size_t i = 0; i < sf->count; i++) names[i] = &sf->tensors[i];
    qsort(names, sf->count, sizeof *names, by_name);
    for (size_t i = 1; i < sf->count; i++)
        HFP4_CHECK_ARG(strcmp(names[i - 1]->name, names[i]->name) != 0,
                       "safetensors '%s': tensor name '%s' appears twice in the header", p, HFP4__SHOWN(names[i]->name));

    uint64_t pos = 0;
    const hfp4__st_tensor *prev = NULL;
    for (size_t i = 0; i < sf->count; i++) {
        const hfp4__st_tensor *t = &sf->tensors[i];
        /* empty tensors too: the reference requires every begin to be where the previous tensor
         * ended, so a 0-byte tensor inside another one or past a gap is an error there */
        HFP4_CHECK_ARG(t->begin >= pos,
                       "safetensors '%s': tensor '%s': data_offsets [%llu, %llu] overlap tensor '%s' [%llu, %llu]", p,
                       HFP4__SHOWN(t->name), (unsigned long long)t->begin, (unsigned long long)t->end,
                       HFP4__SHOWN(prev ? prev->name : "?"), (unsigned long long)(prev ? prev->begin : 0),
                       (unsigned long long)(prev ? prev->end : 0));
        HFP4_CHECK_ARG(t->begin == pos,
                       "safetensors '%s': data section bytes [%llu, %llu) before tensor '%s' belong to no tensor (a damaged "
                       "file?)",
                       p, (unsigned long long)pos, (unsigned long long)t->begin, HFP4__SHOWN(t->name));
        pos = t->end;
        prev = t;
    }
    HFP4_CHECK_ARG(pos == sf->data_bytes,
                   "safetensors '%s': data section is %llu bytes but its tensors end at %llu (%llu trailing bytes belong to "
                   "no tensor)",
                   p, (unsigned long long)sf->data_bytes, (unsigned long long)pos,
                   (unsigned long long)(sf->data_bytes - pos));
    return HFP4_OK;
}

static hfp4_status parse_file(hfp4__st_file *sf) {
    char shown_path[HFP4__SHOWN_CAP];
    const char *p = hfp4__shown(sf->path, shown_path);
    errno = 0;
    if (fseeko(sf->f, 0, SEEK_END) != 0)
        return hfp4__fail(HFP4_ERR_INVALID_ARGUMENT, "safetensors '%s': cannot seek: %s", p, strerror(errno));
    off_t size = ftello(sf->f);
    if (size < 0 || fseeko(sf->f, 0, SEEK_SET) != 0)
        return hfp4__fail(HFP4_ERR_INVALID_ARGUMENT, "safetensors '%s': cannot determine the file size: %s", p, strerror(errno));
    sf->file_bytes = (uint64_t)size;
    HFP4_CHECK_ARG(sf->file_bytes >= 8, "safetensors '%s': the file is %llu bytes, shorter than the 8-byte header length", p,
                   (unsigned long long)sf->file_bytes);
    unsigned char lenbuf[8];
    HFP4_TRY(read_exact(sf, lenbuf, 8, "the header length"));
    uint64_t h = le64(lenbuf);
    /* a JSON file given by mistake (model.safetensors.index.json, most likely) reads as an absurd
     * header length; '{' alone is no proof (a real length can end in 0x7B), hence only then */
    HFP4_CHECK_ARG(lenbuf[0] != '{' || (h <= HFP4__ST_MAX_HEADER && h <= sf->file_bytes - 8),
                   "safetensors '%s': the file starts with '{': it looks like JSON text, not a safetensors file (the "
                   "index of a sharded checkpoint, model.safetensors.index.json?); pass one of the shards it lists",
                   p);
    HFP4_CHECK_ARG(h <= HFP4__ST_MAX_HEADER, "safetensors '%s': header length %llu exceeds the safetensors limit of %llu bytes",
                   p, (unsigned long long)h, HFP4__ST_MAX_HEADER);
    HFP4_CHECK_ARG(h <= sf->file_bytes - 8,
                   "safetensors '%s': header length %llu runs past the end of the file (%llu bytes; truncated?)", p,
                   (unsigned long long)h, (unsigned long long)sf->file_bytes);
    HFP4_CHECK_ARG(h >= 2, "safetensors '%s': header length %llu is too short for a JSON object", p, (unsigned long long)h);
    sf->header_bytes = h;
    sf->data_start = 8 + h;
    sf->data_bytes = sf->file_bytes - sf->data_start;

    char *text = malloc((size_t)h);
    if (!text) return hfp4__fail(HFP4_ERR_OUT_OF_MEMORY, "safetensors '%s': out of memory for a %llu-byte header", p,
                                 (unsigned long long)h);
    hfp4__json_doc doc;
    memset(&doc, 0, sizeof doc);
    hfp4_status st = read_exact(sf, text, (size_t)h, "the header");
    size_t bad = 0;
    if (st == HFP4_OK && !hfp4__utf8_valid(text, (size_t)h, &bad))
        st = hfp4__fail(HFP4_ERR_INVALID_ARGUMENT, "safetensors '%s': header is not valid UTF-8 (byte %zu)", p, bad);
    if (st == HFP4_OK) {
        char what[HFP4__SHOWN_CAP + 32];
        snprintf(what, sizeof what, "safetensors '%s': header", p);
        st = hfp4__json_parse(what, text, (size_t)h, &doc);
    }
    free(text);
    if (st == HFP4_OK && doc.nodes[0].kind != HFP4__JSON_OBJECT)
        st = hfp4__fail(HFP4_ERR_INVALID_ARGUMENT, "safetensors '%s': header is not a JSON object", p);
    const hfp4__json_node *meta = NULL;
    size_t tensors = 0;
    if (st == HFP4_OK) {
        for (size_t c = doc.nodes[0].first_child; c != HFP4__JSON_NONE && st == HFP4_OK; c = doc.nodes[c].next) {
            const hfp4__json_node *m = &doc.nodes[c];
            if (strlen(hfp4__json_key(&doc, m)) != m->key_len)
                st = hfp4__fail(HFP4_ERR_INVALID_ARGUMENT, "safetensors '%s': a key contains a NUL character (header byte %zu)",
                                p, m->pos);
            else if (strcmp(hfp4__json_key(&doc, m), "__metadata__") != 0) tensors++;
            else if (meta) st = hfp4__fail(HFP4_ERR_INVALID_ARGUMENT, "safetensors '%s': \"__metadata__\" appears twice", p);
            else meta = m;
        }
    }
    if (st == HFP4_OK && meta) st = parse_metadata(sf, &doc, meta);
    if (st == HFP4_OK) {
        sf->tensors = calloc(tensors ? tensors : 1, sizeof *sf->tensors);
        if (!sf->tensors) st = hfp4__fail(HFP4_ERR_OUT_OF_MEMORY, "safetensors '%s': out of memory for %zu tensors", p, tensors);
    }
    for (size_t c = st == HFP4_OK ? doc.nodes[0].first_child : HFP4__JSON_NONE; c != HFP4__JSON_NONE && st == HFP4_OK;
         c = doc.nodes[c].next) {
        const hfp4__json_node *m = &doc.nodes[c];
        if (m == meta) continue;
        hfp4__st_tensor *t = &sf->tensors[sf->count];
        t->name = strdup(hfp4__json_key(&doc, m));
        if (!t->name) {
            st = hfp4__fail(HFP4_ERR_OUT_OF_MEMORY, "safetensors '%s': out of memory for tensor names", p);
            break;
        }
        sf->count++;
        st = parse_entry(sf, &doc, m, t);
    }
    hfp4__json_free(&doc);
    if (st == HFP4_OK) st = check_layout(sf);
    return st;
}

hfp4_status hfp4__st_open(const char *path, hfp4__st_file **out) {
    HFP4_CHECK_ARG(out != NULL, "hfp4__st_open: out is NULL");
    *out = NULL;
    HFP4_CHECK_ARG(path != NULL, "hfp4__st_open: path is NULL");
    hfp4__st_file *sf = calloc(1, sizeof *sf);
    if (sf) sf->path = strdup(path);
    if (!sf || !sf->path) {
        hfp4__st_close(sf);
        return hfp4__fail(HFP4_ERR_OUT_OF_MEMORY, "safetensors '%s': out of memory", HFP4__SHOWN(path));
    }
    hfp4_status st = hfp4__open_regular("safetensors", path, &sf->f);
    if (st == HFP4_OK) st = parse_file(sf);
    if (st != HFP4_OK) {
        hfp4__st_close(sf);
        return st;
    }
    *out = sf;
    return HFP4_OK;
}

hfp4_status hfp4__st_read(hfp4__st_file *file, const hfp4__st_tensor *t, uint64_t offset, uint64_t bytes, void *dst) {
    HFP4_CHECK_ARG(file != NULL && t != NULL, "hfp4__st_read: file or tensor is NULL");
    HFP4_CHECK_ARG(dst != NULL || bytes == 0, "hfp4__st_read: dst is NULL");
    HFP4_CHECK_ARG(offset <= t->bytes && bytes <= t->bytes - offset,
                   "safetensors '%s': tensor '%s': read of %llu bytes at offset %llu is outside its %llu bytes",
                   HFP4__SHOWN(file->path), HFP4__SHOWN(t->name), (unsigned long long)bytes, (unsigned long long)offset,
                   (unsigned long long)t->bytes);
    HFP4_CHECK_ARG(bytes <= (uint64_t)SIZE_MAX, "safetensors '%s': tensor '%s': read of %llu bytes is too large",
                   HFP4__SHOWN(file->path), HFP4__SHOWN(t->name), (unsigned long long)bytes);
    if (bytes == 0) return HFP4_OK;
    uint64_t at = file->data_start + t->begin + offset;
    errno = 0;
    if (at > (uint64_t)INT64_MAX || fseeko(file->f, (off_t)at, SEEK_SET) != 0)
        return hfp4__fail(HFP4_ERR_IO, "safetensors '%s': cannot seek to byte %llu: %s", HFP4__SHOWN(file->path),
                          (unsigned long long)at, strerror(errno));
    char what[HFP4__SHOWN_CAP + 16];
    snprintf(what, sizeof what, "tensor '%s'", HFP4__SHOWN(t->name));
    return read_exact(file, dst, (size_t)bytes, what);
}
