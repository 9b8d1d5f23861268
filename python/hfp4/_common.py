"""Helpers shared by the numpy layer (host.py) and the torch layer (deep_gemm.py). Imports neither
numpy nor torch."""
from __future__ import annotations

from . import _lib as L

__all__ = ["ceil_div", "align", "SM90Weights", "infer_gran_k", "resolve_recipes", "scale_grid"]


_torch = None


def torch_module():
    """torch, imported on first use: hfp4.deep_gemm and its parts import without it, and a call that
    needs it raises an ImportError that says so"""
    global _torch
    if _torch is None:
        try:
            import torch
        except ImportError as e:
            raise ImportError("hfp4.deep_gemm: this function needs PyTorch, which is not installed "
                              "(hfp4.host offers the CPU calls on numpy arrays)") from e
        _torch = torch
    return _torch


def ceil_div(x: int, y: int) -> int:
    """DeepGEMM's ceil_div: (x + y - 1) // y."""
    return (x + y - 1) // y


def align(x: int, y: int) -> int:
    """DeepGEMM's align: ceil_div(x, y) * y."""
    return ceil_div(x, y) * y


class SM90Weights:
    """FP4 weights repacked for hfp4's SM90 kernels (HFP4_DTYPE_FP4_E2M1_SM90).

    ``buffer`` owns the bytes (a numpy uint8 array for host repacks, a torch uint8 CUDA tensor for
    device repacks); ``matrix`` is the hfp4_matrix the repack returned, whose pointers point into
    ``buffer`` (keep this object alive while it is used). Pass the object as the ``b`` operand of
    :func:`hfp4.host.ref_gemm` (host) or of the :mod:`hfp4.deep_gemm` GEMMs (device)."""

    __slots__ = ("buffer", "matrix", "num_groups", "n", "k", "scale_dtype", "nbytes", "__weakref__")

    def __init__(self, buffer, matrix, num_groups: int, n: int, k: int, scale_dtype: int, nbytes: int):
        self.buffer = buffer
        self.matrix = matrix
        self.num_groups = int(num_groups)
        self.n = int(n)
        self.k = int(k)
        self.scale_dtype = int(scale_dtype)
        self.nbytes = int(nbytes)

    def __repr__(self) -> str:
        return "SM90Weights(num_groups=%d, n=%d, k=%d, scales=%s, %d bytes)" % (
            self.num_groups, self.n, self.k, "ue8m0" if self.scale_dtype == L.DTYPE_UE8M0 else "fp32", self.nbytes)


def scale_grid(rows: int, k: int, gran_mn: int, gran_k: int, packed: bool):
    """(scale rows, scale columns) of an operand: ceil(rows/gran_mn) x ceil(k/gran_k) (packed: words)."""
    sk = ceil_div(k, gran_k)
    return ceil_div(rows, gran_mn), (ceil_div(sk, 4) if packed else sk)


def infer_gran_k(name: str, sf_cols: int, k: int, packed: bool) -> int:
    """The K granularity (32 or 128) of per-token activation scales, from their column count.

    When both fit (FP32 scales with K <= 32: identical meaning; packed scales with K <= 128) the
    packed form takes 32 (hfp4's FP4 flows quantize activations with gran_k = 32) and FP32 takes
    128 (DeepGEMM's default). Pass the granularity (a recipe) explicitly to decide otherwise."""
    fits = [g for g in (32, 128) if scale_grid(1, k, 1, g, packed)[1] == sf_cols]
    if not fits:
        raise L.invalid_argument(
            "%s has %d scale columns, which fits neither gran_k = 32 (%d) nor gran_k = 128 (%d) for k = %d%s"
            % (name, sf_cols, scale_grid(1, k, 1, 32, packed)[1], scale_grid(1, k, 1, 128, packed)[1], k,
               " (packed UE8M0: 4 scales per int32 word)" if packed else ""))
    if len(fits) == 1:
        return fits[0]
    return 32 if packed else 128


def resolve_recipes(recipe, recipe_a, recipe_b):
    """DeepGEMM's recipe rules for a GEMM (compat spec section 2.4): returns (gran_k_a or None,
    (gran_mn_b, gran_k_b) or None); None means "not given" (inferred from the scale shapes).
    recipe and recipe_a/recipe_b are exclusive; recipe_a and recipe_b come together."""
    if (recipe_a is None) != (recipe_b is None):
        raise L.invalid_argument("recipe_a and recipe_b must be given together (recipe_a = %r, recipe_b = %r)"
                                 % (recipe_a, recipe_b))
    if recipe is not None and recipe_a is not None:
        raise L.invalid_argument("give either recipe or the recipe_a/recipe_b pair, not both (recipe = %r, "
                                 "recipe_a = %r, recipe_b = %r)" % (recipe, recipe_a, recipe_b))
    if recipe is not None:
        r = tuple(int(v) for v in recipe)
        if len(r) != 3:
            raise L.invalid_argument("recipe = %r must be a 3-tuple (gran_mn_a, gran_mn_b, gran_k)" % (recipe,))
        if min(r) <= 0:
            raise L.invalid_argument("recipe = %r: granularities must be > 0" % (r,))
        if r[0] != 1:
            raise L.unsupported("recipe = %r: hfp4's SM90 kernels take per-token activation scales (gran_mn_a = 1)"
                                % (r,))
        return r[2], (r[1], r[2])
    if recipe_a is not None:
        ra, rb = tuple(int(v) for v in recipe_a), tuple(int(v) for v in recipe_b)
        if len(ra) != 2 or len(rb) != 2:
            raise L.invalid_argument("recipe_a = %r and recipe_b = %r must be 2-tuples (gran_mn, gran_k)"
                                     % (recipe_a, recipe_b))
        if min(ra + rb) <= 0:
            raise L.invalid_argument("recipe_a = %r, recipe_b = %r: granularities must be > 0" % (ra, rb))
        if ra[0] != 1:
            raise L.unsupported("recipe_a = %r: hfp4's SM90 kernels take per-token activation scales "
                                "(gran_mn = 1)" % (ra,))
        return ra[1], rb
    return None, None
