"""Greedy Qwen3-MoE decoding with a KV cache, in lanes that reproduce the arithmetic decisions of the kernels.

One decoder, five lanes. Each lane is the decode step of the seed's generation program (``decode_step``)
written with the reference ops (``reference.*``): the lane decides, kernel by kernel, which activation is
quantized (and with which zero rule, single or two-pass), which values are stored in float32 buffers between
kernels, and how attention is evaluated. Every op is computed in float64 on its (rounded, quantized) inputs
and its output is rounded to float32 where the kernel stores float32 -- the mode-faithful value of each kernel
(the kernels' own float32 accumulation error is bounded in reference.bounds, not reproduced).

* ``exact``: float64 throughout on the dequantized weights, nothing rounded to float32, no activation
  quantized: the truth every lane is measured against.
* ``precise`` (Dequant): gk_embed, gk_rmsnorm, gk_gemv_deq (Q), gk_gemv_kv_deq (K, V), gk_qk_norm_rope (K),
  gk_fused_attn (Q norm + RoPE inside the attention), gk_gemv_deq (O), gk_add_rmsnorm, moe_router_fast,
  moe_topk_idx, gk_moe_gate_up_deq, gk_moe_down_deq, gk_add; final gk_rmsnorm and LM head gk_gemv_deq.
* ``fast`` (Int8Act): gk_rmsnorm_q8 (unit zero rule) for layer 0's attention input, gk_gemv_qkv,
  gk_qk_norm_rope2, gk_attn + gk_quant_act (unit), gk_gemv (O), gk_add_rmsnorm_q8 (floor rule: the experts'
  activation), router, top-K, moe_gate_up_silu, moe_qact (floor), moe_down_combine, gk_add_rmsnorm_q8a (unit:
  the next layer's attention input, or the LM head's after the last layer), LM head gk_gemv.
* ``flash``: the fast lane with split-K attention, gk_attn_part (keys interleaved over 8 splits) +
  gk_attn_comb_q (combine, then the floor-rule quantizer).
* ``twopass`` (TwoPassInt8): the fast lane with the two-pass activation (hi byte + residual byte, floor rule,
  fused residual) wherever the family has two-pass kernels: every GEMV (k*_qact + k*_q8dp4a two-pass, fed by
  the float gk_rmsnorm / gk_attn outputs, since the fused norm+quant kernels are single-pass only) and the MoE
  experts (two-pass moe_qact, moe_gate_up_silu, moe_down_combine). The router reads the float x2n as always.

The router is the Q8_0 router the kernels read (``router="q8"``) or the checkpoint's float router
(``router="float"``, LayerWeights.router_float) for the F32-router effect. Top-K: softmax over all experts,
the K largest (ties to the lower index), weights renormalized over the K (reference.moe.route_top_k), stored
as float32 by the non-exact lanes as moe_topk_idx does.

Layers are read through ``ModelWeights.layer(i)`` one at a time, so a memory-mapped checkpoint is touched a
layer at a time; the routed experts' rows are the only expert rows read (take_rows).

Capture (``capture=True``): ``StepRecord.buffers`` maps ``(layer, name)`` to the value the kernel writing
buffer ``name`` of decode_step leaves there, in the kernel's dtype and layout (float32 vectors, int8 quants,
float32 scales, int32 indices; the exact lane keeps float64). ``layer`` is the decode_step loop iteration;
-1 holds what lies outside the loop: ``x`` (gk_embed's output), ``xn`` / ``aqE`` / ``asE`` (the LM head's
input) and ``logits``. Names are the seed's, with these additions where one buffer is written twice in a step
or a lane has a buffer the seed's lanes do not:

* ``x_attn``: x after the attention residual add (the fused add+norm's ``x += tmp``); ``x``: after the layer;
* ``xn`` (precise, twopass, exact): the attention norm's float output; in the fast lanes the norm is fused with
  its quantizer and ``aqE``/``asE`` at layer l are the quantized input layer l's QKV projection reads (written by
  gk_rmsnorm_q8 for layer 0, by the previous layer's gk_add_rmsnorm_q8a otherwise);
* ``qbuf``: Q as the projection wrote it; ``qbuf_rope``: after gk_qk_norm_rope2 (fast lanes; the precise lane
  norms and rotates Q inside gk_fused_attn, ``q_rope`` there is that in-kernel value);
* ``kc_row_raw`` / ``kc_row``: this position's K cache row before / after the K norm + RoPE; ``vc_row``;
* ``attnb``: the attention output (float; in the flash lane the combine's in-kernel value);
* two-pass residual bytes: ``aqE_lo``, ``aqQ_lo``, ``moe_xq_lo``, ``moe_hq_lo`` (scale = hi scale / 128);
* flash: ``acc_part`` (n_head * 8, head_dim), ``m_part``, ``d_part`` (n_head * 8), -1e30 for an empty split as
  the kernel writes it.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from reference.argmax import argmax_first
from reference.attention import AttentionPartials, attention_partials, combine_partials, decode_attention
from reference.bounds import U32, U64, act_error_bound, gamma, hoeffding_factor, warp_row_depth
from reference.embed import embed_q8
from reference.matmul import blocked_product, q8_matmul
from reference.model import ModelWeights
from reference.modes import Mode
from reference.moe import moe_trace, route_top_k
from reference.norm import rms_norm
from reference._validate import QK
from reference.quant import Q8Tensor, QuantizedActivation, quantize_act_int8, quantize_activation
from reference.rope import qk_norm_rope

LANES = ("exact", "precise", "fast", "flash", "twopass")
ROUTERS = ("q8", "float")
FLASH_SPLIT = 8          # ATTN_SPLIT of the seed's generation program (gk_attn_part / gk_attn_comb_q)
EMPTY_SPLIT_M = np.float32(-1e30)   # what gk_attn_part writes as the max of a split with no key


@dataclass(frozen=True)
class Lane:
    """The arithmetic decisions of one lane.

    mode: how the GEMVs and the experts meet the int8 weights. store: the dtype of the buffers between
    kernels. norm_rule / attn_rule: the single-pass zero rule of the quantizer on the attention-norm (and
    final-norm) output and on the attention output (two-pass lanes always use the floor rule). split: 0 for the
    single-pass attention, else the split-K count.
    """

    name: str
    mode: Mode
    store: type
    norm_rule: str = "floor"
    attn_rule: str = "floor"
    split: int = 0

    @property
    def exact(self) -> bool:
        return self.store is np.float64


LANE_SPECS = {
    "exact": Lane("exact", Mode.DEQUANT, np.float64),
    "precise": Lane("precise", Mode.DEQUANT, np.float32),
    "fast": Lane("fast", Mode.INT8_ACT, np.float32, norm_rule="unit", attn_rule="unit"),
    "flash": Lane("flash", Mode.INT8_ACT, np.float32, norm_rule="unit", attn_rule="floor", split=FLASH_SPLIT),
    "twopass": Lane("twopass", Mode.TWO_PASS_INT8, np.float32),
}


def lane_spec(lane: str) -> Lane:
    if lane not in LANE_SPECS:
        raise ValueError(f"lane: unknown lane {lane!r}; expected one of {', '.join(LANES)}")
    return LANE_SPECS[lane]


@dataclass
class StepRecord:
    """One decode step. logits float64 (vocab,); token: the greedy argmax (first index on exact ties);
    top5: (ids, values); margin: top1 - top2 logit; experts: (n_layer, K) routed experts, best first;
    head_input: the float vector the LM head (or its quantizer) read, float64; head_act: its quantized form
    (None in the Dequant lanes); hidden: (n_layer, d_model) residual after each layer (capture or
    keep_hidden); buffers: see the module docstring (capture)."""

    position: int
    input_token: int
    logits: np.ndarray
    token: int
    top5: tuple
    margin: float
    experts: np.ndarray
    head_input: np.ndarray
    head_act: Optional[QuantizedActivation] = None
    hidden: Optional[np.ndarray] = None
    buffers: Optional[dict] = None
    lm_head: Optional[Q8Tensor] = field(default=None, repr=False, compare=False)   # for logit_bound (no copy)


class Decoder:
    """A greedy decoder in one lane. ``step(token)`` runs one position and appends to the KV cache."""

    def __init__(self, weights: ModelWeights, lane: str, *, max_positions: int, capture: bool = False,
                 router: str = "q8", keep_hidden: bool = False) -> None:
        if not isinstance(weights, ModelWeights):
            raise ValueError(f"weights: expected a reference.model.ModelWeights, got {type(weights).__name__}")
        self.lane = lane_spec(lane)
        if router not in ROUTERS:
            raise ValueError(f"router: expected one of {', '.join(ROUTERS)}, got {router!r}")
        if isinstance(max_positions, bool) or not isinstance(max_positions, (int, np.integer)) or max_positions <= 0:
            raise ValueError(f"max_positions: expected a positive integer, got {max_positions!r}")
        self.weights = weights
        self.config = weights.config
        self.router = router
        self.capture = bool(capture)
        self.keep_hidden = bool(keep_hidden) or self.capture
        self.max_positions = int(max_positions)
        c = self.config
        self.k_cache = np.zeros((c.n_layer, self.max_positions, c.kv_dim), dtype=self.lane.store)
        self.v_cache = np.zeros_like(self.k_cache)
        self.position = 0
        # gk_* kernels take the attention scale as a float32 constant; the exact lane keeps 1/sqrt(hd).
        s = 1.0 / np.sqrt(c.head_dim)
        self.attn_scale = s if self.lane.exact else float(np.float32(s))

    def fork(self) -> "Decoder":
        """An independent copy (KV cache included): continue one decode two ways."""
        other = copy.copy(self)
        other.k_cache = self.k_cache.copy()
        other.v_cache = self.v_cache.copy()
        return other

    # ---------------------------------------------------------------------------------------- arithmetic
    def _r(self, v) -> np.ndarray:
        """Round to the lane's buffer dtype (float32 storage between kernels; identity in the exact lane)."""
        return np.asarray(v).astype(self.lane.store)

    def _quant(self, v: np.ndarray, rule: str, layer: int, site: str) -> Optional[QuantizedActivation]:
        """The int8 activation the next kernel reads (None in the Dequant lanes); `site` is the buffer it lands
        in (aqE: attention or LM-head input, aqQ: attention output), `layer` the layer (-1: the LM head's)."""
        mode = self.lane.mode
        if mode is Mode.DEQUANT:
            return None
        if mode is Mode.INT8_ACT:
            return QuantizedActivation(*quantize_act_int8(v, rule))
        return quantize_activation(v, mode)      # two-pass: floor rule, fused residual

    def _gemv(self, w: Q8Tensor, v: np.ndarray, act: Optional[QuantizedActivation]) -> np.ndarray:
        if self.lane.exact:
            y = blocked_product(w, v[None])[0]
        elif act is None:
            y = q8_matmul(v, w, Mode.DEQUANT)
        else:
            y = q8_matmul(None, w, self.lane.mode, act=act)
        return self._r(y)

    def _norm(self, x: np.ndarray, w: np.ndarray) -> np.ndarray:
        return self._r(rms_norm(x, w, self.config.rms_eps))

    def _rope(self, v: np.ndarray, w: np.ndarray, pos: int) -> np.ndarray:
        c = self.config
        return self._r(qk_norm_rope(v, w, pos, c.rope_theta, c.head_dim, c.rms_eps))

    def _experts(self, layer: int, x2n: np.ndarray, moe, routing: tuple):
        """The routed experts of `layer` on the FFN-norm output (reference.moe.moe_trace)."""
        return moe_trace(x2n, moe, self.lane.mode, zero_rule="floor", routing=routing, exact=self.lane.exact)

    def _router_logits(self, layer, x2n: np.ndarray) -> np.ndarray:
        if self.router == "float":
            if layer.router_float is None:
                raise ValueError("router: 'float' needs the checkpoint's float router (ffn_gate_inp stored as a "
                                 "float type); this model stores it in Q8_0 only")
            return self._r(layer.router_float.astype(np.float64) @ x2n.astype(np.float64))
        if self.lane.exact:
            return blocked_product(layer.router, x2n[None])[0]
        return self._r(q8_matmul(x2n, layer.router, Mode.DEQUANT))

    # ------------------------------------------------------------------------------------------ one step
    def step(self, token: int) -> StepRecord:
        c, lane = self.config, self.lane
        if isinstance(token, (bool, np.bool_)) or not isinstance(token, (int, np.integer)):
            raise ValueError(f"token: expected an integer token id, got {token!r}")
        if not 0 <= int(token) < c.vocab:
            raise ValueError(f"token: id {token} must lie in [0, {c.vocab}) (the model's vocabulary)")
        pos = self.position
        if pos >= self.max_positions:
            raise ValueError(f"max_positions: the KV cache holds {self.max_positions} positions; step "
                             f"{pos + 1} does not fit")
        buf: Optional[dict] = {} if self.capture else None

        def put(layer: int, name: str, value) -> None:
            if buf is not None:
                buf[(layer, name)] = np.array(value, copy=True)

        def put_act(layer: int, prefix: str, act: Optional[QuantizedActivation]) -> None:
            if act is None or buf is None:
                return
            names = {"aqE": "asE", "aqQ": "asQ", "moe_xq": "moe_xs", "moe_hq": "moe_hs"}
            put(layer, prefix, act.hi)
            put(layer, names[prefix], act.scales)
            if act.lo is not None:
                put(layer, prefix + "_lo", act.lo)

        x = self._r(embed_q8(self.weights.token_embd, int(token)))
        put(-1, "x", x)
        experts = np.empty((c.n_layer, c.n_expert_used), dtype=np.int64)
        hidden = np.empty((c.n_layer, c.d_model)) if self.keep_hidden else None
        for li in range(c.n_layer):
            layer = self.weights.layer(li)
            # attention input: the norm, and in the int8 lanes its quantizer (fused in the fast lanes)
            xn = self._norm(x, layer.attn_norm)
            act_e = self._quant(xn, lane.norm_rule, li, "aqE")
            if lane.mode is not Mode.INT8_ACT:
                put(li, "xn", xn)
            put_act(li, "aqE", act_e)
            q = self._gemv(layer.wq, xn, act_e)
            k = self._gemv(layer.wk, xn, act_e)
            v = self._gemv(layer.wv, xn, act_e)
            put(li, "qbuf", q)
            put(li, "kc_row_raw", k)
            q_rope = self._rope(q, layer.q_norm, pos)
            k_rope = self._rope(k, layer.k_norm, pos)
            put(li, "q_rope" if lane.mode is Mode.DEQUANT else "qbuf_rope", q_rope)
            self.k_cache[li, pos] = k_rope
            self.v_cache[li, pos] = v
            put(li, "kc_row", k_rope)
            put(li, "vc_row", v)
            kc, vc = self.k_cache[li, :pos + 1], self.v_cache[li, :pos + 1]
            if lane.split:
                parts = attention_partials(q_rope, kc, vc, c.n_head, c.n_kv_head, c.head_dim, lane.split,
                                           scale=self.attn_scale)
                m, d, acc = self._r(parts.m), self._r(parts.d), self._r(parts.acc)
                put(li, "m_part", np.where(np.isneginf(m), EMPTY_SPLIT_M, m).reshape(-1))
                put(li, "d_part", d.reshape(-1))
                put(li, "acc_part", acc.reshape(-1, c.head_dim))
                attn = self._r(combine_partials(AttentionPartials(m=m.astype(np.float64), d=d.astype(np.float64),
                                                                  acc=acc.astype(np.float64))))
            else:
                attn = self._r(decode_attention(q_rope, kc, vc, c.n_head, c.n_kv_head, c.head_dim,
                                                scale=self.attn_scale))
            put(li, "attnb", attn)
            act_q = self._quant(attn, lane.attn_rule, li, "aqQ")
            put_act(li, "aqQ", act_q)
            tmp = self._gemv(layer.wo, attn, act_q)
            put(li, "tmp", tmp)
            x = self._r(x + tmp)                                       # the fused add+norm's residual sum
            put(li, "x_attn", x)
            x2n = self._norm(x, layer.ffn_norm)
            put(li, "x2n", x2n)
            logits_r = self._router_logits(layer, x2n)
            put(li, "moe_logits", logits_r)
            idx, w = route_top_k(logits_r, c.n_expert_used)
            w = self._r(w)
            put(li, "moe_idx", idx.astype(np.int32))
            put(li, "moe_w", w)
            tr = self._experts(li, x2n, layer.moe(c.n_expert_used), (logits_r, idx, w))
            put_act(li, "moe_xq", tr.x_act)
            put(li, "moe_he", self._r(tr.h).reshape(-1))
            put_act(li, "moe_hq", tr.h_act)
            moe_out = self._r(tr.out)
            put(li, "moe_out", moe_out)
            x = self._r(x + moe_out)
            put(li, "x", x)
            experts[li] = idx
            if hidden is not None:
                hidden[li] = x
        xn = self._norm(x, self.weights.output_norm)
        act = self._quant(xn, lane.norm_rule, -1, "aqE")
        put(-1, "xn", xn)
        put_act(-1, "aqE", act)
        logits = self._gemv(self.weights.output, xn, act).astype(np.float64)
        put(-1, "logits", self._r(logits))
        self.position += 1
        token_out = argmax_first(logits)
        top = np.argsort(-logits, kind="stable")[:5]
        margin = float(logits[top[0]] - logits[top[1]]) if logits.size > 1 else float("inf")
        return StepRecord(position=pos, input_token=int(token), logits=logits, token=token_out,
                          top5=(top.astype(np.int64), logits[top]), margin=margin, experts=experts,
                          head_input=xn.astype(np.float64), head_act=act, hidden=hidden, buffers=buf,
                          lm_head=self.weights.output)


# ------------------------------------------------------------------------------------------ runs
def generate(weights: ModelWeights, lane: str, prompt, n_tokens: int, *, router: str = "q8",
             capture: bool = False, keep_hidden: bool = False,
             on_step: Optional[Callable[[StepRecord], None]] = None, decoder_type: type = Decoder
             ) -> list[StepRecord]:
    """Prefill `prompt` (each token through the decode step, as the seed's program does), then decode greedily
    until `n_tokens` tokens are generated: len(prompt) + n_tokens - 1 steps. The generated tokens are
    ``[r.token for r in records[len(prompt) - 1:]]``. decoder_type: Decoder or a subclass (a planted lane)."""
    prompt = _token_list("prompt", prompt)
    if isinstance(n_tokens, bool) or not isinstance(n_tokens, (int, np.integer)) or n_tokens <= 0:
        raise ValueError(f"n_tokens: expected a positive integer, got {n_tokens!r}")
    dec = _decoder_type(decoder_type)(weights, lane, max_positions=len(prompt) + n_tokens - 1, capture=capture,
                                      router=router, keep_hidden=keep_hidden)
    records = []
    feed = list(prompt)
    while feed:
        rec = dec.step(feed.pop(0))
        records.append(rec)
        if on_step is not None:
            on_step(rec)
        if not feed and len(records) < len(prompt) + n_tokens - 1:
            feed.append(rec.token)
    return records


def teacher_forced(weights: ModelWeights, lane: str, tokens, *, router: str = "q8", capture: bool = False,
                   keep_hidden: bool = False, on_step: Optional[Callable[[StepRecord], None]] = None,
                   decoder_type: type = Decoder) -> list[StepRecord]:
    """Feed every token of `tokens` (one record each, whatever the lane would have chosen)."""
    tokens = _token_list("tokens", tokens)
    dec = _decoder_type(decoder_type)(weights, lane, max_positions=len(tokens), capture=capture, router=router,
                                      keep_hidden=keep_hidden)
    records = []
    for t in tokens:
        records.append(dec.step(t))
        if on_step is not None:
            on_step(records[-1])
    return records


def generated_tokens(records: list, n_prompt: int) -> list[int]:
    """The tokens a generate() run produced (the argmax of every step from the last prompt token on)."""
    return [r.token for r in records[n_prompt - 1:]]


def _decoder_type(cls) -> type:
    if not (isinstance(cls, type) and issubclass(cls, Decoder)):
        raise ValueError(f"decoder_type: expected reference.decoder.Decoder or a subclass, got {cls!r}")
    return cls


def _token_list(name: str, tokens) -> list[int]:
    out = list(tokens)
    if not out:
        raise ValueError(f"{name}: expected at least one token id")
    for i, t in enumerate(out):
        if isinstance(t, (bool, np.bool_)) or not isinstance(t, (int, np.integer)):
            raise ValueError(f"{name}[{i}]: expected an integer token id, got {t!r}")
    return [int(t) for t in out]


# ------------------------------------------------------------------------------------------ bounds
# Failure probability of the logit bound at one step (all tokens of the step at once): docs/NUMERICS.md,
# "The logit bound". A run of S steps in N lanes holds everywhere except with probability at most S * N * this.
LOGIT_BOUND_FAILURE = 1e-6


def logit_bound_parts(record: StepRecord, lane: str, exact: Optional[StepRecord] = None, *,
                      failure: Optional[float] = LOGIT_BOUND_FAILURE) -> tuple[np.ndarray, np.ndarray]:
    """(head, drift): the two parts of logit_bound_vector, per token, from one pass over the LM head; drift is
    zero without the exact record.

    With ``z = hoeffding_factor(vocab, failure)``, e the per-element bound of the head activation's quantization
    (0 in the Dequant lanes) and d the measured drift of the head input against exact's:
    ``head = z sqrt(sum_k w_k^2 e_k^2) + acc`` and ``head + drift = z sqrt(sum_k w_k^2 (e_k^2 + d_k^2)) + acc``,
    acc the deterministic float32 accumulation bound (float64 in the exact lane). ``failure=None``: the worst
    case instead, ``head = sum_k |w_k| e_k + acc`` and ``drift = sum_k |w_k| |d_k|`` (no probability)."""
    spec = lane_spec(lane)
    if not isinstance(record, StepRecord):
        raise ValueError(f"record: expected a StepRecord, got {type(record).__name__}")
    w = record.lm_head
    if not isinstance(w, Q8Tensor):
        raise ValueError("record: has no LM head (a StepRecord from Decoder.step carries it)")
    x = np.asarray(record.head_input, dtype=np.float64)
    if x.shape != (w.cols,):
        raise ValueError(f"record: head_input has shape {x.shape}, the LM head expects ({w.cols},)")
    if spec.mode is Mode.DEQUANT or record.head_act is None:
        e = np.zeros_like(x)
        x_eff = x
    else:
        e = np.repeat(act_error_bound(x.astype(np.float32), spec.mode, zero_rule=spec.norm_rule), QK)
        x_eff = record.head_act.dequantize()
    d = np.zeros_like(x)
    if exact is not None:
        xe = np.asarray(exact.head_input, dtype=np.float64)
        if xe.shape != x.shape:
            raise ValueError(f"exact: head_input has shape {xe.shape}, expected {x.shape}")
        d = x - xe
    if failure is None:       # worst case: every term at its bound, all of one sign (triangle inequality)
        sums = blocked_product(w, np.stack([e, np.abs(x_eff), np.abs(d)]), absolute=True)
        quant, drift, sum_abs = sums[0], sums[2], sums[1]
    else:
        var = blocked_product(w, np.stack([e * e, d * d]), squared=True)      # sum_k w_k^2 r_k^2, per token
        z = hoeffding_factor(w.rows, failure)
        quant = z * np.sqrt(var[0])
        drift = z * np.sqrt(var[0] + var[1]) - quant
        sum_abs = blocked_product(w, x_eff[None], absolute=True)[0]
    if spec.exact:
        acc = gamma(w.cols + 3, U64) * sum_abs
    else:
        depth = gamma(warp_row_depth(w.cols))
        acc = (depth + U32 * (1 + depth)) * sum_abs
    return quant + acc, drift


def logit_bound_vector(record: StepRecord, lane: str, exact: Optional[StepRecord] = None, *,
                       failure: Optional[float] = LOGIT_BOUND_FAILURE) -> np.ndarray:
    """Per-token bound (vocab,) on |lane logit - exact logit| at this step (docs/NUMERICS.md, "The logit bound"),
    holding for every token of the step except with probability at most `failure`.

    The lane's logits minus exact's are ``W(x_hat - x) + W(x - x_exact) + rounding``: the head activation's
    quantization errors (independent, zero-mean, each within the mode's per-element bound e_k:
    reference.bounds), the measured drift d of the head input against exact's with signs independent of the
    LM head's rows, and the float32 accumulation of a warp-per-row kernel (deterministic, ``gamma_(K/32+24)
    sum |w x_hat|`` plus the stored logit's rounding). Hoeffding's inequality over the 2K independent terms,
    with a union bound over the vocabulary, gives ``z sqrt(sum_k w_k^2 (e_k^2 + d_k^2))``,
    ``z = sqrt(2 ln(2 vocab / failure))`` (reference.bounds.hoeffding_factor). ``failure=None``: the worst
    case, every term at its bound with one sign (``sum_k |w_k| (e_k + |d_k|)`` plus the accumulation).
    """
    head, drift = logit_bound_parts(record, lane, exact, failure=failure)
    return head + drift


def logit_bound(record: StepRecord, lane: str, exact: Optional[StepRecord] = None, *,
                failure: Optional[float] = LOGIT_BOUND_FAILURE) -> float:
    """The largest per-token bound of logit_bound_vector (a bound on every logit of the step)."""
    return float(logit_bound_vector(record, lane, exact, failure=failure).max())
