"""Instantiations of template kernels that a source's host code makes implicitly.

A program launches `topk<8, false><<<g, b>>>(...)` from host code, and the compiler instantiates the template
there. qconform builds device code only, so those instantiations vanish with the host code. `instantiated()` puts
them back as explicit instantiations (`template __global__ void topk<8, false>(...);`) appended to the source, so
that `topk<8,false>` can be launched by name without editing the file. Line numbers of the source stay as they
are: the text is appended after its last line."""
from __future__ import annotations

import re
from typing import Iterable, Mapping

from .signatures import (kernel_signatures, launch_name, split_declaration, template_definitions,
                         template_param_name)

_NAME = re.compile(r"^\s*((?:[A-Za-z_]\w*\s*::\s*)*)([A-Za-z_]\w*)\s*<(.*)>\s*$", re.S)


def split_instantiation(name: str) -> "tuple[str, tuple[str, ...]] | None":
    """`k<float, 4>` -> ("k", ("float", "4")); None when `name` names no template arguments."""
    m = _NAME.match(name)
    if m is None:
        return None
    args = tuple(a.strip() for a in split_declaration(m.group(3), ","))
    return m.group(2), (() if args == ("",) else args)


def _default(template_param: str) -> "str | None":
    parts = split_declaration(template_param, "=")
    return "=".join(parts[1:]).strip() if len(parts) > 1 else None


def instantiated(code: str, names: Iterable[str], defines: "Mapping[str, str] | None" = None,
                 headers: "Mapping[str, str] | None" = None) -> str:
    """`code` with an explicit instantiation appended for each name of `names` that gives template arguments
    (`k<8,false>`) and that the source does not already instantiate; other names are left to the caller. The
    template kernel may be the source's or one of its own `headers`' (file name -> text: the source includes them, so
    the instantiation appended after its last line sees their definitions). ValueError names the kernel and the rule
    broken: no template kernel of that name, or a count of template arguments that its template parameters do not
    take."""
    made = {k.name for k in kernel_signatures(code, defines=defines)}
    templates: dict = {}
    for where, text in [(None, code), *sorted((headers or {}).items())]:
        for t in template_definitions(text, defines):
            templates.setdefault(t.name, (t, where))
    added = []
    for name in names:
        parts = split_instantiation(name)
        if parts is None or launch_name(name) in made:
            continue
        base, args = parts
        if base not in templates:
            raise ValueError(f"kernel {name!r}: neither the source nor its headers define a template kernel {base!r} "
                             f"(their template kernels: {', '.join(templates) or 'none'})")
        kernel, where = templates[base]
        added.append(_instantiation(kernel, args, name, f"{where}, line" if where else "line"))
        made.add(launch_name(name))
    if not added:
        return code
    return code + ("" if code.endswith("\n") else "\n") + "".join(added)


def _instantiation(kernel, args: tuple[str, ...], name: str, at: str) -> str:
    params = list(kernel.template_params)
    pack = params.pop() if params and "..." in params[-1] else None     # a trailing pack takes the arguments left
    if any("..." in p for p in params):
        raise ValueError(f"kernel {name!r}: {kernel.name} ({at} {kernel.line}) takes a template parameter pack "
                         "before its last template parameter, which qconform does not instantiate; write the "
                         "explicit instantiation in the source")
    required = sum(_default(p) is None for p in params)
    fits = required <= len(args) <= len(params) if pack is None else len(args) >= len(params)   # a pack: all fixed given
    if not fits:
        wanted = (f"{len(params)} and then any number for its pack" if pack else
                  f"{required} to {len(params)}" if required != len(params) else str(len(params)))
        heads = params + ([pack] if pack else [])
        raise ValueError(f"kernel {name!r}: {len(args)} template argument(s), but {kernel.name} ({at} {kernel.line}) "
                         f"takes {wanted}: template <{', '.join(heads)}>")
    values: dict[str, str] = {}
    for i, p in enumerate(params):          # a default may name earlier parameters
        values[template_param_name(p)] = args[i] if i < len(args) else _substituted(_default(p) or "", values)
    packed = list(args[len(params):])
    expanded = kernel.params if pack is None else _expanded(kernel.params, template_param_name(pack), packed)
    signature = ", ".join(_substituted(p, values) for p in expanded)
    text = f"template __global__ void {kernel.name}<{', '.join(args)}>({signature});"
    for namespace in reversed(kernel.namespaces):      # where C++ wants the instantiation of an unqualified name
        text = f"namespace {namespace} {{ {text} }}"
    return text + "\n"


def _expanded(params, pack: str, packed: list) -> list:
    """The kernel's parameters with the one that expands the pack (`P... xs`, `const P&... xs`) written once per
    argument of the pack (`T0 xs0, T1 xs1`), or dropped where the pack is empty."""
    out = []
    for p in params:
        if not re.search(rf"\b{re.escape(pack)}\b[^,]*\.\.\.", p):
            out.append(p)
            continue
        head = re.sub(r"\s*\.\.\.\s*", " ", p).strip()
        last = re.search(r"([A-Za-z_]\w*)\s*$", head)
        named = last is not None and last.group(1) != pack
        for i, t in enumerate(packed):
            out.append(re.sub(rf"\b{re.escape(pack)}\b", lambda _m: t, head) + (str(i) if named else ""))
    return out


def _substituted(text: str, values: Mapping[str, str]) -> str:
    """Each identifier of `text` that names a template parameter replaced by its argument, once (an argument may
    itself be a name of the source)."""
    return re.sub(r"\b[A-Za-z_]\w*\b", lambda m: values.get(m.group(0), m.group(0)), text)
