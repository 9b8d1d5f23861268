"""pytest configuration for hfp4's Python tests.

* Makes ``python/`` importable without installing the package (the library itself is found through
  HFP4_LIBRARY or the source tree's build/, see hfp4/_lib.py).
* Registers the ``gpu`` marker: tests that need torch with a CUDA device (and a library built with
  the CUDA toolkit). They are skipped where torch or CUDA is absent; ``make pytest`` deselects them
  with ``-m "not gpu"``.
"""
import importlib.util
import os
import sys

import pytest

_PY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _PY not in sys.path:
    sys.path.insert(0, _PY)


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs torch and a CUDA device (skipped otherwise)")


def _gpu_reason():
    if importlib.util.find_spec("torch") is None:
        return "torch is not installed"
    import torch
    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    return None


def pytest_collection_modifyitems(config, items):
    gpu_items = [it for it in items if "gpu" in it.keywords]
    if not gpu_items:
        return
    reason = _gpu_reason()
    if reason:
        skip = pytest.mark.skip(reason="gpu test: " + reason)
        for it in gpu_items:
            it.add_marker(skip)
