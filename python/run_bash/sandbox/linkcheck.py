"""Symbolic links a run leaves: where they lead for whoever follows them outside the sandbox.

Inside the sandbox a link is harmless: the kernel resolves it in the run's own view, where denied
paths are hidden and nothing outside the grants can be read or written. Outside, the same link is
resolved in the host's view, by whatever follows it later: CodeCompanion's file tools
(``read_file``, ``insert_edit_into_file``, ``create_file``), your editor, a tool the agent asks
you to approve under the link's name. A link the run leaves at ``notes.md`` that leads to
``~/.ssh/id_rsa`` would hand the chat what the sandbox denied the run; one at
``memories/x`` that leads to ``~/.config/nvim/init.lua`` would let an edit write, under a
harmless name, what the run could not.

So the guard's post-run check (``guard.py``) judges every link a run created or changed in the
trees it could write (``treescan.TreeScan.links_since``: the directories that changed, listed
once each) by where the host's kernel resolves it now (``os.path.realpath``: the same walk the
next reader's ``open`` makes) against the run's own grants (``leads_out``). One that leads where
the run could not go is moved to the quarantine, with a notice: a denied path or a directory
holding one, a place outside the readable grants, the host's own ``/proc``, a file the host reads
from the project, a file granted read-only by itself, a file that does not exist outside the
writable grants. Links that stay inside what the run could reach stay: a venv's ``python`` to
``/usr/bin/python3``, a link between project files, ``/dev/null``. In a git directory (each is
walked alone: the tree walk does not enter ``.git``) git itself writes through links, so there a
link that leads out of the writable grants goes too (``GIT_WRITES``; ``git_dir_links`` for a new
repository). A run that goes on in the background has its links judged as they appear
(``livelinks.py``).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from run_bash.paths import Tops, is_under
from run_bash.sandbox.places import Places

if TYPE_CHECKING:
    from run_bash.sandbox.hostread import HostRead

# Readable inside the sandbox, but a view of the run's own: ``/proc`` shows the sandbox's
# processes there and the host's (its environment, its open files) outside.
OWN_VIEW = ("/proc",)
_OWN = Tops(OWN_VIEW)


@dataclass(frozen=True)
class Reach:
    """What a run could reach, as the post-run check compares a link's end with it: the
    readable and writable grants, the denied paths, and what the host reads from the writable
    places (the host-read members, the sealed paths, Neovim's directories kept read-only)."""

    readable: tuple[str, ...]
    writable: tuple[str, ...]
    denied: tuple[str, ...]
    kept: tuple[str, ...] = ()
    git_dirs: tuple[str, ...] = ()

    @staticmethod
    def of(
        readable: Iterable[str],
        writable: Iterable[str],
        denied: Iterable[str],
        kept: Iterable[str] = (),
        git_dirs: Iterable[str] = (),
    ) -> Reach:
        def real(paths: Iterable[str]) -> tuple[str, ...]:
            out: list[str] = []
            for p in paths:
                out.append(os.path.normpath(p))
                out.append(os.path.realpath(p))
            return tuple(dict.fromkeys(out))

        return Reach(real(readable), real(writable), real(denied), real(kept), real(git_dirs))


def leads_out(end: str, reach: Reach, link: str = "") -> str | None:
    """Why a link (at ``link``) whose end (resolved by the host, ``os.path.realpath``) is
    ``end`` would give whoever follows it outside the sandbox what the run could not reach;
    None when it stays within the run's reach."""
    denied = Tops(reach.denied)
    if end in denied:
        return "a path the sandbox denies"
    if any(is_under(d, end) for d in reach.denied):
        return "a directory that holds paths the sandbox denies"
    if end in _OWN:
        return "the host's own /proc (inside the sandbox /proc is the run's)"
    if end in Tops(reach.kept):
        return "a file the host reads, kept read-only in the sandbox"
    if any(is_under(end, g) and not (link and is_under(link, g)) for g in reach.git_dirs):
        return "git's own directory, whose hooks and config git runs"
    # A name for a directory that holds them (``g`` -> ``.git``, ``p`` -> the project from
    # elsewhere) hides them from an approval; a link inside it (``self`` -> ``.``) adds nothing.
    if not (link and is_under(link, end)) and any(
        is_under(k, end) for k in (*reach.kept, *reach.git_dirs)
    ):
        return "a directory that holds files the host reads"
    if end in Tops(reach.writable):
        return None
    readable = Tops(reach.readable)
    if end not in readable:
        return "a place outside what the sandbox could read"
    if not os.path.lexists(end):
        # Creating a file through it (``create_file``) would make one where the run could not.
        return "a file that does not exist, where the sandbox could not write"
    # A single file granted read-only by itself (~/.gitconfig): an edit through the link would
    # write what the run could only read, and what git then runs.
    if end in reach.readable:
        try:
            st = os.stat(end)
        except OSError:
            return None
        if stat.S_ISREG(st.st_mode) and os.path.dirname(end) not in readable:
            return "a file the sandbox could only read"
    return None


# Why a link in a git directory that leads out of the writable grants goes: git on the host
# writes through it (it appends to ``logs/HEAD``, rewrites ``COMMIT_EDITMSG``), with text a run
# chooses (a branch name in a reflog line).
GIT_WRITES = "a place the sandbox could not write, and git writes through links in a git directory"


# Why a link whose way passes through ``/proc`` goes, wherever it ends for the guard.
THROUGH_PROC = (
    "a way through /proc, which each reader resolves in its own process (/dev/fd/N, /dev/stdin: "
    "the reader's own open files)"
)


def through_proc(path: str, depth: int = 0) -> bool:
    """Whether the kernel's walk of ``path`` (absolute) passes through ``/proc`` at any step, a
    link on the way included (``/dev/stdin`` -> ``/proc/self/fd/0``): there ``self`` is whoever
    walks, so where it ends for the guard says nothing of where it ends for the next reader."""
    if depth > 40:
        return True  # the kernel gives up (ELOOP) long before: count it as leading out
    parts = [p for p in path.split("/") if p not in ("", ".")]
    cur = "/"
    for i, name in enumerate(parts):
        if name == "..":
            cur = os.path.dirname(cur)
            continue
        nxt = os.path.join(cur, name)
        if nxt in _OWN:
            return True
        try:
            if not stat.S_ISLNK(os.lstat(nxt).st_mode):
                cur = nxt
                continue
            text = os.readlink(nxt)
        except OSError:
            return False  # the rest does not exist: the walk ends here
        rest = "/".join(parts[i + 1 :])
        target = os.path.join(cur, text)  # an absolute text replaces ``cur``
        return through_proc(os.path.join(target, rest) if rest else target, depth + 1)
    return False


def links_out(
    found: Iterable[tuple[str, str]], readable: Iterable[str], hr: HostRead
) -> list[tuple[str, str, str]]:
    """``(path, end, why)`` of each link in ``found`` (``(path, link text)`` from the tree scan)
    that is still there with that text and leads out of the reach of a run with these readable
    grants and this host-read set (``leads_out``); one in a git directory (``hr.git_dirs``)
    also when it leads out of the writable grants (``GIT_WRITES``)."""
    found = list(found)
    if not found:
        return []
    reach = Reach.of(readable, hr.writable, hr.denied, (*hr.members, *hr.sealed), hr.git_dirs)
    git_dirs = Tops(hr.git_dirs)
    out = []
    for path, text in found:
        try:
            if not stat.S_ISLNK(os.lstat(path).st_mode) or os.readlink(path) != text:
                continue  # gone, or replaced: what replaced it is judged on its own
            end = os.path.realpath(path)
        except (OSError, ValueError):
            continue
        at = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
        why = THROUGH_PROC if through_proc(path) else leads_out(end, reach, at)
        if why is None and path in git_dirs and end not in Tops(reach.writable):
            why = GIT_WRITES
        if why is not None:
            out.append((path, end, why))
    return out


# Entries of a new git directory looked at for links (its loose objects are not).
MAX_GIT_ENTRIES = 10_000


def git_dir_links(git_dir: str, writable: Iterable[str]) -> str | None:
    """Why a git directory a run created is not inert because of a symbolic link in it that
    leads out of the writable grants (``GIT_WRITES``); None when it holds none."""
    inside = Places(writable)
    looked = 0
    for top, dirs, files in os.walk(git_dir):
        if os.path.basename(top) == "objects":
            dirs[:] = [d for d in dirs if len(d) != 2]  # loose objects: written by rename
        for name in (*dirs, *files):
            looked += 1
            if looked > MAX_GIT_ENTRIES:
                return f"it has more than {MAX_GIT_ENTRIES} entries to look at for links"
            path = os.path.join(top, name)
            if not os.path.islink(path):
                continue
            end = os.path.realpath(path)
            if end not in inside:
                rel = os.path.relpath(path, git_dir)
                return f"its {rel} is a symbolic link to {end}, {GIT_WRITES}"
    return None
