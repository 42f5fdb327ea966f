"""The kernels a cubin holds, by their symbols, and the C++ names those symbols stand for.

The driver finds a kernel by its symbol. A kernel with C linkage has its own name as its symbol; an instantiation
of a template kernel has only its mangled name (`_ZN3moe5routeILi32ELb1EEEvPKfPf`). The GPU backend launches
`route<32,true>` by matching it against the demangled entry names of the cubin it built."""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import re
import struct

from cudasrc.signatures import launch_name
from cudasrc.types import normalize_ctype

_SHT_SYMTAB = 2
_STT_FUNC = 2
_STO_CUDA_ENTRY = 0x10        # st_other of a kernel's symbol (a device function has none)


def entry_symbols(cubin: bytes) -> tuple[str, ...]:
    """The symbols of the kernels (entry functions) in an ELF64 cubin, in symbol-table order; ValueError when the
    bytes are no ELF64 file."""
    if cubin[:4] != b"\x7fELF" or cubin[4] != 2:
        raise ValueError("cubin: not an ELF64 file")
    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", cubin, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
    names = []
    for _, kind, _, _, offset, size, link, _, _, entsize in sections:
        if kind != _SHT_SYMTAB or entsize == 0:
            continue
        strtab = sections[link]
        strings = cubin[strtab[4]:strtab[4] + strtab[5]]
        for at in range(offset, offset + size, entsize):
            name_at, info, other = struct.unpack_from("<IBB", cubin, at)
            if info & 0xF == _STT_FUNC and other & _STO_CUDA_ENTRY:
                names.append(strings[name_at:strings.index(b"\0", name_at)].decode())
    return tuple(names)


@functools.lru_cache(maxsize=None)
def _cxa_demangle():
    found = ctypes.util.find_library("stdc++")
    if found is None:
        return None
    fn = ctypes.CDLL(found).__cxa_demangle
    fn.restype = ctypes.c_void_p
    fn.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    return fn


@functools.lru_cache(maxsize=4096)
def demangle(symbol: str) -> str:
    """`_ZN3moe5routeILi32ELb1EEEvPKfPf` -> `moe::route<32, true>(float const*, float*)` (the Itanium C++ ABI's
    demangler of the C++ runtime, without the return type a template's mangled name carries); a symbol that is not
    mangled (C linkage) is returned as it is. RuntimeError when the runtime's demangler is not to be found."""
    if not symbol.startswith("_Z"):
        return symbol
    fn = _cxa_demangle()
    if fn is None:
        raise RuntimeError("the C++ runtime (libstdc++) is not to be found, so template kernels' names cannot be read")
    status = ctypes.c_int()
    out = fn(symbol.encode(), None, None, ctypes.byref(status))
    if not out:
        return symbol
    try:
        text = ctypes.string_at(out).decode()
    finally:
        ctypes.CDLL(None).free(ctypes.c_void_p(out))
    return re.sub(r"^void\s+", "", text)


def demangled_params(spelled: str) -> "tuple[str, ...]":
    """The parameter types of a demangled name (`o(int*, double const*)` -> ('int*', 'const double*')), normalized
    as the signature reader normalizes a kernel's (cudasrc.types.normalize_ctype)."""
    inner = spelled[spelled.find("(") + 1:spelled.rfind(")")].strip()
    if inner in ("", "void"):
        return ()
    parts, depth, start = [], 0, 0
    for i, c in enumerate(inner):
        depth += (c in "(<[") - (c in ")>]")
        if c == "," and depth == 0:
            parts.append(inner[start:i])
            start = i + 1
    return tuple(normalize_ctype(p.strip()) for p in parts + [inner[start:]])


def kernel_symbol(cubin: bytes, name: str, scope: str = "", params: "tuple[str, ...] | None" = None
                  ) -> "tuple[str | None, tuple[str, ...]]":
    """The symbol of kernel `name` (`route<32,true>`, as qconform spells an instantiation: no spaces; or a plain
    kernel's name, whose C++ symbol demangles to it) in namespace `scope` (`moe::`): (the symbol, or None; the
    demangled names of that template's instantiations in the cubin, for a message). Tried in turn, each taken only when one instantiation answers it: the same spelling; the same
    leading arguments (the demangler spells out defaulted ones: `route<32,true,float>`); the template's only
    instantiation in the cubin (an argument spelled otherwise, `int32_t` for `int`). `params`: an overloaded plain
    kernel's parameter types (KernelSignature.ctypes), which choose among the symbols of its name."""
    base = scope + name.split("<", 1)[0]
    given = scope + name
    if "<" not in name:          # a plain kernel with C++ linkage (a header's, a static one, an overload)
        plain = [s for s in entry_symbols(cubin) if demangle(s).split("(", 1)[0] == given]
        if params is not None:   # an overload: the one whose parameter types are `params`
            plain = [s for s in plain if demangled_params(demangle(s)) == tuple(params)]
        return (plain[0] if len(plain) == 1 else None), ()
    same_template = []
    for symbol in entry_symbols(cubin):
        spelled = demangle(symbol).split("(", 1)[0]
        if spelled.startswith(base + "<"):
            same_template.append((symbol, spelled))
    squeezed = [(symbol, launch_name(spelled)) for symbol, spelled in same_template]
    for matches in ([s for s, text in squeezed if text == given],
                    [s for s, text in squeezed if text.startswith(given[:-1] + ",")],
                    [s for s, _ in squeezed]):
        if len(matches) == 1:
            return matches[0], ()
        if matches:
            break
    return None, tuple(spelled for _, spelled in same_template)
