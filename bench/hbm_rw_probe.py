"""The H200's memory rates for the access mixes of hfp4's passes, with torch's own kernels: write
only (zero_), copy (read = write), read only (sum), and read 1 : write 2 (the FP4 -> FP8
conversion's mix: a 32 MB source broadcast into 64 MB). Microseconds a call over 50 back-to-back
calls. What it answers: the floor of a pass that reads 0.5 and writes 1 byte a weight, which the
copy rate (read = write) does not give.

    python3 bench/hbm_rw_probe.py
"""
import torch

from torch_timing import timed

MB = 1 << 20


a = torch.empty(64 * MB, dtype=torch.uint8, device="cuda")
b = torch.empty(64 * MB, dtype=torch.uint8, device="cuda")
h = torch.randint(0, 255, (32 * MB,), dtype=torch.uint8, device="cuda")
for name, f, moved in (("write 64 MB", lambda: a.zero_(), 64),
                       ("copy 64 MB (read 64, write 64)", lambda: b.copy_(a), 128),
                       ("read 64 MB", lambda: torch.sum(a.view(torch.int32)), 64),
                       ("read 32 MB, write 64 MB", lambda: a.view(2, -1).copy_(h.view(1, -1).expand(2, -1)), 96)):
    us = timed(f, 50, warm=True)
    print("%-32s %7.1f us  %.2f TB/s" % (name, us, moved * MB / us / 1e6))
