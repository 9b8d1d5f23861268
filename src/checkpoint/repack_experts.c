/*
 * repack_experts.c - see repack_experts.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../weights/sm90_layout.h"
#include "repack_experts.h"

static hfp4_status write_all(FILE *f, const void *buf, size_t n, const char *path) {
    errno = 0;
    if (n && fwrite(buf, 1, n, f) != n)
        return hfp4__fail(HFP4_ERR_IO, "cannot write '%s': %s", HFP4__SHOWN(path), errno ? strerror(errno) : "write error");
    return HFP4_OK;
}

static hfp4_status write_zeros(FILE *f, int64_t n, const char *path) {
    static const unsigned char zeros[256];
    while (n > 0) {
        size_t step = n < (int64_t)sizeof zeros ? (size_t)n : sizeof zeros;
        HFP4_TRY(write_all(f, zeros, step, path));
        n -= (int64_t)step;
    }
    return HFP4_OK;
}

/* UE8M0 storage unless some FP32 source scale is not a power of two (hfp4_sm90_weights_scale_dtype's
 * rule, applied over every group before anything is written). FP32 scales must be positive and
 * finite, the checkpoint rule `hfp4 inspect` applies too (docs/CHECKPOINTS.md; the library's repack
 * would take a zero or negative scale as the number it is); the UE8M0 NaN byte is left for the
 * repack to reject with its message. */
static hfp4_status choose_scale_dtype(hfp4__st_file *file, const hfp4__fp4_expert *parts, int32_t count, hfp4_dtype *sdt) {
    *sdt = HFP4_DTYPE_UE8M0;
    for (int32_t p = 0; p < count; p++) {
        if (parts[p].scale_dtype != HFP4_DTYPE_FP32) continue;
        uint64_t bytes = hfp4__fp4_expert_scale_bytes(&parts[p], 1);
        float *s = malloc((size_t)bytes);
        if (!s) return hfp4__fail(HFP4_ERR_OUT_OF_MEMORY, "out of memory for %llu bytes of scales", (unsigned long long)bytes);
        for (int32_t g = 0; g < parts[p].groups; g++) {
            hfp4_status st = hfp4__st_read(file, parts[p].scale, bytes * (uint64_t)g, bytes, s);
            if (st != HFP4_OK) {
                free(s);
                return st;
            }
            for (uint64_t i = 0; i < bytes / 4; i++) {
                if (!(isfinite(s[i]) && s[i] > 0.0f)) {
                    const int64_t kg = parts[p].k / 32, row = (int64_t)(i / (uint64_t)kg), j = (int64_t)(i % (uint64_t)kg);
                    const double v = (double)s[i];
                    free(s);
                    return hfp4__fail(HFP4_ERR_INVALID_ARGUMENT,
                                      "repack: tensor '%s': scale of group %d, row %lld, k-group %lld is %g; scales "
                                      "must be positive and finite",
                                      HFP4__SHOWN(parts[p].scale->name), (int)g, (long long)row, (long long)j, v);
                }
                uint8_t e;
                if (hfp4_ue8m0_from_float(s[i], &e) != 0) *sdt = HFP4_DTYPE_FP32;
            }
        }
        free(s);
    }
    return HFP4_OK;
}

/* 1 if out_path names the file `f` is reading (writing it would destroy the input). */
static int same_file(FILE *f, const char *out_path) {
    struct stat a, b;
    return fstat(fileno(f), &a) == 0 && stat(out_path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* Creates "<target>.XXXXXX" (X random) exclusively for writing; *name is malloc'ed. NULL with errno
 * on failure. Not mkstemp: its file is 0600, and the renamed container would be unreadable to
 * others; O_EXCL with 0666 gives what fopen gives (less the umask) just as safely. */
static FILE *create_temporary(const char *target, char **name) {
    static const char digits[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    size_t n = strlen(target);
    char *t = malloc(n + 8);
    if (!t) return NULL;
    uint64_t x = (uint64_t)getpid() * 0x9E3779B97F4A7C15ull ^ (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)t;
    for (int attempt = 0; attempt < 100; attempt++) {
        memcpy(t, target, n);
        t[n] = '.';
        for (int i = 0; i < 6; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            t[n + 1 + i] = digits[(x >> 33) % 62];
        }
        t[n + 7] = '\0';
        int fd = open(t, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno == EEXIST) continue;
        FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
        if (f) {
            *name = t;
            return f;
        }
        const int saved = errno;
        if (fd >= 0) {
            close(fd);
            unlink(t);
        }
        free(t);
        errno = saved;
        return NULL;
    }
    free(t);
    errno = EEXIST;
    return NULL;
}

hfp4_status hfp4__repack_experts_to_file(hfp4__st_file *file, const hfp4__fp4_expert *parts, int32_t count,
                                         const char *out_path, hfp4__repack_result *result) {
    HFP4_CHECK_ARG(file && parts && out_path && result, "hfp4__repack_experts_to_file: NULL argument");
    HFP4_CHECK_ARG(count >= 1, "hfp4__repack_experts_to_file: count = %d must be >= 1", (int)count);
    int64_t total = 0;
    for (int32_t p = 0; p < count; p++) {
        HFP4_CHECK_ARG(parts[p].n == parts[0].n && parts[p].k == parts[0].k,
                       "repack: tensor '%s' is [N %lld, K %lld] but '%s' is [N %lld, K %lld]; groups must share a shape",
                       HFP4__SHOWN(parts[p].weight->name), (long long)parts[p].n, (long long)parts[p].k,
                       HFP4__SHOWN(parts[0].weight->name), (long long)parts[0].n, (long long)parts[0].k);
        total += parts[p].groups;
    }
    HFP4_CHECK_ARG(total <= INT32_MAX, "repack: %lld groups in all; at most %d", (long long)total, INT32_MAX);
    HFP4_CHECK_ARG(!same_file(file->f, out_path), "repack: output '%s' is the input file", HFP4__SHOWN(out_path));
    int64_t n = parts[0].n, k = parts[0].k;
    hfp4_dtype sdt;
    HFP4_TRY(choose_scale_dtype(file, parts, count, &sdt));
    hfp4__repack_result res;
    memset(&res, 0, sizeof res);
    HFP4_TRY(hfp4__sm90_container_make((int32_t)total, n, k, sdt, &res.header));

    /* the G-group layout is G one-group layouts region by region (repack_experts.h) */
    hfp4_sm90_geometry geo = hfp4_sm90_geometry_make(total, n, k, sdt == HFP4_DTYPE_FP32);
    hfp4_sm90_geometry one = hfp4_sm90_geometry_make(1, n, k, sdt == HFP4_DTYPE_FP32);
    int64_t modes_per_group = one.tiles * one.chunks;
    if (one.weight_bytes * total != geo.weight_bytes || one.scale_bytes_per_group != geo.scale_bytes_per_group ||
        (uint64_t)geo.total_bytes != res.header.bytes)
        return hfp4__fail(HFP4_ERR_INTERNAL, "repack: SM90 layout is not group-major per region; this writer needs updating");

    size_t wsrc = (size_t)hfp4__fp4_expert_weight_bytes(&parts[0], 1);
    size_t ssrc = 0; /* parts may mix F8_E8M0 and F32 sources */
    for (int32_t p = 0; p < count; p++) {
        size_t sb = (size_t)hfp4__fp4_expert_scale_bytes(&parts[p], 1);
        if (sb > ssrc) ssrc = sb;
    }
    unsigned char *src_w = malloc(wsrc), *src_s = malloc(ssrc), *tmp = malloc((size_t)one.total_bytes);
    unsigned char *scales = malloc((size_t)(geo.scale_bytes_per_group * total)), *modes = malloc((size_t)(modes_per_group * total));
    hfp4_status st = HFP4_OK;
    if (!src_w || !src_s || !tmp || !scales || !modes)
        st = hfp4__fail(HFP4_ERR_OUT_OF_MEMORY, "repack: out of memory (one group of [%lld, %lld] plus %lld groups' scales)",
                        (long long)n, (long long)k, (long long)total);
    /* A regular output (or a new one) is written to a temporary file beside it and renamed over it
     * once complete: a failure leaves an existing file as it was (it used to be deleted) and no
     * half-written one. A device or pipe (/dev/null, a FIFO) is written in place. */
    FILE *out = NULL;
    char *tmp_path = NULL, *target = NULL; /* renamed to target: out_path, through a symbolic link */
    if (st == HFP4_OK) {
        struct stat info;
        const int exists = stat(out_path, &info) == 0;
        errno = 0;
        if (exists && !S_ISREG(info.st_mode)) {
            out = fopen(out_path, "wb");
        } else {
            target = exists ? realpath(out_path, NULL) : NULL;
            if (!target) target = strdup(out_path);
            out = target ? create_temporary(target, &tmp_path) : NULL;
        }
        if (!out)
            st = hfp4__fail(HFP4_ERR_INVALID_ARGUMENT, "repack: cannot create output '%s'%s: %s", HFP4__SHOWN(out_path),
                            target ? " (a temporary file beside it)" : "", errno ? strerror(errno) : "unknown error");
    }
    unsigned char head[HFP4__SM90_CONTAINER_HEADER_BYTES];
    hfp4__sm90_container_encode(&res.header, head);
    if (st == HFP4_OK) st = write_all(out, head, sizeof head, out_path);

    int64_t real_tiles = hfp4__ceil_div(n, HFP4_SM90_ROW_TILE), g_all = 0;
    for (int32_t p = 0; p < count && st == HFP4_OK; p++) {
        for (int32_t g = 0; g < parts[p].groups && st == HFP4_OK; g++, g_all++) {
            hfp4_matrix m, packed;
            st = hfp4__fp4_expert_load(file, &parts[p], g, 1, src_w, src_s, &m);
            if (st != HFP4_OK) break;
            st = hfp4_ref_repack_sm90(&m, 1, sdt, tmp, (size_t)one.total_bytes, &packed);
            if (st != HFP4_OK) {
                char why[512];
                snprintf(why, sizeof why, "%s", hfp4_last_error());
                if (parts[p].groups > 1)
                    st = hfp4__fail(st, "safetensors '%s': tensor '%s' (group %d): %s", HFP4__SHOWN(file->path),
                                    HFP4__SHOWN(parts[p].weight->name), (int)g, why);
                else
                    st = hfp4__fail(st, "safetensors '%s': tensor '%s': %s", HFP4__SHOWN(file->path),
                                    HFP4__SHOWN(parts[p].weight->name), why);
                break;
            }
            st = write_all(out, tmp, (size_t)one.weight_bytes, out_path);
            memcpy(scales + g_all * geo.scale_bytes_per_group, tmp + one.scale_offset, (size_t)one.scale_bytes_per_group);
            memcpy(modes + g_all * modes_per_group, tmp + one.mode_offset, (size_t)modes_per_group);
            for (int64_t t = 0; t < real_tiles; t++) {
                res.tiles++;
                res.one_base += (tmp[one.mode_offset + t * one.chunks] & HFP4_SM90_MODE_ONE_BASE) != 0;
                for (int64_t c = 0; c < one.chunks; c++) {
                    res.chunk_tiles++;
                    res.folded += (tmp[one.mode_offset + t * one.chunks + c] & HFP4_SM90_MODE_PER32) == 0;
                }
            }
        }
    }
    if (st == HFP4_OK) st = write_zeros(out, geo.scale_offset - geo.weight_bytes, out_path);
    if (st == HFP4_OK) st = write_all(out, scales, (size_t)(geo.scale_bytes_per_group * total), out_path);
    if (st == HFP4_OK)
        st = write_zeros(out, geo.mode_offset - geo.scale_offset - geo.scale_bytes_per_group * total, out_path);
    if (st == HFP4_OK) st = write_all(out, modes, (size_t)(modes_per_group * total), out_path);
    if (out) {
        errno = 0;
        if (fclose(out) != 0 && st == HFP4_OK)
            st = hfp4__fail(HFP4_ERR_IO, "cannot write '%s': %s", HFP4__SHOWN(out_path),
                            errno ? strerror(errno) : "close failed");
        if (tmp_path && st == HFP4_OK && rename(tmp_path, target) != 0)
            st = hfp4__fail(HFP4_ERR_IO, "repack: cannot rename the finished temporary file to '%s': %s",
                            HFP4__SHOWN(out_path), strerror(errno));
        if (tmp_path && st != HFP4_OK) unlink(tmp_path);
    }
    free(tmp_path);
    free(target);
    free(src_w);
    free(src_s);
    free(tmp);
    free(scales);
    free(modes);
    if (st == HFP4_OK) *result = res;
    return st;
}
