"""The exact lane against an independent straightforward float64 decoder (tests/model/straight_decoder.py)."""
import numpy as np
import pytest

from reference.decoder import generate, generated_tokens
from tests.model.straight_decoder import straight_generate
from tests.model.weights import small_weights

# Both sides are float64 evaluations of the same real-number function, summed in different orders: they agree
# to a few ulps of the logits' magnitude times the depth of the computation; 1e-9 relative is far above that
# and far below any lane's deviation (the precise lane's float32 storage is ~1e-7 relative).
REL = 1e-9


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("router", ["q8", "float"])
def test_exact_lane_matches_straight_decoder(seed, router):
    w = small_weights(seed)
    prompt = [1, 2, 3]
    recs = generate(w, "exact", prompt, 6, router=router)
    tokens, logits = straight_generate(w, prompt, 6, router=router)
    assert generated_tokens(recs, len(prompt)) == tokens, f"seed {seed} router {router}"
    for i, (r, ref) in enumerate(zip(recs, logits)):
        scale = np.abs(ref).max()
        assert np.abs(r.logits - ref).max() <= REL * scale, f"seed {seed} router {router} step {i}"


def test_straight_decoder_detects_a_broken_lane():
    """Negative control: the precise lane (float32 storage) is NOT within the exact lane's tolerance."""
    w = small_weights(0)
    recs = generate(w, "precise", [1, 2, 3], 4)
    _, logits = straight_generate(w, [1, 2, 3], 4)
    err = max(np.abs(r.logits - ref).max() / np.abs(ref).max() for r, ref in zip(recs, logits))
    assert err > REL
