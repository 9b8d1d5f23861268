"""DeepGEMM's ``deep_gemm.testing`` names (``hfp4.deep_gemm.testing``): what DeepGEMM's own test
scripts import besides the GEMMs (deepgemm-compat.md §5.1), so they run against hfp4.deep_gemm.

* ``calc_diff(x, y)``: 1 - 2 Σxy / Σ(x² + y²) in float64 (= Σ(x - y)² / Σ(x² + y²)), a 0-d tensor as
  DeepGEMM's; 0 when both are all zeros.
* ``count_bytes(*tensors)``: the bytes of the tensors given, in nested tuples or lists (None skipped).
* ``bench_kineto(fn, kernel_names, ...)``: seconds per launch of the GPU kernels whose names contain
  each of kernel_names (a str gives one figure, a tuple a tuple), from torch's profiler over the
  second of two rounds of num_tests calls of fn, each after an 8 GB memset that flushes L2 (as
  DeepGEMM times); 0 for a name no kernel matched. Unless with_multiple_kernels, a name that
  matches more than one distinct kernel is an AssertionError (the figure would mix them), as in
  DeepGEMM. suppress_kineto_output silences what the profiler prints (at the file-descriptor level).
  DG_USE_NVIDIA_TOOLS=1 skips the profiling (1 for each name), as DeepGEMM's does under Nsight
  and compute-sanitizer.
* ``ignore_env(name, condition)``: a decorator that runs the function with environment variable
  name removed while condition() holds.
* ``get_arch_major()``: the current CUDA device's compute capability major (9 on Hopper).
* ``test_filter(condition)``: a decorator that runs the function only while condition() holds
  (else prints that it was filtered, as DeepGEMM's does)."""
from __future__ import annotations

import contextlib
import functools
import os

from . import _lib as L
from ._common import torch_module as _torch

_FLUSH_BYTES = 8_000_000_000


def calc_diff(x, y):
    x, y = x.double(), y.double()
    denominator = (x * x + y * y).sum()
    if float(denominator) == 0.0:
        return denominator  # (a 0-d zero)
    return 1.0 - 2.0 * (x * y).sum() / denominator


class _silenced:
    """stdout and stderr sent to /dev/null, Python's streams and the file descriptors both (the
    profiler prints from C++)"""

    def __enter__(self):
        import sys
        for f in (sys.stdout, sys.stderr):
            f.flush()
        self.null = os.open(os.devnull, os.O_WRONLY)
        self.saved = [os.dup(1), os.dup(2)]
        os.dup2(self.null, 1)
        os.dup2(self.null, 2)
        self.streams = (sys.stdout, sys.stderr)
        self.null_file = open(os.devnull, "w")
        sys.stdout = sys.stderr = self.null_file
        return self

    def __exit__(self, *_):
        import sys
        sys.stdout, sys.stderr = self.streams
        self.null_file.close()
        os.dup2(self.saved[0], 1)
        os.dup2(self.saved[1], 2)
        for fd in self.saved + [self.null]:
            os.close(fd)



def count_bytes(*tensors):
    total = 0
    for t in tensors:
        if t is None:
            continue
        if isinstance(t, (tuple, list)):
            total += count_bytes(*t)
        else:
            total += t.numel() * t.element_size()
    return total


def _device_times_us(events):
    """(kernel name, total device µs, launches) of the profiler's averaged events that ran on the GPU"""
    out = []
    for e in events:
        total = getattr(e, "device_time_total", None)
        if total is None:  # (older torch)
            total = getattr(e, "cuda_time_total", 0)
        if total and e.count:
            out.append((e.key, float(total), int(e.count)))
    return out


def bench_kineto(fn, kernel_names, num_tests: int = 30, suppress_kineto_output: bool = False, trace_path=None,
                 flush_l2: bool = True, with_multiple_kernels: bool = False):
    if not isinstance(kernel_names, (str, tuple)):
        raise L.invalid_argument("bench_kineto: kernel_names must be a str or a tuple of str (got %s)"
                                 % type(kernel_names).__name__)
    names = (kernel_names,) if isinstance(kernel_names, str) else kernel_names
    if int(os.environ.get("DG_USE_NVIDIA_TOOLS", "0") or 0):
        return (1,) * len(names) if isinstance(kernel_names, tuple) else 1
    torch = _torch()
    fn()  # (first-call work: module loads, repacks, caches)
    with _silenced() if suppress_kineto_output else contextlib.nullcontext():
        schedule = torch.profiler.schedule(wait=1, warmup=0, active=1, repeat=1)
        profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA], schedule=schedule)
        with profiler:
            for _ in range(2):
                for _ in range(num_tests):
                    if flush_l2:
                        torch.empty(_FLUSH_BYTES // 4, dtype=torch.int, device="cuda").zero_()
                    fn()
                profiler.step()
    if trace_path is not None:
        profiler.export_chrome_trace(trace_path)
    kernels = _device_times_us(profiler.key_averages())
    times = []
    for name in names:
        hits = [k for k in kernels if name in k[0]]
        if len(hits) > 1 and not with_multiple_kernels:
            raise AssertionError("bench_kineto: %r matches %d kernels (%s); pass with_multiple_kernels=True to "
                                 "average them" % (name, len(hits), ", ".join(h[0][:60] for h in hits)))
        launches = sum(h[2] for h in hits)
        times.append(sum(h[1] for h in hits) / launches * 1e-6 if launches else 0)
    return tuple(times) if isinstance(kernel_names, tuple) else times[0]


def ignore_env(name: str, condition):
    def decorator(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            if not condition():
                return func(*args, **kwargs)
            saved = os.environ.pop(name, None)
            try:
                return func(*args, **kwargs)
            finally:
                if saved is not None:
                    os.environ[name] = saved
        return wrapper
    return decorator


def get_arch_major() -> int:
    torch = _torch()
    return torch.cuda.get_device_capability()[0]


def test_filter(condition):
    def decorator(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            if condition():
                return func(*args, **kwargs)
            print("%s:\n > Filtered by %s\n" % (func.__name__, condition))
        return wrapper
    return decorator


test_filter.__test__ = False  # (pytest: not a test)
