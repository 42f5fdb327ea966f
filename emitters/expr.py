"""A tiny, safe evaluator for the integer expressions contracts are written in ("(N+7)//8", "K % 32 == 0").

Contracts keep their sizes and launch geometry as text so they can be written into manifests and
reports and read by people; this module turns that text into numbers for a given set of dims.
"""
from __future__ import annotations

import ast
import math
import operator
from functools import lru_cache
from typing import Mapping

_BINOPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Div: operator.truediv,
    ast.Pow: operator.pow, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
    ast.BitAnd: operator.and_, ast.BitOr: operator.or_,
}
_CMPOPS = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge,
}
_FUNCS = {
    "min": min, "max": max, "abs": abs,
    "ceil_div": lambda a, b: -(-a // b),
    "is_pow2": lambda a: a > 0 and (a & (a - 1)) == 0,
    "sqrt": math.sqrt, "float": float, "int": int,
}


class ExprError(ValueError):
    pass


@lru_cache(maxsize=4096)
def _parse(text: str) -> ast.Expression:
    try:
        return ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise ExprError(f"contract expression {text!r} is not valid: {exc.msg}") from None


def evaluate(text: "str | int | float", dims: Mapping[str, "int | float"]):
    """Evaluate a contract expression over named dims; unknown names raise ExprError naming them."""
    if isinstance(text, (int, float)):
        return text
    tree = _parse(str(text))

    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, bool)):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in dims:
                raise ExprError(f"contract expression {text!r} needs dim {node.id!r}, not given "
                                f"(given: {', '.join(sorted(dims)) or 'none'})")
            return dims[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return _BINOPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd, ast.Not)):
            v = ev(node.operand)
            return -v if isinstance(node.op, ast.USub) else (+v if isinstance(node.op, ast.UAdd) else not v)
        if isinstance(node, ast.BoolOp):
            vals = [ev(v) for v in node.values]
            return all(vals) if isinstance(node.op, ast.And) else any(vals)
        if isinstance(node, ast.Compare):
            left = ev(node.left)
            for op, comp in zip(node.ops, node.comparators):
                right = ev(comp)
                if not _CMPOPS[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.IfExp):
            return ev(node.body) if ev(node.test) else ev(node.orelse)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS:
            return _FUNCS[node.func.id](*[ev(a) for a in node.args])
        raise ExprError(f"contract expression {text!r} uses an unsupported construct: {ast.dump(node)[:60]}")

    return ev(tree)


def names_in(text: "str | int | float") -> set[str]:
    """The dim names an expression reads."""
    if isinstance(text, (int, float)):
        return set()
    return {n.id for n in ast.walk(_parse(str(text))) if isinstance(n, ast.Name) and n.id not in _FUNCS}
