/*
 * test_status.c - status names and strings, the last-error message, the version.
 */
#include <string.h>

#include "harness.h"
#include "internal.h"

TEST(status_names_are_distinct_and_stable) {
    CHECK_EQ_I64(HFP4_OK, 0);
    CHECK_EQ_I64(HFP4_ERR_INVALID_ARGUMENT, 1);
    CHECK_EQ_I64(HFP4_ERR_UNSUPPORTED, 2);
    CHECK_EQ_I64(HFP4_ERR_CUDA, 3);
    CHECK_EQ_I64(HFP4_ERR_OUT_OF_MEMORY, 4);
    CHECK_EQ_I64(HFP4_ERR_NO_DEVICE, 5);
    CHECK_EQ_I64(HFP4_ERR_INTERNAL, 6);
    CHECK_EQ_I64(HFP4_ERR_IO, 7);
    for (int a = 0; a <= 7; a++)
        for (int b = a + 1; b <= 7; b++) {
            CHECK(strcmp(hfp4_status_name((hfp4_status)a), hfp4_status_name((hfp4_status)b)) != 0);
            CHECK(strcmp(hfp4_status_string((hfp4_status)a), hfp4_status_string((hfp4_status)b)) != 0);
        }
    CHECK(strcmp(hfp4_status_name(HFP4_ERR_UNSUPPORTED), "HFP4_ERR_UNSUPPORTED") == 0);
    CHECK(strcmp(hfp4_status_name((hfp4_status)99), "HFP4_STATUS_UNKNOWN") == 0);
}

TEST(last_error_holds_the_message) {
    hfp4_clear_error();
    CHECK(hfp4_last_error()[0] == '\0');
    CHECK_STATUS(hfp4__fail(HFP4_ERR_INVALID_ARGUMENT, "f: k = %d", 100), HFP4_ERR_INVALID_ARGUMENT);
    CHECK(strcmp(hfp4_last_error(), "f: k = 100") == 0);
    hfp4_clear_error();
    CHECK(hfp4_last_error()[0] == '\0');
}

TEST(version_matches_header) {
    CHECK_EQ_I64(hfp4_version_number(), HFP4_VERSION_NUMBER);
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", HFP4_VERSION_MAJOR, HFP4_VERSION_MINOR, HFP4_VERSION_PATCH);
    CHECK(strcmp(hfp4_version_string(), want) == 0);
}

/* hfp4_gemm_flags: bits hfp4.h does not define are an invalid argument that names them, checked
 * before anything else (so with or without a GPU, and without reading the problem) */
TEST(gemm_flags_unknown_bits_are_invalid) {
    hfp4_gemm_problem p;
    memset(&p, 0, sizeof p);
    CHECK_STATUS(hfp4_gemm_flags(&p, 0x80u, NULL), HFP4_ERR_INVALID_ARGUMENT);
    CHECK(strstr(hfp4_last_error(), "flags = 0x80") != NULL);
    CHECK_STATUS(hfp4_gemm_flags(NULL, HFP4_GEMM_OVERLAP_PREVIOUS | 0x2u, NULL), HFP4_ERR_INVALID_ARGUMENT);
    CHECK(strstr(hfp4_last_error(), "flags = 0x3") != NULL);
}
