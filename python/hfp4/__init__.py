"""hfp4: FP4-weight GEMMs for NVIDIA Hopper, compatible with DeepGEMM -- Python binding.

Layers (each imports only what it needs; ``import hfp4`` needs neither numpy nor torch and does not
load the library until a call needs it):

* :mod:`hfp4._lib`      ctypes: loader (``HFP4_LIBRARY``, the package directory, ``../build``),
                         structure mirrors, the function table, status -> exception mapping;
* :mod:`hfp4.host`      numpy: codecs, DeepGEMM's quantizers, the exact reference GEMMs, the
                         SM90 weight repack and the scale-factor layout toolkit (CPU);
* :mod:`hfp4.deep_gemm` torch: DeepGEMM-named GEMMs on CUDA tensors, layout helpers and ``utils``
                         (torch is imported when a function is called).

The numpy layer's names are also reachable here (``hfp4.ref_gemm`` etc.).

Errors: every failing call raises an :class:`HFP4Error` (a RuntimeError) subclass:
:class:`InvalidArgument` (also a ValueError; its message contains "Assertion" like DeepGEMM's),
:class:`Unsupported` (also a NotImplementedError: fall back to another backend), :class:`NoDevice`,
:class:`CudaError`, :class:`OutOfMemory`, :class:`InternalError`, :class:`IOFailure`. ``.status`` is the hfp4_status code
and ``.detail`` the library's message, which names the offending argument.
"""
from __future__ import annotations

from ._lib import (CudaError, HFP4Error, InternalError, InvalidArgument, IOFailure, LibraryNotFound, NoDevice,
                   OutOfMemory, Unsupported)
from ._common import SM90Weights, align, ceil_div

__version__ = "0.1.0"

__all__ = [
    "version", "version_number", "library_path", "device_info", "status_name", "dtype_name",
    "HFP4Error", "InvalidArgument", "Unsupported", "NoDevice", "CudaError", "OutOfMemory", "InternalError",
    "IOFailure", "LibraryNotFound", "SM90Weights", "ceil_div", "align",
]


def version() -> str:
    """The loaded library's version string ("MAJOR.MINOR.PATCH")."""
    from ._lib import lib
    return lib().hfp4_version_string().decode()


def version_number() -> int:
    """The loaded library's HFP4_VERSION_NUMBER (major*10000 + minor*100 + patch)."""
    from ._lib import lib
    return int(lib().hfp4_version_number())


def library_path() -> str:
    """Path of the loaded libhfp4.so."""
    from ._lib import library_path as _p
    return _p()


def status_name(status: int) -> str:
    """hfp4_status_name, e.g. "HFP4_ERR_UNSUPPORTED"."""
    from ._lib import lib
    return lib().hfp4_status_name(int(status)).decode()


def dtype_name(dtype: int) -> str:
    """hfp4_dtype_name, e.g. "fp4_e2m1"."""
    from ._lib import lib
    return lib().hfp4_dtype_name(int(dtype)).decode()


def device_info(device: int = 0) -> dict:
    """hfp4_device_query as a dict (device, cc_major, cc_minor, num_sms, has_sm90_kernels,
    global_mem_bytes, name). Raises NoDevice without a driver or GPU (the normal CPU-only answer)."""
    import ctypes
    from . import _lib as L
    info = L.hfp4_device_info()
    L.check(L.lib().hfp4_device_query(int(device), ctypes.byref(info)))
    return {
        "device": info.device, "cc_major": info.cc_major, "cc_minor": info.cc_minor, "num_sms": info.num_sms,
        "has_sm90_kernels": bool(info.has_sm90_kernels), "global_mem_bytes": info.global_mem_bytes,
        "name": info.name.decode("utf-8", "replace"),
    }


def __getattr__(name):  # PEP 562: the numpy layer, imported on first use
    import importlib
    if name in ("host", "deep_gemm", "_lib", "_common"):
        return importlib.import_module(__name__ + "." + name)
    host = importlib.import_module(__name__ + ".host")
    if name in host.__all__:
        return getattr(host, name)
    raise AttributeError("module 'hfp4' has no attribute %r" % name)


def __dir__():
    try:
        import importlib
        extra = importlib.import_module(__name__ + ".host").__all__
    except ImportError:
        extra = []
    return sorted(set(globals()) | set(extra))
