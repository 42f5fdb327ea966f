"""The three numeric modes a Q8_0 product can be computed in."""
from __future__ import annotations

from enum import Enum


class Mode(str, Enum):
    """How an activation meets an int8 weight.

    DEQUANT: f32 activation x int8 weight, f64 accumulation (the exact math).
    INT8_ACT: activation quantized to int8 per 32-block, int32 ``__dp4a`` dot.
    TWO_PASS_INT8: activation as a hi byte plus a lo residual byte (scale / 128), two int32 dots.
    """

    DEQUANT = "dequant"
    INT8_ACT = "int8act"
    TWO_PASS_INT8 = "twopass"

    @classmethod
    def parse(cls, value: "str | Mode") -> "Mode":
        """Accept a Mode, its value or its name (case-insensitive); raise ValueError naming the choices."""
        if isinstance(value, Mode):
            return value
        text = str(value).strip().lower()
        for mode in cls:
            if text in (mode.value, mode.name.lower()):
                return mode
        choices = ", ".join(m.value for m in cls)
        raise ValueError(f"mode: unknown mode {value!r}; expected one of {choices}")

    def __str__(self) -> str:
        return self.value
