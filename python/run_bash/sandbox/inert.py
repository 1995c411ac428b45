"""Whether a repository a run created, or a new work tree of a kept one, is inert: nothing git
on the host would run or write out through it (the guard's post-run check, ``guard.py``). What git
reads of it is asked of git (``gitask``)."""

from __future__ import annotations

import contextlib
import os

from run_bash.paths import is_under
from run_bash.sandbox import gitask, gitindex
from run_bash.sandbox.hostread import HostRead, HostReadError, active_hooks, read_nonblocking


class Kept:
    """Whether a path is a member of the host-read set (kept at its trusted state), by name or by
    where it leads."""

    def __init__(self, members: tuple[str, ...]) -> None:
        self._members = members
        self._names = frozenset(members)
        self._real: frozenset[str] | None = None

    def __contains__(self, path: str) -> bool:
        if path in self._names:
            return True
        if self._real is None:
            self._real = frozenset(os.path.realpath(m) for m in self._members)
        return os.path.realpath(path) in self._real


def hooks_not_inert(hr: HostRead, path: str, kind: str, target: str, kept: Kept) -> str | None:
    """Why a new work tree (or new git dir) would run hooks a run could have written; None when it
    would not. The hooks directory is the one the user's git names there (their own global and
    system config included: a relative ``core.hooksPath`` is taken in the work tree), asked only
    once the repository's own config passed (or is trusted). A hooks directory the host-read set
    keeps was compared already; one no run can write is the user's own; any other one must hold no
    hooks. Whatever git cannot answer counts as not inert."""
    try:
        if kind == "bare":
            git_dir, hooks = gitask.hooks_dir(target, hr.env, git_dir=target)
        else:
            git_dir, hooks = gitask.hooks_dir(os.path.dirname(path), hr.env)
    except HostReadError as e:
        return str(e)
    if os.path.realpath(git_dir) != os.path.realpath(target):
        return f"git does not take it for a repository there (it finds {git_dir})"
    if hooks in kept or not hr.is_writable(hooks):
        return None
    found = active_hooks(hooks)
    if found:
        base = os.path.dirname(path) if kind != "bare" else target
        shown = os.path.relpath(hooks, base) if is_under(hooks, base) else hooks
        return f"git would run hooks from {shown}: {', '.join(found[:5])}"
    return None


def not_inert(git_dir: str, trusted: set[tuple[int, int]], depth: int = 0) -> str | None:
    """Why a repository the run created is not inert; None when it is. What git reads of it is
    asked of git (``gitask``): the keys of its config files, where its commondir leads."""
    for name in ("config", "config.worktree"):
        why = gitask.judge_config(os.path.join(git_dir, name))
        if why:
            return f"its {name} {why}"
    for name in ("HEAD", "commondir", "gitdir"):
        p = os.path.join(git_dir, name)
        if os.path.lexists(p) and not (os.path.islink(p) or os.path.isfile(p)):
            return f"its {name} is not a regular file"
        if os.path.lexists(p) and read_nonblocking(os.path.realpath(p), 1 << 20) is None:
            return f"its {name} cannot be read without blocking"
    if os.path.lexists(os.path.join(git_dir, "info/attributes")):
        return "it has info/attributes"
    hooks_home = git_dir
    if os.path.lexists(os.path.join(git_dir, "commondir")):
        common = gitask.common_dir(git_dir)
        if common is None:
            return "git cannot tell where its commondir leads"
        common = os.path.realpath(common)
        is_trusted = False
        with contextlib.suppress(OSError):
            st = os.stat(common)
            is_trusted = (st.st_dev, st.st_ino) in trusted
        if not is_trusted and common != os.path.realpath(git_dir):
            if depth > 2:
                return "its commondir chain is too long"
            why = not_inert(common, trusted, depth + 1)
            if why:
                return f"its commondir points to a repository that is not inert: {why}"
            hooks_home = common
    hooks = active_hooks(os.path.join(hooks_home, "hooks"))
    if hooks:
        return f"it has hooks: {', '.join(hooks[:5])}"
    # Last: git reads the repository's config (and its commondir's) to list the index.
    return gitindex.judge(git_dir)
