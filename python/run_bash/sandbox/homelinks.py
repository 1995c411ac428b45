"""The user's own files in the home directory that lead into a place runs can write.

No run writes the home directory, but a symlink there may lead into one that runs can write:
dotfiles kept in a repository and put in place with GNU stow or ``ln -s`` (``~/.bashrc`` ->
``~/dotfiles/bashrc``, ``~/.config/nvim`` -> ``~/dotfiles/nvim``). The user's shell, editor and
tools read what such a link leads to at their next start, outside the sandbox, so it is kept like
the files the host reads (``hostread.py``): a directory read-only whole, a file read-only (or,
not there yet, kept from appearing).

Looked at: the symbolic links among the hidden entries of the home directory (``~/.bashrc``;
``~/work`` -> ``/data/work`` is a place, not a file a tool reads) and among all entries of
``$XDG_CONFIG_HOME`` (where stow and ``ln -s`` put them), each followed to its end. One that
leads to a writable place itself, or above one (``~/.dotfiles`` -> the project), keeps nothing:
the files in it that the others lead to are kept. A link deeper down
(``~/.config/nvim/lua/x.lua`` -> ``~/proj/x.lua`` inside a real ``nvim`` directory) is not
looked at. Read unnoted by a policy's recording and checked by asking again
(``fsdeps.add_check``): a listing is taken again only when its directory's signature changed.
"""

from __future__ import annotations

import os
import threading
import time

from run_bash import fsdeps
from run_bash.paths import is_under
from run_bash.sandbox.places import Places

# A directory's symbolic links by its signature (inode, change and modification times).
_LISTED: dict[str, tuple[tuple[int, int, int], tuple[str, ...]]] = {}
_lock = threading.Lock()


def home_links(home: str, config_home: str, writable: Places) -> list[tuple[str, str]]:
    """``(link, where it leads)`` for each symbolic link among the hidden entries of ``home``
    and the entries of ``config_home`` that leads (to its end) inside one of ``writable``'s
    places, not to one of them or above one."""
    args = (home, config_home, writable)
    with fsdeps.unrecorded():
        out = _home_links(*args)
    fsdeps.add_check(lambda: _home_links(*args) == out)
    return out


def _home_links(home: str, config_home: str, writable: Places) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    home = os.path.normpath(home)
    for d in dict.fromkeys(os.path.normpath(p) for p in (home, config_home) if p):
        for link in _links(d):
            if d == home and not os.path.basename(link).startswith("."):
                continue
            target = os.path.realpath(link)
            if target == link or target not in writable:
                continue
            if any(is_under(w, target) for w in writable.real):
                continue  # a place runs write (or above one): what is in it is judged apart
            out.append((link, target))
    return out


def _links(d: str) -> tuple[str, ...]:
    """The symbolic links among the entries of ``d`` (none when it cannot be listed)."""
    try:
        st = os.stat(d)
    except OSError:
        return ()
    sig = (st.st_ino, st.st_ctime_ns, st.st_mtime_ns)
    with _lock:
        kept = _LISTED.get(d)
    if kept is not None and kept[0] == sig:
        return kept[1]
    try:
        with os.scandir(d) as it:
            links = tuple(sorted(e.path for e in it if e.is_symlink()))
    except OSError:
        return ()
    if time.time_ns() - st.st_ctime_ns > fsdeps.SETTLED_NS:  # a change in the same tick shows
        with _lock:
            _LISTED[d] = (sig, links)
    return links
