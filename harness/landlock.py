"""Landlock (Linux 5.13 and later): a process limits, for good, what it and every program it starts may do to
the file system, and from later ABI versions to TCP and to processes outside. The kernel's interface only;
what to allow is the callers' (the emu worker's sandbox, `harness.confine` for compilers).

A ruleset names the rights it governs ("handled"); each rule gives some of them back beneath one path. A
governed right with no rule covering a path is refused there, whatever system call asks for it."""
from __future__ import annotations

import ctypes
import os
import stat
import sys
from pathlib import Path
from typing import Callable

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446     # the same numbers on every architecture
_RULE_PATH_BENEATH = 1
_NO_NEW_PRIVS = 38

# file-system rights, by bit (the ABI version that introduced each: 1 unless noted)
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15          # ABI 2, 3 and 5
_FS_BY_ABI = {1: (1 << 13) - 1, 2: REFER, 3: TRUNCATE, 5: IOCTL_DEV}
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV    # the rights a rule on a file may give
READ = EXECUTE | READ_FILE | READ_DIR
NET_TCP = 0b11                      # ABI 4: bind and connect
SCOPES = 0b11                       # ABI 6: abstract unix sockets and signals outside the domain


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _syscall() -> Callable:
    return ctypes.CDLL(None, use_errno=True).syscall


def abi() -> int:
    """The kernel's Landlock ABI version, 0 where it has none (or it is disabled)."""
    if not sys.platform.startswith("linux"):
        return 0
    return max(int(_syscall()(_CREATE_RULESET, None, 0, 1)), 0)     # LANDLOCK_CREATE_RULESET_VERSION


def fs_rights(version: int) -> int:
    """Every file-system right that ABI `version` knows."""
    return sum(bits for v, bits in _FS_BY_ABI.items() if v <= version)


class Ruleset:
    """A ruleset of the running kernel's ABI (`version` > 0). `handled_fs` is cut to the rights the ABI knows;
    TCP and the scopes are governed where the ABI has them and `net`/`scoped` ask for it."""

    def __init__(self, version: int, handled_fs: int, *, net: bool = True, scoped: bool = True):
        if version <= 0:
            raise ValueError("version: Landlock is not available in this kernel (ABI 0)")
        self.version = version
        self.handled = handled_fs & fs_rights(version)
        fields = [self.handled]
        if version >= 4:
            fields.append(NET_TCP if net else 0)
        if version >= 6:
            fields.append(SCOPES if scoped else 0)
        attr = (ctypes.c_uint64 * len(fields))(*fields)
        self._syscall = _syscall()
        self._prctl = ctypes.CDLL(None, use_errno=True).prctl
        fd = self._syscall(_CREATE_RULESET, ctypes.byref(attr), ctypes.sizeof(attr), 0)
        if fd < 0:
            raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
        self.fd = int(fd)

    def allow(self, path: "str | Path", rights: int) -> bool:
        """Give `rights` back beneath `path` (a folder: everything in it; a file: the file alone, and only its
        file rights). False when the path does not exist."""
        try:
            target = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except FileNotFoundError:
            return False
        try:
            if not stat.S_ISDIR(os.fstat(target).st_mode):
                rights &= FILE_RIGHTS
            rule = _PathBeneath(rights & self.handled, target)
            if rule.allowed_access and self._syscall(_ADD_RULE, self.fd, _RULE_PATH_BENEATH, ctypes.byref(rule),
                                                     0) != 0:
                raise OSError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
        finally:
            os.close(target)
        return True

    def restrict_self(self) -> None:
        """Put the calling thread (and what it starts) under the ruleset, for good. Calls only functions looked
        up when the ruleset was made, so it may run in a forked child (a preexec_fn)."""
        if self._prctl(_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        if self._syscall(_RESTRICT_SELF, self.fd, 0) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
