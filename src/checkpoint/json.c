/*
 * json.c - see json.h. A recursive-descent parser over a byte buffer; nodes and decoded strings go
 * into two growable arrays addressed by index, so growing them never invalidates a reference.
 */
#include <stdlib.h>
#include <string.h>

#include "json.h"

typedef struct parser {
    const char *what;
    const unsigned char *s;
    size_t len, i;
    hfp4__json_doc *doc;
} parser;

static hfp4_status syntax(parser *p, const char *problem) {
    return hfp4__fail(HFP4_ERR_INVALID_ARGUMENT, "%s: JSON %s at byte %zu", p->what, problem, p->i);
}

static void skip_ws(parser *p) {
    while (p->i < p->len && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r'))
        p->i++;
}

static hfp4_status new_node(parser *p, hfp4__json_kind kind, size_t *index) {
    hfp4__json_doc *d = p->doc;
    if (d->count == d->max_count)
        return hfp4__fail(HFP4_ERR_INVALID_ARGUMENT,
                          "%s: JSON has more values than a safetensors header of this length can (over %zu, one per %d "
                          "bytes) at byte %zu",
                          p->what, d->max_count, HFP4__JSON_BYTES_PER_VALUE, p->i);
    if (d->count == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 64;
        if (cap > d->max_count) cap = d->max_count; /* never more than the cap allows */
        hfp4__json_node *n = realloc(d->nodes, cap * sizeof *n);
        if (!n) return hfp4__fail(HFP4_ERR_OUT_OF_MEMORY, "%s: out of memory for %zu JSON nodes", p->what, cap);
        d->nodes = n;
        d->cap = cap;
    }
    hfp4__json_node *n = &d->nodes[d->count];
    memset(n, 0, sizeof *n);
    n->kind = kind;
    n->pos = p->i;
    n->next = n->key = HFP4__JSON_NONE;
    if (kind == HFP4__JSON_OBJECT || kind == HFP4__JSON_ARRAY) n->first_child = HFP4__JSON_NONE;
    *index = d->count++;
    return HFP4_OK;
}

static hfp4_status put_bytes(parser *p, const void *bytes, size_t n) {
    hfp4__json_doc *d = p->doc;
    if (d->str_used + n > d->str_cap) {
        size_t cap = d->str_cap ? d->str_cap : 256;
        while (cap < d->str_used + n) cap *= 2;
        char *s = realloc(d->strings, cap);
        if (!s) return hfp4__fail(HFP4_ERR_OUT_OF_MEMORY, "%s: out of memory for %zu bytes of JSON strings", p->what, cap);
        d->strings = s;
        d->str_cap = cap;
    }
    memcpy(d->strings + d->str_used, bytes, n);
    d->str_used += n;
    return HFP4_OK;
}

static int hex4(const unsigned char *s, unsigned *v) {
    *v = 0;
    for (int k = 0; k < 4; k++) {
        unsigned c = s[k], d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else return -1;
        *v = *v * 16 + d;
    }
    return 0;
}

static hfp4_status put_utf8(parser *p, unsigned cp) {
    unsigned char b[4];
    size_t n;
    if (cp < 0x80) b[0] = (unsigned char)cp, n = 1;
    else if (cp < 0x800) b[0] = (unsigned char)(0xC0 | cp >> 6), b[1] = (unsigned char)(0x80 | (cp & 63)), n = 2;
    else if (cp < 0x10000)
        b[0] = (unsigned char)(0xE0 | cp >> 12), b[1] = (unsigned char)(0x80 | ((cp >> 6) & 63)),
        b[2] = (unsigned char)(0x80 | (cp & 63)), n = 3;
    else
        b[0] = (unsigned char)(0xF0 | cp >> 18), b[1] = (unsigned char)(0x80 | ((cp >> 12) & 63)),
        b[2] = (unsigned char)(0x80 | ((cp >> 6) & 63)), b[3] = (unsigned char)(0x80 | (cp & 63)), n = 4;
    return put_bytes(p, b, n);
}

/* Parses a string starting at the opening quote; stores it NUL-terminated in the arena. */
static hfp4_status parse_string(parser *p, size_t *start, size_t *length) {
    p->i++; /* opening quote */
    *start = p->doc->str_used;
    for (;;) {
        if (p->i >= p->len) return syntax(p, "string is not terminated");
        unsigned char c = p->s[p->i];
        if (c == '"') {
            p->i++;
            break;
        }
        if (c < 0x20) return syntax(p, "control character inside a string (must be escaped)");
        if (c != '\\') {
            size_t run = p->i;
            while (run < p->len && p->s[run] != '"' && p->s[run] != '\\' && p->s[run] >= 0x20) run++;
            HFP4_TRY(put_bytes(p, p->s + p->i, run - p->i));
            p->i = run;
            continue;
        }
        if (p->i + 1 >= p->len) return syntax(p, "string is not terminated");
        char e = (char)p->s[p->i + 1], out = 0;
        switch (e) {
        case '"': out = '"'; break;
        case '\\': out = '\\'; break;
        case '/': out = '/'; break;
        case 'b': out = '\b'; break;
        case 'f': out = '\f'; break;
        case 'n': out = '\n'; break;
        case 'r': out = '\r'; break;
        case 't': out = '\t'; break;
        case 'u': break;
        default: return syntax(p, "invalid escape sequence in a string");
        }
        if (e != 'u') {
            HFP4_TRY(put_bytes(p, &out, 1));
            p->i += 2;
            continue;
        }
        unsigned cp, lo;
        if (p->i + 6 > p->len || hex4(p->s + p->i + 2, &cp) != 0) return syntax(p, "invalid \\u escape in a string");
        if (cp >= 0xDC00 && cp <= 0xDFFF) return syntax(p, "unpaired low surrogate \\u escape in a string");
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (p->i + 12 > p->len || p->s[p->i + 6] != '\\' || p->s[p->i + 7] != 'u' ||
                hex4(p->s + p->i + 8, &lo) != 0 || lo < 0xDC00 || lo > 0xDFFF)
                return syntax(p, "unpaired high surrogate \\u escape in a string");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            p->i += 6;
        }
        HFP4_TRY(put_utf8(p, cp));
        p->i += 6;
    }
    *length = p->doc->str_used - *start;
    return put_bytes(p, "", 1);
}

static hfp4_status parse_integer(parser *p, int64_t *value) {
    int negative = 0;
    if (p->s[p->i] == '-') {
        negative = 1;
        p->i++;
    }
    if (p->i >= p->len || p->s[p->i] < '0' || p->s[p->i] > '9') return syntax(p, "invalid number");
    if (p->s[p->i] == '0' && p->i + 1 < p->len && p->s[p->i + 1] >= '0' && p->s[p->i + 1] <= '9')
        return syntax(p, "number with a leading zero");
    uint64_t v = 0;
    while (p->i < p->len && p->s[p->i] >= '0' && p->s[p->i] <= '9') {
        unsigned d = (unsigned)(p->s[p->i] - '0');
        if (v > (UINT64_C(9223372036854775807) - d) / 10) return syntax(p, "integer beyond the int64 range");
        v = v * 10 + d;
        p->i++;
    }
    if (p->i < p->len && (p->s[p->i] == '.' || p->s[p->i] == 'e' || p->s[p->i] == 'E'))
        return syntax(p, "number that is not an integer (safetensors headers hold integers only)");
    *value = negative ? -(int64_t)v : (int64_t)v;
    return HFP4_OK;
}

static hfp4_status parse_value(parser *p, int depth, size_t *index);

/* Object or array: members/elements are linked in source order. */
static hfp4_status parse_container(parser *p, int depth, size_t self, int object) {
    char close = object ? '}' : ']';
    p->i++;
    skip_ws(p);
    if (p->i < p->len && p->s[p->i] == (unsigned char)close) {
        p->i++;
        return HFP4_OK;
    }
    size_t last = HFP4__JSON_NONE;
    for (;;) {
        skip_ws(p);
        size_t key = HFP4__JSON_NONE, key_len = 0, child;
        if (object) {
            if (p->i >= p->len || p->s[p->i] != '"') return syntax(p, "expected a string key in an object");
            HFP4_TRY(parse_string(p, &key, &key_len));
            skip_ws(p);
            if (p->i >= p->len || p->s[p->i] != ':') return syntax(p, "expected ':' after an object key");
            p->i++;
        }
        if (!object && p->doc->nodes[self].count == HFP4__JSON_MAX_ARRAY)
            return syntax(p, "array longer than 64 elements (a safetensors header's longest, a shape, has at most 16)");
        HFP4_TRY(parse_value(p, depth + 1, &child));
        hfp4__json_node *c = &p->doc->nodes[child];
        /* (the 1 GiB text limit keeps indices, offsets and lengths within 32 bits) */
        c->key = (uint32_t)key;
        c->key_len = (uint32_t)key_len;
        if (last == HFP4__JSON_NONE) p->doc->nodes[self].first_child = (uint32_t)child;
        else p->doc->nodes[last].next = (uint32_t)child;
        last = child;
        p->doc->nodes[self].count++;
        skip_ws(p);
        if (p->i >= p->len) return syntax(p, object ? "object is not closed" : "array is not closed");
        if (p->s[p->i] == (unsigned char)close) {
            p->i++;
            return HFP4_OK;
        }
        if (p->s[p->i] != ',') return syntax(p, object ? "expected ',' or '}' in an object" : "expected ',' or ']' in an array");
        p->i++;
        skip_ws(p);
        if (p->i < p->len && p->s[p->i] == (unsigned char)close) return syntax(p, "trailing comma");
    }
}

static hfp4_status parse_value(parser *p, int depth, size_t *index) {
    if (depth > HFP4__JSON_MAX_DEPTH) return syntax(p, "nesting deeper than 32 levels");
    skip_ws(p);
    if (p->i >= p->len) return syntax(p, "unexpected end of text, expected a value");
    unsigned char c = p->s[p->i];
    if (c == '{' || c == '[') {
        HFP4_TRY(new_node(p, c == '{' ? HFP4__JSON_OBJECT : HFP4__JSON_ARRAY, index));
        return parse_container(p, depth, *index, c == '{');
    }
    if (c == '"') {
        HFP4_TRY(new_node(p, HFP4__JSON_STRING, index));
        size_t start, len;
        HFP4_TRY(parse_string(p, &start, &len));
        p->doc->nodes[*index].str = (uint32_t)start;
        p->doc->nodes[*index].str_len = (uint32_t)len;
        return HFP4_OK;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        HFP4_TRY(new_node(p, HFP4__JSON_INTEGER, index));
        int64_t v = 0;
        HFP4_TRY(parse_integer(p, &v));
        p->doc->nodes[*index].integer = v;
        return HFP4_OK;
    }
    if (c == 't' || c == 'f' || c == 'n')
        return syntax(p, "true/false/null value (safetensors headers hold objects, arrays, strings and integers only)");
    return syntax(p, "unexpected character, expected a value");
}

hfp4_status hfp4__json_parse(const char *what, const char *text, size_t len, hfp4__json_doc *doc) {
    parser p = {what, (const unsigned char *)text, len, 0, doc};
    if (len > HFP4__JSON_MAX_TEXT)
        return hfp4__fail(HFP4_ERR_INVALID_ARGUMENT, "%s: JSON text of %zu bytes is longer than this parser's %zu", what, len,
                          HFP4__JSON_MAX_TEXT);
    doc->max_count = len / HFP4__JSON_BYTES_PER_VALUE + 64;
    size_t top;
    HFP4_TRY(parse_value(&p, 0, &top));
    skip_ws(&p);
    if (p.i != p.len) return syntax(&p, "text after the top-level value");
    return HFP4_OK;
}

void hfp4__json_free(hfp4__json_doc *doc) {
    free(doc->nodes);
    free(doc->strings);
    memset(doc, 0, sizeof *doc);
}

int hfp4__utf8_valid(const char *text, size_t len, size_t *bad) {
    const unsigned char *s = (const unsigned char *)text;
    size_t i = 0;
    while (i < len) {
        unsigned c = s[i];
        size_t n;
        unsigned cp, min;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xE0) == 0xC0) n = 1, cp = c & 0x1F, min = 0x80;
        else if ((c & 0xF0) == 0xE0) n = 2, cp = c & 0x0F, min = 0x800;
        else if ((c & 0xF8) == 0xF0) n = 3, cp = c & 0x07, min = 0x10000;
        else break;
        if (i + n >= len) break; /* the sequence runs past the end */
        size_t k;
        for (k = 1; k <= n; k++) {
            if ((s[i + k] & 0xC0) != 0x80) break;
            cp = cp << 6 | (s[i + k] & 0x3F);
        }
        if (k <= n || cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) break;
        i += n + 1;
    }
    if (i < len) {
        *bad = i;
        return 0;
    }
    return 1;
}
