"""hfp4.experts - a transformers experts backend: DeepSeek-V4's FP4 experts on Hopper through hfp4.

transformers runs a fine-grained FP8/FP4 experts module (``FP8Experts``, ``FineGrainedExperts`` in
newer versions: ``gate_up_proj`` int8
[E, 2I, H/2] with ``gate_up_proj_scale_inv`` UE8M0 [E, 2I, H/32], ``down_proj`` int8 [E, H, I/2]
with ``down_proj_scale_inv`` [E, H, I/32]) through a function picked by name from its experts
interface. Its "deepgemm" function refuses FP4 weights below Blackwell; this one serves them on SM90,
and FP8 checkpoints' experts too (``float8_e4m3fn`` [E, 2I, H] and [E, H, I] under 128 x 128 block
scales, ``block_size`` (128, 128): the library's FP8 x FP8 grouped GEMMs, 1 x 128 activation scales
only; nothing repacked):

    import hfp4.experts
    hfp4.experts.register()                      # adds "hfp4" to transformers' fine-grained experts functions
    model.set_experts_implementation("hfp4")     # or from_pretrained(..., experts_implementation="hfp4")

``experts_forward(module, hidden_states [T, H], top_k_index [T, k], top_k_weights [T, k])`` returns
[T, H] in hidden_states' dtype: for each routed (token, expert) row, down(gate(up(x))) times its
routing weight, summed over the token's k experts; ids outside [0, E) (expert-parallel sentinels)
contribute nothing. It is transformers' DeepGEMM experts forward (sort the routed rows by expert,
pad each expert's rows to 128, two m-grouped GEMMs around the module's own ``_apply_gate``) with
three differences, made for speed:
- activations are quantized per 128 K with FP32 scales (DeepGEMM's SM90 recipe, hfp4's full-speed
  path) where transformers quantizes per 32 K with UE8M0 scales: the numbers differ by that
  quantization's rounding (``gran_k=32`` gives 32-wide groups, still with FP32 scales); the routing
  weights multiply in FP32;
- D's padding rows are not written (``ensure_zero_padding=False``): this forward never reads them,
  and at decode they are most of D;
- the GEMMs get the rows-per-expert hint (``expected_m``), so decode picks hfp4's 8-token tile
  without a second launch.
Everything stays on the device (no host synchronization), so a decode step can be captured in a
CUDA graph. The glue between the GEMMs is the library's: hfp4_moe_route, hfp4_moe_quantize_rows and
hfp4_moe_combine, and, where the module's _apply_gate is the clamped SwiGLU over gate|up stacked (transformers'
FP8Experts / DeepSeek-V4 experts) or row-interleaved (newer transformers; checked on a probe row,
_clamped_swiglu_layout),
hfp4_moe_swiglu_quantize_rows, which applies the activation to D's rows and quantizes them in one
pass (up to 4096 experts; HFP4_EXPERTS_FUSED_GATE=0 runs the module's
own _apply_gate instead). HFP4_EXPERTS_GLUE=0, or more experts,
selects torch's (a sort, scatters, two quantizations, gathers, a sum: ~40 small kernels, ~100-200 us
more a decode step on the H200; bench/RESULTS.md v25). Requests hfp4 cannot serve raise ``NotImplementedError``
(transformers' callers fall back), bad arguments ``ValueError``, both naming the argument. Refused:
``activation_scheme = "static"``, ``is_transposed``, ``has_bias``, a post-expert norm
(``has_post_expert_norm`` / ``post_expert_norm``), an ``activation_format`` other than None, "fp8" or
"mxfp8" (those three are all served with the FP8 quantization above), weights other than FP4 or
FP8 under 128 x 128 blocks, and ``gran_k=32`` with FP8 weights. The
weights must hold ``num_experts`` experts (ValueError otherwise).
"""
import os
import weakref
from ctypes import byref, c_size_t

from . import _lib as L
from . import deep_gemm as dg

__all__ = ["experts_forward", "register"]

GPU_GLUE_MAX_EXPERTS = 4096  # hfp4_moe_route_gpu's limit (its counters live in shared memory)


def _alignment():
    """Rows of each expert's segment: the GEMMs' (hfp4.deep_gemm's mk alignment, 128 unless set)"""
    return dg.get_mk_alignment_for_contiguous_layout()


def _torch():
    import torch
    return torch


# transformers' activation_format values this forward serves: None (the weights' default) and the FP8
# formats; hfp4 quantizes the activations itself (per token, FP32 scales: see the module docstring).
# "bf16" (weight-only), "mxfp4", "nvfp4" and anything else are refused so that transformers falls back.
_ACTIVATION_FORMATS = (None, "fp8", "mxfp8")


def _check_config(module):
    """The module's settings this forward cannot serve (Unsupported: transformers falls back). Cheap:
    run at every call, as they are plain attributes a caller may change."""
    if getattr(module, "activation_scheme", "dynamic") == "static":
        raise L.unsupported("hfp4 experts: activation_scheme = 'static' (per-expert activation scales) is not "
                            "supported; the kernels take per-token scales")
    if getattr(module, "is_transposed", False):
        raise L.unsupported("hfp4 experts: is_transposed = True ([E, K, N] weights) is not supported")
    if getattr(module, "has_bias", False):
        raise L.unsupported("hfp4 experts: has_bias = True is not supported")
    if getattr(module, "has_post_expert_norm", False) or getattr(module, "post_expert_norm", None) is not None:
        raise L.unsupported("hfp4 experts: the module has a post-expert norm (post_expert_norm, applied to each "
                            "expert's output before the routing weights), which hfp4's forward does not apply")
    activation_format = getattr(module, "activation_format", None)
    if activation_format not in _ACTIVATION_FORMATS:
        raise L.unsupported("hfp4 experts: activation_format = %r is not supported (hfp4 quantizes activations to "
                            "FP8 itself: None, 'fp8' or 'mxfp8')" % (activation_format,))
    has_gate = getattr(module, "has_gate", True)
    up = module.gate_up_proj if has_gate else module.up_proj
    block = getattr(module, "block_size", None)
    block = tuple(block) if isinstance(block, (tuple, list)) else block
    if block is not None and block != (128, 128) and _fp8_weights(up):
        raise L.unsupported("hfp4 experts: FP8 expert weights with block_size = %r; the FP8 x FP8 kernels take "
                            "128 x 128 block scales" % (block,))
    return has_gate, up


def _fp8_weights(up):
    """True when a module's expert weights (up: its gate_up_proj or up_proj) are FP8 (e4m3 under
    128 x 128 block scales: transformers' FP8Experts of an FP8 checkpoint), False when FP4 (int8-packed
    e2m1 under 1 x 32 scales)"""
    return up.dtype == _torch().float8_e4m3fn


def _check_weights(module, has_gate, up):
    """The expert weights' dtypes and shapes (checked when a module's plan is built)"""
    torch = _torch()
    up_name = "gate_up_proj" if has_gate else "up_proj"
    fp8 = _fp8_weights(up)
    for name, w in ((up_name, up), ("down_proj", module.down_proj)):
        if fp8 and w.dtype != torch.float8_e4m3fn or not fp8 and w.dtype not in (torch.int8, torch.uint8):
            raise L.unsupported("hfp4 experts: %s.dtype = %s; the expert weights must be FP4 (int8-packed e2m1) or "
                                "FP8 e4m3 with 128 x 128 block scales, both of one kind" % (name, w.dtype))
    E = int(module.num_experts)
    if up.dim() != 3 or module.down_proj.dim() != 3 or up.shape[0] != E or module.down_proj.shape[0] != E:
        raise L.invalid_argument("hfp4 experts: num_experts = %d, but %s has shape %s and down_proj %s (both must be "
                                 "[num_experts, N, %s])" % (E, up_name, tuple(up.shape), tuple(module.down_proj.shape),
                                                            "K" if fp8 else "K/2"))


def _check_inputs(hidden_states, top_k_index, top_k_weights):
    torch = _torch()
    if hidden_states.dim() != 2:
        raise L.invalid_argument("hfp4 experts: hidden_states must be 2D [tokens, hidden], got shape %s"
                                 % (tuple(hidden_states.shape),))
    if not hidden_states.is_cuda:
        raise L.invalid_argument("hfp4 experts: hidden_states must be a CUDA tensor, got one on %s"
                                 % (hidden_states.device,))
    if top_k_index.dim() != 2 or top_k_index.shape[0] != hidden_states.shape[0]:
        raise L.invalid_argument("hfp4 experts: top_k_index must be [tokens = %d, k], got shape %s"
                                 % (hidden_states.shape[0], tuple(top_k_index.shape)))
    if top_k_weights.shape != top_k_index.shape:
        raise L.invalid_argument("hfp4 experts: top_k_weights shape %s must equal top_k_index's %s"
                                 % (tuple(top_k_weights.shape), tuple(top_k_index.shape)))
    if top_k_index.dtype.is_floating_point or top_k_index.dtype == torch.bool:
        raise L.invalid_argument("hfp4 experts: top_k_index must be an integer tensor, got %s" % (top_k_index.dtype,))
    device = hidden_states.device
    for name, t in (("top_k_index", top_k_index), ("top_k_weights", top_k_weights)):
        if t.device != device:
            raise L.invalid_argument("hfp4 experts: %s is on %s, hidden_states on %s" % (name, t.device, device))


def _routed_layout(ids, num_experts):
    """The contiguous layout of the routed rows, built on the device: ids [S] (any integer; outside
    [0, E) = not routed). Returns (perm, sorted_ids, pos, layout, m_pad): row i of the sorted order
    is routed row perm[i] with expert sorted_ids[i] (E for the unrouted, which sort last), at row
    pos[i] of the padded layout; layout [m_pad] int32 holds each row's expert or -1; each expert's
    segment starts at a multiple of the alignment. m_pad is a bound known on the host (no sync)."""
    torch = _torch()
    S, E, A = ids.numel(), num_experts, _alignment()
    ids = ids.long()  # (narrow ids, uint8/int8/int16: torch's scatters take int64 indices, and E may not fit)
    ids = torch.where((ids < 0) | (ids >= E), torch.full_like(ids, E), ids)
    sorted_ids, perm = torch.sort(ids, stable=True)
    counts = ids.new_zeros(E + 1).scatter_add_(0, sorted_ids, torch.ones_like(sorted_ids))
    aligned = (counts[:E] + A - 1) // A * A
    pad_before = torch.nn.functional.pad((aligned - counts[:E]).cumsum(0), (1, 0))  # [E + 1]
    pos = torch.arange(S, device=ids.device) + pad_before[sorted_ids]
    m_pad = S + min(S, E) * (A - 1)  # every hit expert adds at most A - 1 rows
    layout = ids.new_full((m_pad,), -1, dtype=torch.int32)
    layout[pos] = torch.where(sorted_ids < E, sorted_ids, torch.full_like(sorted_ids, -1)).to(torch.int32)
    return perm, sorted_ids, pos, layout, m_pad


def _rows_per_expert(S, E):
    """expected_m: rows per routed expert if routing is even (a tile hint only)"""
    return -(-S // min(S, E))


def _gemm_into_layout(a, sfa, w, w_scale, layout, gran_k, expected_m):
    """D [layout rows, N] BF16 of the FP8 rows a (scales sfa) in the layout; padding rows left unwritten"""
    d = a.new_empty((a.shape[0], w.shape[1]), dtype=_torch().bfloat16)
    if w.dtype == _torch().float8_e4m3fn:
        # (FP8 weights: DeepGEMM's defaults, 1 x 128 activation and 128 x 128 weight scales, so an
        # installed DeepGEMM without the recipe keywords takes the call too)
        dg.m_grouped_fp8_fp4_gemm_nt_contiguous((a, sfa), (w, w_scale), d, layout, ensure_zero_padding=False,
                                                expected_m=expected_m)
    else:
        dg.m_grouped_fp8_fp4_gemm_nt_contiguous((a, sfa), (w, w_scale), d, layout, recipe_a=(1, gran_k),
                                                recipe_b=(1, 32), ensure_zero_padding=False, expected_m=expected_m)
    return d


def _grouped_gemm(x, w, w_scale, pos, layout, m_pad, gran_k, expected_m):
    """D [m_pad, N] BF16 for the sorted rows x [S, K] (quantized here, placed at rows pos); rows of D
    that are padding are left unwritten. Returns D's routed rows [S, N]."""
    q, sf = dg.per_token_cast_to_fp8(x, use_ue8m0=False, gran_k=gran_k)
    a = x.new_empty((m_pad, q.shape[1]), dtype=q.dtype)
    a[pos] = q
    sfa = x.new_empty((m_pad, sf.shape[1]), dtype=sf.dtype)  # (padding rows: anything, hfp4.h)
    sfa[pos] = sf
    return _gemm_into_layout(a, sfa, w, w_scale, layout, gran_k, expected_m)[pos]


def _glue_enabled():
    return os.environ.get("HFP4_EXPERTS_GLUE", "1") != "0"


# module -> {(limit, what its _apply_gate reads): the gate|up layout its _apply_gate is the SwiGLU of, or
# None}; per module (weakly held), as two modules of one class may clamp differently
_gate_probes = weakref.WeakKeyDictionary()


def _clamped_swiglu_layout(module, limit):
    """L.GATE_UP_STACKED or L.GATE_UP_INTERLEAVED when module._apply_gate computes
    silu(min(gate, limit)) * clamp(up, -limit, limit) with gate|up stacked as [gate; up] (chunk(2):
    transformers' FP8Experts and DeepSeek-V4's experts) or row-interleaved [g0, u0, g1, u1, ...]
    (0::2 / 1::2: newer transformers), else None (gpt-oss's swiglu_alpha gate, another activation or
    limit). Checked on a probe row on the CPU, bit for bit against those torch operations in BF16,
    once per module and limit (again if an attribute transformers' gates read changes: act_fn,
    limit, swiglu_limit, swiglu_alpha)."""
    torch = _torch()
    act = getattr(module, "act_fn", None)
    key = (limit, id(act), repr(getattr(module, "limit", None)), repr(getattr(module, "swiglu_limit", None)),
           repr(getattr(module, "swiglu_alpha", None)))
    try:
        seen = _gate_probes.setdefault(module, {})
    except TypeError:  # (not weakly referable: probed every call)
        seen = {}
    if key not in seen:
        L_ = 10.0 if limit == float("inf") else limit
        g = torch.tensor([-2.0, -0.3, -0.05, 0.0, 0.07, 0.4, 0.99, 1.5, -1.1, 0.2, 0.6, -0.8, 1.2, 0.01, -0.6, 0.9])
        u = torch.tensor([1.3, -1.2, 0.2, -0.1, 0.03, 0.8, -0.75, 1.1, 0.5, -1.7, 0.45, 0.9, -0.35, 2.5, -0.2, 0.15])
        g, u = (g * L_).to(torch.bfloat16), (u * L_).to(torch.bfloat16)
        if limit == float("inf"):
            want = torch.nn.functional.silu(g) * u
        else:
            want = torch.nn.functional.silu(g.clamp(max=limit)) * u.clamp(min=-limit, max=limit)
        found = None
        rows = ((L.GATE_UP_STACKED, torch.cat([g, u])), (L.GATE_UP_INTERLEAVED, torch.stack([g, u], 1).reshape(-1)))
        for layout, row in rows:
            try:
                with torch.no_grad():
                    got = module._apply_gate(row.unsqueeze(0))
                same = tuple(got.shape) == (1, g.numel()) and torch.equal(got[0].to(torch.bfloat16), want)
            except Exception:  # (a gate that cannot run on a CPU probe is simply not fused)
                same = False
            if same:
                found = layout
                break
        seen[key] = found
    return seen[key]


def _fused_gate(module):
    """(limit, gate|up layout) when the module's activation is the clamped SwiGLU that
    hfp4_moe_swiglu_quantize_rows computes, else None (the module's own _apply_gate runs). The limit
    is the module's ``limit`` (transformers' FP8Experts and DeepSeek-V4 experts: the config's
    swiglu_limit; none: inf), or its ``swiglu_limit`` where it has no ``limit`` (transformers'
    newer FineGrainedExperts) or a declared ``hfp4_swiglu_limit`` (a number > 0, inf for none); either
    way _apply_gate must compute that SwiGLU on a probe row (_clamped_swiglu_layout). A declared
    limit the gate does not match is an error. HFP4_EXPERTS_FUSED_GATE=0 turns the fusion off."""
    if os.environ.get("HFP4_EXPERTS_FUSED_GATE", "1") == "0" or not getattr(module, "has_gate", True):
        return None
    if not callable(getattr(module, "_apply_gate", None)):
        return None
    declared = getattr(module, "hfp4_swiglu_limit", None)
    if declared is not None:
        try:
            limit = float(declared)
        except (TypeError, ValueError):
            limit = float("nan")
        if not limit > 0:
            raise L.invalid_argument("hfp4 experts: hfp4_swiglu_limit = %r must be a number > 0 (inf for no "
                                     "clamp)" % (declared,))
        layout = _clamped_swiglu_layout(module, limit)
        if layout is None:
            raise L.invalid_argument("hfp4 experts: hfp4_swiglu_limit = %r is declared, but the module's "
                                     "_apply_gate does not compute silu(min(gate, %r)) * clamp(up, +-%r)"
                                     % (declared, limit, limit))
        return limit, layout
    # (transformers' FP8Experts: `limit`; its newer FineGrainedExperts: only `swiglu_limit`)
    limit = module.limit if hasattr(module, "limit") else getattr(module, "swiglu_limit", None)
    try:
        limit = float("inf") if limit is None else float(limit)
    except (TypeError, ValueError):
        return None
    layout = _clamped_swiglu_layout(module, limit) if limit > 0 else None
    return None if layout is None else (limit, layout)


def _fused_swiglu_limit(module):
    """The clamp limit of the fused gate (_fused_gate), or None"""
    fused = _fused_gate(module)
    return None if fused is None else fused[0]


class _Plan:
    """What a module's forward keeps between eager calls, so that a decode step's host work is a few
    pointer writes and the library's launches (bench/RESULTS.md v35: the GEMMs' generic wrappers
    were most of an eager step): the module's weights checked and repacked, and the problem
    descriptors for the last shape, as one tuple (shape, up's GEMM, down's GEMM, the one-call
    layer's) that calls copy before setting their pointers (so threads sharing a module never write
    one descriptor). The repacked weights are the weight cache's buffers, held weakly: the plan is
    valid only while the cache would hand out the same ones (equal _weights_state, both liveness
    tokens alive, the buffers alive) and keeps nothing alive the cache has let go."""
    __slots__ = ("E", "has_gate", "device", "generation", "states", "tokens", "w_refs", "problems")

    def weights(self, E, has_gate, device, up, up_scale, down, down_scale):
        """(w_up, w_down) while the plan is valid for these arguments, else None"""
        if not (E == self.E and has_gate == self.has_gate and device == self.device
                and self.generation == dg._cache_generation
                and dg._weights_state(up, up_scale) == self.states[0]
                and dg._weights_state(down, down_scale) == self.states[1]
                and all(tok() is not None for pair in self.tokens for tok in pair)):
            return None
        w_up, w_down = self.w_refs[0](), self.w_refs[1]()
        return None if w_up is None or w_down is None else (w_up, w_down)


class _FP8Weights:
    """A module's FP8 expert weights [E, N, K] under 128 x 128 block scales as the GEMMs take them
    (what SM90Weights is for FP4 weights: n, k, num_groups, matrix), pointing at the module's tensors"""
    __slots__ = ("n", "k", "num_groups", "matrix")

    def __init__(self, name, B, SFB, device):
        sf_name = name + "_scale_inv"
        want = (B.shape[0], -(-B.shape[1] // 128), -(-B.shape[2] // 128))
        if SFB.numel() == B.shape[0] and tuple(SFB.shape) != want:
            # (a scale an expert, what transformers' FP8 quantizer keeps without a block size)
            raise L.unsupported("hfp4 experts: %s has shape %s: FP8 expert weights need 128 x 128 block scales %s"
                                % (sf_name, tuple(SFB.shape), want))
        self.matrix = dg._fp8_weights(name, B, SFB, B.shape[-1], None, 3, sf_name, device)
        self.num_groups, self.n, self.k = B.shape[0], B.shape[1], B.shape[2]


# module -> _Plan (weakly held); emptied by hfp4.deep_gemm.clear_weight_cache
_plans = weakref.WeakKeyDictionary()
dg._clear_hooks.append(_plans.clear)


def _weights_plan(module, has_gate, up, up_scale, device, capturing):
    """(the module's _Plan, its repacked w_up, w_down): the plan kept from the last call where the
    weights are unchanged, else built (and kept unless a CUDA graph is being captured or the weight
    cache is off: HFP4_WEIGHT_CACHE=0, read at every call as the cache reads it; FP8 weights' plans,
    which hold no cached buffer, are kept either way)"""
    down, down_scale = module.down_proj, module.down_proj_scale_inv
    E = int(module.num_experts)
    fp8 = _fp8_weights(up)
    # (FP8 plans hold no cached buffers: kept whatever the weight cache's switch says)
    keep = not capturing and (fp8 or dg.weight_cache_enabled())
    try:
        plan = _plans.get(module) if keep else None
    except TypeError:  # (not weakly referable: a plan per call)
        plan = None
    if plan is not None:
        ws = plan.weights(E, has_gate, device, up, up_scale, down, down_scale)
        if ws is not None:
            return plan, ws[0], ws[1]
    _check_weights(module, has_gate, up)
    up_name = "gate_up_proj" if has_gate else "up_proj"
    plan = _Plan()
    plan.E, plan.has_gate, plan.device, plan.problems = E, has_gate, device, None
    plan.generation = dg._cache_generation  # (before the fetch: a clear_weight_cache() meanwhile voids the plan)
    if fp8:
        # FP8 weights as they are (nothing repacked or cached: the descriptors point at the module's
        # tensors, so the plan holds them only while their state is unchanged)
        w_up = _FP8Weights(up_name, up, up_scale, device)
        w_down = _FP8Weights("down_proj", down, down_scale, device)
        if w_up.k % 128 or w_down.k % 128:
            raise L.unsupported("hfp4 experts: FP8 expert weights with hidden size %d and intermediate size %d; the FP8 x "
                                "FP8 kernels take multiples of 128" % (w_up.k, w_down.k))
        if w_down.n != w_up.k:
            raise L.invalid_argument("hfp4 experts: down_proj has %d rows an expert; it must equal the hidden size %d "
                                     "(%s's K)" % (w_down.n, w_up.k, up_name))
        plan.states = (dg._weights_state(up, up_scale), dg._weights_state(down, down_scale))
        plan.tokens = ()
        plan.w_refs = (lambda: w_up, lambda: w_down)
        if keep:
            try:
                _plans[module] = plan
            except TypeError:
                pass
        return plan, w_up, w_down
    # (dg._weights: the operands' checks, the cache, and a captured graph's pin on the buffers)
    w_up = dg._weights(up_name, (up, up_scale), 3, 2 * up.shape[-1], device)
    w_down = dg._weights("down_proj", (down, down_scale), 3, 2 * down.shape[-1], device)
    if w_down.n != w_up.k:
        raise L.invalid_argument("hfp4 experts: down_proj has %d rows an expert; it must equal the hidden size %d "
                                 "(%s's K)" % (w_down.n, w_up.k, up_name))
    plan.states = (dg._weights_state(up, up_scale), dg._weights_state(down, down_scale))
    plan.tokens = (dg._cache_tokens(up, w_up), dg._cache_tokens(down, w_down))
    plan.w_refs = (weakref.ref(w_up), weakref.ref(w_down))
    if keep and None not in plan.tokens and plan.generation == dg._cache_generation:
        try:
            _plans[module] = plan
        except TypeError:
            pass
    return plan, w_up, w_down


def _grouped_problem(w, m_pad, k, gran_k, layout_rows_alignment, expected_m):
    """hfp4_gemm_problem of an m-grouped contiguous GEMM over the FP8 rows [m_pad, k] with FP32
    scales [m_pad, ceil(k / gran_k)] into BF16 D [m_pad, N] (padding rows left alone); the
    pointers (A, its scales, the layout, D) are set per call"""
    p = L.hfp4_gemm_problem()
    p.grouping = L.GROUPING_CONTIGUOUS
    p.m, p.n, p.k, p.num_groups = m_pad, w.n, k, w.num_groups
    p.m_alignment = layout_rows_alignment
    p.expected_m = expected_m
    p.d_padding = L.D_PADDING_ANY
    p.a = L.hfp4_matrix(None, L.DTYPE_FP8_E4M3, m_pad, k, k, 0,
                        L.hfp4_scales(None, L.DTYPE_FP32, 1, gran_k, -(-k // gran_k), 1, 0))
    p.b = w.matrix
    p.d = L.hfp4_output(None, L.DTYPE_BF16, w.n, 0, None)
    return p


def _layer_problem(lib, E, w_up, w_down, T, k, gran_k, alignment):
    """hfp4_moe_forward_problem of the module's layer for T tokens (hfp4_moe_forward_gpu: the whole
    fused-SwiGLU forward in one library call), its workspace size filled in; x, ids, weights, the
    gate's limit and layout, out and the workspace are set per call"""
    p = L.hfp4_moe_forward_problem()
    p.tokens, p.top_k, p.num_experts = T, k, E
    p.w13, p.w2 = w_up.matrix, w_down.matrix
    p.gran_k, p.m_alignment = gran_k, alignment
    p.ldx = p.ldo = w_up.k
    nbytes = c_size_t()
    L.check(lib.hfp4_moe_forward_workspace_size(byref(p), byref(nbytes)))
    p.workspace_bytes = nbytes.value
    return p


def _workspace_offsets(S, m_pad, H, I, N1, c1, c2):
    """Byte offsets in one workspace of everything between the input and the output (each region
    256-byte aligned, as TMA wants 16; the second GEMM's scales 4-byte aligned inside the scales'
    region): pos [S] int32, layout [m_pad] int32, both GEMMs' activation scales [m_pad, c1] and
    [m_pad, c2] FP32 (one region), a1 [m_pad, H] and a2 [m_pad, I] FP8, D1
    [m_pad, N1] and D2 [m_pad, H] BF16. Returns (offsets, total bytes)."""
    sizes = (4 * S, 4 * m_pad, 4 * m_pad * (c1 + c2), m_pad * H, m_pad * I, 2 * m_pad * N1, 2 * m_pad * H)
    offsets, at = [], 0
    for n in sizes:
        offsets.append(at)
        at += (n + 255) // 256 * 256
    return offsets, at


def _forward_with_library_glue(self, has_gate, up, up_scale, hidden_states, top_k_index, top_k_weights, gran_k):
    torch = _torch()
    T, H = hidden_states.shape
    k = top_k_index.shape[1]
    S = T * k
    device = hidden_states.device
    lib, stream = L.lib(), dg._stream(device)
    A = _alignment()
    with torch.cuda.device(device):
        plan, w_up, w_down = _weights_plan(self, has_gate, up, up_scale, device,
                                           torch.cuda.is_current_stream_capturing())
        E = plan.E
        if w_up.k != H:
            raise L.invalid_argument("hfp4 experts: hidden_states has %d columns; %s takes K = %d"
                                     % (H, "gate_up_proj" if has_gate else "up_proj", w_up.k))
        I = w_down.k  # (the second GEMM's K)
        N1 = w_up.n
        m_pad = int(lib.hfp4_moe_layout_rows(S, E, A))
        expected_m = _rows_per_expert(S, E)
        fused = _fused_gate(self) if has_gate else None
        one_call = fused is not None and N1 == 2 * I
        shape = (T, k, m_pad, H, I, gran_k, A, expected_m, one_call)
        problems = plan.problems
        if problems is None or problems[0] != shape:
            problems = (shape, _grouped_problem(w_up, m_pad, H, gran_k, A, expected_m),
                        _grouped_problem(w_down, m_pad, I, gran_k, A, expected_m),
                        _layer_problem(lib, E, w_up, w_down, T, k, gran_k, A) if one_call else None)
            plan.problems = problems
        ids = top_k_index.reshape(-1)
        if ids.dtype not in (torch.int32, torch.int64):
            ids = ids.long()
        ids = ids.contiguous()
        x = hidden_states
        if x.dtype not in (torch.bfloat16, torch.float32):
            x = x.float()
        x = x.contiguous()
        w = top_k_weights.reshape(-1)
        if w.dtype not in (torch.float32, torch.bfloat16):
            w = w.float()
        w = w.contiguous()
        out_bf16 = hidden_states.dtype == torch.bfloat16
        if one_call:
            # the whole layer in one library call (hfp4_moe_forward_gpu): route, quantize, both GEMMs,
            # the SwiGLU fused with the second quantization, combine (eager decode's host time)
            p = L.hfp4_moe_forward_problem.from_buffer_copy(problems[3])
            ws = hidden_states.new_empty((p.workspace_bytes + 256,), dtype=torch.uint8)  # (aligned below)
            out = hidden_states.new_empty((T, H), dtype=torch.bfloat16 if out_bf16 else torch.float32)
            p.x, p.x_dtype = x.data_ptr(), L.DTYPE_BF16 if x.dtype == torch.bfloat16 else L.DTYPE_FP32
            p.ids, p.ids_int64 = ids.data_ptr(), int(ids.dtype == torch.int64)
            p.weights, p.weights_dtype = w.data_ptr(), L.DTYPE_FP32 if w.dtype == torch.float32 else L.DTYPE_BF16
            p.gate_up, p.swiglu_limit = fused[1], fused[0]
            p.out, p.out_dtype = out.data_ptr(), L.DTYPE_BF16 if out_bf16 else L.DTYPE_FP32
            p.workspace = (ws.data_ptr() + 255) // 256 * 256
            L.check(lib.hfp4_moe_forward_gpu(byref(p), stream))
            return out if out_bf16 else out.to(hidden_states.dtype)
        c1, c2 = -(-H // gran_k), -(-I // gran_k)
        (o_pos, o_layout, o_sf, o_a1, o_a2, o_d1, o_d2), nbytes = _workspace_offsets(S, m_pad, H, I, N1, c1, c2)
        ws = hidden_states.new_empty((nbytes,), dtype=torch.uint8)
        base = ws.data_ptr()
        pos, layout, sfa1, sfa2 = base + o_pos, base + o_layout, base + o_sf, base + o_sf + 4 * m_pad * c1
        a1, a2, d1, d2 = base + o_a1, base + o_a2, base + o_d1, base + o_d2
        # (the padding rows of a1, a2 and their scales stay unwritten: hfp4.h, no other row reads them)
        L.check(lib.hfp4_moe_route_gpu(ids.data_ptr(), int(ids.dtype == torch.int64), S, E, A, pos, layout, m_pad,
                                       stream))
        L.check(lib.hfp4_moe_quantize_rows_gpu(x.data_ptr(), L.DTYPE_BF16 if x.dtype == torch.bfloat16 else
                                               L.DTYPE_FP32, T, H, H, k, pos, S, gran_k, a1, H, sfa1, m_pad, stream))
        p = L.hfp4_gemm_problem.from_buffer_copy(problems[1])
        p.a.data, p.a.scales.data, p.layout, p.d.data = a1, sfa1, layout, d1
        L.check(lib.hfp4_gemm(byref(p), stream))
        # the module's own activation between the GEMMs, then the second quantization
        # (unrouted rows, pos -1, read row 0, whatever it holds: their quantization and sum skip them)
        d = ws.narrow(0, o_d1, 2 * m_pad * N1).view(torch.bfloat16).view(m_pad, N1)
        rows = ws.narrow(0, o_pos, 4 * S).view(torch.int32)
        h = d[rows.clamp(min=0).long()]
        h = self._apply_gate(h) if has_gate else self.act_fn(h)
        if h.dim() != 2 or h.shape[1] != I:
            raise L.invalid_argument("hfp4 experts: the activation gives %s columns; down_proj takes %d"
                                     % (h.shape[1] if h.dim() == 2 else tuple(h.shape), I))
        if h.dtype not in (torch.bfloat16, torch.float32):
            h = h.float()
        h = h.contiguous()
        L.check(lib.hfp4_moe_quantize_rows_gpu(h.data_ptr(), L.DTYPE_BF16 if h.dtype == torch.bfloat16 else
                                               L.DTYPE_FP32, S, I, I, 1, pos, S, gran_k, a2, I, sfa2, m_pad,
                                               stream))
        p = L.hfp4_gemm_problem.from_buffer_copy(problems[2])
        p.a.data, p.a.scales.data, p.layout, p.d.data = a2, sfa2, layout, d2
        L.check(lib.hfp4_gemm(byref(p), stream))
        out = hidden_states.new_empty((T, H), dtype=torch.bfloat16 if out_bf16 else torch.float32)
        L.check(lib.hfp4_moe_combine_gpu(d2, H, m_pad, H, pos, w.data_ptr(),
                                         L.DTYPE_FP32 if w.dtype == torch.float32 else L.DTYPE_BF16, T, k,
                                         out.data_ptr(), L.DTYPE_BF16 if out_bf16 else L.DTYPE_FP32, H, stream))
    return out if out_bf16 else out.to(hidden_states.dtype)


def experts_forward(self, hidden_states, top_k_index, top_k_weights, gran_k=128):
    """The experts forward (transformers' experts-function signature; ``self`` is the experts
    module). gran_k: the activations' scale granularity along K, 128 (default) or 32."""
    torch = _torch()
    if gran_k not in (32, 128):
        raise L.invalid_argument("hfp4 experts: gran_k = %r must be 32 or 128" % (gran_k,))
    has_gate, up = _check_config(self)
    _check_inputs(hidden_states, top_k_index, top_k_weights)
    if gran_k != 128 and _fp8_weights(up):
        raise L.unsupported("hfp4 experts: gran_k = %d with FP8 expert weights; the FP8 x FP8 kernels take 1 x 128 "
                            "activation scales" % gran_k)
    up_scale = self.gate_up_proj_scale_inv if has_gate else self.up_proj_scale_inv
    T, H = hidden_states.shape
    k = top_k_index.shape[1]
    E = int(self.num_experts)
    if (T > 0 and k > 0) and _glue_enabled() and E <= GPU_GLUE_MAX_EXPERTS:
        # (the weights are checked when the module's plan is built, not at every call)
        return _forward_with_library_glue(self, has_gate, up, up_scale, hidden_states, top_k_index, top_k_weights,
                                          gran_k)
    _check_weights(self, has_gate, up)
    if T == 0 or k == 0:
        return hidden_states.new_zeros((T, H))
    perm, sorted_ids, pos, layout, m_pad = _routed_layout(top_k_index.reshape(-1), E)
    S = perm.numel()
    expected_m = _rows_per_expert(S, E)
    h = _grouped_gemm(hidden_states[perm // k], up, up_scale, pos, layout, m_pad, gran_k, expected_m)
    h = self._apply_gate(h) if has_gate else self.act_fn(h)
    y = _grouped_gemm(h, self.down_proj, self.down_proj_scale_inv, pos, layout, m_pad, gran_k, expected_m)
    w = top_k_weights.reshape(-1)[perm].float()
    routed = (sorted_ids < E).unsqueeze(1)
    # (where, not a product: unrouted rows sit in D's unwritten padding and may hold NaN)
    y = torch.where(routed, y.float() * w.unsqueeze(1), y.new_zeros((), dtype=torch.float32))
    # back to token order and a sum over each token's k rows in order of j: deterministic, where
    # index_add_'s atomics would sum in a different order from run to run
    inv = torch.empty_like(perm)
    inv[perm] = torch.arange(S, device=perm.device)
    return y[inv].view(T, k, H).sum(1).to(hidden_states.dtype)


# transformers' registries of fine-grained (FP8/FP4) experts functions, newest first: (module, interface
# class, its instance). Recent transformers: transformers.integrations.finegrained (a module, or a
# package whose __init__ exports only the instance); earlier: transformers.integrations.finegrained_fp8.
_EXPERTS_INTERFACES = (
    ("transformers.integrations.finegrained", "FineGrainedExpertsInterface", "ALL_FINEGRAINED_EXPERTS_FUNCTIONS"),
    ("transformers.integrations.finegrained_fp8", "FP8ExpertsInterface", "ALL_FP8_EXPERTS_FUNCTIONS"),
)


def _experts_registries():
    """([registry objects to register with], [why each path was not usable])"""
    import importlib
    found, missing = [], []
    for modname, cls_name, inst_name in _EXPERTS_INTERFACES:
        try:
            mod = importlib.import_module(modname)
        except Exception as e:  # (ImportError, or a transformers whose module fails to import)
            missing.append("%s: %s" % (modname, e))
            continue
        # the instance transformers dispatches through; register() on it is transformers'
        # classmethod (updates the class-wide mapping) or, where it is not, updates that instance
        target = getattr(mod, inst_name, None)
        if target is None:
            target = getattr(mod, cls_name, None)
        if target is None or not callable(getattr(target, "register", None)):
            missing.append("%s has neither %s nor %s" % (modname, inst_name, cls_name))
            continue
        cls = target if isinstance(target, type) else type(target)
        if all(cls is not (t if isinstance(t, type) else type(t)) for t in found):  # (one module re-exporting the other)
            found.append(target)
    return found, missing


def register(name="hfp4"):
    """Adds experts_forward to transformers' fine-grained FP8/FP4 experts functions under `name`, so
    that ``model.set_experts_implementation(name)`` (or ``experts_implementation=name``) selects it.
    Registers with every registry the installed transformers has: ALL_FINEGRAINED_EXPERTS_FUNCTIONS
    (transformers.integrations.finegrained, recent versions) and ALL_FP8_EXPERTS_FUNCTIONS
    (transformers.integrations.finegrained_fp8, earlier ones). Returns the name."""
    found, missing = _experts_registries()
    if not found:
        raise L.unsupported("hfp4 experts: transformers with a fine-grained experts interface is needed "
                            "(FineGrainedExpertsInterface or FP8ExpertsInterface): %s" % "; ".join(missing))
    for target in found:
        target.register(name, experts_forward)
    return name
