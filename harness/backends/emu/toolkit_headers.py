"""The CUDA toolkit's own headers that emu compiles as they are, as device code: cuRAND's device API
(curand_kernel.h and the files it includes), the <nv/target> macros they use, and math_constants.h (CUDART_PI_F
and the other constants: macros only).

emu's include folder shadows the toolkit (its cuda_runtime.h, cuda_fp16.h... are emu's own), so the toolkit's
folder is never on the host compiler's path as a whole: a header emu does not provide stays "not found" instead
of turning into host-compiler errors. Only these files are offered, through a private folder of links that the
host compiler searches last (-idirafter); emu's curand_kernel.h declares the few runtime names they expect and
includes the toolkit's. The toolkit is the one whose nvcc the device-side gate uses (`gate.nvcc_gate`)."""
from __future__ import annotations

import functools
import os
from pathlib import Path

from harness.cache import cache_dir, cache_entry, content_key

from . import gate

OFFERED = ("curand*.h", "nv", "math_constants.h")        # globs in the toolkit's include folder


@functools.lru_cache(maxsize=None)
def toolkit_include() -> "Path | None":
    """The toolkit's include folder, when it has cuRAND's headers (what a race report names after the kernel's
    line where an access is inside them)."""
    nvcc, _ = gate.nvcc_gate()
    if nvcc is None:
        return None
    folder = Path(nvcc).resolve().parent.parent / "include"
    return folder if (folder / "curand_kernel.h").is_file() else None


@functools.lru_cache(maxsize=None)
def include_flags() -> tuple[str, ...]:
    """("-idirafter", <private folder>) when the toolkit has cuRAND's headers, else () (then emu's
    curand_kernel.h stops the build with a message saying what to install)."""
    folder = toolkit_include()
    if folder is None:
        return ()
    names = sorted({p.name for glob in OFFERED for p in folder.glob(glob)})
    key = content_key(str(folder), *names, *(str((folder / n).stat().st_mtime_ns) for n in names))[:24]

    def make(tmp: Path) -> None:
        tmp.mkdir()
        for name in names:
            os.symlink(folder / name, tmp / name)

    path, _ = cache_entry(cache_dir("emu") / f"toolkit-include-{key}", make)
    return ("-idirafter", str(path))
