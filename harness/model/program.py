"""The generation program as data: one decode step of a lane as an ordered list of kernel launches.

A lane's decode step mirrors the seed's ``decode_step`` (``emit_qwen30b_generate``): the embedding, per
layer the attention block and the MoE block, the final norm and the LM head; ``gk_argmax_adv`` then picks
the token and advances the position on the device, as the seed's captured graph does. Every launch names
its kernel, its grid, block and dynamic shared bytes (from the kernel's contract, evaluated at the model's
dims), and its arguments: a buffer name for every pointer parameter and a value for every scalar. Every
buffer (weights per layer, KV cache per layer, scratch, position, token) is declared once with its shape
and dtype. The program holds no data: ``harness.model.chain`` runs it on a backend over a buffer set.

Lanes:
  precise  f32 activations (DEQUANT): the seed's precise lane, fused QK-norm+RoPE attention.
  fast     int8 activations (INT8_ACT): fused QKV GEMV, fused QK-norm+RoPE of Q and K, ``gk_attn`` then
           ``gk_quant_act``, the single-pass int8 MoE set.
  flash    the fast lane with split-K attention (``gk_attn_part`` + ``gk_attn_comb_q``).
  twopass  qconform's own lane: the fast lane's structure with a hi + lo int8 activation (TWO_PASS_INT8) in
           every GEMV (k0_qact + k0_q8dp4a on the float norm / attention outputs) and in the MoE experts; K and V
           rows are written through a host-offset pointer (see MISSING_KERNELS).

Kernels come from qconform's emitters at the model's dims (default), or from CUDA source files (``--source``):
a kernel the lane needs that the source lacks, or whose parameter list differs from its contract, is a
ProgramError naming it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Mapping, Optional, Sequence

import numpy as np

from emitters.contract import ContractViolation, KernelContract, Role
from emitters.expr import evaluate
from emitters.registry import emit
from reference.model import ModelConfig
from reference.modes import Mode
from reference.shapes import ShapeSet

from cudasrc.signatures import kernel_signatures

LANES = ("precise", "fast", "flash", "twopass")

# What qconform's emitters do not provide for the lanes, and what stands in for it (reported by `describe`).
MISSING_KERNELS = {
    "twopass": ("qconform emits no two-pass (hi + lo int8 activation) GEMV that writes a KV-cache row at *d_pos "
                "(the two-pass counterpart of gk_gemv_kv / gk_gemv_qkv), nor a two-pass fused norm+quant: the "
                "twopass lane writes K and V with k0_q8dp4a through a host-offset pointer kc[l] + pos*KD, so its "
                "step cannot be replayed with a device-side position (not graph-capturable) and it runs on host "
                "buffers only"),
}

# Which (family, mode) of qconform's emitters provides each kernel of each lane.
_DEQ, _I8, _TP = Mode.DEQUANT, Mode.INT8_ACT, Mode.TWO_PASS_INT8
# A binding "kc[0]@row" passes the buffer offset by the current position times the parameter's element count:
# the host-side pointer arithmetic `kc[l] + pos*KD` (the position is known on the host at every step).
ROW_SUFFIX = "@row"


@dataclass(frozen=True)
class RowRef:
    """Buffer `buffer` offset by position * length elements, `length` elements long."""
    buffer: str
    length: int

    def __str__(self) -> str:
        return f"{self.buffer}[pos*{self.length}:]"


class ProgramError(ValueError):
    """The program cannot be built: a kernel missing from the source, a parameter list that differs from the
    contract, a buffer that does not fit a launch, a broken kernel precondition at the model's dims."""


@dataclass(frozen=True)
class BufferDecl:
    """A device buffer of the program: declared once, bound by name in every launch that uses it."""
    name: str                    # the seed's name, with [l] for per-layer buffers: "kc[0]", "wq_q[1]", "x"
    shape: tuple[int, ...]
    dtype: str                   # numpy dtype name
    kind: str                    # weight | kv | scratch | state
    layer: int = -1              # -1: not per layer

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    @property
    def nbytes(self) -> int:
        return self.size * np.dtype(self.dtype).itemsize


@dataclass(frozen=True)
class Launch:
    """One kernel launch of the decode step."""
    index: int                               # position in the step (0-based)
    kernel: str                              # the kernel's name in the source
    contract: KernelContract
    instance: str                            # the contract's size instance (attn_q, lm_head, experts, ...)
    layer: int                               # -1 for the embedding, final norm, LM head and the argmax
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int
    bindings: tuple[tuple[str, object], ...]  # (param name, buffer name | numpy scalar), in parameter order
    dims: Mapping[str, object] = field(default_factory=dict)   # the contract's dims (cache length = maxseq)

    @property
    def args(self) -> tuple[object, ...]:
        return tuple(v for _, v in self.bindings)

    def buffer(self, param: str) -> str:
        for p, v in self.bindings:
            if p == param:
                if isinstance(v, RowRef):
                    return v.buffer
                if not isinstance(v, str):
                    raise KeyError(f"{self.kernel}: parameter {param} is a scalar")
                return v
        raise KeyError(f"{self.kernel} has no parameter {param!r}")

    @property
    def output_indices(self) -> tuple[int, ...]:
        """Arguments the kernel must write in full (poisoned before the launch)."""
        return tuple(i for i, p in enumerate(self.contract.params) if p.role is Role.OUTPUT)

    def written(self) -> tuple[str, ...]:
        """Buffers this launch writes (outputs and in/out buffers)."""
        return tuple(self.buffer(p.name) for p in self.contract.params
                     if p.is_pointer and p.role in (Role.OUTPUT, Role.INOUT, Role.SCRATCH))

    def read(self) -> tuple[str, ...]:
        return tuple(self.buffer(p.name) for p in self.contract.params
                     if p.is_pointer and p.role in (Role.INPUT, Role.INOUT))

    @property
    def has_rows(self) -> bool:
        return any(isinstance(v, RowRef) for _, v in self.bindings)

    def dims_at(self, pos: int) -> dict:
        """The contract's dims at decode position pos (cache length pos + 1), keeping the cache size."""
        d = dict(self.dims)
        if "L" in d:
            d["L"] = pos + 1
        if "pos" in d:
            d["pos"] = pos
        return d

    def where(self) -> str:
        layer = "" if self.layer < 0 else f"layer {self.layer}, "
        g = "x".join(map(str, self.grid))
        b = "x".join(map(str, self.block))
        return f"{layer}launch {self.index} {self.kernel}<<<{g}, {b}, {self.shared_bytes}>>> ({self.instance})"


@dataclass(frozen=True)
class Program:
    lane: str
    config: ModelConfig
    shape: ShapeSet                          # the kernel family's shape set at the model's dims
    maxseq: int                              # KV-cache rows (the seed's MAXSEQ)
    buffers: Mapping[str, BufferDecl]
    launches: tuple[Launch, ...]             # one decode step
    advance: Launch                          # gk_argmax_adv: token and position on the device
    code: str                                # the CUDA source all kernels come from
    source_label: str                        # "emitters" or the --source file names

    def layer_launches(self, layer: int) -> list[Launch]:
        return [l for l in self.launches if l.layer == layer]

    @property
    def has_rows(self) -> bool:
        """Some launch takes a host-offset cache row (RowRef): the buffers must be host arrays."""
        return any(l.has_rows for l in self.launches)

    def kernels(self) -> list[str]:
        return list(dict.fromkeys([l.kernel for l in self.launches] + [self.advance.kernel]))

    def describe(self) -> dict:
        return {"lane": self.lane, "source": self.source_label, "maxseq": self.maxseq,
                "launches_per_step": len(self.launches) + 1, "kernels": self.kernels(),
                "buffers": len(self.buffers), "bytes": sum(b.nbytes for b in self.buffers.values()),
                "missing_in_qconform": MISSING_KERNELS.get(self.lane)}


# -- the lanes ------------------------------------------------------------------------------------------------------
# A launch template: (kernel, family, mode, instance, {param: buffer name template}). "{l}" is the layer,
# "{n}" the next layer's attention norm (or the output norm after the last layer).
_T = tuple


def _attn_precise() -> list[_T]:
    return [
        ("gk_rmsnorm", "norm", _DEQ, "attn_norm", {"out": "xn", "x": "x", "w": "an[{l}]"}),
        ("gk_gemv_deq", "matmul", _DEQ, "attn_q", {"y": "qbuf", "wq": "wq_q[{l}]", "ws": "wq_s[{l}]", "x": "xn"}),
        ("gk_gemv_kv_deq", "matmul", _DEQ, "attn_k", {"cache": "kc[{l}]", "d_pos": "d_pos", "wq": "wk_q[{l}]",
                                                      "ws": "wk_s[{l}]", "x": "xn"}),
        ("gk_gemv_kv_deq", "matmul", _DEQ, "attn_v", {"cache": "vc[{l}]", "d_pos": "d_pos", "wq": "wv_q[{l}]",
                                                      "ws": "wv_s[{l}]", "x": "xn"}),
        ("gk_qk_norm_rope", "rope", None, "k_cache_row", {"base": "kc[{l}]", "d_pos": "d_pos", "nw": "akn[{l}]"}),
        ("gk_fused_attn", "attention", _DEQ, "decode", {"out": "attnb", "q": "qbuf", "kc": "kc[{l}]",
                                                        "vc": "vc[{l}]", "d_pos": "d_pos", "qnw": "aqn[{l}]"}),
        ("gk_gemv_deq", "matmul", _DEQ, "attn_out", {"y": "tmp", "wq": "wo_q[{l}]", "ws": "wo_s[{l}]", "x": "attnb"}),
        ("gk_add_rmsnorm", "norm", _DEQ, "attn_norm", {"x": "x", "y": "tmp", "out": "x2n", "w": "fn_[{l}]"}),
    ]


def _tp_act(src: str, hi: str, inst: str) -> _T:
    return ("k0_qact", "matmul", _TP, inst, {"a": src, "aqh": hi, "aql": hi + "_lo", "as_": hi.replace("aq", "as")})


def _tp_gemv(act: str, w: str, y: str, inst: str, layer: bool = True) -> _T:
    """k0_q8dp4a two-pass: weight quants w_q and the float16 copy of its scales w_sh (per layer unless not)."""
    at = "[{l}]" if layer else ""
    return ("k0_q8dp4a", "matmul", _TP, inst, {"aqh": act, "aql": act + "_lo", "as_": act.replace("aq", "as"),
                                               "wq": f"{w}_q{at}", "ws": f"{w}_sh{at}", "y": y})


def _attn_twopass() -> list[_T]:
    """The fast lane's attention with every GEMV two-pass (k0_qact + k0_q8dp4a on the float norm output). The
    K and V projections write this position's cache row through a host-offset pointer (ROW_SUFFIX): qconform
    emits no two-pass GEMV that indexes the cache by *d_pos (MISSING_KERNELS)."""
    return [
        ("gk_rmsnorm", "norm", _DEQ, "attn_norm", {"out": "xn", "x": "x", "w": "an[{l}]"}),
        _tp_act("xn", "aqE", "x_norm"),
        _tp_gemv("aqE", "wq", "qbuf", "attn_q"),
        _tp_gemv("aqE", "wk", "kc[{l}]" + ROW_SUFFIX, "attn_k"),
        _tp_gemv("aqE", "wv", "vc[{l}]" + ROW_SUFFIX, "attn_v"),
        ("gk_qk_norm_rope2", "rope", None, "qk_heads", {"qbase": "qbuf", "kbase": "kc[{l}]", "d_pos": "d_pos",
                                                        "qnw": "aqn[{l}]", "knw": "akn[{l}]"}),
        ("gk_attn", "attention", _DEQ, "decode", {"out": "attnb", "q": "qbuf", "kc": "kc[{l}]", "vc": "vc[{l}]",
                                                  "d_pos": "d_pos"}),
        _tp_act("attnb", "aqQ", "attn_ctx"),
        _tp_gemv("aqQ", "wo", "tmp", "attn_out"),
        ("gk_add_rmsnorm", "norm", _DEQ, "attn_norm", {"x": "x", "y": "tmp", "out": "x2n", "w": "fn_[{l}]"}),
    ]


def _router(mode: Mode) -> list[_T]:
    return [
        ("moe_router_fast", "moe", mode, "router", {"a": "x2n", "wq": "wr_q[{l}]", "ws": "wr_s[{l}]",
                                                    "y": "moe_logits"}),
        ("moe_topk_idx", "moe", mode, "router", {"logits": "moe_logits", "idx": "moe_idx", "w": "moe_w"}),
    ]


_EXPERT_W = {"wg_q": "wg_q[{l}]", "wg_s": "wg_s[{l}]", "wu_q": "wu_q[{l}]", "wu_s": "wu_s[{l}]", "idx": "moe_idx"}
_DOWN_W = {"wd_q": "wd_q[{l}]", "wd_s": "wd_s[{l}]", "idx": "moe_idx", "wc": "moe_w", "H": "moe_out"}


def _layer_precise() -> list[_T]:
    return _attn_precise() + _router(_DEQ) + [
        ("gk_moe_gate_up_deq", "moe", _DEQ, "experts", {"x": "x2n", **_EXPERT_W, "h": "moe_he"}),
        ("gk_moe_down_deq", "moe", _DEQ, "experts", {"hbuf": "moe_he", **_DOWN_W}),
        ("gk_add", "elementwise", None, "moe_residual", {"x": "x", "y": "moe_out"}),
    ]


def _layer_twopass() -> list[_T]:
    return _attn_twopass() + _router(_TP) + [
        ("moe_qact", "moe", _TP, "x", {"a": "x2n", "aqh": "moe_xq", "aql": "moe_xq_lo", "as_": "moe_xs"}),
        ("moe_gate_up_silu", "moe", _TP, "experts", {"xqh": "moe_xq", "xql": "moe_xq_lo", "xs": "moe_xs",
                                                     **_EXPERT_W, "h": "moe_he"}),
        ("moe_qact", "moe", _TP, "h", {"a": "moe_he", "aqh": "moe_hq", "aql": "moe_hq_lo", "as_": "moe_hs"}),
        ("moe_down_combine", "moe", _TP, "experts", {"hqh": "moe_hq", "hql": "moe_hq_lo", "hs": "moe_hs",
                                                     **_DOWN_W}),
        ("gk_add", "elementwise", None, "moe_residual", {"x": "x", "y": "moe_out"}),
    ]


def _layer_fast(flash: bool) -> list[_T]:
    out = [
        ("gk_gemv_qkv", "matmul", _I8, "qkv", {"qbuf": "qbuf", "kc": "kc[{l}]", "vc": "vc[{l}]", "d_pos": "d_pos",
                                               "wqq": "wq_q[{l}]", "wqs": "wq_s[{l}]", "wkq": "wk_q[{l}]",
                                               "wks": "wk_s[{l}]", "wvq": "wv_q[{l}]", "wvs": "wv_s[{l}]",
                                               "xq": "aqE", "xs": "asE"}),
        ("gk_qk_norm_rope2", "rope", None, "qk_heads", {"qbase": "qbuf", "kbase": "kc[{l}]", "d_pos": "d_pos",
                                                        "qnw": "aqn[{l}]", "knw": "akn[{l}]"}),
    ]
    if flash:
        out += [
            ("gk_attn_part", "attention", _I8, "decode", {"q": "qbuf", "kc": "kc[{l}]", "vc": "vc[{l}]",
                                                          "d_pos": "d_pos", "acc_part": "acc_part",
                                                          "m_part": "m_part", "d_part": "d_part"}),
            ("gk_attn_comb_q", "attention", _I8, "decode", {"aq": "aqQ", "as_": "asQ", "acc_part": "acc_part",
                                                            "m_part": "m_part", "d_part": "d_part"}),
        ]
    else:
        out += [
            ("gk_attn", "attention", _DEQ, "decode", {"out": "attnb", "q": "qbuf", "kc": "kc[{l}]",
                                                      "vc": "vc[{l}]", "d_pos": "d_pos"}),
            ("gk_quant_act", "matmul", _I8, "attn_ctx", {"x": "attnb", "xq": "aqQ", "xs": "asQ"}),
        ]
    out += [
        ("gk_gemv", "matmul", _I8, "attn_out", {"y": "tmp", "wq": "wo_q[{l}]", "ws": "wo_s[{l}]", "xq": "aqQ",
                                                "xs": "asQ"}),
        ("gk_add_rmsnorm_q8", "norm", _I8, "attn_norm", {"x": "x", "y": "tmp", "out": "x2n", "w": "fn_[{l}]",
                                                         "oq": "moe_xq", "os_": "moe_xs"}),
    ] + _router(_I8) + [
        ("moe_gate_up_silu", "moe", _I8, "experts", {"xq": "moe_xq", "xs": "moe_xs", **_EXPERT_W, "h": "moe_he"}),
        ("moe_qact", "moe", _I8, "h", {"a": "moe_he", "aq": "moe_hq", "as_": "moe_hs"}),
        ("moe_down_combine", "moe", _I8, "experts", {"hq": "moe_hq", "hs": "moe_hs", **_DOWN_W}),
        ("gk_add_rmsnorm_q8a", "norm", _I8, "attn_norm", {"x": "x", "y": "moe_out", "xq": "aqE", "xs": "asE",
                                                          "w": "{n}"}),
    ]
    return out


def _head(lane: str) -> list[_T]:
    if lane in ("fast", "flash"):
        return [("gk_embed", "embed", None, "token_embd", {"x": "x", "wq": "emb_q", "ws": "emb_s", "d_tok": "d_tok"}),
                ("gk_rmsnorm_q8", "norm", _I8, "attn_norm", {"x": "x", "xq": "aqE", "xs": "asE", "w": "an[0]"})]
    return [("gk_embed", "embed", None, "token_embd", {"x": "x", "wq": "emb_q", "ws": "emb_s", "d_tok": "d_tok"})]


def _tail(lane: str) -> list[_T]:
    if lane in ("fast", "flash"):
        return [("gk_gemv", "matmul", _I8, "lm_head", {"y": "logits", "wq": "wout_q", "ws": "wout_s", "xq": "aqE",
                                                       "xs": "asE"})]
    out = [("gk_rmsnorm", "norm", _DEQ, "attn_norm", {"out": "xn", "x": "x", "w": "on_w"})]
    if lane == "twopass":
        return out + [_tp_act("xn", "aqE", "x_norm"), _tp_gemv("aqE", "wout", "logits", "lm_head", layer=False)]
    return out + [("gk_gemv_deq", "matmul", _DEQ, "lm_head", {"y": "logits", "wq": "wout_q", "ws": "wout_s",
                                                              "x": "xn"})]


_ADVANCE = ("gk_argmax_adv", "argmax", None, "lm_head", {"logits": "logits", "d_tok": "d_tok", "d_pos": "d_pos"})


def _templates(lane: str, n_layer: int) -> list[tuple[int, _T]]:
    layer = {"precise": _layer_precise, "twopass": _layer_twopass,
             "fast": lambda: _layer_fast(False), "flash": lambda: _layer_fast(True)}[lane]()
    out = [(-1, t) for t in _head(lane)]
    for l in range(n_layer):
        nxt = f"an[{l + 1}]" if l + 1 < n_layer else "on_w"
        for kernel, fam, mode, inst, binds in layer:
            out.append((l, (kernel, fam, mode, inst, {p: b.format(l=l, n=nxt) for p, b in binds.items()})))
    out += [(-1, t) for t in _tail(lane)]
    return out


# -- buffers ------------------------------------------------------------------------------------------------------
def declare_buffers(cfg: ModelConfig, maxseq: int, attn_split: int) -> dict[str, BufferDecl]:
    """Every buffer any lane uses, with the seed's names and sizes (per-layer weights and KV caches)."""
    E, QD, KD, FF, NE, KT, V = (cfg.d_model, cfg.q_dim, cfg.kv_dim, cfg.d_expert, cfg.n_expert,
                                cfg.n_expert_used, cfg.vocab)
    HD, NH = cfg.head_dim, cfg.n_head
    out: dict[str, BufferDecl] = {}

    def add(name, shape, dtype, kind, layer=-1):
        out[name] = BufferDecl(name, tuple(int(s) for s in shape), dtype, kind, layer)

    add("emb_q", (V, E), "int8", "weight")
    add("emb_s", (V, E // 32), "float32", "weight")
    add("wout_q", (V, E), "int8", "weight")
    add("wout_s", (V, E // 32), "float32", "weight")
    add("wout_sh", (V, E // 32), "float16", "weight")
    add("on_w", (E,), "float32", "weight")
    for l in range(cfg.n_layer):
        for n, shape, dt in (("an", (E,), "float32"), ("fn_", (E,), "float32"), ("aqn", (HD,), "float32"),
                             ("akn", (HD,), "float32"),
                             ("wq_q", (QD, E), "int8"), ("wq_s", (QD, E // 32), "float32"),
                             ("wk_q", (KD, E), "int8"), ("wk_s", (KD, E // 32), "float32"),
                             ("wv_q", (KD, E), "int8"), ("wv_s", (KD, E // 32), "float32"),
                             ("wo_q", (E, QD), "int8"), ("wo_s", (E, QD // 32), "float32"),
                             ("wq_sh", (QD, E // 32), "float16"), ("wk_sh", (KD, E // 32), "float16"),
                             ("wv_sh", (KD, E // 32), "float16"), ("wo_sh", (E, QD // 32), "float16"),
                             ("wr_q", (NE, E), "int8"), ("wr_s", (NE, E // 32), "float32"),
                             ("wg_q", (NE * FF, E), "int8"), ("wg_s", (NE * FF, E // 32), "float32"),
                             ("wu_q", (NE * FF, E), "int8"), ("wu_s", (NE * FF, E // 32), "float32"),
                             ("wd_q", (NE * E, FF), "int8"), ("wd_s", (NE * E, FF // 32), "float32")):
            add(f"{n}[{l}]", shape, dt, "weight", l)
        add(f"kc[{l}]", (maxseq, KD), "float32", "kv", l)
        add(f"vc[{l}]", (maxseq, KD), "float32", "kv", l)
    for n, shape, dt in (("x", (E,), "float32"), ("xn", (E,), "float32"), ("x2n", (E,), "float32"),
                         ("qbuf", (QD,), "float32"), ("attnb", (QD,), "float32"), ("tmp", (E,), "float32"),
                         ("logits", (V,), "float32"),
                         ("aqE", (E,), "int8"), ("aqE_lo", (E,), "int8"), ("asE", (E // 32,), "float32"),
                         ("aqQ", (QD,), "int8"), ("aqQ_lo", (QD,), "int8"), ("asQ", (QD // 32,), "float32"),
                         ("moe_logits", (NE,), "float32"), ("moe_idx", (KT,), "int32"), ("moe_w", (KT,), "float32"),
                         ("moe_xq", (E,), "int8"), ("moe_xq_lo", (E,), "int8"), ("moe_xs", (E // 32,), "float32"),
                         ("moe_he", (KT * FF,), "float32"), ("moe_hq", (KT * FF,), "int8"),
                         ("moe_hq_lo", (KT * FF,), "int8"), ("moe_hs", (KT * FF // 32,), "float32"),
                         ("moe_out", (E,), "float32"),
                         ("acc_part", (NH * attn_split * HD,), "float32"), ("m_part", (NH * attn_split,), "float32"),
                         ("d_part", (NH * attn_split,), "float32")):
        add(n, shape, dt, "scratch")
    add("d_pos", (1,), "int32", "state")
    add("d_tok", (1,), "int32", "state")
    return out


# -- kernel source --------------------------------------------------------------------------------------------------
def _emitted(needed: Sequence[tuple[str, Optional[Mode]]], shape: ShapeSet) -> tuple[str, dict]:
    """qconform's source for the (family, mode) pairs and their contracts by (name, family, mode)."""
    codes, contracts = [], {}
    for fam, mode in dict.fromkeys(needed):
        src = emit(fam, mode, shape)
        codes.append(f"// ---- qconform emitters: {fam} / {mode.value if mode else 'any'} ----\n{src.code}")
        for c in src.contracts:
            contracts[(c.name, fam, mode)] = c
    return "\n".join(codes), contracts


def _merge_sources(sources: Sequence[tuple[str, str]]) -> str:
    """Concatenate --source files; a kernel defined in two of them is an error naming both."""
    seen: dict[str, str] = {}
    for label, code in sources:
        for sig in kernel_signatures(code):
            if sig.name in seen and seen[sig.name] != label:
                raise ProgramError(f"--source: kernel {sig.name} is defined in both {seen[sig.name]} and {label}; "
                                   "give one kernel set per kernel name")
            seen[sig.name] = label
    return "\n".join(f"// ---- {label} ----\n{code}" for label, code in sources)


def _scalar(contract: KernelContract, pname: str, dims: Mapping[str, object]) -> np.generic:
    p = contract.param(pname)
    if p.value is not None:
        v = evaluate(p.value, dims)
    elif pname in dims:
        v = dims[pname]
    else:
        raise ProgramError(f"kernel {contract.name}: scalar {pname} has no value expression and no dim")
    return np.dtype(p.dtype).type(v)


def build_program(config: ModelConfig, lane: str, *, maxseq: int, attn_split: int = 8,
                  sources: Optional[Sequence[tuple[str, str]]] = None) -> Program:
    """The decode program of one lane at the model's dims.

    maxseq: KV-cache rows (positions 0 .. maxseq-1 can be decoded). sources: (label, CUDA C) pairs to take
    the kernels from (their names and parameter lists must match qconform's contracts); None = qconform's
    emitters."""
    if lane not in LANES:
        raise ProgramError(f"lane: unknown lane {lane!r}; expected one of {', '.join(LANES)}")
    if not isinstance(maxseq, (int, np.integer)) or maxseq < 1:
        raise ProgramError(f"maxseq: expected a positive integer, got {maxseq!r}")
    shape = config.as_shape(name="model", kv_len=int(maxseq), attn_split=attn_split)
    templates = _templates(lane, config.n_layer) + [(-1, _ADVANCE)]
    needed = [(fam, mode) for _, (_, fam, mode, _, _) in templates]
    try:
        code, contracts = _emitted(needed, shape)
    except ContractViolation as exc:
        raise ProgramError(f"lane {lane}: qconform's emitters refuse the model's dims: {exc}") from None
    label = "qconform emitters"
    if sources:
        code = _merge_sources(sources)
        label = ", ".join(l for l, _ in sources)
        sigs = {s.name: s for s in kernel_signatures(code)}
        for kernel in dict.fromkeys(t[0] for _, t in templates):
            ctr = next(c for (n, _, _), c in contracts.items() if n == kernel)
            if kernel not in sigs:
                raise ProgramError(f"lane {lane}: kernel {kernel} is not in {label} (the lane launches it; "
                                   f"the source has {', '.join(sigs) or 'no kernels'})")
            if sigs[kernel].ctypes != ctr.signature():
                raise ProgramError(f"lane {lane}: kernel {kernel} in {label} has parameter list "
                                   f"({', '.join(sigs[kernel].ctypes)}); its contract has "
                                   f"({', '.join(ctr.signature())})")
    buffers = declare_buffers(config, int(maxseq), attn_split)
    launches = []
    for i, (layer, (kernel, fam, mode, inst, binds)) in enumerate(templates):
        c = contracts[(kernel, fam, mode)]
        launches.append(_launch(i, c, inst, layer, binds, shape, buffers, lane))
    return Program(lane, config, shape, int(maxseq), buffers, tuple(launches[:-1]),
                   replace(launches[-1], index=len(launches) - 1), code, label)


def _launch(index: int, c: KernelContract, inst: str, layer: int, binds: Mapping[str, str], shape: ShapeSet,
            buffers: Mapping[str, BufferDecl], lane: str) -> Launch:
    dims = c.dims_for(shape, inst)
    # the cache-size dims: L and pos at the last position a cache of maxseq rows holds
    if "maxseq" in dims:
        dims["maxseq"] = shape.kv_len
    if "L" in dims:
        dims["L"] = shape.kv_len
    if "pos" in dims:
        dims["pos"] = shape.kv_len - 1
    where = f"lane {lane}, {'layer %d, ' % layer if layer >= 0 else ''}launch {index} {c.name} ({inst})"
    try:
        c.check(dims)
    except ContractViolation as exc:
        raise ProgramError(f"{where}: {exc}") from None
    grid, block, shared = c.geometry(dims)
    counts = c.counts(dims)
    bindings = []
    for p in c.params:
        if not p.is_pointer:
            bindings.append((p.name, _scalar(c, p.name, dims)))
            continue
        if p.name not in binds:
            raise ProgramError(f"{where}: parameter {p.name} is bound to no buffer")
        name = binds[p.name]
        row = name.endswith(ROW_SUFFIX)
        if row:
            name = name[:-len(ROW_SUFFIX)]
        decl = buffers.get(name)
        if decl is None:
            raise ProgramError(f"{where}: parameter {p.name} names undeclared buffer {name!r}")
        if decl.dtype != p.dtype:
            raise ProgramError(f"{where}: parameter {p.name} ({p.ctype}) bound to {name} of dtype {decl.dtype}")
        need = counts[p.name]
        if row:
            if decl.size != need * shape.kv_len:
                raise ProgramError(f"{where}: parameter {p.name} writes rows of {need} elements; buffer {name} "
                                   f"has {decl.size}, not {shape.kv_len} such rows")
            bindings.append((p.name, RowRef(name, need)))
            continue
        if p.role is Role.OUTPUT and decl.size != need:
            raise ProgramError(f"{where}: output {p.name} must be written in full ({need} elements) but buffer "
                               f"{name} has {decl.size}")
        if decl.size < need:
            raise ProgramError(f"{where}: parameter {p.name} needs {need} elements, buffer {name} has {decl.size}")
        bindings.append((p.name, name))
    extra = set(binds) - {p.name for p in c.params}
    if extra:
        raise ProgramError(f"{where}: bindings for parameters the kernel does not have: {', '.join(sorted(extra))}")
    return Launch(index, c.name, c, inst, layer, grid, block, shared, tuple(bindings), dims)


def seed_scale(head_dim: int) -> float:
    """The attention scale as the seed computes it (1/sqrt(hd) in f64, printed into the source as f32)."""
    return float(np.float32(1.0 / math.sqrt(head_dim)))


__all__ = ["LANES", "MISSING_KERNELS", "BufferDecl", "Launch", "Program", "ProgramError", "RowRef", "build_program",
           "declare_buffers"]
