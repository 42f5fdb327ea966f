"""The seed's kernels launched through emu with the geometry and buffer sizes of the emitters' contracts
(every dims instance at the tiny shapes), all checks on. Kernels are matched to contracts by name and
parameter list; a seed kernel without a matching contract fails the coverage test."""
from __future__ import annotations

import re

import numpy as np
import pytest

from cudasrc.signatures import kernel_signatures
from harness.backends import DataRace
from harness.toolchain.rust_literals import CUDA_PRELUDE
from reference.shapes import TINY

from .seed_launches import RACE_REPORT, RACES_AT_TINY
from .test_seed_kernels import SETS

INPUT_SEED = 3


@pytest.fixture(scope="module")
def contracts():
    from emitters.registry import all_contracts, available_families
    if not available_families():
        pytest.skip("no emitter family is available yet, so there are no contracts to launch with")
    return all_contracts("tiny")


def _matching(contracts, sig):
    return [c for c in contracts if c.matches_name(sig.name) and c.signature() == sig.ctypes]


def _inputs(contract, dims, rng):
    from emitters.expr import evaluate
    counts, scalars = contract.counts(dims), contract.scalars(dims)
    args, outputs = [], []
    for i, p in enumerate(contract.params):
        if not p.is_pointer:
            args.append(np.dtype(p.dtype).type(scalars[p.name]))
            continue
        n, dt = counts[p.name], np.dtype(p.dtype)
        if p.fill and p.fill.startswith("index("):
            a = rng.choice(int(evaluate(p.fill[len("index("):-1], dims)), n, replace=False).astype(dt)
        elif p.fill and p.fill.startswith("const("):
            a = np.full(n, evaluate(p.fill[len("const("):-1], dims), dt)
        elif dt == np.int8:
            a = rng.integers(-127, 128, n).astype(dt)
        elif dt.kind in "iu":
            a = np.zeros(n, dt)
        else:
            a = (rng.standard_normal(n) * 0.5).astype(dt)
        args.append(a)
        if p.role.value == "output":
            outputs.append(i)
    return args, tuple(outputs)


def test_every_seed_kernel_has_a_contract(seed_sets, contracts):
    missing = [f"{s}/{sig.name}" for s in SETS for sig in kernel_signatures(seed_sets[s].code)
               if not _matching(contracts, sig)]
    assert not missing, f"seed kernels without a matching contract: {missing}"


@pytest.mark.parametrize("set_name", SETS)
def test_seed_kernels_with_contract_geometry(seed_sets, contracts, load, set_name):
    code = CUDA_PRELUDE + seed_sets[set_name].code
    mod = load(code)
    launched, raced = 0, set()
    for sig in kernel_signatures(code):
        for contract in _matching(contracts, sig)[:1]:
            for label, _ in contract.instances:
                dims = contract.dims_for(TINY, label)
                grid, block, shared = contract.geometry(dims)
                args, outputs = _inputs(contract, dims, np.random.default_rng(INPUT_SEED))
                try:
                    mod.launch(sig.name, grid, block, shared, args, outputs)
                except DataRace as exc:     # the known races (docs/KERNELS.md, section 3) and nothing else
                    if (set_name, sig.name) not in RACES_AT_TINY or not re.search(RACE_REPORT, str(exc)):
                        raise AssertionError(f"{set_name}/{sig.name} instance {label} (input seed {INPUT_SEED}): "
                                             f"{exc}") from exc
                    raced.add((set_name, sig.name))
                except Exception as exc:
                    raise AssertionError(f"{set_name}/{sig.name} instance {label} (input seed {INPUT_SEED}): {exc}") from exc
                launched += 1
    assert launched > 0
    assert raced == {k for k in RACES_AT_TINY if k[0] == set_name}
