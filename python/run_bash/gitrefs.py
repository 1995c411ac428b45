"""What a line's git would replace, asked of git before the line runs: the gate's answer for
reasons the pause list cannot decide from the text. ``git branch -M main`` loses a branch only
when one named ``main`` exists, and right after ``git init`` none does."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from run_bash.gate import IRREVERSIBLE, NO_MATCH, REVERSIBLE
from run_bash.run_changes import as_asked

# The environment that makes git read another repository, or other refs of it, than ``-C DIR``
# finds: the gate asks git without it.
_GIT_ELSEWHERE = ("GIT_DIR", "GIT_COMMON_DIR", "GIT_NAMESPACE")


def replaces_no_branch(
    overwrites: object,
    cwd: str,
    commands: Sequence[Sequence[str]],
    writes: Sequence[object],
    env_changed: bool,
    environ: Mapping[str, str],
    busy: Callable[[str], bool],
) -> bool:
    """Whether a forced rename or copy of a branch (a hit's ``overwrites``: the repository's
    directory from ``cwd``, the branch it replaces, the branch renamed or ``""`` for the
    current one) replaces nothing, as git itself says before the line runs (a clean
    environment and a timeout): no branch of that name exists, or it is the one renamed. Only
    for a line whose git reads what was asked (``as_asked``: no other git command may make
    the branch first) in an environment that names no other repository (``environ``), while
    no other run works in the repository (``busy``, asked with the directory that holds its
    ``.git``): it could make the branch meanwhile. Any doubt is False."""
    from run_bash.sandbox import gitask

    if not (isinstance(overwrites, (list, tuple)) and len(overwrites) == 3):
        return False
    where, branch, renamed = overwrites
    if not (isinstance(where, str) and isinstance(branch, str) and isinstance(renamed, str)):
        return False
    if not branch.startswith("refs/heads/") or not as_asked(commands, writes, env_changed):
        return False
    if any(environ.get(name) for name in _GIT_ELSEWHERE):
        return False
    top = ["-C", os.path.join(cwd, where)]
    try:
        rc, out, _err = gitask.run_git(
            [*top, "rev-parse", "--git-common-dir"], "", {}, clean=True, limit=4096
        )
        if rc != 0 or not out.strip():
            return False
        common = os.path.realpath(os.path.join(cwd, where, out.strip()))
        if busy(os.path.dirname(common) if os.path.basename(common) == ".git" else common):
            return False
        rc, out, _err = gitask.run_git(
            [*top, "rev-parse", "--verify", "-q", branch], "", {}, clean=True, limit=4096
        )
        if rc == 1 and not out:
            return True  # git says there is no such branch (not a repository is 128)
        if rc != 0 or renamed:
            return False
        rc, out, _err = gitask.run_git(
            [*top, "symbolic-ref", "-q", "HEAD"], "", {}, clean=True, limit=4096
        )
    except Exception:
        return False
    return rc == 0 and out.strip() == branch  # the current branch, renamed onto itself


def without_new_branches(
    verdict: Mapping[str, Any],
    cwd: str,
    environ: Mapping[str, str],
    busy: Callable[[str], bool],
) -> dict[str, Any]:
    """``verdict`` (``Verdict.to_dict()``) without the reasons of a forced rename or copy of a
    branch that replaces nothing (``replaces_no_branch``); the reason shown, its class and
    whether it pauses follow from the reasons left."""
    hits = [h for h in verdict.get("hits") or [] if isinstance(h, Mapping)]
    if not any(h.get("overwrites") for h in hits):
        return dict(verdict)
    commands = [a for a in verdict.get("commands") or [] if isinstance(a, (list, tuple))]
    writes = verdict.get("writes")
    kept = [
        h
        for h in hits
        if not (
            h.get("overwrites")
            and replaces_no_branch(
                h.get("overwrites"),
                cwd,
                commands,
                writes if isinstance(writes, list) else ["?"],
                verdict.get("env_changed") is not False,
                environ,
                busy,
            )
        )
    ]
    if len(kept) == len(hits):
        return dict(verdict)
    if not kept:
        out = {**verdict, "hits": [], "pause": False, "effect": None}
        return {**out, "reason": NO_MATCH, "rule": None, "command": None}
    first = next(
        (h for h in kept if h.get("reason") == verdict.get("reason")),
        next((h for h in kept if h.get("effect") != REVERSIBLE), kept[0]),
    )
    effect = REVERSIBLE if all(h.get("effect") == REVERSIBLE for h in kept) else IRREVERSIBLE
    out = {**verdict, "hits": kept, "effect": effect}
    return {**out, "reason": first["reason"], "rule": first["rule"], "command": first["command"]}
