"""reference.decoder: the lanes' arithmetic decisions, the captured buffers, runs and the logit bound."""
import numpy as np
import pytest

from reference.attention import AttentionPartials, combine_partials
from reference.decoder import (LANES, Decoder, generate, generated_tokens, logit_bound, logit_bound_parts,
                               logit_bound_vector, teacher_forced)
from reference.matmul import blocked_product
from reference.norm import rms_norm
from reference.quant import quantize_act_int8, quantize_act_two_pass
from reference.rope import qk_norm_rope
from tests.model.weights import small_weights

# The buffer names of the seed's decode_step that model-api.md promises to blame (issue 9), per lane.
COMMON = {"x", "x2n", "qbuf", "kc_row", "vc_row", "attnb", "tmp", "moe_logits", "moe_idx", "moe_w", "moe_he",
          "moe_out", "logits"}
INT8 = {"aqE", "asE", "aqQ", "asQ", "moe_xq", "moe_xs", "moe_hq", "moe_hs"}
EXPECTED = {"exact": COMMON | {"xn"}, "precise": COMMON | {"xn"}, "fast": COMMON | INT8,
            "flash": COMMON | INT8 | {"acc_part", "m_part", "d_part"},
            "twopass": COMMON | INT8 | {"xn", "aqE_lo", "aqQ_lo", "moe_xq_lo", "moe_hq_lo"}}
PROMPT = [1, 2, 3]


@pytest.fixture(scope="module")
def weights():
    return small_weights(0)


@pytest.fixture(scope="module")
def runs(weights):
    return {lane: generate(weights, lane, PROMPT, 6, capture=True) for lane in LANES}


@pytest.mark.parametrize("lane", LANES)
def test_capture_names_and_dtypes(runs, weights, lane):
    c = weights.config
    buf = runs[lane][-1].buffers
    names = {name for _, name in buf}
    assert EXPECTED[lane] <= names, f"{lane}: missing {sorted(EXPECTED[lane] - names)}"
    float_t = np.float64 if lane == "exact" else np.float32
    for (layer, name), v in buf.items():
        if name.startswith(("aq", "moe_xq", "moe_hq")):
            assert v.dtype == np.int8, (lane, name)
        elif name == "moe_idx":
            assert v.dtype == np.int32 and v.shape == (c.n_expert_used,)
        else:
            assert v.dtype == float_t, (lane, name, v.dtype)
    assert buf[(-1, "logits")].shape == (c.vocab,)
    assert buf[(0, "kc_row")].shape == (c.kv_dim,)
    assert runs[lane][-1].hidden.shape == (c.n_layer, c.d_model)
    assert np.array_equal(runs[lane][-1].hidden[-1], buf[(c.n_layer - 1, "x")])


def test_fast_lane_quantizes_the_attention_input_with_the_unit_rule(runs, weights):
    """gk_rmsnorm_q8 / gk_add_rmsnorm_q8a: unit zero rule on the float32 norm output; experts: floor rule."""
    c = weights.config
    buf = runs["fast"][-1].buffers
    for li in range(c.n_layer):
        prev = buf[(li - 1, "x")]
        y = rms_norm(prev, weights.layer(li).attn_norm, c.rms_eps).astype(np.float32)
        q, s = quantize_act_int8(y, "unit")
        assert np.array_equal(buf[(li, "aqE")], q) and np.array_equal(buf[(li, "asE")], s)
        q2, s2 = quantize_act_int8(buf[(li, "x2n")], "floor")
        assert np.array_equal(buf[(li, "moe_xq")], q2) and np.array_equal(buf[(li, "moe_xs")], s2)
        q3, s3 = quantize_act_int8(buf[(li, "attnb")], "unit")       # gk_quant_act
        assert np.array_equal(buf[(li, "aqQ")], q3) and np.array_equal(buf[(li, "asQ")], s3)


def test_twopass_lane_uses_the_two_pass_quantizer_everywhere(runs, weights):
    buf = runs["twopass"][-1].buffers
    for li in range(weights.config.n_layer):
        for src, hi, lo, sc in (("xn", "aqE", "aqE_lo", "asE"), ("attnb", "aqQ", "aqQ_lo", "asQ"),
                                ("x2n", "moe_xq", "moe_xq_lo", "moe_xs"), ("moe_he", "moe_hq", "moe_hq_lo", "moe_hs")):
            h, l, s = quantize_act_two_pass(buf[(li, src)])
            assert np.array_equal(buf[(li, hi)], h) and np.array_equal(buf[(li, lo)], l), (li, src)
            assert np.array_equal(buf[(li, sc)], s)


def test_flash_lane_combines_its_split_partials(runs, weights):
    c = weights.config
    rec = runs["flash"][-1]
    buf = rec.buffers
    split = 8
    assert buf[(0, "m_part")].shape == (c.n_head * split,)
    m = buf[(0, "m_part")].astype(np.float64).reshape(c.n_head, split)
    # the last step sees len(PROMPT) + 5 = 8 keys: every split holds one key, none empty
    assert (m > -1e30).all()
    parts = AttentionPartials(m=m, d=buf[(0, "d_part")].astype(np.float64).reshape(c.n_head, split),
                              acc=buf[(0, "acc_part")].astype(np.float64).reshape(c.n_head, split, c.head_dim))
    assert np.array_equal(combine_partials(parts).astype(np.float32), buf[(0, "attnb")])
    q, s = quantize_act_int8(buf[(0, "attnb")], "floor")             # gk_attn_comb_q's epilogue
    assert np.array_equal(buf[(0, "aqQ")], q) and np.array_equal(buf[(0, "asQ")], s)
    first = runs["flash"][0].buffers[(0, "m_part")]                   # one key: seven empty splits
    assert (first[1::split] == np.float32(-1e30)).all()


def test_kv_rows_are_normed_and_rotated(runs, weights):
    c = weights.config
    for lane in ("precise", "fast"):
        rec = runs[lane][-1]
        raw = rec.buffers[(1, "kc_row_raw")]
        want = qk_norm_rope(raw, weights.layer(1).k_norm, rec.position, c.rope_theta, c.head_dim, c.rms_eps)
        assert np.array_equal(rec.buffers[(1, "kc_row")], want.astype(np.float32)), lane


def test_lm_head_reads_the_final_norm(runs, weights):
    rec = runs["precise"][-1]
    x = rec.buffers[(-1, "xn")]
    assert np.array_equal(rec.buffers[(-1, "logits")],
                          blocked_product(weights.output, x.astype(np.float64)[None])[0].astype(np.float32))
    assert rec.token == int(np.argmax(rec.logits))


def test_lanes_differ_where_their_arithmetic_does(runs):
    exact = runs["exact"][-1].logits
    err = {lane: np.abs(runs[lane][-1].logits - exact).max() for lane in LANES}
    assert err["exact"] == 0
    assert 0 < err["precise"] < err["twopass"] < err["fast"]


def test_teacher_forced_equals_generation_on_its_own_tokens(weights, runs):
    recs = runs["fast"]
    fed = PROMPT + generated_tokens(recs, len(PROMPT))[:-1]
    tf = teacher_forced(weights, "fast", fed)
    assert [r.token for r in tf] == [r.token for r in recs]
    assert all(np.array_equal(a.logits, b.logits) for a, b in zip(tf, recs))


def test_fork_continues_identically(weights):
    a = Decoder(weights, "twopass", max_positions=6)
    for t in PROMPT:
        a.step(t)
    b = a.fork()
    ra, rb = a.step(7), b.step(7)
    assert np.array_equal(ra.logits, rb.logits)
    rc = b.step(9)
    assert rc.position == 4 and a.position == 4


def test_float_router_changes_the_routing_inputs(weights):
    q8 = generate(weights, "exact", PROMPT, 2, router="q8", capture=True)[-1]
    fl = generate(weights, "exact", PROMPT, 2, router="float", capture=True)[-1]
    assert not np.array_equal(q8.buffers[(0, "moe_logits")], fl.buffers[(0, "moe_logits")])


@pytest.mark.parametrize("lane", LANES)
def test_logit_bound_holds_with_the_measured_drift(runs, weights, lane):
    """|lane - exact| <= the probabilistic bound (Hoeffding, failure 1e-6 per step) and <= the worst case (the
    triangle inequality, failure=None) at every step, per token."""
    for rec, ex in zip(runs[lane], runs["exact"]):
        err = np.abs(rec.logits - ex.logits)
        b = logit_bound_vector(rec, lane, ex)
        assert (err <= b).all(), (lane, rec.position)
        assert logit_bound(rec, lane, ex) == b.max()
        assert (err <= logit_bound_vector(rec, lane, ex, failure=None)).all(), (lane, rec.position)


def test_the_probabilistic_bound_widens_with_the_confidence_and_sums_the_parts(runs):
    rec, ex = runs["fast"][-1], runs["exact"][-1]
    loose, tight = (logit_bound_vector(rec, "fast", ex, failure=p) for p in (1e-12, 1e-2))
    assert (loose > tight).all()
    head, drift = logit_bound_parts(rec, "fast", ex)
    assert np.array_equal(head + drift, logit_bound_vector(rec, "fast", ex))
    assert (drift >= 0).all() and (head > 0).all()
    with pytest.raises(ValueError, match="failure: expected a probability"):
        logit_bound_vector(rec, "fast", ex, failure=1.5)


@pytest.mark.parametrize("lane", ["precise", "fast", "twopass"])
def test_head_bound_covers_the_heads_own_arithmetic_and_catches_a_corrupt_logit(runs, weights, lane):
    rec = runs[lane][-1]
    on_input = blocked_product(weights.output, rec.head_input[None])[0]   # exact head on the lane's own input
    head = logit_bound_vector(rec, lane)
    assert (np.abs(rec.logits - on_input) <= head).all()
    bad = rec.logits.copy()
    bad[5] += 2 * head[5] + 1e-3                                          # negative control
    assert np.abs(bad - on_input)[5] > head[5]


def test_bad_inputs_are_named(weights):
    with pytest.raises(ValueError, match="lane: unknown lane 'slow'"):
        Decoder(weights, "slow", max_positions=2)
    with pytest.raises(ValueError, match="router: expected one of"):
        Decoder(weights, "exact", max_positions=2, router="f16")
    dec = Decoder(weights, "exact", max_positions=1)
    with pytest.raises(ValueError, match=r"token: id 96 must lie in \[0, 96\)"):
        dec.step(96)
    dec.step(0)
    with pytest.raises(ValueError, match="max_positions: the KV cache holds 1 positions"):
        dec.step(0)
    with pytest.raises(ValueError, match="prompt: expected at least one token id"):
        generate(weights, "exact", [], 2)
    with pytest.raises(ValueError, match="n_tokens: expected a positive integer"):
        generate(weights, "exact", [1], 0)
    no_float = small_weights(0)
    import dataclasses
    stripped = dataclasses.replace(no_float, layer_source=lambda i: dataclasses.replace(no_float.layer(i),
                                                                                        router_float=None))
    with pytest.raises(ValueError, match="router: 'float' needs the checkpoint's float router"):
        generate(stripped, "exact", [1], 1, router="float")
