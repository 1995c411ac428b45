"""What a line's git would replace or delete, asked of git before the line runs: the gate's
answer for reasons the pause list cannot decide from the text. ``git branch -M main`` loses a
branch only when one named ``main`` exists, and right after ``git init`` none does; ``git fetch``
deletes local tags only when the repository's configuration turns tag pruning on."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from run_bash.checker.checks import HARMLESS_GLOBAL
from run_bash.gate import IRREVERSIBLE, NO_MATCH, REVERSIBLE
from run_bash.run_changes import INERT, _program_known, as_asked

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


# The environment besides ``gitask.git_env``'s that chooses the configuration git reads: the
# gate asks git with the host's values, which the line's git gets too.
_CONFIG_VARS = ("GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT")
_CONFIG_PAIRS = ("GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_")
# The keys that turn pruning, and tag pruning with it, on: git lists them as booleans.
_PRUNE_KEYS = r"^(fetch|remote\..*)\.(prune|prunetags)$"


# Git's subcommands that write no configuration and leave the current branch (which an
# ``includeIf "onbranch:…"`` reads) as it is: a fetch beside them reads the configuration asked
# before the line (``git stash && git pull --rebase && git stash pop``).
_KEEPS_CONFIG = frozenset(
    {
        "fetch",
        "pull",
        "stash",
        "status",
        "log",
        "diff",
        "show",
        "add",
        "commit",
        "rev-parse",
        "describe",
        "ls-files",
        "shortlog",
        "grep",
    }
)
# Other programs that write nothing but what a redirection names (``writes``): ``git pull 2>&1 |
# tail -5``.
_READERS = (INERT - {"env"}) | frozenset({"ls", "cat", "head", "tail", "wc", "grep"})
# Programs that only run the command after them, which the pause list lists as a command of its
# own and judges as any (``timeout 60 git fetch``, ``nice git pull``): they change no file and no
# configuration git reads.
_PLAIN_WRAPPERS = frozenset({"timeout", "nice", "ionice", "nohup", "time", "stdbuf"})


def _reads_config_as_asked(
    commands: Sequence[Sequence[str]],
    programs: object,
    path_changed: bool,
    writes: Sequence[object],
    env_changed: bool,
) -> bool:
    """Whether the line's git reads the configuration the gate asked git about: no variable
    set (``HOME``, ``GIT_CONFIG_*``), no file written by a redirection, every program the one
    the table judges by its name (``programs``), each a reader, and each git command given no
    option before its subcommand but ``-C DIR`` and ``HARMLESS_GLOBAL`` (``--no-pager``), and
    wrappers only ``_PLAIN_WRAPPERS`` (``timeout``); beside another git command, each one's
    subcommand is one that leaves the configuration as it is (``_KEEPS_CONFIG``: ``git config
    fetch.pruneTags true && git fetch -p``, ``git checkout x && git pull`` are not)."""
    if writes or env_changed or not isinstance(programs, list):
        return False
    if len(programs) != len(commands):
        return False
    subs: list[str] = []
    for argv, word in zip(commands, programs, strict=True):
        if not argv:
            continue
        if not (isinstance(word, str) and _program_known(word, path_changed)):
            return False
        if argv[0] != "git":
            if argv[0] not in _READERS and argv[0] not in _PLAIN_WRAPPERS:
                return False
            continue
        words = list(argv[1:])
        while words:
            if words[0] == "-C" and len(words) >= 2:
                words = words[2:]
            elif words[0].lstrip("-") in HARMLESS_GLOBAL and words[0].startswith("-"):
                words = words[1:]
            else:
                break
        if not words or words[0].startswith("-"):
            return False
        subs.append(words[0])
    return len(subs) == 1 or all(sub in _KEEPS_CONFIG for sub in subs)


def _same_git(environ: Mapping[str, str]) -> bool:
    """Whether the git the line finds on the host's ``PATH`` is the one the gate asks (on its
    own fixed ``PATH``): another build reads another system configuration file."""
    from run_bash.sandbox import gitask

    ours = shutil.which("git", path=gitask.git_env({})["PATH"])
    theirs = shutil.which("git", path=environ.get("PATH") or os.defpath)
    return bool(ours and theirs) and os.path.realpath(ours or "") == os.path.realpath(theirs or "")


def _bools(out: str) -> list[tuple[str, str, bool]] | None:
    """(section and subsection, name, value) of each ``key\\nvalue`` record git listed with
    ``--null --type=bool``; None when a record is not one."""
    found: list[tuple[str, str, bool]] = []
    for record in out.split("\0")[:-1]:
        key, nl, value = record.partition("\n")
        head, dot, name = key.rpartition(".")
        if not (nl and dot) or value not in ("true", "false"):
            return None
        found.append((head, name, value == "true"))
    return found


def prunes_no_tags(
    prunes: object,
    cwd: str,
    verdict: Mapping[str, Any],
    environ: Mapping[str, str],
    busy: Callable[[str], bool],
) -> bool:
    """Whether a fetch that prunes tags only if the configuration says so (a hit's
    ``prunes``: the repository's directory from ``cwd``, the remote or ``*`` for any, and
    ``prune`` when the line prunes itself) prunes none, as git itself says before the line runs
    (``git config --type=bool --get-regexp`` in the repository, with the host's configuration
    files and variables, and a timeout): no ``fetch.pruneTags`` and no ``pruneTags`` of the
    remote (of any remote, for ``*``) is true, or pruning is off (neither the line nor a
    ``prune`` key of them turns it on). A group of that name (``remotes.NAME``) counts as any
    remote. Only for a line whose git reads what was asked (``_reads_config_as_asked``, of the
    line's ``verdict``), in an environment that names no other repository and finds the same
    git, while no other run works in the repository (``busy``, asked with the directory that
    holds its ``.git``). Any doubt is False."""
    from run_bash.sandbox import gitask

    if not (isinstance(prunes, (list, tuple)) and len(prunes) == 3):
        return False
    where, remote, pruned = prunes
    if not (isinstance(where, str) and isinstance(remote, str) and isinstance(pruned, str)):
        return False
    commands = [a for a in verdict.get("commands") or [] if isinstance(a, (list, tuple))]
    writes = verdict.get("writes")
    if not remote or not _reads_config_as_asked(
        commands,
        verdict.get("programs"),
        verdict.get("path_changed") is not False,
        writes if isinstance(writes, list) else ["?"],
        verdict.get("env_changed") is not False,
    ):
        return False
    if any(environ.get(name) for name in _GIT_ELSEWHERE) or not _same_git(environ):
        return False
    extra = {k: v for k, v in environ.items() if k in _CONFIG_VARS or k.startswith(_CONFIG_PAIRS)}
    top = os.path.join(cwd, where)
    ask = ["-C", top, "config", "--null", "--type=bool"]
    try:
        # A repository (git config answers outside one too), and no other run in it.
        rc, out, _err = gitask.run_git(
            ["-C", top, "rev-parse", "--path-format=absolute", "--git-common-dir"],
            top,
            environ,
            extra_env=extra,
            limit=4096,
        )
        common = os.path.realpath(out.strip()) if rc == 0 and out.strip() else ""
        if not common:
            return False
        if busy(os.path.dirname(common) if os.path.basename(common) == ".git" else common):
            return False
        rc, out, _err = gitask.run_git(
            [*ask, "--get-regexp", _PRUNE_KEYS], top, environ, extra_env=extra, limit=65536
        )
        if rc == 1 and not out:
            return True  # git says none of the keys is set (not a repository is 128)
        keys = _bools(out) if rc == 0 else None
        if keys is None:
            return False
        mine = {"fetch", f"remote.{remote}"}
        on = {name for head, name, value in keys if value and (head in mine or remote == "*")}
        if "prunetags" not in on or not (pruned or "prune" in on):
            others = any(
                name == "prunetags" and value and head not in mine for head, name, value in keys
            )
            if not others or remote == "*":
                return True
            # Another remote prunes tags: a group of this name would fetch it too.
            rc, out, _err = gitask.run_git(
                ["-C", top, "config", "--null", "--name-only", "--get-regexp", r"^remotes\."],
                top,
                environ,
                extra_env=extra,
                limit=65536,
            )
            group = f"remotes.{remote}".lower()
            return (rc == 1 and not out) or (rc == 0 and group not in out.lower().split("\0"))
    except Exception:
        return False
    return False


def without_new_branches(
    verdict: Mapping[str, Any],
    cwd: str,
    environ: Mapping[str, str],
    busy: Callable[[str], bool],
) -> dict[str, Any]:
    """``verdict`` (``Verdict.to_dict()``) without the reasons of a forced rename or copy of a
    branch that replaces nothing (``replaces_no_branch``) and of a fetch that prunes no tags
    (``prunes_no_tags``); the reason shown, its class and whether it pauses follow from the
    reasons left."""
    hits = [h for h in verdict.get("hits") or [] if isinstance(h, Mapping)]
    if not any(h.get("overwrites") or h.get("prunes") for h in hits):
        return dict(verdict)
    commands = [a for a in verdict.get("commands") or [] if isinstance(a, (list, tuple))]
    writes = verdict.get("writes")
    line = (
        commands,
        writes if isinstance(writes, list) else ["?"],
        verdict.get("env_changed") is not False,
        environ,
    )

    def harmless(h: Mapping[str, Any]) -> bool:
        if h.get("overwrites"):
            return replaces_no_branch(h.get("overwrites"), cwd, *line, busy)
        if h.get("prunes"):
            return prunes_no_tags(h.get("prunes"), cwd, verdict, environ, busy)
        return False

    kept = [h for h in hits if not harmless(h)]
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
