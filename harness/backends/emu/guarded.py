"""Device memory of the emu worker between inaccessible guard pages.

Every device buffer (and every staged argument in the shared file) sits in its own read-write pages with
GUARD_REGION bytes of PROT_NONE pages on each side. A write near the buffer but beyond its 256-byte sentinel
band then faults at once; the runtime's SIGSEGV reporter (emu_signals.hpp) leaves the address on stderr, and
the worker announces where each buffer of a launch lies (`buffer_line`), so the parent can say which argument
the write missed and by how much (`locate`). The sentinel band stays: it names the exact element of a write
just past the end, and catches writes into the slack of the last page. A fault of a fiber below its own stack
is reported apart (`emu-stack-overflow: ...`, read by `stack_overflow`): it is no buffer's, wherever it landed.
"""
from __future__ import annotations

import ctypes
import mmap
import re
import weakref
from dataclasses import dataclass
from typing import Optional

import numpy as np

PAGE = mmap.PAGESIZE
GUARD_REGION = 1 << 20       # bytes of PROT_NONE on each side of a buffer (address space only, no memory)
BUFFER_PREFIX = "emu-buffer: "
FAULT = re.compile(r"^emu-fault: (SIGSEGV|SIGBUS) (read|write|access) at 0x([0-9a-f]+)$", re.M)
NULL_PAGE = 1 << 16      # Linux's mmap_min_addr: nothing is mapped below it, a fault there is a null pointer's
FIBER_STACK_BYTES = 256 * 1024   # every thread's stack: kStackBytes of emu_runtime.cpp (for AddressSanitizer's reports)
OVERFLOW_PREFIX = "emu-stack-overflow: "
_OVERFLOW = re.compile(rf"^{OVERFLOW_PREFIX}(.+) stack (\d+) reached (\d+)$", re.M)
_ASAN_OVERFLOW = re.compile(r"^SUMMARY: AddressSanitizer: stack-overflow (?:\S*/)?(\S+:\d+)?", re.M)
_BUFFER = re.compile(rf"^{BUFFER_PREFIX}(\d+) 0x([0-9a-f]+) (\d+) (\d+)$", re.M)

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_MAP_FAILED = ctypes.c_void_p(-1).value
_MAP_NORESERVE = 0x4000


def round_up(n: int, to: int = PAGE) -> int:
    return (n + to - 1) // to * to


def protect(address: int, size: int, writable: bool) -> None:
    prot = (mmap.PROT_READ | mmap.PROT_WRITE) if writable else 0
    if _libc.mprotect(address, size, prot) != 0:
        raise OSError(ctypes.get_errno(), f"mprotect of {size} bytes failed")


def guarded_bytes(size: int) -> np.ndarray:
    """`size` zeroed read-write bytes (page-aligned, rounded up to whole pages) between PROT_NONE regions.
    The mapping is released when the returned array and every view of it are gone."""
    rw = round_up(max(size, 1))
    total = rw + 2 * GUARD_REGION
    base = _libc.mmap(None, total, 0, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _MAP_NORESERVE, -1, 0)
    if base in (None, _MAP_FAILED):
        raise MemoryError(f"mmap of {total} bytes for a device buffer failed (errno {ctypes.get_errno()})")
    try:
        protect(base + GUARD_REGION, rw, True)
    except OSError:
        _libc.munmap(base, total)
        raise MemoryError(f"mprotect of a {rw}-byte device buffer failed") from None
    cells = (ctypes.c_ubyte * rw).from_address(base + GUARD_REGION)
    weakref.finalize(cells, _libc.munmap, base, total)
    return np.frombuffer(cells, np.uint8)


def buffer_line(index: int, data_address: int, nbytes: int, itemsize: int) -> str:
    return f"{BUFFER_PREFIX}{index} 0x{data_address:x} {nbytes} {itemsize}"


@dataclass(frozen=True)
class GuardHit:
    arg: int          # index of the argument whose guard pages were hit
    side: str         # 'before' | 'after'
    distance: int     # bytes from the buffer's edge
    access: str       # 'read' | 'write' | 'access'


def locate(stderr: str) -> Optional[GuardHit]:
    """The memory fault the worker reported, when it fell within GUARD_REGION of a buffer of the launch."""
    hit = nearest(stderr)
    reach = GUARD_REGION + PAGE
    if hit is None or hit.distance > reach or (hit.side == "after" and hit.distance == reach):
        return None
    return hit


def nearest(stderr: str) -> Optional[GuardHit]:
    """The buffer of the faulting run nearest to the memory fault the worker reported, wherever the address lies
    (a wild index far past every buffer, beyond their guard pages), or None; None too for an address in the
    null page (a null pointer's, nearest to no buffer)."""
    m = FAULT.search(stderr)
    if not m or int(m.group(3), 16) < NULL_PAGE:
        return None
    addr = int(m.group(3), 16)
    latest = {int(b.group(1)): (int(b.group(2), 16), int(b.group(3)))     # the faulting run's buffers
              for b in _BUFFER.finditer(stderr[:m.start()])}
    best = None
    for i, (lo, n) in latest.items():
        hit = (GuardHit(i, "before", lo - addr, m.group(2)) if addr < lo else
               GuardHit(i, "after", addr - (lo + n), m.group(2)) if addr >= lo + n else None)
        if hit is not None and (best is None or hit.distance < best.distance):
            best = hit
    return best


@dataclass(frozen=True)
class StackOverflow:
    thread: str        # 'block (0,0,0) warp 1 lane 5 (thread (37,0,0))'
    stack_bytes: int   # the fiber stack every thread gets
    reached: Optional[int]   # bytes below the stack's top that its stack pointer or access reached (if known)


def stack_overflow(stderr: str) -> Optional[StackOverflow]:
    """The stack overflow the worker reported (emu_signals.hpp), or AddressSanitizer did (it names no thread
    and no depth), if its memory fault was one."""
    m = _OVERFLOW.search(stderr)
    if m:
        return StackOverflow(m.group(1), int(m.group(2)), int(m.group(3)))
    asan = _ASAN_OVERFLOW.search(stderr)
    if asan:
        at = f" at {asan.group(1)}" if asan.group(1) else ""
        return StackOverflow(f"a thread (AddressSanitizer: stack-overflow{at})", FIBER_STACK_BYTES, None)
    return None


def fault_address(stderr: str) -> Optional[str]:
    """'write at address 0x...' from the worker's report of a memory fault, else None."""
    m = FAULT.search(stderr)
    return f"{m.group(2)} at address 0x{m.group(3)}" if m else None


def without_reports(stderr: str) -> str:
    """The worker's stderr without the buffer, fault and race lines (for showing a crash's last output)."""
    return "\n".join(ln for ln in stderr.splitlines()
                     if ln.strip() and not ln.startswith((BUFFER_PREFIX, OVERFLOW_PREFIX, "emu-fault: ", "emu-race: ")))
