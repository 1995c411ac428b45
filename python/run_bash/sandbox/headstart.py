"""The head start of a host's first policy: what the sandbox launcher's fork server reads for it
while the host starts.

A policy looks at every program on ``PATH`` (``pathlinks``: their link counts) and every symlink
of its directories (``pathguard.link_reach``: where they lead). Where ``PATH`` holds many programs
a run could write (all of them, for root) that is most of the first policy's cost, and the host
pays it after its own start, on the way to the first command's sandbox. The fork server has
nothing to do meanwhile: once it said ``ready``, a child of it makes both for the host's own
``PATH`` on a CPU nothing else wants (``make``, the same code the host runs) and sends them as one
message, with the inotify instance that watches the programs (``forkserver._census_child``). The host's first look takes them
(``take``): the listings of the programs with their watches (``_Programs.adopt``: what changed
since is in the instance's queue), and the links' answers, which are checked against the
directories' signatures at their use as answers made in the host are. Anything else the policy
needs, it makes itself; so does a host whose fork server sent nothing in time.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from typing import Any

_lock = threading.Lock()
_taken = False


def make(path_var: str) -> tuple[dict[str, Any], list[int]]:
    """(the message's data, its descriptors) for ``path_var``: in the fork server."""
    from run_bash.sandbox import pathlinks

    data: dict[str, Any] = {"programs": None, "links": None}
    fds: list[int] = []
    programs = pathlinks.warm(path_var)
    if programs is not None:
        data["programs"], fd = programs
        fds.append(fd)
    data["links"] = warm_links(path_var)
    return data, fds


def take() -> None:
    """At a policy's first look at ``PATH``: take over what the fork server made, once. Callers
    hold none of ``pathlinks``'s locks."""
    global _taken
    with _lock:
        if _taken:
            return
        _taken = True
        if "run_bash.sandbox.launcher" not in sys.modules:
            return  # this process started no fork server
        # Imported, not taken from ``sys.modules``: a thread still importing it is waited for.
        from run_bash.sandbox.launcher import launcher

        got = launcher().take_census()
        if got is None:
            return
        data, fds = got
        from run_bash.sandbox import pathlinks

        fd = fds[0] if len(fds) == 1 else -1
        for extra in fds[1:]:
            with contextlib.suppress(OSError):
                os.close(extra)
        programs = data.get("programs") if isinstance(data, dict) else None
        if programs is not None and fd >= 0:
            with pathlinks._PROGRAMS.lock:
                pathlinks._PROGRAMS.adopt(programs, fd)
        elif fd >= 0:
            os.close(fd)
        if isinstance(data, dict):
            adopt_links(data.get("links"))


def warm_links(path_var: str) -> list[list[Any]]:
    """``pathguard.link_reach`` of each absolute entry of ``path_var``, as plain data for
    ``adopt_links`` in another process. Only the answers kept."""
    from run_bash.sandbox import pathguard

    out: list[list[Any]] = []
    for e, _dev in pathguard.path_directories(path_var):
        deps, reach = pathguard.link_reach(e)
        if deps is not None:
            out.append(
                [e, [[p, list(sig) if isinstance(sig, tuple) else None] for p, sig in deps], reach]
            )
    return out


def adopt_links(data: object) -> int:
    """Keep the answers ``warm_links`` gave in another process (``pathguard._REACH``), where this
    one has none; each is checked against the directories' signatures at its use, as one made
    here. Anything malformed is dropped. How many were kept."""
    from run_bash.sandbox import pathguard

    kept = 0
    if not isinstance(data, list):
        return 0
    for item in data:
        try:
            d, raw_deps, reach = item
            if not isinstance(d, str) or not os.path.isabs(d) or d in pathguard._REACH:
                continue
            deps: list[tuple[str, object]] = []
            for p, sig in raw_deps:
                if not isinstance(p, str) or not os.path.isabs(p):
                    raise ValueError(p)
                deps.append((p, dir_sig(sig)))
            if reach is not None:
                if not isinstance(reach, list) or not all(isinstance(r, str) for r in reach):
                    raise ValueError(reach)
                reach = tuple(reach)
        except (TypeError, ValueError):
            continue
        if len(pathguard._REACH) >= pathguard.MAX_KEPT_ANSWERS:
            break
        pathguard._REACH[d] = (tuple(deps), reach)
        kept += 1
    return kept


def dir_sig(raw: object) -> tuple[int, ...] | None:
    """A directory's signature (``pathguard._dir_sig``: four integers, or None) as another
    process sent it. Raises ValueError when it is anything else."""
    if raw is None:
        return None
    if not isinstance(raw, (list, tuple)) or len(raw) != 4 or not all(type(x) is int for x in raw):
        raise ValueError(raw)
    return tuple(raw)
