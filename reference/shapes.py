"""The shape sets every part of qconform uses (report, golden matrix, cases). One definition, here."""
from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class ShapeSet:
    name: str
    d: int            # hidden size (n_embd)
    dff: int          # expert intermediate size
    n_expert: int     # experts (E)
    top_k: int        # experts routed per token (k)
    n_head: int       # query heads
    n_kv: int         # key/value heads (GQA groups)
    head_dim: int
    vocab: int
    n_layer: int
    kv_len: int       # default KV-cache length for decode attention cases
    rope_theta: float = 1.0e6
    rms_eps: float = 1.0e-6
    attn_split: int = 8   # split-K factor of the flash-decode partial kernels

    @property
    def q_dim(self) -> int:
        return self.n_head * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.n_kv * self.head_dim

    def as_dict(self) -> dict:
        out = asdict(self)
        out["q_dim"] = self.q_dim
        out["kv_dim"] = self.kv_dim
        return out


TINY = ShapeSet(
    name="tiny", d=512, dff=128, n_expert=32, top_k=4, n_head=4, n_kv=2, head_dim=64,
    vocab=1024, n_layer=2, kv_len=7, attn_split=4,
)
# K = 672 and 160 are multiples of 32 but not of 128 or 512, so every tail loop of the kernels runs.
TAILS = ShapeSet(
    name="tails", d=672, dff=160, n_expert=64, top_k=8, n_head=8, n_kv=2, head_dim=128,
    vocab=1000, n_layer=2, kv_len=37, attn_split=8,
)
QWEN3_30B_A3B = ShapeSet(
    name="qwen3-30b-a3b", d=2048, dff=768, n_expert=128, top_k=8, n_head=32, n_kv=4, head_dim=128,
    vocab=151936, n_layer=48, kv_len=300, rope_theta=1.0e6, rms_eps=1.0e-6, attn_split=8,
)

SHAPE_SETS: dict[str, ShapeSet] = {s.name: s for s in (TINY, TAILS, QWEN3_30B_A3B)}


def get_shape(name: "str | ShapeSet") -> ShapeSet:
    if isinstance(name, ShapeSet):
        return name
    try:
        return SHAPE_SETS[name]
    except KeyError:
        raise ValueError(f"shapes: unknown shape set {name!r}; expected one of {', '.join(SHAPE_SETS)}") from None


def parse_shape_list(text: str) -> list[ShapeSet]:
    """Parse a comma-separated list such as 'tiny,tails'."""
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise ValueError("shapes: empty shape list; give e.g. 'tiny,tails'")
    return [get_shape(n) for n in names]
