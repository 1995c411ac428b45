"""PATH by state: the programs the host would find on its ``PATH`` stay what they were.

A ``PATH`` entry that lies inside a writable grant (a project venv's ``bin``, ``node_modules/.bin``
given as a relative entry, a cache's ``bin``) would let a run change what the user runs next,
outside the sandbox. Two mechanisms, one per kind of entry:

* **Read-only inside the run** (by construction), for every such entry that does not hold the
  project itself. Its *unit* is bound read-only whole: the directory, or for a Python venv whose
  ``bin`` is on ``PATH`` the whole venv (its ``*.pth`` files, ``sitecustomize.py``,
  ``usercustomize.py``, ``activate*`` and ``pyvenv.cfg`` run or decide what runs at every start
  of its Python). A symlink in the directory whose target lies in a writable grant gets its
  target (followed all the way; the links on the way kept as links) bound read-only too. A
  directory on ``PATH`` no run can write that holds such a link is compared after the run for
  those links (``read_only_dirs``). A unit that does not exist yet is a member of the host-read set
  that does not exist: it may not appear (the run is stopped and it is removed).
* **Full-state comparison**, for an entry that holds a project root (``.``, an empty entry, the
  project itself): binding it read-only would make the project read-only. Every entry's state
  (type, mode, inode, size, times, a link's text and its target's state) is taken before the run
  and compared after it (and on every file event during it): a program that changed and can be
  run, or a new one that shadows a command found later on ``PATH``, is moved to the quarantine
  (a changed link is put back as it was).

Every entry is compared after the run either way (a bound directory's links can still be led
elsewhere by renaming a directory on the way to their target). ``sandbox.rules.path_writable``
names entries runs may write: nothing protects what the host runs from those.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from run_bash import fsdeps
from run_bash.paths import Tops, is_under
from run_bash.sandbox.places import Places

OPTION = "sandbox.rules.path_writable"
# Entries of one PATH directory looked at (state and links); more are compared by name only.
MAX_ENTRIES = 20_000

Sig = tuple[Any, ...]


@dataclass(frozen=True)
class PathDir:
    """A ``PATH`` entry inside a writable grant.

    ``path`` is the directory as ``PATH`` means it (relative entries resolved against a project
    root), ``later`` the entries after it, ``unit`` what is kept read-only for it (the directory,
    or the venv it is the ``bin`` of), ``sealed`` whether the unit is bound read-only inside the
    run (False: it holds a project root and is compared by state only), ``outside`` whether it
    lies outside every writable grant (kept for its links into one: ``read_only_dirs``).
    """

    path: str
    later: tuple[str, ...]
    unit: str
    sealed: bool
    outside: bool = False


def venv_root(bin_dir: str) -> str | None:
    """The venv a ``bin`` directory belongs to: where Python's own start-up finds ``pyvenv.cfg``
    for an interpreter in it (the directory itself or its parent)."""
    for d in (bin_dir, os.path.dirname(bin_dir)):
        if os.path.lexists(os.path.join(d, "pyvenv.cfg")):
            return d
    return None


def path_dirs(
    path_var: str,
    writable: Sequence[str],
    roots: Sequence[str] = (),
    exempt: Sequence[str] = (),
    realpath: Callable[[str], str] = os.path.realpath,
) -> list[PathDir]:
    """``PATH`` entries inside a writable grant, each with the entries after it and its unit.
    A relative entry (``.``, ``bin``, or an empty one, which means the current directory) is
    taken relative to each project root: a program started there finds what a run put there.
    Entries under ``exempt`` (``sandbox.rules.path_writable``) are left out."""
    entries: list[list[str]] = []
    for e in path_var.split(os.pathsep):
        if os.path.isabs(e):
            entries.append([os.path.normpath(e)])
        else:
            entries.append([os.path.normpath(os.path.join(r, e or ".")) for r in roots])
    places = Places(writable, realpath)
    free = Places(exempt, realpath)
    out: list[PathDir] = []
    seen: set[str] = set()
    for i, meanings in enumerate(entries):
        later = tuple(m for ms in entries[i + 1 :] for m in ms)
        for e in meanings:
            if e in seen or e not in places:
                continue
            seen.add(e)
            unit, sealed = _unit(e, roots, realpath)
            if e in free or unit in free:
                continue
            out.append(PathDir(e, later, unit, sealed))
    return out


def _unit(entry: str, roots: Sequence[str], realpath: Callable[[str], str]) -> tuple[str, bool]:
    real_roots = [realpath(r) for r in roots]

    def holds_root(d: str) -> bool:
        real = realpath(d)
        return any(is_under(r, d) or is_under(rr, real) for r in roots for rr in real_roots)

    if holds_root(entry):
        return entry, False
    parent = os.path.dirname(entry)
    # Python finds its venv from where the interpreter really is: through any symlink on the way.
    venv = venv_root(entry) or venv_root(realpath(entry))
    if venv is None and os.path.basename(entry) == "bin" and not os.path.lexists(parent):
        venv = parent  # a venv (or any prefix) yet to be made: none of it may appear
    if venv is not None and not holds_root(venv):
        return venv, True
    return entry, True


# Symlinks followed on the way to one target (the kernel's own limit).
MAX_HOPS = 40


def link_chain(path: str) -> tuple[list[str], str | None]:
    """Resolve ``path`` one component at a time as the kernel does: every symlink met on the way
    (a component or the end, each as an absolute path) and where it ends (None: a loop, or more
    than ``MAX_HOPS`` links). A part that does not exist ends the walk there."""
    parts = [c for c in os.path.abspath(path).split("/") if c]
    links: list[str] = []
    cur = "/"
    while parts:
        name = parts.pop(0)
        if name == ".":
            continue
        if name == "..":
            cur = os.path.dirname(cur)
            continue
        nxt = os.path.join(cur, name)
        try:
            st = os.lstat(nxt)
        except OSError:
            return links, os.path.normpath(os.path.join(nxt, *parts))
        if not stat.S_ISLNK(st.st_mode):
            cur = nxt
            continue
        if len(links) >= MAX_HOPS:
            return links, None
        links.append(nxt)
        try:
            text = os.readlink(nxt)
        except OSError:
            return links, None
        parts = [c for c in text.split("/") if c] + parts
        if text.startswith("/"):
            cur = "/"
    return links, cur


def followed(path: str, writable: Places) -> tuple[list[str], str | None]:
    """What keeps what ``path`` leads to: the symlinks on the way that lie inside a writable grant
    (their text decides where it leads) and its end when that lies inside one (None: outside, or
    a loop; a loop's links are kept as they are)."""
    links, end = link_chain(path)
    kept = [link for link in links if link in writable]
    return kept, end if end is not None and end in writable else None


@dataclass(frozen=True)
class Kept:
    """What the links of a directory lead to inside a writable grant: ``links`` (symlinks on the
    way, kept as links), ``files`` (existing or not, kept as they are) and ``dirs`` (kept
    read-only whole)."""

    links: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    dirs: tuple[str, ...] = ()


def link_targets(pd: PathDir, writable: Places, read: set[str] | None = None) -> Kept:
    """What the symlinks in ``pd`` lead to inside a writable grant and outside its unit, followed
    all the way: bound read-only beside the unit (the program a link runs is the target's
    content), the links on the way kept as they are. ``read`` gets every directory whose entries
    the quick resolution read (what the answer depends on besides ``pd`` itself)."""
    try:
        with os.scandir(pd.path) as it:
            names = [e.name for e in it if e.is_symlink()][:MAX_ENTRIES]
    except OSError:
        return Kept()
    links: list[str] = []
    files: list[str] = []
    real = _fast_real(read)
    tops = Tops(writable.real)
    for name in names:
        path = os.path.join(pd.path, name)
        try:
            text = os.readlink(path)
        except OSError:
            continue
        if "/" not in text and text not in (".", ".."):
            continue  # a sibling: an entry of this same directory, looked at as itself
        # Most links of a PATH directory lead to the system: a quick resolution (directories
        # remembered) tells which ones reach a writable grant before each is walked.
        quick = _quick_end(path, real)
        if quick is not None and quick[0] not in tops and not any(h in tops for h in quick[1]):
            continue
        on_way, target = followed(path, writable)
        links += [link for link in on_way if not is_under(link, pd.unit)]
        if target is None or is_under(target, pd.unit):
            continue
        with contextlib.suppress(OSError):
            if stat.S_ISREG(os.stat(target).st_mode):
                files.append(target)
    return Kept(tuple(dict.fromkeys(links)), tuple(dict.fromkeys(files)))


def _fast_real(
    read: set[str] | None = None,
) -> Callable[[str], tuple[tuple[str, ...], str | None]]:
    """Resolve a directory the way the kernel does, remembered per directory: (the symlinks met
    on the way, where it ends; None: a loop). ``read`` gets the directories the answer was read
    from: where it ends and the one holding each link on the way."""
    memo: dict[str, tuple[tuple[str, ...], str | None]] = {}

    def real(d: str) -> tuple[tuple[str, ...], str | None]:
        hit = memo.get(d)
        if hit is None:
            links, end = link_chain(d)
            hit = memo[d] = (tuple(links), end)
            if read is not None:
                read.update(os.path.dirname(link) for link in links)
                if end is not None:
                    read.add(end)
        return hit

    return real


def _quick_end(
    path: str, real: Callable[[str], tuple[tuple[str, ...], str | None]]
) -> tuple[str, tuple[str, ...]] | None:
    """Where ``path`` ends, resolving its directories with ``real`` (remembered) and following
    the links at the end by their text: (end, every link followed, in a directory on the way
    too). None: no answer (a loop)."""
    hops: list[str] = []
    for _ in range(MAX_HOPS):
        links, parent = real(os.path.dirname(path))
        if parent is None:
            return None
        hops += links
        p = os.path.join(parent, os.path.basename(path))
        try:
            text = os.readlink(p)
        except OSError:
            return p, tuple(hops)
        hops.append(p)
        path = os.path.normpath(os.path.join(os.path.dirname(p), text))
    return None


def read_only_dirs(path_var: str, writable: Places, skip: Iterable[str] = ()) -> list[PathDir]:
    """Absolute ``PATH`` entries no run can write that hold a symlink leading into a writable
    grant (``npm link``, ``ln -s ~/proj/bin/tool ~/.local/bin/``): each as a ``PathDir`` whose
    unit is itself (nothing is bound for it; its links' targets are, ``link_targets``) and that is
    compared after the run like the others (a program whose target changed is quarantined).

    Its hundreds of reads (every link of ``/usr/bin``) are not noted one by one in a policy's
    recording (``fsdeps``): the answer adds its own check, the same question asked again, which
    the kept answers (``_NO_LINKS``) make a few ``stat`` calls."""
    skipped = tuple(skip)
    with fsdeps.unrecorded():
        out = _read_only_dirs(path_var, writable, skipped)
    same = [pd.path for pd in out]
    fsdeps.add_check(
        lambda: [pd.path for pd in _read_only_dirs(path_var, writable, skipped)] == same
    )
    return out


def _read_only_dirs(path_var: str, writable: Places, skip: Iterable[str]) -> list[PathDir]:
    entries = [os.path.normpath(e) for e in path_var.split(os.pathsep) if os.path.isabs(e)]
    skipped = set(skip)
    seen: set[tuple[int, int]] = set()
    tops = tuple(sorted(writable.real))
    out: list[PathDir] = []
    for i, e in enumerate(entries):
        if e in skipped or e in writable:
            continue
        skipped.add(e)
        try:
            st = os.stat(e)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) in seen:
            continue  # the same directory by another name (``/bin`` and ``/usr/bin``)
        seen.add((st.st_dev, st.st_ino))
        key = (e, tops)
        if _still(_NO_LINKS.get(key)):
            continue
        pd = PathDir(e, tuple(entries[i + 1 :]), e, True, outside=True)
        read: set[str] = {e}
        kept = link_targets(pd, writable, read)
        if kept.files or kept.links:
            out.append(pd)
            _NO_LINKS.pop(key, None)
        else:
            if len(_NO_LINKS) >= MAX_KEPT_ANSWERS:
                _NO_LINKS.clear()  # grants of many projects over a long session: start again
            _NO_LINKS[key] = tuple((d, _dir_sig(d)) for d in sorted(read))
    return out


# Read-only PATH directories none of whose links led into the writable grants, by (directory,
# grants): the directories the answer read, each with its signature. Any entry added, removed or
# replaced in one of them (a new link, an alternative re-pointed) changes its signature and the
# directory is looked at again; nothing else can change where its links lead.
_NO_LINKS: dict[tuple[str, tuple[str, ...]], tuple[tuple[str, object], ...]] = {}
MAX_KEPT_ANSWERS = 512


def _dir_sig(d: str) -> object:
    try:
        st = os.stat(d)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)


def _still(deps: tuple[tuple[str, object], ...] | None) -> bool:
    return deps is not None and all(sig is not None and _dir_sig(d) == sig for d, sig in deps)


# -------------------------------------------------------------------------------------------------
# States


def entry_sig(path: str) -> Sig | None:
    """What an entry of a PATH directory is: its type, mode, inode, size and times, and for a
    symlink its text and its target's identity, mode, size and times. None when absent."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    sig: Sig = (
        stat.S_IFMT(st.st_mode),
        stat.S_IMODE(st.st_mode),
        st.st_ino,
        st.st_size,
        st.st_mtime_ns,
        st.st_ctime_ns,
    )
    if stat.S_ISLNK(st.st_mode):
        try:
            text: str | None = os.readlink(path)
        except OSError:
            text = None
        try:
            t = os.stat(path)
            target: Sig | None = (
                t.st_dev,
                t.st_ino,
                t.st_mode,
                t.st_size,
                t.st_mtime_ns,
                t.st_ctime_ns,
            )
        except OSError:
            target = None
        sig += (text, target)
    return sig


def dir_state(path: str) -> dict[str, Sig] | None:
    """Every entry of a PATH directory and its state; None when it is not a directory."""
    try:
        with os.scandir(path) as it:
            names = [e.name for e in it]
    except OSError:
        return None
    out: dict[str, Sig] = {}
    for name in names[:MAX_ENTRIES]:
        sig = entry_sig(os.path.join(path, name))
        if sig is not None:
            out[name] = sig
    return out


def runnable(path: str) -> bool:
    """Whether a PATH lookup would run ``path``: a regular file (through its links) with an
    execute bit."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and bool(st.st_mode & 0o111)


def shadowed(pd: PathDir, name: str) -> str | None:
    """The command ``name`` in ``pd`` would shadow: the first executable of that name in a later
    ``PATH`` entry, unless it is the very same file. None when nothing is shadowed or the entry
    cannot be run."""
    mine = os.path.join(pd.path, name)
    try:
        st = os.stat(mine)
    except OSError:
        return None
    if stat.S_ISDIR(st.st_mode) or not st.st_mode & 0o111:
        return None
    for later in pd.later:
        cand = os.path.join(later, name)
        try:
            cst = os.stat(cand)
        except OSError:
            continue
        if stat.S_ISDIR(cst.st_mode) or not cst.st_mode & 0o111:
            continue
        if (cst.st_dev, cst.st_ino) == (st.st_dev, st.st_ino):
            return None  # a link to the very program PATH would find anyway
        return cand
    return None


@dataclass(frozen=True)
class Change:
    """An entry of a PATH directory that must not stay as a run left it.

    ``why`` says what happened; ``link`` is the text to put back for a symlink whose text
    changed (None: the entry goes to the quarantine)."""

    name: str
    why: str
    link: str | None = None


def _link(sig: Sig | None) -> str | None:
    """A symlink's text from its state (None: not a symlink, or unreadable)."""
    if sig is None or sig[0] != stat.S_IFLNK:
        return None
    text: str | None = sig[6]
    return text


def judge(
    pd: PathDir, before: Mapping[str, Sig] | None, name: str, writable: Places
) -> Change | None:
    """Whether the entry ``name`` of ``pd``, compared with its state before the run, must go.
    A link whose text is unchanged counts as changed only when its target lies where a run can
    write (the system's own programs are updated by the system); so does any entry of a directory
    outside every writable grant."""
    path = os.path.join(pd.path, name)
    was = before.get(name) if before is not None else None
    now = entry_sig(path)
    if now == was or now is None or not runnable(path):
        return None  # unchanged, removed (a later entry is found instead) or not a program
    if pd.outside and os.path.realpath(path) not in writable:
        return None  # a directory no run writes: only what leads into a writable grant counts
    if was is None:
        later = shadowed(pd, name)
        if later is None:
            return None
        return Change(name, f"appeared and would run instead of {later} for you")
    old_link, new_link = _link(was), _link(now)
    if old_link is not None and old_link == new_link and was[:6] == now[:6]:
        if os.path.realpath(path) not in writable:
            return None
        return Change(name, "now runs a changed program (its target changed)")
    if old_link is not None:
        return Change(name, "was led elsewhere or replaced", link=old_link)
    return Change(name, "was changed (content, mode or type)")


def changes(pd: PathDir, before: Mapping[str, Sig] | None, writable: Places) -> list[Change]:
    """Every entry of ``pd`` that must not stay as the run left it (see ``judge``)."""
    now = dir_state(pd.path) or {}
    out = []
    for name in dict.fromkeys([*(before or {}), *now]):
        c = judge(pd, before, name, writable)
        if c is not None:
            out.append(c)
    return out


# -------------------------------------------------------------------------------------------------
# Telling the user


def _show(path: str, cwd: str) -> str:
    return os.path.relpath(path, cwd) if is_under(path, cwd) and path != cwd else path


def reason(pd: PathDir, cwd: str) -> str:
    """Why ``pd``'s unit is kept, and the option that allows writing it."""
    return (
        f"{_show(pd.path, cwd)} is on your PATH, so what a run writes there would run outside the "
        f"sandbox the next time you use it; `{OPTION}` lets runs write it"
    )


_READ_ONLY_RE = re.compile(r"read-only file system|\bEROFS\b", re.IGNORECASE)


def refusal_notices(
    units: Iterable[PathDir], output: str, exit_code: int | None, cwd: str
) -> list[str]:
    """What to tell when a run that failed seems to have tried to write a read-only PATH unit:
    its output says "read-only file system" (or names the unit)."""
    if not exit_code:
        return []
    hit = bool(_READ_ONLY_RE.search(output))
    out: list[str] = []
    for pd in units:
        if not pd.sealed or pd.outside:
            continue
        rel = _show(pd.unit, cwd)
        if hit or pd.unit in output or rel in output:
            out.append(f"{rel} is read-only inside the sandbox: {reason(pd, cwd)}")
    return list(dict.fromkeys(out))
