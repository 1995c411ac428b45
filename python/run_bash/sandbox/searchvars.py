"""Search paths other than ``PATH``: variables of the host's environment that name directories (or
files) a tool loads code from at every start, before or instead of its own. A directory of the
project on the user's ``PYTHONPATH`` would let a run leave a ``sitecustomize.py`` (or a ``json.py``,
found before the standard library's) that every later Python of the user runs, in any directory;
one on ``LD_LIBRARY_PATH`` a ``libc.so.6`` every dynamically linked program loads. So these are
kept as ``PATH``'s directories are (``keptnames.keep_search_dirs``: the same ``pathguard``
units, read-only inside the run), and the files some of them name, read-only as files.

Only variables whose tool loads from them without the user choosing to run project code are
here: each with what reads it. How each tool takes an entry: every one resolves a relative entry
in the directory it starts in (taken like a relative ``PATH`` entry: in the project's top and in
every directory of the writable trees that holds its first component); an empty entry means that
directory for Python, the dynamic loader and Java (``cwd``), and nothing for the others (Node,
Perl, Lua, where ``;;`` means the default path). An entry no rule below can place (a ``$``
token, ``$ORIGIN``) is taken as the directory above its first such component: what lies there
is kept whole.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

DIRS = "dirs"  # directories searched
FILES = "files"  # files loaded as they are named
EITHER = "either"  # a directory searched or a file loaded (Java's jars, PHP's php.ini)
TEMPLATES = "templates"  # Lua's `?` templates: the directory before the first `?` is searched


@dataclass(frozen=True)
class Var:
    """A search-path variable: the characters that separate its entries (none: one entry), what
    an entry is, whether an empty entry means the directory the tool starts in, what reads it."""

    name: str
    seps: str
    kind: str
    cwd: bool
    reads: str


_LUA = "Lua and LuaJIT (Neovim's too) load what `require` finds there first"
VARS: tuple[Var, ...] = (
    # Python prepends each entry (an empty one is the directory it starts in) to sys.path, before
    # the standard library, and imports `sitecustomize` and `usercustomize` from there.
    Var("PYTHONPATH", ":", DIRS, True, "Python imports from it before the standard library"),
    Var("PYTHONHOME", ":", DIRS, False, "Python loads its standard library from it"),
    Var("PYTHONUSERBASE", "", DIRS, False, "Python runs the *.pth files of its site-packages"),
    Var("PYTHONPYCACHEPREFIX", "", DIRS, False, "Python loads compiled modules (*.pyc) from it"),
    Var("PYTHONSTARTUP", "", FILES, False, "Python's prompt runs it"),
    # glibc's loader: `:` and `;` both separate, an empty entry is the working directory.
    Var("LD_LIBRARY_PATH", ":;", DIRS, True, "every program loads its libraries from it first"),
    Var("LD_PRELOAD", ": \t\n", FILES, False, "every program loads it"),
    Var("LD_AUDIT", ":", FILES, False, "every program loads it"),
    Var("GCONV_PATH", ":", DIRS, False, "glibc loads character set converters from it"),
    Var("NODE_PATH", ":", DIRS, False, "Node loads the packages programs require from it"),
    # Perl skips empty entries; PERLLIB counts only without PERL5LIB (both kept).
    Var("PERL5LIB", ":", DIRS, False, "Perl loads modules (strict.pm) from it first"),
    Var("PERLLIB", ":", DIRS, False, "Perl loads modules (strict.pm) from it first"),
    # Ruby's rules for an empty entry are not checked here: taken as the directory it starts in.
    Var("RUBYLIB", ":", DIRS, True, "Ruby loads what it requires (rubygems) from it first"),
    Var("GEM_HOME", "", DIRS, False, "Ruby activates the newest gem of a name from it"),
    Var("GEM_PATH", ":", DIRS, False, "Ruby activates the newest gem of a name from it"),
    *(
        Var(f"{v}{ver}", ";", TEMPLATES, False, _LUA)
        for v in ("LUA_PATH", "LUA_CPATH")
        for ver in ("", "_5_1", "_5_2", "_5_3", "_5_4", "_5_5")
    ),
    # Java: an empty entry is the working directory; `dir/*` is the jars in dir.
    Var("CLASSPATH", ":", EITHER, True, "Java loads classes from it"),
    Var("TCL_LIBRARY", "", DIRS, False, "Tcl runs its init.tcl at every start"),
    Var("TCLLIBPATH", " \t\n", DIRS, False, "Tcl runs the pkgIndex.tcl files there"),
    Var("GUILE_LOAD_PATH", ":", DIRS, False, "Guile loads modules from it first"),
    Var("GUILE_LOAD_COMPILED_PATH", ":", DIRS, False, "Guile loads compiled modules from it"),
    Var("JULIA_DEPOT_PATH", ":", DIRS, False, "Julia runs its config/startup.jl at every start"),
    Var("JULIA_LOAD_PATH", ":", DIRS, False, "Julia loads packages from it"),
    Var("PHPRC", "", EITHER, False, "PHP reads its php.ini (auto_prepend_file) at every start"),
    Var("PHP_INI_SCAN_DIR", ":", DIRS, False, "PHP reads its *.ini at every start"),
    Var("R_PROFILE_USER", "", FILES, False, "R runs it at every start"),
    Var("R_ENVIRON_USER", "", FILES, False, "R reads it at every start"),
    # Shells: bash runs $BASH_ENV before every script, sh (and bash as sh) $ENV at every
    # interactive start, zsh the start-up files of $ZDOTDIR (.zshenv at every start).
    Var("BASH_ENV", "", FILES, False, "bash runs it before every script"),
    Var("ENV", "", FILES, False, "sh runs it at every interactive start"),
    Var("ZDOTDIR", "", DIRS, False, "zsh runs its start-up files (.zshenv) at every start"),
)
BY_NAME = {v.name: v for v in VARS}
# Python's modules imported at every start from its search path (a package or any suffix).
PYTHON_START = ("sitecustomize", "usercustomize")
PYTHON_SUFFIXES = ("", ".py", ".pyc", ".so", ".abi3.so")


@dataclass(frozen=True)
class Entry:
    """One entry of a search-path variable: ``path`` as written ("" for the directory the tool
    starts in), whether it names a file (``FILES``), a directory, or either."""

    var: Var
    path: str
    kind: str


def _split(value: str, seps: str) -> list[str]:
    if not seps:
        return [value]
    parts = [value]
    for sep in seps:
        parts = [q for p in parts for q in p.split(sep)]
    return parts


def _dollar(path: str) -> str:
    """A path with a ``$`` token (``$ORIGIN``, ``$LIB``, ``${PLATFORM}``) as the directory above
    its first component holding one ("" when that is the first one: the tool's directory)."""
    parts = path.split("/")
    for i, c in enumerate(parts):
        if "$" in c:
            head = "/".join(parts[:i])
            return head or ("/" if path.startswith("/") else "")
    return path


def entries(env: Mapping[str, str]) -> list[Entry]:
    """Every entry of the search-path variables set in ``env``, in ``VARS``' order."""
    out: list[Entry] = []
    for var in VARS:
        value = env.get(var.name)
        if not value:
            continue
        for raw in _split(value, var.seps):
            kind = var.kind
            e = raw
            if var.kind == TEMPLATES:
                if not raw:
                    continue  # `;;`: the default path
                if "?" not in raw:
                    kind = FILES  # a template without `?` is one file, tried for every module
                else:
                    parts = raw.split("/")
                    first = next(i for i, c in enumerate(parts) if "?" in c)
                    e = "/".join(parts[:first]) or ("/" if raw.startswith("/") else "")
                    kind = DIRS
            elif var.name == "CLASSPATH" and raw.endswith("/*"):
                e, kind = raw[:-2], DIRS
            elif var.name == "JULIA_LOAD_PATH" and raw.startswith("@"):
                continue  # `@`, `@v#.#`, `@stdlib`: named places, not paths
            if kind == FILES and var.name == "LD_PRELOAD" and "/" not in raw:
                continue  # a library name: found through the search path (kept above)
            if "$" in e:
                e, kind = _dollar(e), DIRS
            if not e and (kind == FILES or (raw == "" and not var.cwd)):
                continue
            out.append(Entry(var, e, kind))
    return out


def dir_values(env: Mapping[str, str]) -> list[tuple[Var, str]]:
    """Each variable's directory entries (and either kind) as one ``PATH``-like value, empty
    entries kept where they mean the directory the tool starts in."""
    by_var: dict[str, list[str]] = {}
    for e in entries(env):
        if e.kind != FILES:
            by_var.setdefault(e.var.name, []).append(e.path)
    return [(BY_NAME[n], os.pathsep.join(ps)) for n, ps in by_var.items()]


def file_entries(env: Mapping[str, str]) -> list[Entry]:
    """The entries that name one file each (``PYTHONSTARTUP``, ``LD_PRELOAD``'s paths)."""
    return [e for e in entries(env) if e.kind == FILES]
