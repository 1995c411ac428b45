"""The system calls a bubblewrap run may not make: a seccomp filter bwrap installs
(``--add-seccomp-fd``) on the command, after its own set-up.

sandlock refuses these by default (its blocklist); bwrap refuses nothing unless given a filter,
and the namespaces alone leave the kernel's rarely needed and often attacked interfaces open to
the command. The list is the kernel's attack surface an agent's command has no use for, not a
second policy: io_uring (the three calls), ``bpf``, ``userfaultfd``, ``perf_event_open``, the key
management calls (``keyctl``, ``add_key``, ``request_key``), modules and ``kexec``, file handles
(``open_by_handle_at``, ``name_to_handle_at``), swap, ``reboot``, ``acct``, ``quotactl``, port
I/O, ``lookup_dcookie``, ``nfsservctl`` and ``personality``. Each fails with EPERM, as under
sandlock. ``link`` and ``linkat`` fail with EXDEV (``LINKS``), on both backends: sandlock's runs
get a filter of those two alone (``links_program``, installed by the launcher, ``install``). Calls of another ABI than the machine's own (32-bit x86 on x86-64, and the x32 ABI)
fail with ENOSYS: the list holds for the native numbers only, so the others are refused whole.
``ptrace`` stays allowed (debuggers, ``strace``): it reaches only the run's own processes, which
are in its pid and user namespace.

The filter is classic BPF (``struct sock_filter``), built here from the syscall numbers of
x86-64 and arm64; on another architecture there is no filter and the backend says so
(``program`` is None).
"""

from __future__ import annotations

import errno
import os
import struct
from functools import cache

# Blocked calls by name: (x86-64, arm64) numbers (asm/unistd_64.h, asm-generic/unistd.h); None
# where the architecture has no such call.
BLOCKED: dict[str, tuple[int | None, int | None]] = {
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "bpf": (321, 280),
    "userfaultfd": (323, 282),
    "perf_event_open": (298, 241),
    "keyctl": (250, 219),
    "add_key": (248, 217),
    "request_key": (249, 218),
    "kexec_load": (246, 104),
    "kexec_file_load": (320, 294),
    "init_module": (175, 105),
    "finit_module": (313, 273),
    "delete_module": (176, 106),
    "open_by_handle_at": (304, 265),
    "name_to_handle_at": (303, 264),
    "swapon": (167, 224),
    "swapoff": (168, 225),
    "reboot": (169, 142),
    "acct": (163, 89),
    "quotactl": (179, 60),
    "iopl": (172, None),
    "ioperm": (173, None),
    "lookup_dcookie": (212, 18),
    "nfsservctl": (180, 42),
    "personality": (135, 92),
}
# AUDIT_ARCH_* of each architecture, and the index of its numbers in BLOCKED.
ARCHES = {"x86_64": (0xC000003E, 0), "aarch64": (0xC00000B7, 1)}
X32_SYSCALL_BIT = 0x40000000

# Classic BPF.
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K
_ALLOW = 0x7FFF0000  # SECCOMP_RET_ALLOW
_ERRNO = 0x00050000  # SECCOMP_RET_ERRNO | errno
_NR, _ARCH = 0, 4  # offsets in struct seccomp_data


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


# Calls that fail with EXDEV ("Invalid cross-device link", as a link between two mounts does), on
# both backends (sandlock's runs get a filter of these alone: ``links_program``). A hard link is a
# second name for a file: a write through it is a write that no watch of the file's own
# directory sees (undo's watches of an ignored tree it keeps nothing of, ``changes/watch.py``), so
# a run could change a file where nothing names the change. Tools that make hard links fall back
# to copying on EXDEV (git's objects, cargo, pnpm, uv, conda); ``ln`` and ``cp -l`` fail.
LINKS: dict[str, tuple[int | None, int | None]] = {
    "link": (86, None),
    "linkat": (265, 37),
}


def build(machine: str, links_only: bool = False) -> bytes | None:
    """The filter for ``machine`` (``os.uname().machine``), or None when it has none.
    ``links_only``: only the ``LINKS`` calls (and other ABIs) refused, not ``BLOCKED``."""
    if machine not in ARCHES:
        return None
    arch, column = ARCHES[machine]
    links = sorted({n for n in (nrs[column] for nrs in LINKS.values()) if n is not None})
    blocked = [] if links_only else BLOCKED.values()
    numbers = sorted({n for n in (nrs[column] for nrs in blocked) if n is not None})
    # Layout: arch check, load nr, [x32 check], one compare per number (EPERM's, then EXDEV's),
    # ALLOW, EPERM, EXDEV, ENOSYS.
    checks = len(numbers) + len(links) + (1 if machine == "x86_64" else 0)
    prog = [_insn(_LD_W_ABS, 0, 0, _ARCH)]
    # Not our arch: jump over the load, the checks, ALLOW, EPERM and EXDEV, to ENOSYS.
    prog.append(_insn(_JEQ_K, 0, 1 + checks + 3, arch))
    prog.append(_insn(_LD_W_ABS, 0, 0, _NR))
    left = checks  # compares from here to ALLOW
    if machine == "x86_64":
        # The x32 ABI's numbers have this bit: refused whole (to ENOSYS, past ALLOW, EPERM, EXDEV).
        prog.append(_insn(_JGE_K, left + 2, 0, X32_SYSCALL_BIT))
        left -= 1
    for nr in numbers:
        prog.append(_insn(_JEQ_K, left, 0, nr))  # to EPERM: past the rest and ALLOW
        left -= 1
    for nr in links:
        prog.append(_insn(_JEQ_K, left + 1, 0, nr))  # to EXDEV: past the rest, ALLOW, EPERM
        left -= 1
    prog.append(_insn(_RET_K, 0, 0, _ALLOW))
    prog.append(_insn(_RET_K, 0, 0, _ERRNO | errno.EPERM))
    prog.append(_insn(_RET_K, 0, 0, _ERRNO | errno.EXDEV))
    prog.append(_insn(_RET_K, 0, 0, _ERRNO | errno.ENOSYS))
    return b"".join(prog)


@cache
def program() -> bytes | None:
    """This machine's filter (None where there is none)."""
    return build(os.uname().machine)


@cache
def links_program() -> bytes | None:
    """This machine's filter of ``LINKS`` alone (None where there is none): sandlock refuses the
    rest itself."""
    return build(os.uname().machine, links_only=True)


def install(prog: bytes) -> None:
    """Install ``prog`` on this thread (and what it starts from now on), with no_new_privs set
    as the kernel requires. Raises OSError."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]

    fprog = SockFprog(len(prog) // 8, prog)
    # seccomp(SECCOMP_SET_MODE_FILTER, 0, &fprog); prctl(PR_SET_SECCOMP) is the same call.
    if libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) != 0:  # PR_SET_SECCOMP, MODE_FILTER
        raise OSError(ctypes.get_errno(), "installing the seccomp filter failed")


def program_fd() -> int:
    """A new descriptor holding the filter from its start, inheritable (bwrap reads it once and
    closes it); -1 where there is no filter. The caller closes its copy once bwrap started."""
    prog = program()
    if prog is None:
        return -1
    fd = os.memfd_create("run_bash-seccomp", 0)
    try:
        os.write(fd, prog)
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError:
        os.close(fd)
        raise
    return fd
