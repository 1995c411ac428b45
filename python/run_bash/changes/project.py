"""Which directory a run's changes are recorded for, and what part of it is walked.

The *project* of a run started in ``cwd`` is the git top level of ``cwd`` (the nearest ancestor
holding ``.git``), else the nearest ancestor (``cwd`` included) that holds one of ``MARKERS`` and
that the user can write. Never ``/``, ``$HOME`` or a directory that contains ``$HOME`` (a
repository at ``$HOME``, a dotfiles one, makes the search for markers start again below it).
Anywhere else nothing is recorded, and the run says why: a run in ``/usr/share`` or ``/tmp`` has
nothing undo could be for.

The *scope* is the part of the project the run can write: the project itself when the sandbox
may write all of it (or the run has no sandbox), else each writable grant of the sandbox that
lies inside the project (the default grant is the run's working directory). What the sandbox
cannot write is never walked.

``trusted_fs`` says whether inotify sees every change to a file system: on network and FUSE file
systems changes can come from elsewhere, so the store walks such projects whole at every start
and end instead of trusting its watches.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Sequence

# Files and directories that make a directory a project (besides a git repository). A list of
# names, not patterns: checked with one lstat each, from the run's directory up.
MARKERS = (
    ".hg",
    ".jj",
    ".svn",
    "package.json",
    "deno.json",
    "pyproject.toml",
    "setup.py",
    "setup.cfg",
    "requirements.txt",
    "Pipfile",
    "Cargo.toml",
    "go.mod",
    "Makefile",
    "makefile",
    "GNUmakefile",
    "CMakeLists.txt",
    "meson.build",
    "build.gradle",
    "build.gradle.kts",
    "pom.xml",
    "build.sbt",
    "Gemfile",
    "composer.json",
    "mix.exs",
    "pubspec.yaml",
    "Package.swift",
    "build.zig",
    "dune-project",
    "stack.yaml",
    "flake.nix",
    "WORKSPACE",
    "MODULE.bazel",
)

# statfs f_type of file systems where every change is made by this kernel (inotify sees it).
LOCAL_FS = frozenset(
    {
        0xEF53,  # ext2/3/4
        0x58465342,  # xfs
        0x9123683E,  # btrfs
        0x01021994,  # tmpfs
        0x794C7630,  # overlayfs
        0xF2F52010,  # f2fs
        0x2FC12FC1,  # zfs
        0x4D44,  # vfat
        0x5346544E,  # ntfs (ntfs3)
        0x2011BAB0,  # exfat
        0x3153464A,  # jfs
        0x52654973,  # reiserfs
        0xCA451A4E,  # bcachefs
        0x858458F6,  # ramfs
    }
)


class _Statfs(ctypes.Structure):
    _fields_ = [("f_type", ctypes.c_long), ("_rest", ctypes.c_long * 31)]  # 120 bytes, and room


_fstatfs = None


def fs_type(fd: int) -> int | None:
    """The ``statfs`` type of the file system of ``fd``, or None when it cannot be told."""
    global _fstatfs
    if _fstatfs is None:
        try:
            fn = ctypes.CDLL(None, use_errno=True).fstatfs
            fn.argtypes = [ctypes.c_int, ctypes.POINTER(_Statfs)]
            _fstatfs = fn
        except (OSError, AttributeError):
            return None
    buf = _Statfs()
    if _fstatfs(fd, ctypes.byref(buf)):
        return None
    return int(buf.f_type) & 0xFFFFFFFF


def trusted_fs(fd: int) -> bool:
    """Whether inotify sees every change made on the file system of ``fd``."""
    return fs_type(fd) in LOCAL_FS


def too_wide(path: str, home: str) -> bool:
    """``/``, ``$HOME`` or a directory that contains ``$HOME``: never a project."""
    return path == "/" or path == home or home.startswith(path.rstrip("/") + "/")


def _has_marker(d: str) -> bool:
    return any(os.path.lexists(os.path.join(d, m)) for m in MARKERS)


def home_of(home: str | None) -> str:
    """The home directory that is never a project: ``home``, else ``$HOME``; resolved."""
    return os.path.realpath(home or os.path.expanduser("~"))


def find_project(cwd: str, home: str) -> tuple[str | None, str | None]:
    """(project, None), or (None, why nothing is recorded)."""
    try:
        cwd = os.path.realpath(cwd)
        if not os.path.isdir(cwd):
            return None, f"{cwd} is not a directory"
    except OSError as err:
        return None, f"cannot resolve {cwd}: {err.strerror}"
    top = None
    d = cwd
    while True:
        if os.path.lexists(os.path.join(d, ".git")):
            top = d
            break
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent
    if top is not None and not too_wide(top, home):
        return top, None
    if too_wide(cwd, home):
        where = "/" if cwd == "/" else "your home directory"
        return None, f"the project would be {where} (run in a project directory)"
    d = cwd
    while not too_wide(d, home) and d != top:
        if _has_marker(d):
            if not os.access(d, os.W_OK):
                return None, f"you cannot write the project {d}"
            return d, None
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent
    return None, (
        f"{cwd} is in no project (no git repository, and no project file such as package.json, "
        "pyproject.toml or Makefile in it or above it)"
    )


def is_under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def scope_of(
    project: str, writable: Sequence[str] | None
) -> tuple[tuple[str, ...] | None, str | None]:
    """The project-relative directories a run may write, as scope roots ("" is the whole
    project), or (None, why) when the sandbox can write nothing of the project. ``writable``
    None: the run has no sandbox (it can write whatever the user can)."""
    if writable is None or any(is_under(project, w) for w in writable):
        return ("",), None
    roots = []
    for w in writable:
        if is_under(w, project) and os.path.isdir(w) and not os.path.islink(w):
            rel = os.path.relpath(w, project)
            if ".git" not in rel.split("/"):
                roots.append(rel)
    roots = sorted(r for r in set(roots) if not any(r != o and is_under(r, o) for o in roots))
    if not roots:
        return None, f"the sandbox cannot write the project {project}"
    return tuple(roots), None
