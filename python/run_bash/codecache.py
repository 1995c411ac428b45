"""Code the host's start-up would otherwise compile again at every start, kept between starts.

Two kinds, both compiled from text the host's own modules give:

* **Dataclass methods.** Python 3.11 compiles each method a dataclass generates (``__init__``,
  ``__repr__``, ``__eq__``, ``__hash__``, and a frozen class's ``__setattr__`` and
  ``__delattr__``) from source text when the class is defined: one ``exec`` of a small function
  each, about 0.1 ms apiece on a slow core and several hundred of them while the host starts.
  ``install()`` gives the ``dataclasses`` module an ``exec`` that looks the source text up first:
  the code object compiled from exactly that text (``compile(text, "<string>", "exec")``, what
  ``exec`` would have compiled) is kept, so a start compiles only text it has not seen. The
  methods are the ones dataclasses would have made: same text, same code, and the globals and
  locals are still given at ``exec`` time.
* **Regular expressions.** ``re`` parses each pattern and builds its program the first time a
  process uses it: about 120 patterns while the host starts (the pause list's tables hold most),
  10 ms here. ``install()`` routes ``re``'s compiler through a look-up of the pattern and its
  flags: the program ``re`` built for exactly them (the arguments it gave ``_sre.compile``) is
  kept, and ``_sre.compile`` makes the pattern object from it, equal to the one ``re`` makes
  (a pattern object compares by its text, flags and program). Patterns are noted only until
  ``save()``, which ends start-up: after it ``re`` compiles as it always does, so a pattern given
  later (a run's output pattern) is never kept.

The file is marshalled data, like a ``.pyc`` file, in the same directory and with the same
trust. Its header names the interpreter (version and build): its marshal, bytecode and regular
expression formats are the file's. Any other header, or a file that does not load, is ignored
and rewritten. ``save()`` writes what this process used (never what it did not), and only when
something was compiled; a directory that cannot be written to is left alone.
"""

from __future__ import annotations

import builtins
import contextlib
import importlib
import marshal
import os
import re
import sys
import threading
from types import CodeType
from typing import Any

_sre: Any = None
_re_compiler: Any = None
try:  # Python 3.11 and later: re's compiler and the C engine it hands its programs to
    _sre = importlib.import_module("_sre")
    _re_compiler = importlib.import_module("re._compiler")
except ImportError:  # (3.10: patterns are compiled at every start)
    _re_compiler = None

FILE = os.path.join(
    os.path.dirname(os.path.abspath(__file__)),
    "__pycache__",
    f"startup-code.{sys.implementation.cache_tag}.bin",
)
# What this file was called when it kept dataclass methods only: removed by ``save``.
_FORMER = os.path.join(os.path.dirname(FILE), f"dataclass-code.{sys.implementation.cache_tag}.bin")
# The exact interpreter (version and build): its marshal, bytecode and regex formats are the file's.
_HEADER = f"run_bash start-up code 2\n{sys.version}\n".encode()

ReKey = tuple[str | bytes, int]  # (pattern, flags)
ReArgs = tuple[Any, ...]  # what ``_sre.compile`` takes after the pattern

_path = FILE  # the file ``install`` read, which ``save`` writes
_known: dict[str, CodeType] = {}
_used: dict[str, CodeType] = {}
_compiled = 0  # compiled by this process (not found in the file)
_hits = 0  # found in the kept code
_re_known: dict[ReKey, ReArgs] = {}
_re_used: dict[ReKey, ReArgs] = {}
_re_counts = [0, 0]  # patterns found in the file, patterns compiled and noted
_re_original: Any = None  # re's own compiler while ours stands in for it
_re_lock = threading.Lock()
_unsaved = False  # compiled something since the file was last written


def _exec(source: Any, globals: Any = None, locals: Any = None) -> None:
    global _compiled, _hits, _unsaved
    if isinstance(source, str):
        code = _known.get(source)
        if code is None:
            code = compile(source, "<string>", "exec")
            _known[source] = code
            _compiled += 1
            _unsaved = True
        else:
            _hits += 1
        _used[source] = code
        source = code
    builtins.exec(source, globals, locals)


class _Noting:
    """Stands for ``_sre`` in ``re._compiler`` while one pattern compiles: its ``compile``
    notes the arguments it was given for that pattern."""

    def __init__(self, pattern: str | bytes) -> None:
        self.pattern = pattern
        self.args: ReArgs | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(_sre, name)

    def compile(self, pattern: Any, *args: Any) -> Any:
        if (
            type(pattern) is not type(self.pattern)
            or pattern != self.pattern
            or len(args) != 5  # (flags, code, groups, groupindex, indexgroup) in 3.11 to 3.13
        ):
            return _sre.compile(pattern, *args)
        flags, code, groups, index, names = args
        # As marshal keeps them: re's opcodes are ints with names, the same numbers.
        kept = (int(flags), [int(c) for c in code], int(groups), dict(index), tuple(names))
        self.args = kept
        return _sre.compile(pattern, *kept)


def _re_compile(p: Any, flags: int = 0) -> Any:
    """``re._compiler.compile`` during start-up: the kept program of ``p`` with ``flags``, else
    re's own compile, noted."""
    global _unsaved
    original = _re_original
    if original is None or not isinstance(p, (str, bytes)) or not isinstance(flags, int):
        return (original or _re_compiler.compile)(p, flags)
    key: ReKey = (p, flags)
    args = _re_known.get(key)
    if args is not None:
        try:
            pattern = _sre.compile(p, *args)
        except Exception:  # not what this interpreter takes: compiled as usual below
            _re_known.pop(key, None)  # (another thread may have dropped it already)
        else:
            _re_used[key] = args
            _re_counts[0] += 1
            return pattern
    with _re_lock:  # one pattern at a time is noted (``_sre`` is one name in re's compiler)
        noting = _Noting(p)
        _re_compiler._sre = noting
        try:
            pattern = original(p, flags)
        finally:
            _re_compiler._sre = _sre
    # (A pattern with re.DEBUG prints its program when compiled: re keeps none either.)
    if noting.args is not None and not flags & re.DEBUG:
        _re_known[key] = _re_used[key] = noting.args
        _re_counts[1] += 1
        _unsaved = True
    return pattern


def install(path: str = FILE) -> None:
    """Load the code kept in ``path`` (if any), route dataclasses' ``exec`` through it and, until
    ``save()``, re's compiler. Call it before the first dataclass is defined; calling it again
    only loads the file again."""
    import dataclasses

    global _path, _re_original
    _path = path
    methods, patterns = _load(path)
    _known.update(methods)
    _re_known.update(patterns)
    dataclasses.exec = _exec  # type: ignore[attr-defined]  # shadows the builtin in that module only
    if _re_compiler is not None and _re_original is None:
        _re_original = _re_compiler.compile
        _re_compiler.compile = _re_compile


def _load(path: str) -> tuple[dict[str, CodeType], dict[ReKey, ReArgs]]:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return {}, {}
    if not data.startswith(_HEADER):
        return {}, {}
    try:
        methods, patterns = marshal.loads(data[len(_HEADER) :])
    except (EOFError, ValueError, TypeError):
        return {}, {}
    if not isinstance(methods, dict) or not isinstance(patterns, dict):
        return {}, {}
    return (
        {k: v for k, v in methods.items() if isinstance(k, str) and isinstance(v, CodeType)},
        {
            k: v
            for k, v in patterns.items()
            if isinstance(k, tuple)
            and len(k) == 2
            and isinstance(k[0], (str, bytes))
            and type(k[1]) is int
            and isinstance(v, tuple)
            and len(v) == 5
            and type(v[0]) is int
        },
    )


def save() -> bool:
    """Start-up is over: re compiles as usual from now on. Write the code and patterns this
    process used to the file ``install`` read, when any of it had to be compiled; whether it
    wrote. (The file's former name, which held dataclass methods only, is removed.)"""
    global _unsaved, _re_original
    if _re_original is not None:
        _re_compiler.compile = _re_original
        _re_original = None
    if _path == FILE:
        with contextlib.suppress(OSError):
            os.unlink(_FORMER)
    if not _unsaved:
        return False
    path = _path
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        # Readable as the bytecode beside it is (the mode of this module's source, less umask).
        mode = os.stat(__file__).st_mode & 0o666
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(_HEADER + marshal.dumps((dict(_used), dict(_re_used))))
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        return False
    _unsaved = False
    return True


def stats() -> tuple[int, int]:
    """(methods found in the kept code, methods compiled) in this process so far."""
    return _hits, _compiled


def pattern_stats() -> tuple[int, int]:
    """(patterns found in the kept programs, patterns compiled and noted) in this process so far."""
    return _re_counts[0], _re_counts[1]
