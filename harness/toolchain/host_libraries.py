"""qconform's stand-ins for the headers of host libraries that kernel files include for the code around their
kernels (cuBLAS: a handle in a context class, a status checked by a macro; NVTX: a scoped range around each
launcher; the profiler API), where the toolkit has no such library.

They declare the library's types, constants and common entry points and define nothing. Every build of qconform's
drops the source's host functions first, so only declarations are ever needed; device code that calls one of these
functions is still refused (nvcc's device-side compile, emu's object check). The folder is searched after all
others, so a toolkit that has the real header (a CUDA install with cuBLAS) uses its own. One more header, included
ahead of every source nvcc compiles, gives back CUB 2's operators that CUB 3 dropped (CUB2_OPERATORS)."""
from __future__ import annotations

import functools
import hashlib
from pathlib import Path

FOLDER = Path(__file__).with_name("host_library_headers")
CUB2_OPERATORS = "qconform_cub2_operators.h"        # cub::Sum, Max and Min where the toolkit's CUB is 3 or later


def host_compiler_flags() -> tuple[str, ...]:
    """The host compiler's flags (g++: searched after every other folder)."""
    return ("-idirafter", str(FOLDER))


def nvcc_flags() -> tuple[str, ...]:
    """nvcc's flags: a system folder, searched after the -I folders, its toolkit's include folder among them; and
    CCCL's NVTX ranges off. CUB and libcu++ open profiler ranges through NVTX's C++ API wherever
    `<nvtx3/nvToolsExt.h>` is found, so the stand-in, which declares only what programs call, would switch them on
    and break every CUB build (ggml's cumsum: `nvtxDomainCreateW` undefined); without NVTX in the toolkit they
    were off, and with it they are host-side profiling that no device-code check needs. And CUB 2's operators
    (CUB2_OPERATORS), so a kernel written for CUDA 12's CUB builds with CUDA 13's."""
    return ("-isystem", str(FOLDER), "-DCCCL_DISABLE_NVTX", "-include", str(FOLDER / CUB2_OPERATORS))


@functools.lru_cache(maxsize=None)
def digest() -> str:
    """The SHA-256 of the stand-ins' texts and of the flags that bring them, for a build's cache key (a changed
    declaration or flag is a new build)."""
    h = hashlib.sha256(repr((nvcc_flags(), host_compiler_flags())).encode())
    for path in sorted(FOLDER.rglob("*.h")):          # nvtx3/ too
        h.update(path.relative_to(FOLDER).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def _header_name(name: str, whole: str) -> str:
    parts = Path(name).parts
    if not name or Path(name).is_absolute() or ".." in parts or name.endswith("/") or "\\" in name \
            or any(c in name for c in "<>\"=,\n"):
        where = f"--empty-header: {name!r}" if name == whole else f"--empty-header {whole!r}: {name!r}"
        raise ValueError(f"{where} is not a header's relative path as `#include` names it (like torch/all.h)")
    return name


def parse_empty_header(spec: str) -> "tuple[str, tuple[str, ...]]":
    """`NAME` or `NAME=HEADER[,HEADER...]`: the header to stand in for and the headers it includes. A ValueError
    names a part that is not a relative header path."""
    name, _, includes = spec.partition("=")
    if "=" in spec and not includes:
        raise ValueError(f"--empty-header: {spec!r} names no header after '=' (NAME=HEADER[,HEADER...])")
    return (_header_name(name, spec),
            tuple(_header_name(h, spec) for h in includes.split(",")) if includes else ())


def empty_headers(specs: "list[str]") -> Path:
    """A folder of the cache with a header at each name of `specs` (`torch/all.h`), for a build whose source
    includes a framework's headers that are not here: the framework serves only the host code, which qconform drops,
    so the include may stand for nothing; device code that uses the framework still fails, naming what it used.
    `NAME=HEADER[,HEADER...]` stands for a header that only includes those: a framework header through which host
    declarations reach the file from a library of its own (ATen/cuda/CUDAContext.h=cublas_v2.h: a host function's
    `cublasHandle_t` parameter). A ValueError names a spec that is not a relative header path, or a name given twice
    with different headers."""
    from harness.cache import cache_dir, cache_entry, content_key
    stands: dict = {}
    for spec in specs:
        name, includes = parse_empty_header(spec)
        if stands.setdefault(name, includes) != includes:
            raise ValueError(f"--empty-header: {name} is given twice, including different headers "
                             f"({', '.join(stands[name]) or 'nothing'}; {', '.join(includes) or 'nothing'})")
    key = content_key("empty-headers", *(f"{n}={','.join(i)}" for n, i in sorted(stands.items())))[:24]

    def make(tmp: Path) -> None:
        tmp.mkdir()
        for name, includes in sorted(stands.items()):
            (tmp / name).parent.mkdir(parents=True, exist_ok=True)
            text = (f"// qconform --empty-header: {name} is not here; it stands for "
                    + (", ".join(includes) if includes else "nothing") + "\n"
                    + "".join(f"#include <{h}>\n" for h in includes))
            (tmp / name).write_text(text)

    return cache_entry(cache_dir("headers") / f"empty-{key}", make)[0]
