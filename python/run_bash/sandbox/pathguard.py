"""PATH by state: the programs the host would find on its ``PATH`` stay what they were.

A ``PATH`` entry that lies inside a writable grant (a project venv's ``bin``, ``node_modules/.bin``
given as a relative entry, a cache's ``bin``) would let a run change what the user runs next,
outside the sandbox. Two mechanisms, one per kind of entry:

* **Read-only inside the run** (by construction), for every such entry that does not hold the
  project itself. Its *unit* is bound read-only whole: the directory, for a Python venv whose
  ``bin`` is on ``PATH`` the whole venv (its ``*.pth`` files, ``sitecustomize.py``,
  ``usercustomize.py``, ``activate*`` and ``pyvenv.cfg`` run or decide what runs at every start
  of its Python), for a directory inside a ``node_modules`` (``node_modules/.bin``) the
  outermost ``node_modules``. A symlink in the directory whose target lies in a writable grant
  gets what its program loads with it (its *code unit*, ``code_unit``: its package, venv or
  ``node_modules``, or its directory for a Python program) bound read-only whole too (followed
  all the way; the links on the way kept as links); a code unit that holds a project root
  cannot be, and the run is refused (``HostReadError``). What a link in a kept unit leads to
  outside it (a workspace package linked into ``node_modules``) is kept the same way
  (``unit_links``). A directory on ``PATH`` no run can
  write that holds such a link is compared after the run for those links (``read_only_dirs``).
  A unit that does not exist yet is a member of the host-read set that does not exist: it may
  not appear (the run is stopped and it is removed).
* **Other names.** A program on ``PATH`` (or one a ``PATH`` link runs) that a run could write
  and that has more names than the ``PATH`` directories hold may have one in a writable grant
  (a hard link): the grants are searched for them, and each is bound read-only (``pathlinks.hard_links``).
* **Full-state comparison**, for an entry that holds a project root (``.``, an empty entry, the
  project itself): binding it read-only would make the project read-only. Every entry's state
  (type, mode, inode, size, times, a link's text and its target's state) is taken before the run
  and compared after it (and on every file event during it): a program that changed and can be
  run, or a new one that shadows a command found later on ``PATH``, is moved to the quarantine
  (a changed link is put back as it was).

Every entry is compared after the run either way (a bound directory's links can still be led
elsewhere by renaming a directory on the way to their target). ``sandbox.rules.path_writable``
names entries runs may write, and programs (or places their targets lie in) whose code runs may
change: nothing protects what the host runs from those.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from run_bash import fsdeps
from run_bash.paths import Tops, is_under
from run_bash.sandbox import headstart
from run_bash.sandbox.gitask import HostReadError
from run_bash.sandbox.places import Places
from run_bash.sandbox.programs import ELF, interpreter, interpreter_path, library_dirs

OPTION = "sandbox.rules.path_writable"
# Entries of one PATH directory looked at (state and links); more are compared by name only.
MAX_ENTRIES = 20_000

Sig = tuple[Any, ...]


@dataclass(frozen=True)
class PathDir:
    """A ``PATH`` entry inside a writable grant.

    ``path`` is the directory as ``PATH`` means it (relative entries resolved against a project
    root), ``later`` the entries after it, ``unit`` what is kept read-only for it (the directory,
    the venv it is the ``bin`` of, or the outermost ``node_modules`` it lies in), ``sealed``
    whether the unit is bound read-only inside the run (False: it holds a project root and is
    compared by state only), ``outside`` whether it lies outside every writable grant (kept for
    its links into one: ``read_only_dirs``), ``free`` the places runs may change what a program
    leads to (``sandbox.rules.path_writable``), ``kept`` what its links' programs load with them
    (``link_targets``), each with why and the program. ``var`` is the variable of the host's
    environment that names it (``PATH``, or another search path: ``searchvars.py``), ``reads``
    what loads from it then (for the reason).
    """

    path: str
    later: tuple[str, ...]
    unit: str
    sealed: bool
    outside: bool = False
    free: tuple[str, ...] = ()
    kept: tuple[tuple[str, str, str], ...] = ()  # ``Kept.why`` of its links' code units
    var: str = "PATH"
    reads: str = ""


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
            unit, sealed = _unit(e, roots, realpath, places)
            if e in free or unit in free:
                continue
            out.append(PathDir(e, later, unit, sealed, free=free.paths))
    return out


def _unit(
    entry: str, roots: Sequence[str], realpath: Callable[[str], str], places: Places
) -> tuple[str, bool]:
    real_roots = [realpath(r) for r in roots]

    def holds_root(d: str) -> bool:
        real = realpath(d)
        return any(is_under(r, d) or is_under(rr, real) for r in roots for rr in real_roots)

    if holds_root(entry):
        return entry, False
    # `node_modules/.bin` (or any directory inside a node_modules): its links lead into the
    # packages beside it, whose bare requires resolve through every node_modules above them.
    modules = outermost_node_modules(entry, places)
    if modules is not None and not holds_root(modules):
        return modules, True
    parent = os.path.dirname(entry)
    # Python finds its venv from where the interpreter really is: through any symlink on the way.
    venv = venv_root(entry) or venv_root(realpath(entry))
    if venv is None and os.path.basename(entry) == "bin" and not os.path.lexists(parent):
        venv = parent  # a venv (or any prefix) yet to be made: none of it may appear
    if venv is not None and not holds_root(venv):
        return venv, True
    return entry, True


def outermost_node_modules(path: str, places: Places | Tops) -> str | None:
    """The outermost directory named ``node_modules`` among ``path`` and its ancestors that lies
    in ``places`` (a writable grant); None when there is none."""
    parts = path.split("/")
    for i in range(2, len(parts) + 1):
        if parts[i - 1] == "node_modules":
            d = "/".join(parts[:i])
            if d in places:
                return d
    return None


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
    way, kept as links), ``files`` (the programs at their ends), ``dirs`` (each program's code
    unit and the ``node_modules`` above it, kept read-only whole), ``names`` (``node_modules``
    above a unit that are not there yet or are links: they must stay what they are) and ``why``
    (for each of ``dirs`` and ``names``: it, what made it kept, the program on PATH)."""

    links: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    dirs: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    why: tuple[tuple[str, str, str], ...] = ()


def link_targets(
    pd: PathDir,
    writable: Places,
    read: set[str] | None = None,
    roots: Sequence[str] | None = None,
) -> Kept:
    """What the symlinks in ``pd`` lead to inside a writable grant and outside its unit, followed
    all the way: the links on the way kept as they are, the program at the end. With ``roots``
    (the project roots) also what each such program loads with it (``code_unit``), kept
    read-only beside the unit; raises HostReadError when that holds a project root (nothing
    could be kept then). A link or target under ``pd.free`` is left out. ``read`` gets every
    directory whose entries the quick resolution read (what the answer depends on besides ``pd``
    itself)."""
    names = _symlink_names(pd.path)
    if names is None:
        return Kept()
    links: list[str] = []
    files: list[str] = []
    dirs: list[str] = []
    members: list[str] = []
    why: dict[str, tuple[str, str]] = {}
    real = _fast_real(read)
    tops = Tops(writable.real)
    free = Places(pd.free)
    for name in names:
        path = os.path.join(pd.path, name)
        if pd.free and path in free:
            continue
        if not _leads_away(path):
            continue
        # Most links of a PATH directory lead to the system: a quick resolution (directories
        # remembered) tells which ones reach a writable grant before each is walked.
        quick = _quick_end(path, real)
        if quick is not None and quick[0] not in tops and not any(h in tops for h in quick[1]):
            continue
        on_way, target = followed(path, writable)
        if target is not None and pd.free and target in free:
            continue
        links += [link for link in on_way if not is_under(link, pd.unit)]
        if target is None or is_under(target, pd.unit):
            continue
        with contextlib.suppress(OSError):
            if stat.S_ISREG(os.stat(target).st_mode):
                files.append(target)
                if roots is not None:
                    unit = code_unit(target, tops)
                    refuse_holding(path, target, unit, roots)
                    runs = f"{path} is on your {pd.var} and runs {target}"
                    dirs.append(unit.path)
                    why.setdefault(unit.path, (f"{runs}; {unit.why}", path))
                    for d in (*unit.dirs, *unit.names):
                        said = f"{runs}; Node resolves what it requires through {d}"
                        why.setdefault(d, (said, path))
                    dirs += unit.dirs
                    members += unit.names
                    # The interpreter its `#!` line names, when a run could write it (a
                    # project venv's python): what that loads runs too (the venv's `*.pth`).
                    # Python finds its venv from the path as named (a venv's python is a link
                    # to the system's), the kernel runs where it leads: both count.
                    interp = interpreter_path(target)
                    named = [interp, os.path.realpath(interp)] if interp else []
                    for each in dict.fromkeys(p for p in named if p in tops):
                        iunit = code_unit(each, tops)
                        how = f"{path} is on your {pd.var} and runs {target} with {interp}"
                        refuse_holding(path, each, iunit, roots, how)
                        dirs += [iunit.path, *iunit.dirs]
                        members += iunit.names
                        why.setdefault(iunit.path, (f"{how}; {iunit.why}", path))
                        for d in (*iunit.dirs, *iunit.names):
                            why.setdefault(d, (f"{how}; {iunit.why}", path))
    return Kept(
        tuple(dict.fromkeys(links)),
        tuple(dict.fromkeys(files)),
        tuple(dict.fromkeys(dirs)),
        tuple(dict.fromkeys(members)),
        tuple((p, w, prog) for p, (w, prog) in why.items()),
    )


# -------------------------------------------------------------------------------------------------
# What a program on PATH loads with it

# Files that make a directory a package: the code of a program in it lies beside them (its
# `lib/` next to its `bin/`), found relative to the program.
MANIFESTS = (
    "package.json",
    "pyproject.toml",
    "setup.py",
    "setup.cfg",
    "Cargo.toml",
    "go.mod",
    "Gemfile",
    "composer.json",
    "deno.json",
    "deno.jsonc",
)
# What marks a program as JavaScript (Node resolves its bare requires through node_modules).
NODE_SUFFIXES = (".js", ".mjs", ".cjs")
NODE_INTERPRETERS = frozenset({"node", "nodejs", "bun", "deno", "tsx", "ts-node"})
# Shells: a script loads what it sources by a path it builds (``$(dirname "$0")/lib.sh``): its
# directory is kept, the convention of a ``bin/`` of shell scripts (a dotfiles repository).
SHELL_INTERPRETERS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish"})
SHELL_SUFFIXES = (".sh", ".bash", ".zsh", ".ksh", ".fish")


@dataclass(frozen=True)
class CodeUnit:
    """What a program in a writable grant loads with it (``code_unit``): ``path`` is kept
    read-only whole, ``dirs`` are the ``node_modules`` directories above it (Node resolves a bare
    ``require`` through each), ``names`` those that are links (kept leading where they do) or,
    for a JavaScript program, not there yet (they may not appear: one would shadow a package
    found further up). ``why`` says what made ``path`` the unit."""

    path: str
    why: str
    dirs: tuple[str, ...] = ()
    names: tuple[str, ...] = ()


def code_unit(target: str, grants: Tops, is_dir: bool = False) -> CodeUnit:
    """What the program ``target`` (a file in a writable grant, symlinks resolved) loads with it,
    inside that grant, so what is kept read-only whole for a ``PATH`` link that runs it:

    * inside a ``node_modules``: the outermost one in the grant (the package, its own and its
      hoisted dependencies);
    * inside a venv (an ancestor holds ``pyvenv.cfg``): the venv;
    * a Python program (``*.py``, or a `#!` line that runs ``python*``): its directory, the
      first place its imports are found; a shell script (``SHELL_INTERPRETERS``) or a compiled
      program (ELF): its directory too;
    * else the nearest ancestor that holds a package manifest (``MANIFESTS``), up to the top of
      the grant; with none, its directory, or the one above when that is a ``bin`` (a
      package's ``bin/`` beside its ``lib/``).

    Except for a venv, a Python or shell script or a compiled program, the ``node_modules`` directories above the unit in
    the grant are kept too (``CodeUnit``: Node resolves a bare ``require`` through each, a
    workspace's hoisted packages among them). ``is_dir``: ``target`` is a directory a link in a
    kept unit leads to (a workspace package): the unit is found from it, itself included."""
    here = target if is_dir else os.path.dirname(target)
    ups = _ups(here, grants)
    if not ups:
        return CodeUnit(here, "the directory it lies in")
    for i in range(len(ups) - 1, -1, -1):
        if os.path.basename(ups[i]) == "node_modules":
            dirs, names = _modules_above(ups, i, True)
            return CodeUnit(ups[i], f"it lies in {ups[i]}, whose packages it requires", dirs, names)
    for d in ups:
        if os.path.lexists(os.path.join(d, "pyvenv.cfg")):
            return CodeUnit(d, f"it lies in the venv {d}, whose packages it imports")
    prog = "" if is_dir else interpreter(target) or ""
    if not is_dir and (target.endswith(".py") or prog.startswith("python")):
        return CodeUnit(here, f"Python imports first from its directory {here}")
    if not is_dir and (prog in SHELL_INTERPRETERS or target.endswith(SHELL_SUFFIXES)):
        return CodeUnit(here, f"a shell script sources what lies beside it in {here}")
    if not is_dir and prog == ELF:
        libs = tuple(d for d in library_dirs(target, grants) if not is_under(d, here))
        why = f"a compiled program loads the libraries beside it in {here}"
        if libs:
            why = f"a compiled program loads its libraries from {', '.join((here, *libs))}"
        return CodeUnit(here, why, libs)
    unit: int | None = None
    why = ""
    for i, d in enumerate(ups):
        found = next((m for m in MANIFESTS if os.path.lexists(os.path.join(d, m))), None)
        if found is not None:
            unit, why = i, f"it belongs to the package {d} ({found}), whose files it loads"
            break
    if unit is None:
        if not is_dir and os.path.basename(here) == "bin" and len(ups) > 1:
            unit, why = 1, f"it lies in {here}, beside the rest of its package in {ups[1]}"
        else:
            unit, why = 0, f"it loads what lies beside it in {here}"
    top = ups[unit]
    node = (
        prog in NODE_INTERPRETERS
        or target.endswith(NODE_SUFFIXES)
        or os.path.lexists(os.path.join(top, "package.json"))
    )
    scopes = node and not os.path.lexists(os.path.join(top, "package.json"))
    dirs, names = _modules_above(ups, unit, node, scopes)
    return CodeUnit(top, why, dirs, names)


def _ups(here: str, grants: Tops) -> list[str]:
    """``here`` and its ancestors inside the grant, nearest first."""
    ups: list[str] = []
    d = here
    while d in grants:
        ups.append(d)
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent
    return ups


def _modules_above(
    ups: Sequence[str], unit: int, node: bool, scopes: bool = False
) -> tuple[tuple[str, ...], ...]:
    """The ``node_modules`` directories in the ancestors above ``ups[unit]`` (inside the grant):
    (those that are directories, those that are links or, for ``node``, not there yet). With
    ``scopes`` (a JavaScript program that is not itself in a package: no ``package.json`` in its
    unit), each ancestor's ``package.json`` is a name too, there or not: Node takes the nearest
    one as the program's package, and its ``name`` with ``exports`` (or its ``imports``) resolves
    a bare specifier before any ``node_modules`` is searched."""
    dirs: list[str] = []
    names: list[str] = []
    for d in ups[unit + 1 :]:
        if scopes:
            names.append(os.path.join(d, "package.json"))
        modules = os.path.join(d, "node_modules")
        if modules == ups[unit]:
            continue
        try:
            st = os.lstat(modules)
        except OSError:
            if node:
                names.append(modules)
            continue
        if stat.S_ISDIR(st.st_mode):
            dirs.append(modules)
        elif stat.S_ISLNK(st.st_mode) or node:
            names.append(modules)
    return tuple(dirs), tuple(names)


def modules_above(unit: str, writable: Places) -> tuple[tuple[str, ...], ...]:
    """For a ``PATH`` entry's unit that is a ``node_modules`` (``node_modules/.bin`` on PATH):
    the ``node_modules`` above it in its grant, as ``CodeUnit.dirs`` and ``CodeUnit.names``."""
    ups = _ups(os.path.realpath(unit), Tops(writable.real))
    return _modules_above(ups, 0, True) if ups else ((), ())


def refuse_holding(
    program: str, target: str, unit: CodeUnit, roots: Sequence[str], how: str | None = None
) -> None:
    """Raise HostReadError when ``unit`` (or a directory kept with it; symlinks resolved, as
    ``code_unit`` finds them) is, or holds, a project root (as given, or resolved): the project
    itself cannot be read-only. ``how`` says how ``program`` (on PATH) comes to load ``target``
    (default: it runs it)."""
    both = {*roots, *(_real_root(r) for r in roots)}
    for d in (unit.path, *unit.dirs):
        for r in both:
            if is_under(r, d):
                raise HostReadError(
                    f"{how or f'{program} is on your PATH and runs {target}'}; {unit.why}, and "
                    f"{d} holds the project, so it cannot be kept read-only: add {program} to "
                    f"`{OPTION}` to let runs change what it runs, or remove it from your PATH"
                )


def _real_root(root: str) -> str:
    """``root`` with its symlinks resolved, remembered for a few seconds (one computation asks
    for it once per unit)."""
    now = time.monotonic()
    hit = _REAL_ROOTS.get(root)
    if hit is not None and now - hit[0] < 2:
        return hit[1]
    if len(_REAL_ROOTS) > 64:
        _REAL_ROOTS.clear()
    real = os.path.realpath(root)
    _REAL_ROOTS[root] = (now, real)
    return real


_REAL_ROOTS: dict[str, tuple[float, str]] = {}


# Entries of the kept units listed for symlinks that lead out of them, and how many links deep
# the units those links lead to are looked at in turn.
MAX_UNIT_ENTRIES = 50_000
MAX_UNIT_DEPTH = 4


def unit_links(
    units: Sequence[tuple[str, str]],
    writable: Places,
    roots: Sequence[str],
    exempt: Sequence[str] = (),
) -> Kept:
    """What the symlinks in kept units (``(directory, the program on PATH it is kept for)``)
    lead to inside a writable grant outside every kept unit: a package manager's link to a
    workspace package (``node_modules/@my/lib`` -> ``../../packages/lib``), a module linked into
    a Python program's directory. Node and Python load what such a link leads to, so its code
    unit (``code_unit``) is kept read-only whole too, the links on the way keep their text, a
    target that does not exist yet may not appear, and the new unit's own links are looked at
    in turn (``MAX_UNIT_DEPTH``). Looked at: the entries of each unit, and for a
    ``node_modules`` those of its ``@scope`` directories (each listing remembered while its
    directory's signature holds). Read unnoted by a policy's recording and checked by asking
    again, like ``read_only_dirs``. Raises HostReadError when such a unit holds the project, or
    there are more than ``MAX_UNIT_ENTRIES`` entries to look at."""
    args = (tuple(units), writable, tuple(roots), tuple(exempt))
    with fsdeps.unrecorded():
        out = _unit_links(*args)

    def check() -> bool:
        try:
            return _unit_links(*args) == out
        except HostReadError:
            return False

    fsdeps.add_check(check)
    return out


def _unit_links(
    units: tuple[tuple[str, str], ...],
    writable: Places,
    roots: tuple[str, ...],
    exempt: tuple[str, ...],
) -> Kept:
    tops = Tops(writable.real)
    free = Places(exempt)
    kept = {u for u, _p in units}

    def inside(path: str) -> bool:
        p = path
        while p:
            if p in kept:
                return True
            p = p[: p.rfind("/")]
        return False

    links: list[str] = []
    files: list[str] = []
    dirs: list[str] = []
    names: list[str] = []
    why: dict[str, tuple[str, str]] = {}
    todo = [(u, program, 0) for u, program in units]
    seen: set[str] = set()
    looked = 0
    sigs: dict[str, object] = {}
    while todo:
        unit, program, depth = todo.pop(0)
        if unit in seen:
            continue
        seen.add(unit)
        found, n = _unit_symlinks(unit, sigs)
        looked += n
        if looked > MAX_UNIT_ENTRIES:
            raise HostReadError(
                f"more than {MAX_UNIT_ENTRIES} entries to look at for links in what {program} "
                f"on your PATH loads (through {unit}): too many to keep; add {program} to "
                f"`{OPTION}`, or remove it from your PATH"
            )
        for link in found:
            led = _lead(link, writable, tops, sigs)
            links += [x for x in led.on_way if not inside(x)]
            end, cu = led.end, led.unit
            if end is None or inside(end) or (exempt and end in free):
                continue
            how = f"{program} is on your PATH and loads {link} in {unit}, which leads to {end}"
            if cu is None:
                names.append(end)  # not there yet: it may not appear
                why.setdefault(end, (how, program))
                continue
            refuse_holding(program, end, cu, roots, how)
            if not led.is_dir:
                files.append(end)
            why.setdefault(cu.path, (f"{how}; {cu.why}", program))
            for d in (*cu.dirs, *cu.names):
                why.setdefault(d, (f"{how}; Node resolves what it requires through {d}", program))
            new = [d for d in (cu.path, *cu.dirs) if not inside(d)]
            dirs += new
            names += [m for m in cu.names if not inside(m)]
            kept.update(new)
            if depth + 1 < MAX_UNIT_DEPTH:
                todo += [(d, program, depth + 1) for d in new]
    return Kept(
        tuple(dict.fromkeys(links)),
        tuple(dict.fromkeys(files)),
        tuple(dict.fromkeys(dirs)),
        tuple(dict.fromkeys(names)),
        tuple((p, w, prog) for p, (w, prog) in why.items()),
    )


@dataclass(frozen=True)
class _Led:
    """Where a link in a kept unit leads (``_lead``): the links on the way in a writable grant,
    its end there (None: outside every grant, or a loop), whether that is a directory, and the
    end's code unit (None: the end does not exist)."""

    on_way: tuple[str, ...]
    end: str | None
    is_dir: bool = False
    unit: CodeUnit | None = None


# ``_lead``'s answers, by (link, grants): (the signatures of what it read, the answer).
_LEAD: dict[tuple[str, tuple[str, ...]], tuple[tuple[tuple[str, object], ...], _Led]] = {}


def _sig_in(sigs: dict[str, object], path: str) -> object:
    """``_dir_sig(path)``, asked once per computation (``sigs``)."""
    if path not in sigs:
        sigs[path] = _dir_sig(path)
    return sigs[path]


def _lead(link: str, writable: Places, tops: Tops, sigs: dict[str, object]) -> _Led:
    """Where ``link`` leads and the code unit there, remembered while every directory it was
    read from (the ancestors of the link, of each link on the way and of the end, where the
    unit's manifests and ``node_modules`` are looked for) and the end itself are unchanged
    (their signatures; an answer read from something changed within ``fsdeps.SETTLED_NS`` is
    not kept)."""
    key = (link, writable.real)
    hit = _LEAD.get(key)
    if hit is not None and all(_sig_in(sigs, p) == sig for p, sig in hit[0]):
        return hit[1]
    chain, end = link_chain(link)
    on_way = tuple(x for x in chain if x in writable)
    led = _Led(on_way, None)
    if end is not None and end in writable:
        try:
            is_dir = stat.S_ISDIR(os.stat(end).st_mode)
        except OSError:
            led = _Led(on_way, end)
        else:
            led = _Led(on_way, end, is_dir, code_unit(end, tops, is_dir))
    read: set[str] = set()
    for p in (link, *chain, *([end] if end is not None else [])):
        d = os.path.dirname(p)
        while d not in read:
            read.add(d)
            if d == "/":
                break
            d = os.path.dirname(d)
    if end is not None:
        read.add(end)
    deps = tuple((p, _dir_sig(p)) for p in sorted(read))
    if _settled(deps):
        if len(_LEAD) >= MAX_KEPT_ANSWERS * 8:
            _LEAD.clear()
        _LEAD[key] = (deps, led)
    return led


# Each directory listed for ``_unit_symlinks``: (its signature then, its symlinks, its `@scope`
# subdirectories, how many entries it has).
_LISTED: dict[str, tuple[object, tuple[str, ...], tuple[str, ...], int]] = {}


def _unit_symlinks(unit: str, sigs: dict[str, object]) -> tuple[list[str], int]:
    """The symlinks among the entries of ``unit`` (and, for a ``node_modules``, of its
    ``@scope`` directories, where package managers put their links to workspace packages), and
    how many entries were looked at."""
    links: list[str] = []
    todo = [unit]
    looked = 0
    first = True
    while todo:
        d = todo.pop()
        sig = _sig_in(sigs, d)
        hit = _LISTED.get(d)
        if hit is None or sig is None or hit[0] != sig:
            found: list[str] = []
            scopes: list[str] = []
            count = 0
            try:
                with os.scandir(d) as it:
                    for entry in it:
                        count += 1
                        if count > MAX_UNIT_ENTRIES:
                            break
                        with contextlib.suppress(OSError):
                            if entry.is_symlink():
                                found.append(entry.name)
                            elif entry.name.startswith("@") and entry.is_dir():
                                scopes.append(entry.name)
            except OSError:
                pass
            if len(_LISTED) >= MAX_KEPT_ANSWERS * 8:
                _LISTED.clear()
            hit = _LISTED[d] = (sig, tuple(found), tuple(scopes), count)
        links += [os.path.join(d, n) for n in hit[1]]
        looked += hit[3]
        if first and os.path.basename(unit) == "node_modules":
            todo += [os.path.join(d, n) for n in hit[2]]
        first = False
    return links, looked


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


def read_only_dirs(
    path_var: str, writable: Places, skip: Iterable[str] = (), exempt: Sequence[str] = ()
) -> list[PathDir]:
    """Absolute ``PATH`` entries no run can write that hold a symlink leading into a writable
    grant (``npm link``, ``ln -s ~/proj/bin/tool ~/.local/bin/``): each as a ``PathDir`` whose
    unit is itself (nothing is bound for it; its links' targets are, ``link_targets``) and that is
    compared after the run like the others (a program whose target changed is quarantined).

    Its hundreds of reads (every link of ``/usr/bin``) are not noted one by one in a policy's
    recording (``fsdeps``): the answer adds its own check, the same question asked again, which
    the kept answers (``_NO_LINKS``) make a few ``stat`` calls. Entries under ``exempt``
    (``sandbox.rules.path_writable``) are left out, and so are links that lead under it."""
    skipped = tuple(skip)
    free = tuple(exempt)
    headstart.take()  # the first look: what the launcher's fork server made meanwhile
    with fsdeps.unrecorded():
        out = _read_only_dirs(path_var, writable, skipped, free)
    same = [pd.path for pd in out]
    fsdeps.add_check(
        lambda: [pd.path for pd in _read_only_dirs(path_var, writable, skipped, free)] == same
    )
    return out


def outside_dirs(path_var: str, writable: Places, exempt: Sequence[str] = ()) -> list[str]:
    """The absolute ``PATH`` entries outside every writable grant and not under ``exempt``, each
    directory once (``/bin`` and ``/usr/bin`` may be one)."""
    free = Places(exempt)

    def left_out(e: str) -> bool:
        return e in writable or bool(exempt and e in free)

    return [e for e, _dev in path_directories(path_var, left_out)]


def _read_only_dirs(
    path_var: str, writable: Places, skip: Iterable[str], exempt: tuple[str, ...]
) -> list[PathDir]:
    entries = [os.path.normpath(e) for e in path_var.split(os.pathsep) if os.path.isabs(e)]
    skipped = set(skip)
    seen: set[tuple[int, int]] = set()
    tops = tuple(sorted(writable.real))
    in_grants = Tops(writable.real)
    free = Places(exempt)
    out: list[PathDir] = []
    for i, e in enumerate(entries):
        if e in skipped or e in writable or (exempt and e in free):
            continue
        skipped.add(e)
        try:
            st = os.stat(e)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) in seen:
            continue  # the same directory by another name (``/bin`` and ``/usr/bin``)
        seen.add((st.st_dev, st.st_ino))
        key = (e, tops, exempt)
        if _still(_NO_LINKS.get(key)):
            continue
        deps, reach = link_reach(e)
        if reach is not None and not any(p in in_grants for p in reach):
            # None of its links leads into or through a grant: what ``link_targets`` would find
            # (it looks at no link the quick resolution places outside every grant).
            if deps is not None:
                if len(_NO_LINKS) >= MAX_KEPT_ANSWERS:
                    _NO_LINKS.clear()
                _NO_LINKS[key] = deps
            continue
        pd = PathDir(e, tuple(entries[i + 1 :]), e, True, outside=True, free=free.paths)
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


Deps = tuple[tuple[str, object], ...]  # directories read, each with its signature (``_dir_sig``)


def link_reach(d: str) -> tuple[Deps | None, tuple[str, ...] | None]:
    """Where the symlinks of the PATH directory ``d`` lead, whatever the grants: every end and
    every link met on the way by the quick resolution ``link_targets`` makes of each (``None``
    when one has no quick answer, a loop, or ``d`` cannot be listed: ``link_targets`` decides
    then), with the directories that answer read. Kept per directory while those directories
    keep their signatures (``_REACH``), like ``_NO_LINKS``; ``None`` for them when the answer
    is not kept (one of them changed in the last ``fsdeps.SETTLED_NS``: a change within the
    same timestamp could leave its signature as it was)."""
    hit = _REACH.get(d)
    if hit is not None and _still(hit[0]):
        return hit
    read: set[str] = {d}
    real = _fast_real(read)
    reach: set[str] = set()
    answered = True
    names = _symlink_names(d)
    if names is None:
        return None, None
    for name in names:
        path = os.path.join(d, name)
        if not _leads_away(path):
            continue
        quick = _quick_end(path, real)
        if quick is None:
            answered = False
            break
        reach.add(quick[0])
        reach.update(quick[1])
    deps = tuple((p, _dir_sig(p)) for p in sorted(read))
    answer = (deps, tuple(sorted(reach)) if answered else None)
    if not _settled(deps):
        return None, answer[1]
    if len(_REACH) >= MAX_KEPT_ANSWERS:
        _REACH.clear()
    _REACH[d] = answer
    return answer


# ``link_reach``'s answers, by directory.
_REACH: dict[str, tuple[Deps, tuple[str, ...] | None]] = {}

# Read-only PATH directories none of whose links led into the writable grants, by (directory,
# grants): the directories the answer read, each with its signature. Any entry added, removed or
# replaced in one of them (a new link, an alternative re-pointed) changes its signature and the
# directory is looked at again; nothing else can change where its links lead.
_NO_LINKS: dict[tuple[str, tuple[str, ...], tuple[str, ...]], tuple[tuple[str, object], ...]] = {}
MAX_KEPT_ANSWERS = 512


def _symlink_names(d: str) -> list[str] | None:
    """The names of the symlinks among the entries of ``d`` (at most ``MAX_ENTRIES``); None
    when it cannot be listed."""
    try:
        with os.scandir(d) as it:
            return [e.name for e in it if e.is_symlink()][:MAX_ENTRIES]
    except OSError:
        return None


def _leads_away(link: str) -> bool:
    """Whether the symlink ``link`` names something other than an entry of its own directory
    (a sibling is looked at as itself)."""
    try:
        text = os.readlink(link)
    except OSError:
        return False
    return "/" in text or text in (".", "..")


def _settled(deps: Deps) -> bool:
    """Whether none of the directories of ``deps`` changed in the last ``fsdeps.SETTLED_NS`` (a
    change within the same timestamp could leave a signature as it was): only then is an answer
    read from them kept."""
    young = time.time_ns() - fsdeps.SETTLED_NS
    return all(
        sig is None or (isinstance(sig, tuple) and sig[2] < young and sig[3] < young)
        for _p, sig in deps
    )


def path_directories(
    path_var: str, left_out: Callable[[str], bool] = lambda _e: False
) -> list[tuple[str, int]]:
    """Each absolute entry of ``path_var`` that is a directory, normalized, once per directory
    (``/bin`` and ``/usr/bin`` may be one: the first name not ``left_out`` counts), with its
    ``st_dev``."""
    out: list[tuple[str, int]] = []
    seen: set[tuple[int, int]] = set()
    for e in path_var.split(os.pathsep):
        if not os.path.isabs(e):
            continue
        e = os.path.normpath(e)
        if left_out(e):
            continue
        try:
            st = os.stat(e)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode) and (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            out.append((e, st.st_dev))
    return out


def _dir_sig(d: str) -> object:
    try:
        st = os.stat(d)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)


def _still(deps: tuple[tuple[str, object], ...] | None) -> bool:
    return deps is not None and all(sig is not None and _dir_sig(d) == sig for d, sig in deps)
