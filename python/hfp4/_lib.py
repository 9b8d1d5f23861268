"""ctypes binding of libhfp4.so: the loader, the structure mirrors, the function table and the
mapping of hfp4_status codes to Python exceptions.

This module never imports numpy or torch. Nothing is loaded at import time: the first call of
:func:`lib` finds and loads the library, so ``import hfp4`` works on any machine and a missing
library is reported (as :class:`LibraryNotFound`, an ImportError) only when a call needs it.

Where the library is looked for, first match wins:

1. the environment variable ``HFP4_LIBRARY`` (a path to the .so; if set, it must load);
2. ``libhfp4.so`` in this package's directory (a wheel or an installed copy);
3. ``build/libhfp4.so`` of the source tree this package sits in (``python/../build``), i.e. what
   ``make`` builds.

The structure mirrors below follow include/hfp4.h and include/hfp4_sf_layout.h field for field
(enums are C ``int``); tests/test_lib.py checks their offsets and sizes against a C compiler and the
function table against the headers' prototypes.
"""
from __future__ import annotations

import ctypes
import os
import threading
from ctypes import (POINTER, Structure, c_char, c_char_p, c_float, c_int, c_int32, c_int64, c_size_t,
                    c_uint, c_uint8, c_uint16, c_uint32, c_void_p)

__all__ = [
    "lib", "library_path", "check", "raise_status", "invalid_argument",
    "HFP4Error", "InvalidArgument", "Unsupported", "CudaError", "OutOfMemory", "NoDevice", "InternalError", "IOFailure",
    "LibraryNotFound",
    "hfp4_scales", "hfp4_matrix", "hfp4_output", "hfp4_gemm_problem", "hfp4_device_info",
    "hfp4_sf_tensor", "hfp4_sf_recipe", "hfp4_sf_psum", "hfp4_sf_options", "hfp4_sf_k_groups",
    "hfp4_sf_transform_request", "hfp4_sf_pair_request", "hfp4_sf_pair_result",
    "FUNCTIONS", "ABI_MAJOR",
]

ABI_MAJOR = 0  # HFP4_VERSION_MAJOR this binding was written for (same major => ABI compatible)

# ------------------------------------------------------------------------------------------------
# Constants (values from the headers; they are never renumbered)
# ------------------------------------------------------------------------------------------------

# hfp4_status
OK = 0
ERR_INVALID_ARGUMENT = 1
ERR_UNSUPPORTED = 2
ERR_CUDA = 3
ERR_OUT_OF_MEMORY = 4
ERR_NO_DEVICE = 5
ERR_INTERNAL = 6
ERR_IO = 7

# hfp4_dtype
DTYPE_NONE = 0
DTYPE_FP32 = 1
DTYPE_BF16 = 2
DTYPE_FP8_E4M3 = 3
DTYPE_FP4_E2M1 = 4
DTYPE_UE8M0 = 5
DTYPE_UE8M0_PACKED = 6
DTYPE_INT32 = 7
DTYPE_FP4_E2M1_SM90 = 8

# hfp4_grouping
GROUPING_NONE = 0
GROUPING_CONTIGUOUS = 1
GROUPING_CONTIGUOUS_PSUM = 2
GROUPING_MASKED = 3

# hfp4_d_padding
D_PADDING_ZERO = 0
D_PADDING_ANY = 1
# hfp4_gemm_flags
GEMM_OVERLAP_PREVIOUS = 1
# hfp4_gate_up (hfp4_moe_swiglu_quantize_rows)
GATE_UP_STACKED = 0
GATE_UP_INTERLEAVED = 1

DEFAULT_M_ALIGNMENT = 128
SM90_WEIGHTS_VERSION = 3

# hfp4_sf_operand
SF_OPERAND_UNSET = 0
SF_OPERAND_A = 1
SF_OPERAND_B = 2

# flags
SF_ROUND_UP = 1
SF_CHECK_TMA_STRIDE = 1
SF_CHECK_SM90_SFB = 2

# ------------------------------------------------------------------------------------------------
# Exceptions
# ------------------------------------------------------------------------------------------------


class HFP4Error(RuntimeError):
    """A failing hfp4 call. ``status`` is the hfp4_status code, ``status_name`` its name
    (``"HFP4_ERR_UNSUPPORTED"`` ...) and ``detail`` the library's hfp4_last_error() message, which
    names the offending argument and its value."""

    def __init__(self, message: str, status: int = ERR_INTERNAL, detail: str = ""):
        super().__init__(message)
        self.status = status
        self.status_name = _STATUS_NAMES.get(status, "HFP4_STATUS_UNKNOWN")
        self.detail = detail or message


class InvalidArgument(HFP4Error, ValueError):
    """HFP4_ERR_INVALID_ARGUMENT: the caller broke the contract. The message starts with
    "Assertion error" as DeepGEMM's host assertions do (callers match on "Assertion")."""


class Unsupported(HFP4Error, NotImplementedError):
    """HFP4_ERR_UNSUPPORTED: a well-formed request this build or device cannot serve; callers
    catch NotImplementedError to fall back to another backend."""


class CudaError(HFP4Error):
    """HFP4_ERR_CUDA: a CUDA runtime call failed (its name is in the message)."""


class OutOfMemory(HFP4Error):
    """HFP4_ERR_OUT_OF_MEMORY: a host or device allocation failed."""


class NoDevice(HFP4Error, NotImplementedError):
    """HFP4_ERR_NO_DEVICE: no CUDA driver or GPU, or a library built without the CUDA toolkit.
    Also a NotImplementedError: like Unsupported, the caller can serve the request elsewhere
    (the message says which of the two it was)."""


class IOFailure(HFP4Error, OSError):
    """HFP4_ERR_IO: a file could not be opened, read or written (checkpoint tools)."""


class InternalError(HFP4Error):
    """HFP4_ERR_INTERNAL: a bug in hfp4; please report it with the message."""


class LibraryNotFound(ImportError):
    """libhfp4.so could not be found or loaded (see the module docstring for the search order)."""


_STATUS_NAMES = {
    OK: "HFP4_OK",
    ERR_INVALID_ARGUMENT: "HFP4_ERR_INVALID_ARGUMENT",
    ERR_UNSUPPORTED: "HFP4_ERR_UNSUPPORTED",
    ERR_CUDA: "HFP4_ERR_CUDA",
    ERR_OUT_OF_MEMORY: "HFP4_ERR_OUT_OF_MEMORY",
    ERR_NO_DEVICE: "HFP4_ERR_NO_DEVICE",
    ERR_INTERNAL: "HFP4_ERR_INTERNAL",
    ERR_IO: "HFP4_ERR_IO",
}

_STATUS_CLASSES = {
    ERR_INVALID_ARGUMENT: InvalidArgument,
    ERR_UNSUPPORTED: Unsupported,
    ERR_CUDA: CudaError,
    ERR_OUT_OF_MEMORY: OutOfMemory,
    ERR_NO_DEVICE: NoDevice,
    ERR_INTERNAL: InternalError,
    ERR_IO: IOFailure,
}


def make_error(status: int, detail: str) -> HFP4Error:
    """The exception for `status` with the library's message `detail`."""
    cls = _STATUS_CLASSES.get(status, HFP4Error)
    name = _STATUS_NAMES.get(status, "HFP4_STATUS_UNKNOWN(%d)" % status)
    if cls is InvalidArgument:
        # DeepGEMM's DG_HOST_ASSERT reads "Assertion error (<file>:<line>): <condition>".
        message = "Assertion error (hfp4, %s): %s" % (name, detail)
    else:
        message = "%s: %s" % (name, detail)
    return cls(message, status, detail)


def invalid_argument(detail: str) -> InvalidArgument:
    """An InvalidArgument raised by the Python layer itself (a check needed to build pointers)."""
    return make_error(ERR_INVALID_ARGUMENT, detail)  # type: ignore[return-value]


def unsupported(detail: str) -> Unsupported:
    """An Unsupported raised by the Python layer itself."""
    return make_error(ERR_UNSUPPORTED, detail)  # type: ignore[return-value]


def raise_status(status: int) -> None:
    """Raise the exception for a non-OK status, with hfp4_last_error() as its detail. The message
    is read on the calling thread, right after the failing call (it is per thread in the library)."""
    if status == OK:
        return
    detail = lib().hfp4_last_error().decode("utf-8", "replace")
    raise make_error(status, detail)


def check(status: int) -> None:
    """Raise unless `status` is HFP4_OK (the errcheck of every status-returning function)."""
    if status != OK:
        raise_status(status)


# ------------------------------------------------------------------------------------------------
# Structure mirrors (field order and types exactly as in the headers)
# ------------------------------------------------------------------------------------------------


class hfp4_scales(Structure):
    _fields_ = [
        ("data", c_void_p),          # const void *data
        ("dtype", c_int),            # hfp4_dtype
        ("gran_mn", c_int32),
        ("gran_k", c_int32),
        ("stride_mn", c_int64),
        ("stride_k", c_int64),
        ("stride_group", c_int64),
    ]


class hfp4_matrix(Structure):
    _fields_ = [
        ("data", c_void_p),          # const void *data
        ("dtype", c_int),            # hfp4_dtype
        ("rows", c_int64),
        ("cols", c_int64),
        ("ld", c_int64),
        ("stride_group", c_int64),
        ("scales", hfp4_scales),
    ]


class hfp4_output(Structure):
    _fields_ = [
        ("data", c_void_p),          # void *data
        ("dtype", c_int),            # hfp4_dtype
        ("ld", c_int64),
        ("stride_group", c_int64),
        ("c", c_void_p),             # const void *c
    ]


class hfp4_gemm_problem(Structure):
    _fields_ = [
        ("grouping", c_int),         # hfp4_grouping
        ("m", c_int64),
        ("n", c_int64),
        ("k", c_int64),
        ("num_groups", c_int32),
        ("layout", c_void_p),        # const int32_t *layout
        ("m_alignment", c_int32),
        ("d_padding", c_int32),      # hfp4_d_padding
        ("expected_m", c_int64),
        ("a", hfp4_matrix),
        ("b", hfp4_matrix),
        ("d", hfp4_output),
    ]


class hfp4_moe_forward_problem(Structure):
    _fields_ = [
        ("tokens", c_int64),
        ("top_k", c_int32),
        ("num_experts", c_int32),
        ("x", c_void_p),             # const void *x
        ("x_dtype", c_int),          # hfp4_dtype
        ("ldx", c_int64),
        ("ids", c_void_p),           # const void *ids
        ("ids_int64", c_int),
        ("weights", c_void_p),       # const void *weights
        ("weights_dtype", c_int),    # hfp4_dtype
        ("w13", hfp4_matrix),
        ("w2", hfp4_matrix),
        ("gate_up", c_int),          # hfp4_gate_up
        ("swiglu_limit", c_float),
        ("gran_k", c_int32),
        ("m_alignment", c_int32),
        ("out", c_void_p),           # void *out
        ("out_dtype", c_int),        # hfp4_dtype
        ("ldo", c_int64),
        ("workspace", c_void_p),
        ("workspace_bytes", c_size_t),
    ]


class hfp4_device_info(Structure):
    _fields_ = [
        ("device", c_int32),
        ("cc_major", c_int32),
        ("cc_minor", c_int32),
        ("num_sms", c_int32),
        ("has_sm90_kernels", c_int32),
        ("global_mem_bytes", c_int64),
        ("name", c_char * 96),
    ]


class hfp4_sf_tensor(Structure):
    _fields_ = [
        ("data", c_void_p),          # void *data
        ("dtype", c_int),            # hfp4_dtype
        ("num_groups", c_int32),
        ("mn", c_int64),
        ("sf_k", c_int64),
        ("stride_group", c_int64),
        ("stride_mn", c_int64),
        ("stride_k", c_int64),
    ]


class hfp4_sf_recipe(Structure):
    _fields_ = [
        ("size", c_int32),
        ("gran", c_int32 * 3),
    ]


class hfp4_sf_psum(Structure):
    _fields_ = [
        ("ends", c_void_p),          # const int32_t *ends
        ("num_groups", c_int32),
        ("alignment", c_int32),
    ]


class hfp4_sf_options(Structure):
    _fields_ = [
        ("flags", c_uint32),
        ("num_threads", c_int32),
        ("error_flag", c_void_p),    # int32_t *error_flag (device memory)
    ]


class hfp4_sf_k_groups(Structure):
    _fields_ = [
        ("layout", c_void_p),        # const int32_t *layout
        ("num_groups", c_int32),
        ("ks", c_void_p),            # const int32_t *ks (host)
        ("gran_k", c_int32),
        ("k_alignment", c_int32),
        ("use_psum", c_int32),
    ]


class hfp4_sf_transform_request(Structure):
    _fields_ = [
        ("sf", POINTER(hfp4_sf_tensor)),
        ("mn", c_int64),
        ("k", c_int64),
        ("recipe", hfp4_sf_recipe),
        ("num_groups", c_int32),
        ("is_sfa", c_int),           # hfp4_sf_operand
        ("disable_ue8m0_cast", c_int32),
        ("psum", POINTER(hfp4_sf_psum)),
        ("arch", c_int32),
    ]


class hfp4_sf_pair_request(Structure):
    _fields_ = [
        ("sfa", POINTER(hfp4_sf_tensor)),
        ("sfb", POINTER(hfp4_sf_tensor)),
        ("m", c_int64),
        ("n", c_int64),
        ("k", c_int64),
        ("recipe", hfp4_sf_recipe),
        ("recipe_a", hfp4_sf_recipe),
        ("recipe_b", hfp4_sf_recipe),
        ("num_groups_a", c_int32),
        ("num_groups_b", c_int32),
        ("disable_ue8m0_cast", c_int32),
        ("psum", POINTER(hfp4_sf_psum)),
        ("a_dtype", c_int),          # hfp4_dtype
        ("b_dtype", c_int),          # hfp4_dtype
        ("arch", c_int32),
    ]


class hfp4_sf_pair_result(Structure):
    _fields_ = [
        ("sfa", hfp4_sf_tensor),
        ("sfb", hfp4_sf_tensor),
        ("sfa_bytes", c_size_t),
        ("sfb_bytes", c_size_t),
        ("gran_k_a", c_int32),
        ("gran_k_b", c_int32),
    ]


def recipe(values) -> hfp4_sf_recipe:
    """hfp4_sf_recipe from None (not given), a 2-tuple or a 3-tuple of ints."""
    r = hfp4_sf_recipe()
    if values is None:
        return r
    values = tuple(int(v) for v in values)
    if len(values) not in (2, 3):
        raise invalid_argument("recipe = %r must be a 2-tuple (gran_mn, gran_k) or a 3-tuple "
                               "(gran_mn_a, gran_mn_b, gran_k)" % (values,))
    r.size = len(values)
    for i, v in enumerate(values):
        r.gran[i] = v
    return r


def sf_transform_request(t, mn, k, recipe_values, num_groups, is_sfa, disable_ue8m0_cast, psum, arch):
    """hfp4_sf_transform_request for transform_sf_into_required_layout (shared by the numpy and the
    torch layers). t: the input hfp4_sf_tensor; psum: an hfp4_sf_psum or None. The caller keeps t
    and psum alive while the request is used."""
    req = hfp4_sf_transform_request()
    req.sf = ctypes.pointer(t)
    req.mn, req.k = int(mn), int(k)
    req.recipe = recipe(recipe_values)
    req.num_groups = 0 if num_groups is None else int(num_groups)
    req.is_sfa = SF_OPERAND_UNSET if is_sfa is None else (SF_OPERAND_A if is_sfa else SF_OPERAND_B)
    req.disable_ue8m0_cast = int(bool(disable_ue8m0_cast))
    if psum is not None:
        req.psum = ctypes.pointer(psum)
    req.arch = int(arch)
    return req


# ------------------------------------------------------------------------------------------------
# Function table: (name, restype, argtypes), each with its C prototype
# ------------------------------------------------------------------------------------------------

_st = c_int  # hfp4_status
_P = POINTER
_stream = c_void_p  # hfp4_stream (cudaStream_t)

FUNCTIONS = [
    # unsigned hfp4_version_number(void);
    ("hfp4_version_number", c_uint, []),
    # const char *hfp4_version_string(void);
    ("hfp4_version_string", c_char_p, []),
    # const char *hfp4_status_name(hfp4_status status);
    ("hfp4_status_name", c_char_p, [c_int]),
    # const char *hfp4_status_string(hfp4_status status);
    ("hfp4_status_string", c_char_p, [c_int]),
    # const char *hfp4_last_error(void);
    ("hfp4_last_error", c_char_p, []),
    # void hfp4_clear_error(void);
    ("hfp4_clear_error", None, []),
    # size_t hfp4_dtype_storage_bytes(hfp4_dtype dtype);
    ("hfp4_dtype_storage_bytes", c_size_t, [c_int]),
    # const char *hfp4_dtype_name(hfp4_dtype dtype);
    ("hfp4_dtype_name", c_char_p, [c_int]),
    # float hfp4_fp4_decode(uint8_t code);
    ("hfp4_fp4_decode", c_float, [c_uint8]),
    # uint8_t hfp4_fp4_encode(float x);
    ("hfp4_fp4_encode", c_uint8, [c_float]),
    # float hfp4_fp8_decode(uint8_t byte);
    ("hfp4_fp8_decode", c_float, [c_uint8]),
    # uint8_t hfp4_fp8_encode(float x);
    ("hfp4_fp8_encode", c_uint8, [c_float]),
    # float hfp4_ue8m0_decode(uint8_t e);
    ("hfp4_ue8m0_decode", c_float, [c_uint8]),
    # float hfp4_ceil_to_ue8m0(float x);
    ("hfp4_ceil_to_ue8m0", c_float, [c_float]),
    # int hfp4_ue8m0_from_float(float x, uint8_t *e);
    ("hfp4_ue8m0_from_float", c_int, [c_float, _P(c_uint8)]),
    # float hfp4_bf16_decode(uint16_t bits);
    ("hfp4_bf16_decode", c_float, [c_uint16]),
    # uint16_t hfp4_bf16_encode(float x);
    ("hfp4_bf16_encode", c_uint16, [c_float]),
    # hfp4_status hfp4_quantize_fp8_per_token(const void *x, hfp4_dtype x_dtype, int64_t m, int64_t k,
    #     int64_t ldx, int use_ue8m0, uint8_t *q, int64_t ldq, const hfp4_scales *sf);
    ("hfp4_quantize_fp8_per_token", _st,
     [c_void_p, c_int, c_int64, c_int64, c_int64, c_int, c_void_p, c_int64, _P(hfp4_scales)]),
    # hfp4_status hfp4_quantize_fp8_per_block(... same ...);
    ("hfp4_quantize_fp8_per_block", _st,
     [c_void_p, c_int, c_int64, c_int64, c_int64, c_int, c_void_p, c_int64, _P(hfp4_scales)]),
    # hfp4_status hfp4_quantize_fp4_per_token(... same ...);
    ("hfp4_quantize_fp4_per_token", _st,
     [c_void_p, c_int, c_int64, c_int64, c_int64, c_int, c_void_p, c_int64, _P(hfp4_scales)]),
    # hfp4_status hfp4_ref_gemm(const hfp4_gemm_problem *problem, int num_threads);
    ("hfp4_ref_gemm", _st, [_P(hfp4_gemm_problem), c_int]),
    # hfp4_status hfp4_check_problem(const hfp4_gemm_problem *problem, int device_pointers);
    ("hfp4_check_problem", _st, [_P(hfp4_gemm_problem), c_int]),
    # hfp4_status hfp4_sm90_weights_size(int32_t num_groups, int64_t n, int64_t k, hfp4_dtype scale_dtype,
    #     size_t *bytes);
    ("hfp4_sm90_weights_size", _st, [c_int32, c_int64, c_int64, c_int, _P(c_size_t)]),
    # hfp4_status hfp4_sm90_weights_scale_dtype(const hfp4_matrix *w, int32_t num_groups, hfp4_dtype *scale_dtype);
    ("hfp4_sm90_weights_scale_dtype", _st, [_P(hfp4_matrix), c_int32, _P(c_int)]),
    # hfp4_status hfp4_ref_repack_sm90(const hfp4_matrix *w, int32_t num_groups, hfp4_dtype scale_dtype,
    #     void *dst, size_t dst_bytes, hfp4_matrix *out);
    ("hfp4_ref_repack_sm90", _st, [_P(hfp4_matrix), c_int32, c_int, c_void_p, c_size_t, _P(hfp4_matrix)]),
    # hfp4_status hfp4_device_query(int device, hfp4_device_info *info);
    ("hfp4_device_query", _st, [c_int, _P(hfp4_device_info)]),
    # hfp4_status hfp4_gemm(const hfp4_gemm_problem *problem, hfp4_stream stream);
    ("hfp4_gemm", _st, [_P(hfp4_gemm_problem), _stream]),
    # hfp4_status hfp4_gemm_flags(const hfp4_gemm_problem *problem, uint32_t flags, hfp4_stream stream);
    ("hfp4_gemm_flags", _st, [_P(hfp4_gemm_problem), c_uint32, _stream]),
    # hfp4_status hfp4_gemm_supported(const hfp4_gemm_problem *problem);
    ("hfp4_gemm_supported", _st, [_P(hfp4_gemm_problem)]),
    # hfp4_status hfp4_repack_sm90(const hfp4_matrix *w, int32_t num_groups, hfp4_dtype scale_dtype,
    #     void *dst, size_t dst_bytes, hfp4_matrix *out, hfp4_stream stream);
    ("hfp4_repack_sm90", _st,
     [_P(hfp4_matrix), c_int32, c_int, c_void_p, c_size_t, _P(hfp4_matrix), _stream]),
    # hfp4_status hfp4_fp4_weights_to_fp8(const hfp4_matrix *w, uint8_t *q, int64_t ldq, const hfp4_scales *sf);
    ("hfp4_fp4_weights_to_fp8", _st, [_P(hfp4_matrix), c_void_p, c_int64, _P(hfp4_scales)]),
    # hfp4_status hfp4_fp4_weights_to_fp8_gpu(... same ..., int32_t *inexact_blocks, hfp4_stream stream);
    ("hfp4_fp4_weights_to_fp8_gpu", _st,
     [_P(hfp4_matrix), c_void_p, c_int64, _P(hfp4_scales), c_void_p, _stream]),
    # int64_t hfp4_moe_layout_rows(int64_t routed_rows, int32_t num_experts, int32_t alignment);
    ("hfp4_moe_layout_rows", c_int64, [c_int64, c_int32, c_int32]),
    # hfp4_status hfp4_moe_route(const void *ids, int ids_int64, int64_t routed_rows, int32_t num_experts,
    #     int32_t alignment, int32_t *row_pos, int32_t *layout, int64_t layout_rows);
    ("hfp4_moe_route", _st, [c_void_p, c_int, c_int64, c_int32, c_int32, c_void_p, c_void_p, c_int64]),
    # hfp4_status hfp4_moe_route_gpu(... the same ..., hfp4_stream stream);
    ("hfp4_moe_route_gpu", _st, [c_void_p, c_int, c_int64, c_int32, c_int32, c_void_p, c_void_p, c_int64, _stream]),
    # hfp4_status hfp4_moe_quantize_rows(const void *x, hfp4_dtype x_dtype, int64_t x_rows, int64_t k,
    #     int64_t ldx, int32_t row_div, const int32_t *row_pos, int64_t routed_rows, int32_t gran_k,
    #     uint8_t *a, int64_t lda, float *sf, int64_t layout_rows);
    ("hfp4_moe_quantize_rows", _st,
     [c_void_p, c_int, c_int64, c_int64, c_int64, c_int32, c_void_p, c_int64, c_int32, c_void_p, c_int64, c_void_p,
      c_int64]),
    # hfp4_status hfp4_moe_quantize_rows_gpu(... the same ..., hfp4_stream stream);
    ("hfp4_moe_quantize_rows_gpu", _st,
     [c_void_p, c_int, c_int64, c_int64, c_int64, c_int32, c_void_p, c_int64, c_int32, c_void_p, c_int64, c_void_p,
      c_int64, _stream]),
    # hfp4_status hfp4_moe_swiglu_quantize_rows(const void *y, int64_t ldy, int64_t n, hfp4_gate_up gate_up,
    #     float limit, const int32_t *row_pos, int64_t routed_rows, int32_t gran_k, uint8_t *a, int64_t lda,
    #     float *sf, int64_t layout_rows);
    ("hfp4_moe_swiglu_quantize_rows", _st,
     [c_void_p, c_int64, c_int64, c_int, c_float, c_void_p, c_int64, c_int32, c_void_p, c_int64, c_void_p, c_int64]),
    # hfp4_status hfp4_moe_swiglu_quantize_rows_gpu(... the same ..., hfp4_stream stream);
    ("hfp4_moe_swiglu_quantize_rows_gpu", _st,
     [c_void_p, c_int64, c_int64, c_int, c_float, c_void_p, c_int64, c_int32, c_void_p, c_int64, c_void_p, c_int64,
      _stream]),
    # hfp4_status hfp4_moe_combine(const void *y, int64_t ldy, int64_t layout_rows, int64_t n,
    #     const int32_t *row_pos, const void *weights, hfp4_dtype weights_dtype, int64_t tokens, int32_t top_k,
    #     void *out, hfp4_dtype out_dtype, int64_t ldo);
    ("hfp4_moe_combine", _st,
     [c_void_p, c_int64, c_int64, c_int64, c_void_p, c_void_p, c_int, c_int64, c_int32, c_void_p, c_int, c_int64]),
    # hfp4_status hfp4_moe_combine_gpu(... the same ..., hfp4_stream stream);
    ("hfp4_moe_combine_gpu", _st,
     [c_void_p, c_int64, c_int64, c_int64, c_void_p, c_void_p, c_int, c_int64, c_int32, c_void_p, c_int, c_int64,
      _stream]),
    # hfp4_status hfp4_moe_forward_workspace_size(const hfp4_moe_forward_problem *problem, size_t *bytes);
    ("hfp4_moe_forward_workspace_size", _st, [_P(hfp4_moe_forward_problem), _P(c_size_t)]),
    # hfp4_status hfp4_moe_forward(const hfp4_moe_forward_problem *problem);
    ("hfp4_moe_forward", _st, [_P(hfp4_moe_forward_problem)]),
    # hfp4_status hfp4_moe_forward_gpu(const hfp4_moe_forward_problem *problem, hfp4_stream stream);
    ("hfp4_moe_forward_gpu", _st, [_P(hfp4_moe_forward_problem), _stream]),

    # --- hfp4_sf_layout.h ---
    # hfp4_status hfp4_sf_get_tma_aligned_size(int64_t x, int64_t element_size, int64_t *aligned);
    ("hfp4_sf_get_tma_aligned_size", _st, [c_int64, c_int64, _P(c_int64)]),
    # hfp4_status hfp4_sf_get_default_recipe(hfp4_dtype sfa_dtype, hfp4_dtype sfb_dtype, int32_t arch,
    #     hfp4_sf_recipe *recipe);
    ("hfp4_sf_get_default_recipe", _st, [c_int, c_int, c_int32, _P(hfp4_sf_recipe)]),
    # hfp4_status hfp4_sf_check_layout(const hfp4_sf_tensor *sf, int64_t mn, int64_t k, int32_t gran_mn,
    #     int32_t gran_k, int32_t num_groups, uint32_t checks, hfp4_dtype type_check);
    ("hfp4_sf_check_layout", _st,
     [_P(hfp4_sf_tensor), c_int64, c_int64, c_int32, c_int32, c_int32, c_uint32, c_int]),
    # hfp4_status hfp4_sf_get_mn_major_tma_aligned_tensor_query(const hfp4_sf_tensor *sf, hfp4_sf_tensor *out,
    #     size_t *bytes);
    ("hfp4_sf_get_mn_major_tma_aligned_tensor_query", _st,
     [_P(hfp4_sf_tensor), _P(hfp4_sf_tensor), _P(c_size_t)]),
    # hfp4_status hfp4_sf_get_mn_major_tma_aligned_tensor(const hfp4_sf_tensor *sf, const hfp4_sf_options *opts,
    #     void *dst, size_t dst_bytes, hfp4_sf_tensor *out);
    ("hfp4_sf_get_mn_major_tma_aligned_tensor", _st,
     [_P(hfp4_sf_tensor), _P(hfp4_sf_options), c_void_p, c_size_t, _P(hfp4_sf_tensor)]),
    # hfp4_status hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor_query(const hfp4_sf_tensor *sf,
    #     int64_t mn, int32_t gran_mn, const hfp4_sf_psum *psum, hfp4_sf_tensor *out, size_t *bytes);
    ("hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor_query", _st,
     [_P(hfp4_sf_tensor), c_int64, c_int32, _P(hfp4_sf_psum), _P(hfp4_sf_tensor), _P(c_size_t)]),
    # hfp4_status hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor(const hfp4_sf_tensor *sf, int64_t mn,
    #     int32_t gran_mn, const hfp4_sf_psum *psum, const hfp4_sf_options *opts, void *dst,
    #     size_t dst_bytes, hfp4_sf_tensor *out);
    ("hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor", _st,
     [_P(hfp4_sf_tensor), c_int64, c_int32, _P(hfp4_sf_psum), _P(hfp4_sf_options), c_void_p, c_size_t,
      _P(hfp4_sf_tensor)]),
    # hfp4_status hfp4_sf_get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor_query(
    #     const hfp4_sf_tensor *sf, const hfp4_sf_k_groups *groups, hfp4_sf_tensor *out, size_t *bytes);
    ("hfp4_sf_get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor_query", _st,
     [_P(hfp4_sf_tensor), _P(hfp4_sf_k_groups), _P(hfp4_sf_tensor), _P(c_size_t)]),
    # hfp4_status hfp4_sf_get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor(
    #     const hfp4_sf_tensor *sf, const hfp4_sf_k_groups *groups, const hfp4_sf_options *opts, void *dst,
    #     size_t dst_bytes, hfp4_sf_tensor *out);
    ("hfp4_sf_get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor", _st,
     [_P(hfp4_sf_tensor), _P(hfp4_sf_k_groups), _P(hfp4_sf_options), c_void_p, c_size_t, _P(hfp4_sf_tensor)]),
    # hfp4_status hfp4_sf_transpose_for_utccp_query(const hfp4_sf_tensor *sf, hfp4_sf_tensor *out, size_t *bytes);
    ("hfp4_sf_transpose_for_utccp_query", _st, [_P(hfp4_sf_tensor), _P(hfp4_sf_tensor), _P(c_size_t)]),
    # hfp4_status hfp4_sf_transpose_for_utccp(const hfp4_sf_tensor *sf, const hfp4_sf_options *opts, void *dst,
    #     size_t dst_bytes, hfp4_sf_tensor *out);
    ("hfp4_sf_transpose_for_utccp", _st,
     [_P(hfp4_sf_tensor), _P(hfp4_sf_options), c_void_p, c_size_t, _P(hfp4_sf_tensor)]),
    # hfp4_status hfp4_sf_transform_into_required_layout_query(const hfp4_sf_transform_request *req,
    #     hfp4_sf_tensor *out, size_t *bytes);
    ("hfp4_sf_transform_into_required_layout_query", _st,
     [_P(hfp4_sf_transform_request), _P(hfp4_sf_tensor), _P(c_size_t)]),
    # hfp4_status hfp4_sf_transform_into_required_layout(const hfp4_sf_transform_request *req,
    #     const hfp4_sf_options *opts, void *dst, size_t dst_bytes, hfp4_sf_tensor *out);
    ("hfp4_sf_transform_into_required_layout", _st,
     [_P(hfp4_sf_transform_request), _P(hfp4_sf_options), c_void_p, c_size_t, _P(hfp4_sf_tensor)]),
    # hfp4_status hfp4_sf_transform_pair_into_required_layout_query(const hfp4_sf_pair_request *req,
    #     hfp4_sf_pair_result *res);
    ("hfp4_sf_transform_pair_into_required_layout_query", _st,
     [_P(hfp4_sf_pair_request), _P(hfp4_sf_pair_result)]),
    # hfp4_status hfp4_sf_transform_pair_into_required_layout(const hfp4_sf_pair_request *req,
    #     const hfp4_sf_options *opts, void *dst_a, size_t dst_a_bytes, void *dst_b, size_t dst_b_bytes,
    #     hfp4_sf_pair_result *res);
    ("hfp4_sf_transform_pair_into_required_layout", _st,
     [_P(hfp4_sf_pair_request), _P(hfp4_sf_options), c_void_p, c_size_t, c_void_p, c_size_t,
      _P(hfp4_sf_pair_result)]),
    # GPU forms: the CPU form's arguments plus hfp4_stream stream.
    ("hfp4_sf_get_mn_major_tma_aligned_tensor_gpu", _st,
     [_P(hfp4_sf_tensor), _P(hfp4_sf_options), c_void_p, c_size_t, _P(hfp4_sf_tensor), _stream]),
    ("hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor_gpu", _st,
     [_P(hfp4_sf_tensor), c_int64, c_int32, _P(hfp4_sf_psum), _P(hfp4_sf_options), c_void_p, c_size_t,
      _P(hfp4_sf_tensor), _stream]),
    ("hfp4_sf_get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor_gpu", _st,
     [_P(hfp4_sf_tensor), _P(hfp4_sf_k_groups), _P(hfp4_sf_options), c_void_p, c_size_t, _P(hfp4_sf_tensor),
      _stream]),
    ("hfp4_sf_transpose_for_utccp_gpu", _st,
     [_P(hfp4_sf_tensor), _P(hfp4_sf_options), c_void_p, c_size_t, _P(hfp4_sf_tensor), _stream]),
    ("hfp4_sf_transform_into_required_layout_gpu", _st,
     [_P(hfp4_sf_transform_request), _P(hfp4_sf_options), c_void_p, c_size_t, _P(hfp4_sf_tensor), _stream]),
    ("hfp4_sf_transform_pair_into_required_layout_gpu", _st,
     [_P(hfp4_sf_pair_request), _P(hfp4_sf_options), c_void_p, c_size_t, c_void_p, c_size_t,
      _P(hfp4_sf_pair_result), _stream]),
]

# ------------------------------------------------------------------------------------------------
# Loader
# ------------------------------------------------------------------------------------------------

_LIB_NAME = "libhfp4.so"
_lock = threading.Lock()
_lib = None
_lib_path = None


def _candidates():
    env = os.environ.get("HFP4_LIBRARY")
    if env:
        return [env], True
    here = os.path.dirname(os.path.abspath(__file__))
    return [os.path.join(here, _LIB_NAME),
            os.path.normpath(os.path.join(here, os.pardir, os.pardir, "build", _LIB_NAME))], False


def _load():
    paths, from_env = _candidates()
    errors = []
    for path in paths:
        if not from_env and not os.path.exists(path):
            errors.append("%s: not found" % path)
            continue
        try:
            handle = ctypes.CDLL(path)
        except OSError as e:
            errors.append("%s: %s" % (path, e))
            continue
        return handle, path
    how = ("HFP4_LIBRARY is set" if from_env else
           "looked in this package's directory and in the source tree's build/ (run `make` there, or set "
           "HFP4_LIBRARY to the path of libhfp4.so)")
    raise LibraryNotFound("hfp4: cannot load %s (%s): %s" % (_LIB_NAME, how, "; ".join(errors)))


def _declare(handle):
    for name, restype, argtypes in FUNCTIONS:
        try:
            fn = getattr(handle, name)
        except AttributeError as e:
            raise LibraryNotFound("hfp4: the loaded library lacks %s (an older build?): %s" % (name, e)) from e
        fn.restype = restype
        fn.argtypes = argtypes


def lib():
    """The loaded library, its functions declared (argtypes/restype). Raises LibraryNotFound."""
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is None:
            handle, path = _load()
            _declare(handle)
            number = handle.hfp4_version_number()
            if number // 10000 != ABI_MAJOR:
                raise LibraryNotFound("hfp4: %s is version %s (major %d) but this Python package was written "
                                      "for major version %d" % (path, handle.hfp4_version_string().decode(),
                                                                number // 10000, ABI_MAJOR))
            _lib_path = path
            _lib = handle
    return _lib


def library_path() -> str:
    """The path of the loaded library (loading it if needed)."""
    lib()
    return _lib_path
