"""The seed's own kernel strings (decoded at test time, never copied into the repository) through emu:
every complete kernel set builds, every kernel launches at the tiny shapes with all checks on, the integer
paths are bit-exact against numpy, and the findings recorded in docs/KERNELS.md, section 3 reproduce."""
from __future__ import annotations

import re

import numpy as np
import pytest

from harness.backends import DataRace, OutOfBounds, UnwrittenOutput
from harness.toolchain.rust_literals import CUDA_PRELUDE

from .seed_launches import D, RACE_REPORT, RACES_AT_TINY, TOP, Inputs, build_launch

SEED_VALUE = 1      # the input seed of every launch below; failures print it for replay

SETS = ["emit_moe_forward", "MOE_ROUTER_TOPK_KERNELS", "MOE_TWO_PASS_KERNELS", "MOE_SINGLE_PASS_KERNELS",
        "MOE_KERNELS", "emit_forward#1", "emit_forward#2", "emit_forward#3", "emit_forward#12",
        "emit_marlin_q8_gemm", "GEN_DEVICE_KERNELS"]


@pytest.fixture(scope="module")
def seed_module(seed_sets, load):
    def _get(set_name: str):
        return load(CUDA_PRELUDE + seed_sets[set_name].code)
    return _get


def test_every_complete_set_is_covered(seed_sets):
    assert sorted(SETS) == sorted(seed_sets), "a complete kernel set of the seed is not exercised here"


@pytest.mark.parametrize("set_name", SETS)
def test_kernel_set_builds_and_every_kernel_launches_clean(seed_sets, seed_module, set_name):
    mod = seed_module(set_name)
    assert set(mod.kernel_names) == set(seed_sets[set_name].kernels)
    raced = set()
    for kernel in mod.kernel_names:
        grid, block, shared, args, outputs = build_launch(set_name, kernel, SEED_VALUE)
        try:
            mod.launch(kernel, grid, block, shared, args, outputs)
        except DataRace as exc:
            if (set_name, kernel) not in RACES_AT_TINY or not re.search(RACE_REPORT, str(exc)):
                raise AssertionError(f"{set_name}/{kernel} (input seed {SEED_VALUE}): {exc}") from exc
            raced.add((set_name, kernel))
            continue
        except Exception as exc:
            raise AssertionError(f"{set_name}/{kernel} (input seed {SEED_VALUE}): {exc}") from exc
        for i in outputs:
            assert np.all(np.isfinite(args[i].astype(np.float64))), f"{set_name}/{kernel}: non-finite output {i}"
    assert raced == {k for k in RACES_AT_TINY if k[0] == set_name}, f"{set_name}: the detector missed a known race"


def _qact_reference(a: np.ndarray, two_pass: bool, floor: float = 1e-30):
    """Per-32 block int8 quantization as the seed's kernels state it, in float32 numpy."""
    blocks = a.reshape(-1, 32)
    amax = np.maximum(np.abs(blocks).max(axis=1), np.float32(floor)).astype(np.float32)
    sh = (amax / np.float32(127.0)).astype(np.float32)
    qh = np.clip(np.rint(blocks / sh[:, None]), -128, 127)
    if not two_pass:
        return qh.astype(np.int8).reshape(-1), sh
    r = (blocks - (qh.astype(np.float32) * sh[:, None]).astype(np.float32)).astype(np.float32)
    sl = (sh * np.float32(0.0078125)).astype(np.float32)
    ql = np.clip(np.rint(r / sl[:, None]), -128, 127)
    return qh.astype(np.int8).reshape(-1), ql.astype(np.int8).reshape(-1), sh


@pytest.mark.parametrize("set_name,kernel,two_pass", [
    ("MOE_TWO_PASS_KERNELS", "moe_qact", True), ("MOE_SINGLE_PASS_KERNELS", "moe_qact", False),
    ("emit_forward#1", "k0_qact", True), ("emit_forward#2", "k0_qact", False)])
def test_activation_quantization_is_bit_exact(seed_module, set_name, kernel, two_pass):
    mod = seed_module(set_name)
    grid, block, shared, args, outputs = build_launch(set_name, kernel, SEED_VALUE)
    mod.launch(kernel, grid, block, shared, args, outputs)
    ref = _qact_reference(args[0], two_pass)
    for got, want in zip([args[i] for i in outputs], ref):
        assert np.array_equal(got, want), f"{set_name}/{kernel}, input seed {SEED_VALUE}"


def test_gk_quant_act_is_bit_exact(seed_module):
    mod = seed_module("GEN_DEVICE_KERNELS")
    grid, block, shared, args, outputs = build_launch("GEN_DEVICE_KERNELS", "gk_quant_act", SEED_VALUE)
    mod.launch("gk_quant_act", grid, block, shared, args, outputs)
    q, s = _qact_reference(args[0], False, floor=0.0)
    assert np.array_equal(args[1], q) and np.array_equal(args[2], s), f"input seed {SEED_VALUE}"


def test_topk_indices_are_exact(seed_module):
    mod = seed_module("MOE_ROUTER_TOPK_KERNELS")
    grid, block, shared, args, outputs = build_launch("MOE_ROUTER_TOPK_KERNELS", "moe_topk_idx", SEED_VALUE)
    mod.launch("moe_topk_idx", grid, block, shared, args, outputs)
    logits, idx, w = args[0], args[1], args[2]
    assert np.array_equal(idx, np.argsort(-logits, kind="stable")[:TOP]), f"input seed {SEED_VALUE}"
    p = np.exp(logits.astype(np.float64) - logits.max())
    # weights: renormalized top-K softmax; float32 with expf, so within a few ulp of the f64 value
    want = p[idx] / p[idx].sum()
    assert np.allclose(w, want, rtol=8 * np.finfo(np.float32).eps, atol=0)


def test_argmax_index_and_position_advance(seed_module):
    mod = seed_module("GEN_DEVICE_KERNELS")
    grid, block, shared, args, outputs = build_launch("GEN_DEVICE_KERNELS", "gk_argmax_adv", SEED_VALUE)
    pos0 = int(args[3][0])
    mod.launch("gk_argmax_adv", grid, block, shared, args, outputs)
    assert args[2][0] == int(np.argmax(args[0])) and args[3][0] == pos0 + 1


def test_marlin_tensor_core_gemm_matches_integer_reference(seed_module):
    mod = seed_module("emit_marlin_q8_gemm")
    grid, block, shared, args, outputs = build_launch("emit_marlin_q8_gemm", "gk_marlin_q8", SEED_VALUE)
    mod.launch("gk_marlin_q8", grid, block, shared, args, outputs)
    Xq, Xs, Wq, Ws, Y, B, N, K = args
    x = Xq.reshape(B, K // 32, 32).astype(np.int64)
    w = Wq.reshape(N, K // 32, 32).astype(np.int64)
    dots = np.einsum("bkj,nkj->bnk", x, w)                    # exact int32 block dots (what the mma computes)
    ref = np.einsum("bnk,bk,nk->bn", dots.astype(np.float64), Xs.reshape(B, -1).astype(np.float64),
                    Ws.reshape(N, -1).astype(np.float64))
    # f32 accumulation over K/32 blocks of a product of three f32 values: <= (K/32 + 2) u relative to sum |terms|
    terms = np.einsum("bnk,bk,nk->bn", np.abs(dots).astype(np.float64), Xs.reshape(B, -1).astype(np.float64),
                      Ws.reshape(N, -1).astype(np.float64))
    bound = (K // 32 + 2) * np.finfo(np.float32).eps / 2 * terms
    assert np.all(np.abs(Y.reshape(B, N) - ref) <= bound), f"input seed {SEED_VALUE}"


# ---- findings recorded in docs/KERNELS.md, section 3 ---------------------------------------------------------------
def test_finding_rmsnorm_q8_needs_256_threads(seed_module):
    mod = seed_module("GEN_DEVICE_KERNELS")
    grid, _block, shared, args, outputs = build_launch("GEN_DEVICE_KERNELS", "gk_rmsnorm_q8", SEED_VALUE)
    with pytest.raises(UnwrittenOutput, match=r"256 of 512 elements of output 'xq' were not written; first at index 128"
                                              .replace("; first", r" \(they hold the poison pattern after runs with "
                                                                   r"both patterns\); first")):
        mod.launch("gk_rmsnorm_q8", grid, (128,), shared, args, outputs)


def test_finding_rmsnorm_shared_array_caps_block_at_256(seed_module):
    mod = seed_module("GEN_DEVICE_KERNELS")
    grid, _block, shared, args, outputs = build_launch("GEN_DEVICE_KERNELS", "gk_rmsnorm", SEED_VALUE)
    with pytest.raises(OutOfBounds, match=r"past the end of __shared__ 'sh'"):
        mod.launch("gk_rmsnorm", grid, (512,), shared, args, outputs)


def test_finding_attn_dynamic_shared_must_hold_all_scores(seed_sets):
    from harness.backends.emu.backend import EmuBackend
    grid, block, shared, args, outputs = build_launch("GEN_DEVICE_KERNELS", "gk_attn", SEED_VALUE)
    L = int(args[4][0]) + 1
    be = EmuBackend(timeout_s=60, race_check=False)      # the red[0] race would be reported first
    try:
        mod = be.load(CUDA_PRELUDE + seed_sets["GEN_DEVICE_KERNELS"].code)
        with pytest.raises(OutOfBounds, match=r"past the end of the extern __shared__ area"):
            mod.launch("gk_attn", grid, block, (L - 1) * 4, args, outputs)
    finally:
        be.close()


@pytest.mark.slow
def test_finding_marlin_reads_a_full_16_row_tile(seed_sets):
    from harness.backends.emu.backend import EmuBackend
    x = Inputs(SEED_VALUE)
    B, N, K = 1, 64, D
    args = [x.q(B * K), x.pos(B * K // 32), x.q(N * K), x.pos(N * K // 32), x.zeros(B * N), np.int32(B), np.int32(N),
            np.int32(K)]
    asan = EmuBackend(sanitize=True, schedules=1, timeout_s=120)
    try:
        mod = asan.load(CUDA_PRELUDE + seed_sets["emit_marlin_q8_gemm"].code)
        with pytest.raises(OutOfBounds, match=r"heap-buffer-overflow READ of size 4 \d+ bytes to the right of 512-byte"):
            mod.launch("gk_marlin_q8", (1,), (128,), 0, args, (4,))
    finally:
        asan.close()
