"""Run a lane's decode program on a backend module, step by step, over a set of named buffers.

Two buffer sets behind one small interface:
  HostBuffers      numpy arrays passed to Module.launch: works on every backend (each launch copies its
                   arguments to the device and back);
  ResidentBuffers  device buffers allocated once through the module's resident-buffer API
                   (Module.alloc / write / read), used in place by every launch; only what is judged
                   (the logits, the token, the position) is read back.
The backend's checks (guard bands, poisoned outputs, races across schedules) apply to every launch; a fault
is re-raised as ChainFault naming the step, the position, the layer and the launch.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Mapping, Optional, Sequence

import numpy as np

from reference.model import ModelWeights

from harness.backends.base import KernelFault

from .program import BufferDecl, Launch, Program, RowRef

# The byte every float scratch and KV-cache buffer starts as: all ones is a NaN in float32, so a read of a
# cache row or scratch element no launch has written shows up as NaN in what is judged.
UNWRITTEN_BYTE = 0xFF


class ChainFault(RuntimeError):
    """A launch of the chain faulted (or the chain's own bookkeeping found a wrong position or token)."""

    def __init__(self, step: int, position: int, launch: Optional[Launch], fault: Exception):
        self.step, self.position, self.launch, self.fault = step, position, launch, fault
        where = launch.where() if launch is not None else "chain"
        super().__init__(f"step {step} (position {position}), {where}: {fault}")


def initial(decl: BufferDecl) -> np.ndarray:
    """A buffer's content before the first step: KV caches and scratch all UNWRITTEN_BYTE, the rest zero."""
    if decl.kind in ("kv", "scratch"):
        return np.full(decl.nbytes, UNWRITTEN_BYTE, np.uint8).view(decl.dtype).reshape(decl.shape)
    return np.zeros(decl.shape, decl.dtype)


# -- buffer sets -----------------------------------------------------------------------------------------------------
class BufferSet(ABC):
    """Named device buffers of a program: what a launch argument is, and reading and writing by name."""

    def __init__(self, decls: Mapping[str, BufferDecl]):
        self.decls = dict(decls)

    def decl(self, name: str) -> BufferDecl:
        try:
            return self.decls[name]
        except KeyError:
            raise KeyError(f"buffer {name!r} is not declared by the program") from None

    @abstractmethod
    def arg(self, name: str) -> object:
        """The object to pass to Module.launch for this buffer."""

    def row_arg(self, ref: RowRef, position: int) -> object:
        """The argument for a host-offset row of a buffer (RowRef) at this position."""
        raise ValueError(f"{type(self).__name__}: a launch takes {ref} (a host-offset pointer into a buffer); "
                         "only host buffers support it")

    @abstractmethod
    def read(self, name: str) -> np.ndarray:
        """A copy of the buffer's contents, in its declared shape and dtype."""

    @abstractmethod
    def write(self, name: str, value: np.ndarray) -> None: ...

    def _checked(self, name: str, value) -> np.ndarray:
        d = self.decl(name)
        arr = np.asarray(value)
        if arr.dtype != np.dtype(d.dtype):
            raise ValueError(f"buffer {name}: expected dtype {d.dtype}, got {arr.dtype}")
        if arr.size != d.size:
            raise ValueError(f"buffer {name}: expected {d.size} elements {d.shape}, got {arr.size} {arr.shape}")
        return np.ascontiguousarray(arr).reshape(d.shape)

    def close(self) -> None:
        """Release device memory (nothing to do for host arrays)."""


class HostBuffers(BufferSet):
    """Buffers as host numpy arrays; Module.launch copies them to the device and back on every launch."""

    def __init__(self, decls: Mapping[str, BufferDecl]):
        super().__init__(decls)
        self.arrays = {n: initial(d) for n, d in self.decls.items()}

    def arg(self, name: str) -> np.ndarray:
        return self.arrays[name].reshape(-1)

    def row_arg(self, ref: RowRef, position: int) -> np.ndarray:
        flat = self.arrays[ref.buffer].reshape(-1)
        lo = position * ref.length
        if not (0 <= lo and lo + ref.length <= flat.size):
            raise ValueError(f"{ref}: position {position} is outside buffer {ref.buffer}")
        return flat[lo:lo + ref.length]

    def read(self, name: str) -> np.ndarray:
        return self.arrays[name].copy()

    def write(self, name: str, value) -> None:
        self.arrays[name][...] = self._checked(name, value)


class ResidentBuffers(BufferSet):
    """Buffers allocated once on the module (Module.alloc); launches use them in place."""

    def __init__(self, decls: Mapping[str, BufferDecl], module):
        super().__init__(decls)
        if not getattr(module, "supports_resident_buffers", False):
            raise ValueError("module: this backend has no resident buffers; use HostBuffers")
        self.module = module
        self.handles = {}
        for n, d in self.decls.items():
            self.handles[n] = module.alloc(n, d.shape, np.dtype(d.dtype), init=initial(d))

    def arg(self, name: str):
        return self.handles[name]

    def read(self, name: str) -> np.ndarray:
        return np.asarray(self.module.read(self.handles[name])).reshape(self.decl(name).shape)

    def write(self, name: str, value) -> None:
        self.module.write(self.handles[name], self._checked(name, value))

    def close(self) -> None:
        for h in self.handles.values():
            self.module.free(h)
        self.handles = {}


def make_buffers(program: Program, module, resident: "bool | None" = None) -> BufferSet:
    """Resident buffers where the module supports them (or resident=True demands them), else host arrays."""
    if resident is None:
        resident = bool(getattr(module, "supports_resident_buffers", False)) and not program.has_rows
    return ResidentBuffers(program.buffers, module) if resident else HostBuffers(program.buffers)


# -- weights ------------------------------------------------------------------------------------------------------------
def weight_arrays(weights: ModelWeights) -> Iterable[tuple[str, np.ndarray]]:
    """(buffer name, array) for every weight buffer, one layer at a time (a checkpoint's layers stay mapped)."""
    yield "emb_q", weights.token_embd.quants
    yield "emb_s", weights.token_embd.scales
    yield "wout_q", weights.output.quants
    yield "wout_s", weights.output.scales
    yield "wout_sh", weights.output.scales.astype(np.float16)   # exact: Q8_0 scales are float16 values
    yield "on_w", weights.output_norm
    for l in range(weights.config.n_layer):
        w = weights.layer(l)
        for name, arr in (("an", w.attn_norm), ("fn_", w.ffn_norm), ("aqn", w.q_norm), ("akn", w.k_norm)):
            yield f"{name}[{l}]", arr
        for name, t in (("wq", w.wq), ("wk", w.wk), ("wv", w.wv), ("wo", w.wo), ("wr", w.router),
                        ("wg", w.gate_exps), ("wu", w.up_exps), ("wd", w.down_exps)):
            yield f"{name}_q[{l}]", t.quants
            yield f"{name}_s[{l}]", t.scales
        for name, t in (("wq", w.wq), ("wk", w.wk), ("wv", w.wv), ("wo", w.wo)):
            yield f"{name}_sh[{l}]", t.scales.astype(np.float16)   # exact (Q8_0 scales are float16 values)


def used_buffers(program: Program) -> set[str]:
    used = set()
    for l in (*program.launches, program.advance):
        used.update(l.buffer(p.name) for p in l.contract.params if p.is_pointer)
    return used


# -- the chain ----------------------------------------------------------------------------------------------------------
@dataclass
class StepOutput:
    step: int
    position: int
    token_in: int
    logits: np.ndarray                      # float32 (vocab,), as the LM head wrote them
    token: Optional[int] = None             # gk_argmax_adv's token (None for a step without the advance)


class Chain:
    """A lane's program on one loaded module over one buffer set.

    `step(token, position)` writes the token and position (the host side of the seed's prefill), runs the
    decode step and reads the logits; `advance=True` also runs gk_argmax_adv and reads the token and the
    advanced position it left on the device (the seed's graph replay)."""

    def __init__(self, program: Program, module, buffers: BufferSet, *,
                 launch_hook: Optional[Callable[[Launch, int], None]] = None):
        self.program, self.module, self.buffers = program, module, buffers
        self.steps = 0
        self.history: list[int] = []     # the token at each position whose KV rows the caches now hold
        self.launch_hook = launch_hook
        self._used = used_buffers(program)
        missing = [k for k in program.kernels() if k not in module.kernel_names]
        if missing:
            raise ValueError(f"module: kernels {', '.join(missing)} of lane {program.lane} are not in the module")

    def load_weights(self, weights: ModelWeights) -> None:
        if weights.config != self.program.config:
            raise ValueError("weights: their config differs from the program's")
        for name, arr in weight_arrays(weights):
            if name in self._used:
                self.buffers.write(name, arr)

    def reset(self) -> None:
        """Back to an empty KV cache: caches and scratch to their unwritten pattern (a later read of a row no
        launch of this run wrote shows as NaN), the step counter to 0."""
        for name, d in self.program.buffers.items():
            if d.kind in ("kv", "scratch") and name in self._used:
                self.buffers.write(name, initial(d))
        self.steps = 0
        self.history = []

    def resume_at(self, position: int) -> None:
        """Continue from `position` on the KV rows of positions < position already in the caches (the earlier
        run fed the same tokens there); later rows are rewritten before any step reads them."""
        if not 0 < position <= len(self.history):
            raise ValueError(f"position: the caches hold {len(self.history)} positions; cannot resume at {position}")
        self.history = self.history[:position]
        self.steps = position

    def set_state(self, token: int, position: int) -> None:
        if not 0 <= position < self.program.maxseq:
            raise ValueError(f"position: {position} outside the KV cache's {self.program.maxseq} rows")
        if not 0 <= token < self.program.config.vocab:
            raise ValueError(f"token: {token} outside the vocabulary [0, {self.program.config.vocab})")
        self.buffers.write("d_pos", np.array([position], np.int32))
        self.buffers.write("d_tok", np.array([token], np.int32))

    def run_launch(self, launch: Launch, step: int, position: int) -> None:
        args = [self.buffers.arg(v) if isinstance(v, str) else
                self.buffers.row_arg(v, position) if isinstance(v, RowRef) else v for v in launch.args]
        try:
            self.module.launch(launch.kernel, launch.grid, launch.block, launch.shared_bytes, args,
                               outputs=launch.output_indices)
        except KernelFault as exc:
            raise ChainFault(step, position, launch, exc) from exc
        if self.launch_hook is not None:
            self.launch_hook(launch, step)

    def step(self, token: int, position: int, *, advance: bool = False) -> StepOutput:
        """Run one decode step at `position` with input `token` (written from the host)."""
        self.set_state(token, position)
        return self.step_on_device(position, token, advance=advance)

    def step_on_device(self, position: int, token: int, *, advance: bool = False) -> StepOutput:
        """Run one decode step on the token and position already on the device."""
        step = self.steps
        del self.history[position:]
        for launch in self.program.launches:
            self.run_launch(launch, step, position)
        self.history.append(int(token))
        out = StepOutput(step, position, token, self.buffers.read("logits").reshape(-1))
        if advance:
            self.run_launch(self.program.advance, step, position)
            out.token = int(self.buffers.read("d_tok")[0])
            pos_after = int(self.buffers.read("d_pos")[0])
            if pos_after != position + 1:
                raise ChainFault(step, position, self.program.advance,
                                 ValueError(f"d_pos is {pos_after} after the advance, expected {position + 1}"))
        self.steps += 1
        return out


def host_argmax(logits: np.ndarray) -> int:
    """The seed's host-side pick after the prefill: the first index of the maximum (strict > scan)."""
    return int(np.argmax(np.asarray(logits, dtype=np.float32)))


def generate(chain: Chain, prompt: Sequence[int], n_tokens: int) -> Iterator[StepOutput]:
    """The seed's generation loop: the prompt's tokens with host-written positions (prefill), the first new
    token picked on the host from the last prefill logits, then n_tokens - 1 decode steps whose token and
    position gk_argmax_adv advances on the device. Yields one StepOutput per step as it completes (a fault
    raises after the steps before it were yielded); the generated tokens are [host pick] + each later step's
    input token ... (see `generated_tokens`)."""
    if not prompt:
        raise ValueError("prompt: at least one token is needed")
    if n_tokens < 1:
        raise ValueError(f"n_tokens: expected >= 1, got {n_tokens}")
    if len(prompt) + n_tokens - 1 > chain.program.maxseq:
        raise ValueError(f"n_tokens: {len(prompt)} prompt + {n_tokens - 1} decode positions exceed the program's "
                         f"{chain.program.maxseq} KV-cache rows")
    o = None
    for i, t in enumerate(prompt):
        o = chain.step(int(t), i)
        yield o
    tok = host_argmax(o.logits)
    if n_tokens > 1:        # the device's state for the decode steps (one token: the host's pick, no decode step)
        chain.set_state(tok, len(prompt))
    for k in range(1, n_tokens):
        pos = len(prompt) + k - 1
        o = chain.step_on_device(pos, tok, advance=True)
        yield o
        tok = o.token


def generated_tokens(outs: Sequence[StepOutput], prompt_len: int) -> list[int]:
    """The token stream of `generate`: the host pick after the prefill, then each decode step's device pick."""
    toks = [host_argmax(outs[prompt_len - 1].logits)]
    toks += [o.token for o in outs[prompt_len:]]
    return toks


__all__ = ["BufferSet", "Chain", "ChainFault", "HostBuffers", "ResidentBuffers", "StepOutput", "generate",
           "generated_tokens", "host_argmax", "make_buffers", "weight_arrays"]
