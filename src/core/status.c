/*
 * status.c - status names and strings, the per-thread last-error message, and the version.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

#define HFP4_STR2(x) #x
#define HFP4_STR(x) HFP4_STR2(x)

/* NOTE: _Thread_local keeps each thread's message apart, so concurrent callers never see each
 * other's errors (the API promises a per-thread detail). */
static _Thread_local char last_error[2048]; /* room for a path and two names, each HFP4__SHOWN'ed */

hfp4_status hfp4__fail(hfp4_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return status;
}

const char *hfp4__shown(const char *s, char buf[HFP4__SHOWN_CAP]) {
    if (!s) return "(null)";
    size_t n = strlen(s);
    if (n <= HFP4__SHOWN_MAX) return s;
    size_t head = HFP4__SHOWN_HEAD, tail = n - HFP4__SHOWN_TAIL;
    /* whole UTF-8 sequences only: back the head off a continuation byte, move the tail past one */
    while (head > 0 && ((unsigned char)s[head] & 0xC0) == 0x80) head--;
    while (tail < n && ((unsigned char)s[tail] & 0xC0) == 0x80) tail++;
    const int saved = errno; /* a message's strerror(errno) may be evaluated after this */
    snprintf(buf, HFP4__SHOWN_CAP, "%.*s...(%zu bytes)...%s", (int)head, s, n, s + tail);
    errno = saved;
    return buf;
}

const char *hfp4_last_error(void) { return last_error; }

void hfp4_clear_error(void) { last_error[0] = '\0'; }

const char *hfp4_status_name(hfp4_status status) {
    switch (status) {
    case HFP4_OK: return "HFP4_OK";
    case HFP4_ERR_INVALID_ARGUMENT: return "HFP4_ERR_INVALID_ARGUMENT";
    case HFP4_ERR_UNSUPPORTED: return "HFP4_ERR_UNSUPPORTED";
    case HFP4_ERR_CUDA: return "HFP4_ERR_CUDA";
    case HFP4_ERR_OUT_OF_MEMORY: return "HFP4_ERR_OUT_OF_MEMORY";
    case HFP4_ERR_NO_DEVICE: return "HFP4_ERR_NO_DEVICE";
    case HFP4_ERR_INTERNAL: return "HFP4_ERR_INTERNAL";
    case HFP4_ERR_IO: return "HFP4_ERR_IO";
    }
    return "HFP4_STATUS_UNKNOWN";
}

const char *hfp4_status_string(hfp4_status status) {
    switch (status) {
    case HFP4_OK: return "success";
    case HFP4_ERR_INVALID_ARGUMENT: return "invalid argument";
    case HFP4_ERR_UNSUPPORTED: return "unsupported on this device or for this combination";
    case HFP4_ERR_CUDA: return "CUDA error";
    case HFP4_ERR_OUT_OF_MEMORY: return "out of memory";
    case HFP4_ERR_NO_DEVICE: return "no CUDA device or driver";
    case HFP4_ERR_INTERNAL: return "internal error";
    case HFP4_ERR_IO: return "I/O error";
    }
    return "unknown status";
}

unsigned hfp4_version_number(void) { return HFP4_VERSION_NUMBER; }

const char *hfp4_version_string(void) {
    return HFP4_STR(HFP4_VERSION_MAJOR) "." HFP4_STR(HFP4_VERSION_MINOR) "." HFP4_STR(HFP4_VERSION_PATCH);
}
