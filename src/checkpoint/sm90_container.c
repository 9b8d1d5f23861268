/*
 * sm90_container.c - see sm90_container.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "../weights/repack_sm90.h"
#include "safetensors.h"
#include "sm90_container.h"

static void put_le(unsigned char *b, uint64_t v, int n) {
    for (int i = 0; i < n; i++) b[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le(const unsigned char *b, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | b[i];
    return v;
}

hfp4_status hfp4__sm90_container_make(int32_t groups, int64_t n, int64_t k, hfp4_dtype scale_dtype, hfp4__sm90_container *h) {
    size_t bytes = 0;
    HFP4_TRY(hfp4_sm90_weights_size(groups, n, k, scale_dtype, &bytes));
    h->container_version = HFP4__SM90_CONTAINER_VERSION;
    h->layout_version = HFP4_SM90_WEIGHTS_VERSION;
    h->groups = groups;
    h->scale_dtype = scale_dtype;
    h->n = n;
    h->k = k;
    h->bytes = bytes;
    return HFP4_OK;
}

void hfp4__sm90_container_encode(const hfp4__sm90_container *h, unsigned char out[HFP4__SM90_CONTAINER_HEADER_BYTES]) {
    memset(out, 0, HFP4__SM90_CONTAINER_HEADER_BYTES);
    memcpy(out, HFP4__SM90_CONTAINER_MAGIC, 8);
    put_le(out + 8, h->container_version, 4);
    put_le(out + 12, h->layout_version, 4);
    put_le(out + 16, (uint32_t)h->groups, 4);
    put_le(out + 20, (uint32_t)h->scale_dtype, 4);
    put_le(out + 24, (uint64_t)h->n, 8);
    put_le(out + 32, (uint64_t)h->k, 8);
    put_le(out + 40, h->bytes, 8);
}

hfp4_status hfp4__sm90_container_decode(const char *path, const unsigned char in[HFP4__SM90_CONTAINER_HEADER_BYTES],
                                        uint64_t file_bytes, hfp4__sm90_container *h) {
    char shown[HFP4__SHOWN_CAP];
    path = hfp4__shown(path, shown); /* only messages use it */
    HFP4_CHECK_ARG(memcmp(in, HFP4__SM90_CONTAINER_MAGIC, 8) == 0, "HFP4SM90 container '%s': magic is not \"HFP4SM90\"", path);
    uint32_t cv = (uint32_t)get_le(in + 8, 4), lv = (uint32_t)get_le(in + 12, 4);
    HFP4_CHECK_ARG(cv == HFP4__SM90_CONTAINER_VERSION, "HFP4SM90 container '%s': container version %u, this build reads %u",
                   path, cv, HFP4__SM90_CONTAINER_VERSION);
    /* NOTE: version 2 buffers are valid version 3 buffers without the one-base bit of the chunk
     * modes (docs/FORMATS.md): they run, on the chunk-by-chunk path; repacking brings them the
     * look-ahead loop */
    HFP4_CHECK_ARG(lv == HFP4_SM90_WEIGHTS_VERSION || lv == 2,
                   "HFP4SM90 container '%s': SM90 layout version %u, this build reads versions 2 and %d (repack again)",
                   path, lv, HFP4_SM90_WEIGHTS_VERSION);
    uint64_t g = get_le(in + 16, 4), sd = get_le(in + 20, 4);
    int64_t n = (int64_t)get_le(in + 24, 8), k = (int64_t)get_le(in + 32, 8);
    uint64_t bytes = get_le(in + 40, 8);
    HFP4_CHECK_ARG(g >= 1 && g <= INT32_MAX, "HFP4SM90 container '%s': G = %llu must be in [1, %d]", path,
                   (unsigned long long)g, INT32_MAX);
    HFP4_CHECK_ARG(sd == HFP4_DTYPE_UE8M0 || sd == HFP4_DTYPE_FP32,
                   "HFP4SM90 container '%s': scale dtype %llu must be %d (ue8m0) or %d (fp32)", path, (unsigned long long)sd,
                   (int)HFP4_DTYPE_UE8M0, (int)HFP4_DTYPE_FP32);
    /* bounds first so that the geometry below cannot overflow */
    HFP4_CHECK_ARG(n >= 1 && n <= (INT64_C(1) << 40), "HFP4SM90 container '%s': N = %lld is out of range", path, (long long)n);
    HFP4_CHECK_ARG(k >= 32 && k % 32 == 0 && k <= (INT64_C(1) << 40),
                   "HFP4SM90 container '%s': K = %lld must be a positive multiple of 32", path, (long long)k);
    for (int i = 48; i < HFP4__SM90_CONTAINER_HEADER_BYTES; i++)
        HFP4_CHECK_ARG(in[i] == 0, "HFP4SM90 container '%s': reserved header byte %d is %u, not 0", path, i, in[i]);
    /* the weights alone need G * N_pad * K_pad / 2 bytes: a larger claim than the file is bogus, and
     * checking it first keeps the geometry arithmetic below from overflowing */
    uint64_t npad = ((uint64_t)n + 127) / 128 * 128, kpad = ((uint64_t)k + 127) / 128 * 128, per_group, weight_bytes;
    int overflow = __builtin_mul_overflow(npad, kpad / 2, &per_group);
    overflow |= __builtin_mul_overflow(g, per_group, &weight_bytes);
    HFP4_CHECK_ARG(!overflow && weight_bytes <= file_bytes,
                   "HFP4SM90 container '%s': G %llu x [N %lld, K %lld] needs more bytes than the file's %llu", path,
                   (unsigned long long)g, (long long)n, (long long)k, (unsigned long long)file_bytes);
    hfp4__sm90_container want;
    HFP4_TRY(hfp4__sm90_container_make((int32_t)g, n, k, (hfp4_dtype)sd, &want));
    HFP4_CHECK_ARG(bytes == want.bytes,
                   "HFP4SM90 container '%s': byte count %llu, but G %llu x [N %lld, K %lld] with %s scales needs %llu", path,
                   (unsigned long long)bytes, (unsigned long long)g, (long long)n, (long long)k,
                   hfp4_dtype_name((hfp4_dtype)sd), (unsigned long long)want.bytes);
    HFP4_CHECK_ARG(file_bytes == HFP4__SM90_CONTAINER_HEADER_BYTES + bytes,
                   "HFP4SM90 container '%s': the file is %llu bytes, but header + payload are %llu (truncated or padded)", path,
                   (unsigned long long)file_bytes, (unsigned long long)(HFP4__SM90_CONTAINER_HEADER_BYTES + bytes));
    want.layout_version = lv; /* 2 or 3: as the file says */
    *h = want;
    return HFP4_OK;
}

hfp4_status hfp4__sm90_container_load(const char *path, hfp4__sm90_container *h, void **payload, hfp4_matrix *b) {
    HFP4_CHECK_ARG(path && h && payload && b, "hfp4__sm90_container_load: NULL argument");
    *payload = NULL;
    FILE *f = NULL;
    HFP4_TRY(hfp4__open_regular("HFP4SM90 container", path, &f));
    char shown[HFP4__SHOWN_CAP];
    path = hfp4__shown(path, shown); /* only messages use it from here */
    hfp4_status st = HFP4_OK;
    unsigned char head[HFP4__SM90_CONTAINER_HEADER_BYTES];
    off_t size = -1;
    errno = 0;
    if (fseeko(f, 0, SEEK_END) == 0) size = ftello(f);
    if (size < 0 || fseeko(f, 0, SEEK_SET) != 0)
        st = hfp4__fail(HFP4_ERR_INVALID_ARGUMENT, "HFP4SM90 container '%s': cannot determine the file size: %s", path,
                        strerror(errno));
    else if (size < HFP4__SM90_CONTAINER_HEADER_BYTES)
        st = hfp4__fail(HFP4_ERR_INVALID_ARGUMENT, "HFP4SM90 container '%s': the file is %lld bytes, shorter than the %d-byte header",
                        path, (long long)size, HFP4__SM90_CONTAINER_HEADER_BYTES);
    else {
        errno = 0; /* a short read sets no errno: a stale one must not be given as the reason */
        if (fread(head, 1, sizeof head, f) != sizeof head)
            st = hfp4__fail(HFP4_ERR_INVALID_ARGUMENT, "HFP4SM90 container '%s': cannot read the header: %s", path,
                            errno ? strerror(errno) : "short read");
    }
    if (st == HFP4_OK) st = hfp4__sm90_container_decode(path, head, (uint64_t)size, h);
    void *buf = NULL;
    if (st == HFP4_OK && h->bytes > SIZE_MAX)
        st = hfp4__fail(HFP4_ERR_OUT_OF_MEMORY, "HFP4SM90 container '%s': %llu bytes do not fit this host", path,
                        (unsigned long long)h->bytes);
    if (st == HFP4_OK && !(buf = malloc((size_t)h->bytes)))
        st = hfp4__fail(HFP4_ERR_OUT_OF_MEMORY, "HFP4SM90 container '%s': out of memory for %llu bytes", path,
                        (unsigned long long)h->bytes);
    if (st == HFP4_OK) {
        errno = 0;
        if (fread(buf, 1, (size_t)h->bytes, f) != (size_t)h->bytes)
            st = hfp4__fail(HFP4_ERR_INVALID_ARGUMENT, "HFP4SM90 container '%s': cannot read the %llu-byte payload: %s",
                            path, (unsigned long long)h->bytes, errno ? strerror(errno) : "short read");
    }
    fclose(f);
    if (st != HFP4_OK) {
        free(buf);
        return st;
    }
    hfp4_sm90_geometry geo = hfp4_sm90_geometry_make(h->groups, h->n, h->k, h->scale_dtype == HFP4_DTYPE_FP32);
    hfp4__sm90_describe(&geo, buf, b);
    *payload = buf;
    return HFP4_OK;
}
