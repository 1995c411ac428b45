"""The runs' seccomp filters (``seccomp.py``): hard links fail with EXDEV in both, the rest of
bubblewrap's list with EPERM in its own, and everything else goes through (the controls)."""

from __future__ import annotations

import ctypes
import errno
import os
import platform
from pathlib import Path

import pytest

from run_bash.sandbox import seccomp

pytestmark = pytest.mark.skipif(
    platform.machine() not in seccomp.ARCHES, reason="no syscall numbers for this architecture"
)


def _in_child(prog: bytes, tmp: Path) -> dict[str, int]:
    """Install ``prog`` in a forked child and try a few calls there: each one's errno (0: ok)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            seccomp.install(prog)
            out: dict[str, int] = {}
            for name, call in (
                ("link", lambda: os.link(tmp / "a", tmp / "b")),
                ("rename", lambda: os.rename(tmp / "a", tmp / "c")),
                ("symlink", lambda: os.symlink("c", tmp / "s")),
            ):
                try:
                    call()
                    out[name] = 0
                except OSError as e:
                    out[name] = e.errno or -1
            libc = ctypes.CDLL(None, use_errno=True)
            nr = {"x86_64": 135, "aarch64": 92}[platform.machine()]  # personality(query)
            out["personality"] = 0 if libc.syscall(nr, 0xFFFFFFFF) != -1 else ctypes.get_errno()
            os.write(w, repr(out).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        text = f.read()
    os.waitpid(pid, 0)
    return eval(text)


def test_links_program_refuses_hard_links_only(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("a")
    prog = seccomp.links_program()
    assert prog is not None
    got = _in_child(prog, tmp_path)
    assert got == {"link": errno.EXDEV, "rename": 0, "symlink": 0, "personality": 0}


def test_bubblewraps_program_refuses_links_and_its_list(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("a")
    prog = seccomp.program()
    assert prog is not None
    got = _in_child(prog, tmp_path)
    assert got == {"link": errno.EXDEV, "rename": 0, "symlink": 0, "personality": errno.EPERM}


def test_both_architectures_build() -> None:
    for machine in seccomp.ARCHES:
        for links_only in (False, True):
            prog = seccomp.build(machine, links_only)
            assert prog is not None and len(prog) % 8 == 0
    assert seccomp.build("riscv64") is None
