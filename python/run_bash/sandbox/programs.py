"""What a program file is, as the kernel and the dynamic loader take it: the interpreter its `#!`
line names (``interpreter``, ``interpreter_path``), whether it is compiled (``ELF``), and where the
loader looks for its libraries (``library_dirs``, asked of the loader itself). Used by
``pathguard.code_unit``.
"""

from __future__ import annotations

import os
import stat

from run_bash.paths import Tops
from run_bash.sandbox.gitask import HostReadError

# Bytes of a program read for its `#!` line.
SHEBANG_BYTES = 256

# What ``interpreter`` says of a compiled program (an ELF file): it loads no source, only the
# libraries the loader finds (``library_dirs``).
ELF = "\x7fELF"
# Loaders' answers kept, by program and state.
MAX_KEPT = 512

# The system's dynamic loaders: asked where a program's libraries are looked for.
RTLDS = ("/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1", "/lib/ld-linux-x86-64.so.2")
_LIB_DIRS: dict[tuple[str, tuple[int, ...]], tuple[str, ...]] = {}


def library_dirs(program: str, grants: Tops) -> list[str]:
    """The directories inside a writable grant that the dynamic loader looks in for the
    libraries of the compiled ``program`` (its ``RUNPATH``/``RPATH``, ``$ORIGIN`` expanded, with
    the subdirectories it tries), each as the nearest directory of it that exists (a missing one
    could be made): asked of the loader itself (``ld.so --list`` with ``LD_DEBUG=libs``), which
    runs none of the program's code; remembered per state of the file. Raises HostReadError when
    the loader does not answer."""
    try:
        st = os.stat(program)
    except OSError:
        return []
    key = (program, (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
    looked = _LIB_DIRS.get(key)
    if looked is None:
        looked = _ask_loader(program)
        if len(_LIB_DIRS) >= MAX_KEPT:
            _LIB_DIRS.clear()
        _LIB_DIRS[key] = looked
    out: list[str] = []
    for d in looked:
        if d not in grants:
            continue
        while not os.path.isdir(d) and os.path.dirname(d) in grants:
            d = os.path.dirname(d)
        out.append(d)
    return list(dict.fromkeys(out))


def _ask_loader(program: str) -> tuple[str, ...]:
    import subprocess

    rtld = next((r for r in RTLDS if os.path.exists(r)), None)
    if rtld is None:
        return ()
    try:
        done = subprocess.run(
            [rtld, "--list", program],
            env={"LD_DEBUG": "libs", "PATH": "/usr/bin:/bin", "LC_ALL": "C"},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise HostReadError(
            f"the dynamic loader does not say where {program} (on your PATH) loads its "
            f"libraries from ({e}); nothing was started"
        ) from None
    dirs: list[str] = []
    for line in done.stderr.splitlines():
        _, sep, rest = line.partition("search path=")
        if sep:
            dirs += rest.split("\t", 1)[0].split("(", 1)[0].strip().split(":")
        _, sep, rest = line.partition("trying file=")
        if sep:
            dirs.append(os.path.dirname(rest.strip()))
    for line in done.stdout.splitlines():
        _, sep, rest = line.partition("=> ")
        if sep and rest.startswith("/"):
            dirs.append(os.path.dirname(rest.split(" (", 1)[0]))
    return tuple(dict.fromkeys(os.path.normpath(d) for d in dirs if d.startswith("/")))


def _head(path: str) -> bytes | None:
    """The first ``SHEBANG_BYTES`` of a regular file, read without following a link or ever
    blocking (a FIFO opens at once); None when it is not one or cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, SHEBANG_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)


def interpreter_path(path: str) -> str | None:
    """The program the kernel runs ``path`` with, when its `#!` line names one by an absolute
    path (``#!/home/me/proj/.venv/bin/python``); None otherwise (no `#!` line, or ``env``, which
    finds it on ``PATH``, whose entries are kept by their own rules). Never blocks."""
    head = _head(path)
    if head is None:
        return None
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
    if not words or not words[0].startswith("/") or os.path.basename(words[0]) == "env":
        return None
    return words[0]


def interpreter(path: str) -> str | None:
    """The name (basename) of the program the `#!` line of ``path`` runs it with, after ``env``
    and its options and assignments (``#!/usr/bin/env -S python3 -u`` is ``python3``); None
    without one. Reads at most ``SHEBANG_BYTES``, never blocking."""
    head = _head(path)
    if head is None:
        return None
    if head.startswith(b"\x7fELF"):
        return ELF
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
    if not words:
        return None
    if os.path.basename(words[0]) != "env":
        return os.path.basename(words[0])
    args = iter(words[1:])
    for w in args:
        if w in ("-u", "--unset", "-C", "--chdir"):
            next(args, None)  # the option's value
        elif w.startswith(("-S", "--split-string=")) and w not in ("-S", "--split-string="):
            value = w[2:] if w.startswith("-S") else w.split("=", 1)[1]
            return os.path.basename(value.split()[0]) if value.split() else None
        elif w.startswith("-") or "=" in w:
            continue  # an option, or a variable set for the program
        else:
            return os.path.basename(w)
    return None
