"""The modules a host's start imports, kept in one file between starts.

Importing a module from its ``.pyc`` costs more than its bytecode: the path finder looks along
``sys.path`` for it and the loader opens, reads and checks one file per module (here about a third
of the host's imports, some 280 modules). ``install()`` puts a finder first on ``sys.meta_path``
that answers for each module the last start imported from one file read once, with the code of
exactly the source the usual import would find now:

* each module's source is checked as its ``.pyc`` is, and more strictly: its device, inode,
  size and modification time (to the nanosecond) must be the ones its kept code was compiled
  from;
* the kept modules are used only while ``sys.path`` is the same list and every directory the
  usual import would look through for them (``sys.path``'s entries and the packages'
  directories) is as it was (the same four): a module added where the search would find it
  first, removed, or renamed changes its directory;
* the file names the interpreter (its version and bytecode magic) and optimization level.

A module it does not keep, or whose source changed, is imported the usual way (so are extension
modules, built-in and frozen ones). ``save()``, a moment after start-up, writes the modules it
imported from ``.pyc`` files that match their sources, and the kept modules it did not import
that still hold (hosts with other options import other modules: the file keeps them all), when
anything it imported was not kept; and only when no directory the search looks through changed
since ``install`` (a module found before such a change may not be the one found after it).
The file is marshalled data, like a ``.pyc`` file, beside the plugin's own bytecode and with the
same trust (``codecache`` keeps its compiled dataclass methods and patterns there too); one that
does not load is ignored and written again.

It must be importable before anything else: only built-in and frozen modules here (and
``importlib.machinery``, which imports nothing more).
"""

from __future__ import annotations

import marshal
import os
import sys
import time
from importlib._bootstrap_external import MAGIC_NUMBER  # (importlib.util's, without its imports)
from importlib.machinery import ModuleSpec, SourceFileLoader
from types import CodeType

FILE = os.path.join(
    os.path.dirname(os.path.abspath(__file__)),
    "__pycache__",
    f"startup-modules.{sys.implementation.cache_tag}.bin",
)
_HEADER = b"run_bash start-up modules 2\n" + MAGIC_NUMBER + f"\n{sys.version}\n".encode()

# What identifies a file or directory as it is (``_sig``): device, inode, size, mtime in ns.
Sig = tuple[int, int, int, int]
# name -> (source, its ``Sig``, package?, the .pyc path, where its code is in the file's code
# part, its length)
Entry = tuple[str, Sig, bool, str, int, int]
_LENGTH = 8  # bytes that give the index's length, after the header


def _opened(path: str) -> tuple[int, os.stat_result] | None:
    """``path`` opened for reading, and what it is; None when it cannot be."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return fd, os.fstat(fd)
    except OSError:
        os.close(fd)
        return None


def _sig(path: str) -> Sig | None:
    """``path``'s ``Sig`` now; None when it cannot be looked at."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


class _KeptLoader(SourceFileLoader):
    """A source file's loader whose code is the kept code (everything else, e.g. its source for
    a traceback, is the file's own)."""

    def __init__(self, fullname: str, path: str, code: bytes) -> None:
        super().__init__(fullname, path)
        self._kept = code

    def get_code(self, fullname: str) -> CodeType:
        code = marshal.loads(self._kept)
        if not isinstance(code, CodeType):
            raise ImportError(f"the kept code of {fullname} is not code", name=fullname)
        return code


class Finder:
    """``sys.meta_path``'s first finder while the kept modules hold (see the module docstring).
    Reads each module's code from the open file when it is asked for (``os.pread``)."""

    def __init__(self, fd: int, file: tuple[int, int], base: int, entries: dict[str, Entry]):
        self.fd = fd
        self.file = file  # the file's (device, inode): the descriptor is checked to be it
        self.base = base  # where the code part starts
        self.entries = entries
        self.hits = 0
        self.misses = 0

    def find_spec(self, name: str, path: object = None, target: object = None) -> ModuleSpec | None:
        entry = self.entries.get(name)
        if entry is None:
            return None
        source, sig, package, cached, offset, length = entry
        where = os.path.dirname(source)
        if isinstance(path, list) and (os.path.dirname(where) if package else where) not in path:
            self.misses += 1
            return None  # not where this import looks
        if _sig(source) != sig:
            self.misses += 1
            return None
        try:
            st = os.fstat(self.fd)  # (a forked process may have closed it, its number reused)
            code = os.pread(self.fd, length, self.base + offset)
        except OSError:
            return None
        if (st.st_dev, st.st_ino) != self.file or len(code) != length:
            return None
        self.hits += 1
        spec = ModuleSpec(name, _KeptLoader(name, source, code), origin=source, is_package=package)
        spec.has_location = True
        spec.cached = cached
        if package:
            spec.submodule_search_locations = [where]
        return spec

    def invalidate_caches(self) -> None:
        pass


_finder: Finder | None = None
_path = FILE
_searched: list[object] = []  # what ``install`` looked for the kept modules with
_before: frozenset[str] = frozenset()  # the modules imported before ``install``
_installed_ns = 0  # when ``install`` looked (the file system's clock)
# A directory changed later than this before ``install`` counts as changed since (file times
# lag the clock by up to a timer tick).
CHANGE_SLACK_NS = 50_000_000


def install(path: str = FILE) -> Finder | None:
    """Put the finder of the modules kept in ``path`` first on ``sys.meta_path``, when they are
    there and still hold (see the module docstring). Returns it, or None."""
    global _finder, _path, _searched, _before, _installed_ns
    _path = path
    _searched = _search()
    _before = frozenset(sys.modules)
    _installed_ns = time.time_ns()
    opened = _opened(path)
    if opened is None:
        return None
    fd, st = opened
    try:
        head = os.pread(fd, len(_HEADER) + _LENGTH, 0)
        if not head.startswith(_HEADER) or len(head) != len(_HEADER) + _LENGTH:
            raise ValueError(path)
        size = int.from_bytes(head[len(_HEADER) :], "little")
        raw = os.pread(fd, size, len(head))
        kept = marshal.loads(raw)
        search, dirs, entries = kept["path"], kept["dirs"], kept["modules"]
        if search != _searched or not isinstance(dirs, dict) or not isinstance(entries, dict):
            raise ValueError(path)
        if any(_sig(d) != sig for d, sig in dirs.items()):
            raise ValueError(path)
    except (OSError, EOFError, ValueError, TypeError, KeyError):
        os.close(fd)
        return None
    _finder = Finder(fd, (st.st_dev, st.st_ino), len(head) + size, entries)
    sys.meta_path.insert(0, _finder)
    return _finder


def done() -> None:
    """Start-up is over: the finder goes, and its file is closed (a later import is the usual
    one; ``save`` still knows what it kept)."""
    finder = _finder
    if finder is not None and finder in sys.meta_path:
        sys.meta_path.remove(finder)
        try:
            os.close(finder.fd)
        except OSError:
            pass


def _search() -> list[object]:
    """What the usual import finds modules by: the optimization level and ``sys.path``."""
    return [sys.flags.optimize, list(sys.path)]


def save() -> bool:
    """Write the modules imported since ``install`` from ``.pyc`` files that match their sources
    (or from the kept file), with the kept modules this process did not import that still
    hold, unless every module it imported came from the kept file; whether it wrote. Nothing is
    written when a directory the search looks through changed since ``install`` (a module found
    before it changed may not be the one the search finds now). Best effort."""
    if not _searched:
        return False  # never installed: the search it would be kept for is not known
    search = _searched[1] if isinstance(_searched[1], list) else []
    dirs: dict[str, Sig | None] = {p: _sig(p) for p in search if p}
    found: dict[str, tuple[str, Sig, bool, str, bytes]] = {}
    all_kept = _finder is not None and not _finder.misses
    for name, module in list(sys.modules.items()):
        if name in _before:
            continue
        spec = getattr(module, "__spec__", None)
        if not isinstance(spec, ModuleSpec) or not isinstance(spec.loader, SourceFileLoader):
            continue
        source, loader = spec.origin, spec.loader
        if not isinstance(source, str) or not source.endswith(".py"):
            continue
        sig = _sig(source)
        if sig is None or not isinstance(spec.cached, str):
            continue
        all_kept = all_kept and isinstance(loader, _KeptLoader)
        code = loader._kept if isinstance(loader, _KeptLoader) else _pyc_code(spec.cached, sig)
        if code is not None:
            package = spec.submodule_search_locations is not None
            found[name] = (source, sig, package, spec.cached, code)
    if all_kept:
        return False
    found.update(_still_kept(found))
    index: dict[str, Entry] = {}
    parts: list[bytes] = []
    offset = 0
    for name, (source, sig, package, cached, code) in found.items():
        index[name] = (source, sig, package, cached, offset, len(code))
        parts.append(code)
        offset += len(code)
        where = os.path.dirname(source)
        for d in (where, os.path.dirname(where)) if package else (where,):
            dirs.setdefault(d, _sig(d))
    if any(sig is not None and sig[3] >= _installed_ns - CHANGE_SLACK_NS for sig in dirs.values()):
        return False
    raw = marshal.dumps({"path": _searched, "dirs": dirs, "modules": index})
    tmp = f"{_path}.{os.getpid()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(_HEADER + len(raw).to_bytes(_LENGTH, "little") + raw)
                for code in parts:
                    f.write(code)
            os.replace(tmp, _path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        return False
    return True


def _still_kept(
    found: dict[str, tuple[str, Sig, bool, str, bytes]],
) -> dict[str, tuple[str, Sig, bool, str, bytes]]:
    """The kept modules this process did not import whose sources are still the ones their code
    was made from, read from the kept file (when it is still the file ``install`` opened)."""
    finder = _finder
    out: dict[str, tuple[str, Sig, bool, str, bytes]] = {}
    if finder is None:
        return out
    opened = _opened(_path)
    if opened is None:
        return out
    fd, st = opened
    try:
        if (st.st_dev, st.st_ino) != finder.file:
            return out  # another host wrote it since
        for name, (source, sig, package, cached, offset, length) in finder.entries.items():
            if name in found or _sig(source) != sig:
                continue
            code = os.pread(fd, length, finder.base + offset)
            if len(code) == length:
                out[name] = (source, sig, package, cached, code)
    except OSError:
        return {}
    finally:
        os.close(fd)
    return out


def _pyc_code(cached: str, sig: Sig) -> bytes | None:
    """The code in ``cached`` (a ``.pyc`` file) when it was compiled from the source whose
    signature is ``sig`` (as the import system checks it: timestamp-based, its size and
    modification time in seconds), else None."""
    try:
        with open(cached, "rb") as f:
            data = f.read()
    except OSError:
        return None
    if len(data) < 16 or data[:4] != MAGIC_NUMBER or int.from_bytes(data[4:8], "little") != 0:
        return None
    mtime = int.from_bytes(data[8:12], "little")
    size = int.from_bytes(data[12:16], "little")
    if mtime != (sig[3] // 1_000_000_000) & 0xFFFFFFFF or size != sig[2] & 0xFFFFFFFF:
        return None
    return data[16:]


def stats() -> tuple[int, int]:
    """(modules taken from the kept file, kept modules imported the usual way) so far."""
    return (_finder.hits, _finder.misses) if _finder is not None else (0, 0)
