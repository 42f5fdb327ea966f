"""Where the seed specification lives, for tests that read its kernels at test time (never copied into the repo).

In order: $QCONFORM_SEED_RS; ../shared/seed/qwen_emit.rs beside the checkout; .gpu-deps/seed/qwen_emit.rs, the
copy ci/gpu-prepare.sh puts in the folder carried to a GPU machine (where ../shared does not travel).
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SEED_ENV = "QCONFORM_SEED_RS"
BESIDE_SEED_RS = REPO.parent / "shared" / "seed" / "qwen_emit.rs"
CARRIED_SEED_RS = REPO / ".gpu-deps" / "seed" / "qwen_emit.rs"


def seed_path(env=os.environ) -> Path:
    """The seed file to read; ValueError when $QCONFORM_SEED_RS names no file (a typo must not turn into a skip)."""
    given = env.get(SEED_ENV, "").strip()
    if given:
        path = Path(given)
        if not path.is_file():
            raise ValueError(f"${SEED_ENV}: {given!r} is not a file")
        return path
    return BESIDE_SEED_RS if BESIDE_SEED_RS.is_file() else CARRIED_SEED_RS


# The seed file of this run (it may not exist: seed_source() then skips with the reason).
SEED_RS = seed_path()


def seed_source() -> str:
    path = SEED_RS
    if not path.is_file():
        pytest.skip(f"the seed specification is not here: set ${SEED_ENV}, or have ../shared/seed/qwen_emit.rs "
                    f"beside this checkout ({BESIDE_SEED_RS}) or a copy in .gpu-deps/seed/ (ci/gpu-prepare.sh)")
    return path.read_text()
