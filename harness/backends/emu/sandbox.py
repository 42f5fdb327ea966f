"""The emu worker's sandbox: what a kernel that slipped past the device-code gate may do on the host.

Applied by the worker to itself after its own imports and before it loads any kernel library:
  * resource limits (setrlimit): address space (`memory_mb`), CPU time over the worker's life (`cpu_s`),
    no child processes (RLIMIT_NPROC 0), no core files, at most FSIZE_BYTES per written file, NOFILE fds;
  * PR_SET_NO_NEW_PRIVS (no set-uid program can give privileges back; required for an unprivileged filter);
  * Landlock, where the kernel has it: reading only the system's, Python's and the cache's folders
    (readable_roots), and no file-system change or program execution, by any system call;
  * a seccomp-bpf filter built with libseccomp (the `pyseccomp` binding): every system call that makes a
    process or thread, runs a program, opens a socket, opens a file for writing, changes the file system,
    signals another process, traces or reads another process, or bypasses seccomp (io_uring, other
    architectures' system call tables) is answered with SIGSYS (SECCOMP_RET_TRAP). The runtime's handler
    (emu_signals.hpp) writes `emu-sandbox: refused system call N` and ends the worker; the parent names the
    call (describe_violation) and starts a new worker.
Everything else (reading those folders, anonymous memory, writing to the descriptors the worker already holds)
is allowed: SECURITY.md says what that leaves open.
"""
from __future__ import annotations

import ctypes
import json
import os
import re
import resource
import sys
from dataclasses import asdict, dataclass
from typing import Optional

from harness import confine, landlock
from harness.cache import cache_root

ENV = "QCONFORM_EMU_SANDBOX_LIMITS"   # the limits as JSON, passed from the parent to the worker
OFF_ENV = "QCONFORM_EMU_SANDBOX"      # the user's switch: "off" runs kernels unsandboxed (trusted sources only)
SANDBOX_EXIT = 99                     # exit status of a worker the filter stopped (kSandboxExit in emu_signals.hpp)
SETUP_FAILED_EXIT = 98                # the worker could not sandbox itself and ran nothing
MARKER = re.compile(r"^emu-sandbox: refused system call (\d+) arch 0x([0-9a-f]+)$", re.M)

DEFAULT_MEMORY_MB = 16384   # address space of one worker (largest measured: 1.2 GiB, the qwen3-30b-a3b MoE matrix)
DEFAULT_CPU_S = 3600        # CPU seconds over a worker's life (a new worker starts with a fresh budget)
FSIZE_BYTES = 1 << 30       # largest file the worker may grow (its stderr log)
NOFILE = 256                # open descriptors

_O_WRITE_BITS = (os.O_WRONLY, os.O_RDWR, os.O_CREAT, os.O_TRUNC, os.O_APPEND)

# What a refused call does, in the words of the report (all other refused calls: "a refused system call").
_WHAT = {}
for _names, _what in (
        (("fork", "vfork", "clone", "clone3"), "start a process or thread"),
        (("execve", "execveat"), "run a program"),
        (("socket", "socketpair", "connect", "bind", "listen", "accept", "accept4"), "use the network"),
        (("open", "openat", "creat", "openat2", "open_by_handle_at"), "open a file for writing"),
        (("unlink", "unlinkat", "rename", "renameat", "renameat2", "mkdir", "mkdirat", "rmdir", "link", "linkat",
          "symlink", "symlinkat", "mknod", "mknodat", "chmod", "fchmod", "fchmodat", "chown", "fchown", "lchown",
          "fchownat", "truncate", "ftruncate", "utime", "utimes", "utimensat", "futimesat", "setxattr",
          "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr", "memfd_create"),
         "change the file system"),
        (("kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_open", "pidfd_send_signal",
          "pidfd_getfd"), "signal another process"),
        (("ptrace", "process_vm_readv", "process_vm_writev", "kcmp"), "inspect another process"),
        (("io_uring_setup", "io_uring_enter", "io_uring_register"), "submit I/O past the filter (io_uring)"),
        (("mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "bpf", "perf_event_open", "userfaultfd",
          "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot", "acct",
          "swapon", "swapoff", "keyctl", "add_key", "request_key", "quotactl", "syslog", "settimeofday",
          "clock_settime", "adjtimex", "sethostname", "setdomainname", "iopl", "ioperm", "fsopen", "fsmount",
          "fsconfig", "move_mount", "open_tree", "mount_setattr", "name_to_handle_at"),
         "change the system"),
):
    for _n in _names:
        _WHAT[_n] = _what
_ALWAYS_REFUSED = tuple(n for n in _WHAT if n not in ("open", "openat", "kill", "tkill", "tgkill",
                                                      "rt_sigqueueinfo", "rt_tgsigqueueinfo"))


@dataclass(frozen=True)
class Limits:
    """The sandbox's resource limits (options of EmuBackend; defaults above)."""
    memory_mb: Optional[int] = DEFAULT_MEMORY_MB    # None: no address-space limit (AddressSanitizer builds)
    cpu_s: int = DEFAULT_CPU_S

    def __post_init__(self):
        if self.memory_mb is not None and (not isinstance(self.memory_mb, int) or self.memory_mb < 256):
            raise ValueError(f"memory_limit_mb: expected an integer >= 256 (MiB), got {self.memory_mb!r}")
        if not isinstance(self.cpu_s, int) or self.cpu_s < 1:
            raise ValueError(f"cpu_limit_s: expected a positive integer (seconds), got {self.cpu_s!r}")

    def to_env(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_env(cls, text: str) -> "Limits":
        return cls(**json.loads(text))

    def describe(self) -> str:
        mem = "no address-space limit" if self.memory_mb is None else f"{self.memory_mb} MiB of address space"
        return f"{mem}, {self.cpu_s} CPU seconds per worker"


def disabled_by_user() -> bool:
    return os.environ.get(OFF_ENV, "").strip().lower() == "off"


def unavailable_reason() -> Optional[str]:
    """None when a seccomp filter can be built here, else why not (also shown by `qconform doctor`)."""
    if not sys.platform.startswith("linux"):
        return "seccomp needs Linux"
    try:
        with open("/proc/self/status") as f:
            if not re.search(r"^Seccomp:", f.read(), re.M):
                return "this Linux kernel has no seccomp"
    except OSError:
        return "/proc/self/status is unreadable"
    try:
        import pyseccomp  # noqa: F401  (loads the system's libseccomp.so.2)
    except ImportError:
        return "the Python package pyseccomp is not installed (pip install pyseccomp)"
    except (OSError, RuntimeError) as exc:      # pyseccomp raises RuntimeError when it finds no libseccomp
        return f"the system library libseccomp.so.2 was not found ({exc}); install libseccomp2"
    return None


def syscall_name(number: int) -> str:
    try:
        import pyseccomp
        return pyseccomp.resolve_syscall(pyseccomp.system_arch(), number).decode()
    except (ImportError, OSError, RuntimeError, ValueError):
        return f"system call {number}"


def describe_violation(stderr: str, how: str) -> Optional[str]:
    """The SandboxViolation detail for a worker that ended with the runtime's marker on stderr or with
    SIGSYS (`how`: 'signal SIGSYS' / 'exit status N'), else None."""
    m = MARKER.search(stderr)
    if not m:
        if how != "signal SIGSYS":
            return None
        # The kernel delivers the filter's SIGSYS with the default action (death, no handler) when the thread
        # blocks signals, as system(), popen() and posix_spawn() do around the clone that starts a program.
        return ("the kernel made a system call the sandbox refuses while blocking signals, as system(), popen() "
                "and posix_spawn() do to start a program; refused by the sandbox")
    number, arch = int(m.group(1)), int(m.group(2), 16)
    name = syscall_name(number)
    native = _native_arch()
    if native is not None and arch != native:
        return (f"the kernel made a system call through another architecture's table (number {number}, "
                f"audit arch 0x{arch:x}), refused by the sandbox")
    what = _WHAT.get(name, "make a system call the sandbox refuses")
    return f"the kernel called {name}() (system call {number}) to {what}; refused by the sandbox"


def _native_arch() -> Optional[int]:
    try:
        import pyseccomp
        return int(pyseccomp.system_arch())
    except (ImportError, OSError, RuntimeError):
        return None


# ---- Landlock: a second wall for the file system, where the kernel has it -----------------------------------
# governed: every file-system right but device ioctls. Given back: reading, beneath readable_roots() alone.
# Never given back: exec, write, truncate, create, remove, rename.
_FS_HANDLED = landlock.fs_rights(7) & ~landlock.IOCTL_DEV
_READ = landlock.READ_FILE | landlock.READ_DIR
_DEVICES = ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random", "/proc/self", "/sys/devices/system/cpu")


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 where it has none (or it is disabled)."""
    return landlock.abi()


def readable_roots() -> list[str]:
    """What a sandboxed worker may read: the system's program and library folders (confine.SYSTEM), Python's
    installation and import path (modules are imported lazily, tracebacks read their source), the libraries'
    folders of $LD_LIBRARY_PATH, qconform's cache of built kernels, its own /proc entry and a few devices.
    Never the home folder or `/` as a whole (an import path entry that is the working folder may be either)."""
    entries = [*confine.SYSTEM, sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix,
               *sys.path, *os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep), str(cache_root() / "emu"),
               *_DEVICES]
    out: list[str] = []
    for entry in entries:
        if entry and os.path.exists(entry) and not confine.too_wide(entry) and entry not in out:
            out.append(entry)
    return out


def apply_landlock() -> int:
    """Restrict the calling process with a Landlock ruleset that allows reading beneath readable_roots() alone (of
    Python's folders, not the entries at their top whose names begin with a dot) and refuses every file-system
    change and program execution (and, from ABI 4, TCP; from ABI 6, signals to processes outside). Returns the ABI
    used, 0 where Landlock is absent: seccomp then stands alone."""
    version = landlock.abi()
    if version == 0:
        return 0
    rules = landlock.Ruleset(version, _FS_HANDLED)
    whole = {*confine.SYSTEM, *_DEVICES, str(cache_root() / "emu")}     # the cache gains modules while it runs
    try:
        for root in readable_roots():
            if root in whole or not os.path.isdir(root):
                rules.allow(root, _READ)
            else:       # an import path entry may be a checkout's top: its .git (a CI token) stays unread
                confine.allow_tree(rules, root, _READ)
        rules.restrict_self()
    finally:
        rules.close()
    return version


# ---- the worker's side -----------------------------------------------------------------------------------
def address_space() -> int:
    """Bytes of address space the calling process holds (VmSize), what RLIMIT_AS limits."""
    with open("/proc/self/status") as f:
        m = re.search(r"^VmSize:\s+(\d+) kB", f.read(), re.M)
    return int(m.group(1)) * 1024 if m else 0

def _set_limit(which: int, value: int) -> None:
    resource.setrlimit(which, (value, value))


def apply(limits: Limits) -> None:
    """Sandbox the calling process (the worker) for good. Raises OSError/ImportError when it cannot."""
    import pyseccomp as sc
    mb = 1024 * 1024
    if limits.memory_mb is not None:
        _set_limit(resource.RLIMIT_AS, limits.memory_mb * mb)
    soft = int(resource.getrusage(resource.RUSAGE_SELF).ru_utime + resource.getrusage(resource.RUSAGE_SELF).ru_stime)
    # SIGXCPU at the soft limit, SIGKILL 5 s later: the worker's CPU time is a limit of the tool (unchecked)
    resource.setrlimit(resource.RLIMIT_CPU, (soft + limits.cpu_s, soft + limits.cpu_s + 5))
    _set_limit(resource.RLIMIT_CORE, 0)            # a crashing kernel leaves no core file behind
    _set_limit(resource.RLIMIT_FSIZE, FSIZE_BYTES)
    _set_limit(resource.RLIMIT_NOFILE, NOFILE)
    _set_limit(resource.RLIMIT_NPROC, 0)           # a second wall behind the filter (not for root)

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(38, 1, 0, 0, 0) != 0:            # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")

    apply_landlock()
    f = sc.SyscallFilter(sc.ALLOW)
    f.set_attr(sc.Attr.ACT_BADARCH, sc.TRAP)       # int 0x80 / x32 calls would bypass a native-only table
    arch = sc.system_arch()

    def exists(name: str) -> bool:                 # open, fork... do not exist on every architecture (arm64)
        return sc.resolve_syscall(arch, name) >= 0
    for name in filter(exists, _ALWAYS_REFUSED):
        f.add_rule(sc.TRAP, name)
    for name, flags_arg in filter(lambda c: exists(c[0]), (("open", 1), ("openat", 2))):
        for bit in _O_WRITE_BITS:
            f.add_rule(sc.TRAP, name, sc.Arg(flags_arg, sc.MASKED_EQ, bit, bit))
    pid = os.getpid()
    for name in ("kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo"):
        f.add_rule(sc.TRAP, name, sc.Arg(0, sc.NE, pid))    # abort() and raise() signal the worker itself
    f.load()
