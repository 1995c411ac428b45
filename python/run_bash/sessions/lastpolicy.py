"""The policy a host's first run in each directory got, kept for the next host's first sandbox.

A host's first command waits for its sandbox. Made the usual way, that sandbox is asked for only
once the host has computed the policy (its git answers, what it reads of ``PATH``: 10-20 ms of a
host that has just started), and the run then waits for it to be built. So a host's first
preparation in a directory starts from the policy the last host's first run there got
(``load``): the backend builds that sandbox while the run computes its own policy, and the run
takes it only when its own policy plans exactly the same sandbox (``Spares.claim``: the
backend's key, computed from the run's policy then) and gives the same warnings. What is kept
here is a guess, never a decision: a stale, wrong or forged entry costs that prepared sandbox
(discarded at the claim, and the run starts the usual way), never a run's confinement.

One file (``RUN_BASH_SPARE_FILE``: Lua names it in Neovim's state directory), JSON: the last
``MAX_DIRS`` directories, newest first, each with the policy's plain data: every field but the
host-read set, which backends do not build a sandbox from; its project root stands for it (the
project a prepared sandbox belongs to, and whose network namespace it joins). It is read as the
probe answer is (``statedir.read_own``: the user's own regular file, nobody else may write it,
at most ``MAX_BYTES``); anything malformed is ignored and written anew by the next note.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from run_bash.config import LimitsConfig
from run_bash.sandbox.hostread import HostRead
from run_bash.sandbox.netholder import project_of
from run_bash.sandbox.policy import Policy
from run_bash.statedir import read_own, write_own

FILE_ENV = "RUN_BASH_SPARE_FILE"
FORMAT = 1
MAX_DIRS = 8
MAX_BYTES = 512 * 1024

# The policy's fields by kind; every field but ``host_read`` and ``limits`` is in exactly one
# (a test holds this to ``Policy``'s fields, so a field added later is kept too).
TEXTS = ("cwd", "home")
TEXT_LISTS = (
    "readable",
    "writable",
    "denied",
    "read_only",
    "protected",
    "sealed",
    "git_dirs",
    "network_allow",
    "warnings",
)
NUMBER_LISTS = ("allow_local_ports", "own_ports", "blocked_local_ports")
LIMITS = tuple(f.name for f in fields(LimitsConfig))


def encode(policy: Policy) -> dict[str, Any]:
    """``policy`` as plain data (``decode`` makes it again, its host-read set aside)."""
    data: dict[str, Any] = {name: getattr(policy, name) for name in TEXTS}
    data.update({name: list(getattr(policy, name)) for name in TEXT_LISTS + NUMBER_LISTS})
    data["limits"] = {name: getattr(policy.limits, name) for name in LIMITS}
    data["project"] = project_of(policy)
    return data


def decode(data: object) -> Policy | None:
    """The policy ``encode`` gave ``data`` for, with a host-read set that names only its project
    root; None when ``data`` is not exactly that shape."""
    if not isinstance(data, dict):
        return None
    texts: dict[str, str] = {}
    lists: dict[str, list[str]] = {}
    numbers: dict[str, list[int]] = {}
    for name in (*TEXTS, "project"):
        v = data.get(name)
        if not isinstance(v, str) or not os.path.isabs(v):
            return None
        texts[name] = v
    for name in TEXT_LISTS:
        v = data.get(name)
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            return None
        lists[name] = v
    for name in NUMBER_LISTS:
        v = data.get(name)
        if not isinstance(v, list) or not all(type(x) is int for x in v):
            return None
        numbers[name] = v
    limits = data.get("limits")
    if (
        not isinstance(limits, dict)
        or sorted(limits) != sorted(LIMITS)
        or not all(type(v) is int for v in limits.values())
    ):
        return None
    project = texts.pop("project")
    host_read = HostRead(
        cwd=texts["cwd"],
        roots=(project,),
        writable=tuple(lists["writable"]),
        denied=tuple(lists["denied"]),
        home=texts["home"],
    )
    return Policy(
        **texts,  # type: ignore[arg-type]
        **lists,  # type: ignore[arg-type]
        **numbers,  # type: ignore[arg-type]
        limits=LimitsConfig(**limits),
        host_read=host_read,
    )


def _entries(path: str) -> list[Any]:
    """The entries kept in ``path`` (``[cwd, data]`` pairs, newest first); [] when there are
    none or the file is not ours to trust."""
    raw = read_own(path, MAX_BYTES)
    try:
        kept = json.loads(raw) if raw is not None else None
    except ValueError:
        return []
    if not isinstance(kept, dict) or kept.get("format") != FORMAT:
        return []
    entries = kept.get("dirs")
    if not isinstance(entries, list):
        return []
    return [e for e in entries if isinstance(e, list) and len(e) == 2 and isinstance(e[0], str)]


def path_of(environ: Mapping[str, str]) -> str | None:
    """The file the host's environment names (``FILE_ENV``), if an absolute path."""
    path = environ.get(FILE_ENV)
    return path if path and os.path.isabs(path) else None


def load(path: str | None, cwd: str) -> Policy | None:
    """The policy kept for ``cwd`` in ``path``, else None."""
    if not path:
        return None
    for where, data in _entries(path):
        if where == cwd:
            policy = decode(data)
            return policy if policy is not None and policy.cwd == cwd else None
    return None


def note(path: str | None, cwd: str, policy: Policy) -> bool:
    """Keep ``policy`` as ``cwd``'s in ``path``, first, with at most ``MAX_DIRS`` in all; the file
    is written only when that changes it. Whether it was written (best effort: a file that cannot
    be written only means the next host's first sandbox is made the usual way)."""
    if not path:
        return False
    entries = _entries(path)
    entry = [cwd, encode(policy)]
    if entries[:1] == [entry]:
        return False
    kept = [entry, *(e for e in entries if e[0] != cwd)][:MAX_DIRS]
    data = json.dumps({"format": FORMAT, "dirs": kept}).encode()
    if len(data) > MAX_BYTES:
        data = json.dumps({"format": FORMAT, "dirs": [entry]}).encode()
        if len(data) > MAX_BYTES:
            return False
    with contextlib.suppress(OSError):
        write_own(path, data)
        return True
    return False
