"""The compiled code of the methods dataclasses make, kept between starts of the host.

Python 3.11 compiles each method a dataclass generates (``__init__``, ``__repr__``, ``__eq__``,
``__hash__``, and a frozen class's ``__setattr__`` and ``__delattr__``) from source text when the
class is defined: one ``exec`` of a small function each, about 0.1 ms apiece on a slow core and
several hundred of them while the host starts. ``install()`` gives the ``dataclasses`` module an
``exec`` that looks the source text up first: the code object compiled from exactly that text
(``compile(text, "<string>", "exec")``, what ``exec`` would have compiled) is kept in a file beside
the package's bytecode cache, so a start compiles only text it has not seen. The methods are the
ones dataclasses would have made: same text, same code, and the globals and locals are still
given at ``exec`` time.

The file is marshalled code, like a ``.pyc`` file, in the same directory and with the same trust.
Its header names the interpreter (version and build); any other header, or a file that does not load,
is ignored and rewritten. ``save()`` writes what this process used (never what it did not), and
only when something was compiled; a directory that cannot be written to is left alone.
"""

from __future__ import annotations

import builtins
import marshal
import os
import sys
from types import CodeType
from typing import Any

FILE = os.path.join(
    os.path.dirname(os.path.abspath(__file__)),
    "__pycache__",
    f"dataclass-code.{sys.implementation.cache_tag}.bin",
)
# The exact interpreter (version and build): its marshal and bytecode formats are the file's.
_HEADER = f"run_bash dataclass code\n{sys.version}\n".encode()

_path = FILE  # the file ``install`` read, which ``save`` writes
_known: dict[str, CodeType] = {}
_used: dict[str, CodeType] = {}
_compiled = 0  # compiled by this process (not found in the file)
_hits = 0  # found in the kept code
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


def install(path: str = FILE) -> None:
    """Load the code kept in ``path`` (if any) and route dataclasses' ``exec`` through it. Call
    it before the first dataclass is defined; calling it again only loads the file again."""
    import dataclasses

    global _path
    _path = path
    _known.update(_load(path))
    dataclasses.exec = _exec  # type: ignore[attr-defined]  # shadows the builtin in that module only


def _load(path: str) -> dict[str, CodeType]:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return {}
    if not data.startswith(_HEADER):
        return {}
    try:
        table = marshal.loads(data[len(_HEADER) :])
    except (EOFError, ValueError, TypeError):
        return {}
    if not isinstance(table, dict):
        return {}
    return {k: v for k, v in table.items() if isinstance(k, str) and isinstance(v, CodeType)}


def save() -> bool:
    """Write the code this process used to the file ``install`` read, when any of it had to be
    compiled; whether it wrote."""
    global _unsaved
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
                f.write(_HEADER + marshal.dumps(dict(_used)))
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
