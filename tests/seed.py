"""Where the seed specification lives, for tests that read its kernels at test time (never copied into the repo)."""
from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SEED_RS = REPO.parent / "shared" / "seed" / "qwen_emit.rs"


def seed_source() -> str:
    if not SEED_RS.is_file():
        pytest.skip(f"the seed specification ../shared/seed/qwen_emit.rs is not beside this checkout ({SEED_RS})")
    return SEED_RS.read_text()
