"""Timing shared by the torch-based bench scripts (bench/hbm_rw_probe.py, bench/python_fp8_route.py),
imported from their folder."""
import torch


def timed(fn, calls, warm=False):
    """Microseconds a call of fn over `calls` back-to-back calls between two CUDA events on the
    current stream (the host's Python and launch time included); warm: one call first, waited for."""
    if warm:
        fn()
        torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(calls):
        fn()
    e.record()
    e.synchronize()
    return s.elapsed_time(e) * 1e3 / calls
