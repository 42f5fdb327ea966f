"""The kernel arithmetic docs/NUMERICS.md describes and reference/ reproduces, checked against the seed's own
kernel text (decoded at test time): if the seed's quantizers, scales or tie rules change, this fails."""
from __future__ import annotations

import re

import pytest

from harness.toolchain.rust_literals import kernel_sets
from tests.seed import seed_source


@pytest.fixture(scope="module")
def kernels() -> dict:
    return {k.name: k.code for k in kernel_sets(seed_source(), {"i": 0, "nt": 2})}


def squash(code: str) -> str:
    return re.sub(r"\s+", "", code)


def test_floor_rule_quantizers(kernels):
    for name in ("MOE_SINGLE_PASS_KERNELS", "MOE_TWO_PASS_KERNELS"):
        code = squash(kernels[name])
        assert "amax=av>1e-30f?av:1e-30f" in code
        assert "rintf(v/" in code
        assert ("if(q>127)q=127;if(q<-128)q=-128;" in code) or ("if(qh>127)qh=127;if(qh<-128)qh=-128;" in code)
    two = squash(kernels["MOE_TWO_PASS_KERNELS"])
    assert "floatr=v-qh*sh;floatsl=sh*0.0078125f;intql=(int)rintf(r/sl);" in two


def test_one_rule_quantizers(kernels):
    gen = squash(kernels["GEN_DEVICE_KERNELS"])
    assert gen.count("floatsc=a>0?a/127.0f:1.0f;") == 3     # gk_quant_act, gk_rmsnorm_q8, gk_add_rmsnorm_q8a
    assert "(signedchar)__float2int_rn(v/sc)" in gen and "(signedchar)__float2int_rn(y/sc)" in gen
    assert "amax=av>1e-30f?av:1e-30f" in gen                                          # gk_add_rmsnorm_q8 / comb_q


def test_dp4a_kernels_narrow_weight_scales_to_half(kernels):
    templates = [squash(c) for n, c in kernels.items() if n.startswith("emit_forward")]
    assert any("constsignedchar*wq,const__half*ws" in t and "__half2float(wsr[blk])" in t for t in templates)
    moe = squash(kernels["MOE_SINGLE_PASS_KERNELS"])
    assert "constfloat*wg_s" in moe and "__half" not in moe


def test_argmax_tree_keeps_left_unless_right_strictly_greater(kernels):
    gen = squash(kernels["GEN_DEVICE_KERNELS"])
    assert "floatbestv=-1e30f;intbesti=0;" in gen
    assert "if(v>bestv){bestv=v;besti=i;}" in gen
    assert "if(threadIdx.x<k&&bv[threadIdx.x+k]>bv[threadIdx.x])" in gen


def test_split_k_attention_interleaves_keys(kernels):
    gen = squash(kernels["GEN_DEVICE_KERNELS"])
    assert "intj=p+idx*P;if(j>=L)break;" in gen


def test_topk_ranks_exp_values_and_renormalizes(kernels):
    code = squash(kernels["MOE_ROUTER_TOPK_KERNELS"])
    assert "if(sp[e]>bv){bv=sp[e];bi=e;}" in code and "w[r]/=wsum;" in code
