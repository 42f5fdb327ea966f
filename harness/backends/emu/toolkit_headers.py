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


def _include_folder() -> "Path | None":
    """The include folder of the toolkit whose nvcc the gate uses, or None without one."""
    nvcc, _ = gate.nvcc_gate()
    return None if nvcc is None else Path(nvcc).resolve().parent.parent / "include"


@functools.lru_cache(maxsize=None)
def toolkit_include() -> "Path | None":
    """The toolkit's include folder, when it has cuRAND's headers (what a race report names after the kernel's
    line where an access is inside them)."""
    folder = _include_folder()
    return folder if folder is not None and (folder / "curand_kernel.h").is_file() else None


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


# CCCL's top folders (CUB, Thrust, libcu++ and its <nv/target>): a toolkit ships them whatever its layout
CCCL_FOLDERS = ("cub", "thrust", "cuda", "nv")


def toolkit_header(name: str) -> "str | None":
    """Where the CUDA toolkit has the header `#include <name>` names, said for a message: its include folder (or its
    cccl/ folder, where CUDA 13 keeps CUB, Thrust and libcu++); without nvcc, the CCCL library the name's folder is.
    None for a header the toolkit does not have (a header of the source's own, or of another library)."""
    include = _include_folder()
    if include is not None:
        found = next((folder / name for folder in (include, include / "cccl") if (folder / name).is_file()), None)
        return f"the CUDA toolkit's {found.relative_to(include.parent)}" if found else None
    top = Path(name).parts[0] if Path(name).parts else ""
    return f"the CUDA toolkit's {top}/ library (CCCL)" if top in CCCL_FOLDERS and len(Path(name).parts) > 1 else None
