"""qconform's stand-ins for the headers of host libraries that kernel files include for the code around their
kernels (cuBLAS: a handle in a context class, a status checked by a macro), where the toolkit has no such library.

They declare the library's types, constants and common entry points and define nothing. Every build of qconform's
drops the source's host functions first, so only declarations are ever needed; device code that calls one of these
functions is still refused (nvcc's device-side compile, emu's object check). The folder is searched after all
others, so a toolkit that has the real header (a CUDA install with cuBLAS) uses its own."""
from __future__ import annotations

import functools
import hashlib
from pathlib import Path

FOLDER = Path(__file__).with_name("host_library_headers")


def host_compiler_flags() -> tuple[str, ...]:
    """The host compiler's flags (g++: searched after every other folder)."""
    return ("-idirafter", str(FOLDER))


def nvcc_flags() -> tuple[str, ...]:
    """nvcc's flags: a system folder, searched after the -I folders, its toolkit's include folder among them."""
    return ("-isystem", str(FOLDER))


@functools.lru_cache(maxsize=None)
def digest() -> str:
    """The SHA-256 of the stand-ins' texts, for a build's cache key (a changed declaration is a new build)."""
    h = hashlib.sha256()
    for path in sorted(FOLDER.glob("*.h")):
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def empty_headers(names: "list[str]") -> Path:
    """A folder of the cache with an empty header at each of `names` (`torch/all.h`), for a build whose source
    includes a framework's headers that are not here: the framework serves only the host code, which qconform drops,
    so the include may stand for nothing; device code that uses the framework still fails, naming what it used.
    A ValueError names a name that is not a relative path inside the folder."""
    from harness.cache import cache_dir, cache_entry, content_key
    for name in names:
        parts = Path(name).parts
        if not name or Path(name).is_absolute() or ".." in parts or name.endswith("/") or "\\" in name:
            raise ValueError(f"--empty-header: {name!r} is not a header's relative path as `#include` names it "
                             "(like torch/all.h)")
    key = content_key("empty-headers", *sorted(set(names)))[:24]

    def make(tmp: Path) -> None:
        tmp.mkdir()
        for name in sorted(set(names)):
            (tmp / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp / name).write_text(f"// qconform --empty-header: {name} is not here; it stands for nothing\n")

    return cache_entry(cache_dir("headers") / f"empty-{key}", make)[0]
