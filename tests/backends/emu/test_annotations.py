"""Every annotation in the emu worker's run module names something that exists (postponed annotations hide an
undefined name until a tool reads them: `_argv` once took a `dict[int, _Buffer]`)."""
from __future__ import annotations

import typing

from harness.backends.emu import runs


def test_the_runs_module_annotates_only_names_it_defines():
    functions = [f for f in vars(runs).values() if callable(f) and getattr(f, "__module__", None) == runs.__name__]
    assert "_argv" in {f.__name__ for f in functions}
    for fn in functions:
        typing.get_type_hints(fn)                    # NameError for an undefined name
