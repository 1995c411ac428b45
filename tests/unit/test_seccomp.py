"""The runs' seccomp filters (``sandbox/seccomp.py``: bubblewrap's, and sandlock's of hard links
alone) as the kernel would run them: a small classic-BPF interpreter of the four instructions the
filters use, for both architectures (the security suite runs the native one for real)."""

from __future__ import annotations

import errno
import struct

import pytest

from run_bash.sandbox.seccomp import ARCHES, BLOCKED, LINKS, X32_SYSCALL_BIT, build

ALLOW, EPERM, ENOSYS = 0x7FFF0000, 0x00050000 | errno.EPERM, 0x00050000 | errno.ENOSYS
EXDEV = 0x00050000 | errno.EXDEV


def verdict(prog: bytes, arch: int, nr: int) -> int:
    insns = [struct.unpack("=HBBI", prog[i : i + 8]) for i in range(0, len(prog), 8)]
    data = {0: nr, 4: arch}
    acc, pc = 0, 0
    while True:
        code, jt, jf, k = insns[pc]  # an IndexError is a jump out of the program
        if code == 0x20:
            acc = data[k]
        elif code == 0x15:
            pc += jt if acc == k else jf
        elif code == 0x35:
            pc += jt if acc >= k else jf
        elif code == 0x06:
            return k
        else:
            raise AssertionError(f"unexpected instruction {code:#x}")
        pc += 1


@pytest.mark.parametrize("links_only", [False, True])
@pytest.mark.parametrize("machine", sorted(ARCHES))
def test_the_filter_refuses_the_listed_calls_and_allows_the_rest(machine, links_only):
    prog = build(machine, links_only)
    assert prog is not None and len(prog) % 8 == 0
    arch, column = ARCHES[machine]
    blocked = (
        set() if links_only else {n[column] for n in BLOCKED.values() if n[column] is not None}
    )
    links = {nrs[column] for nrs in LINKS.values() if nrs[column] is not None}
    assert links and not links & blocked
    for nr in blocked:
        assert verdict(prog, arch, nr) == EPERM, nr
    for nr in links:  # hard links: as between two mounts
        assert verdict(prog, arch, nr) == EXDEV, nr
    # The control: every other native number passes (read, write, openat, clone, execve …).
    for nr in set(range(500)) - blocked - links:
        assert verdict(prog, arch, nr) == ALLOW, nr
    # Another ABI's calls are refused whole.
    assert verdict(prog, 0x40000003, 0) == ENOSYS  # AUDIT_ARCH_I386: its read
    if machine == "x86_64":
        assert verdict(prog, arch, X32_SYSCALL_BIT | 0) == ENOSYS  # x32's read


def test_no_filter_where_the_numbers_are_not_known():
    assert build("riscv64") is None
