"""Agent rules files, read the way CodeCompanion reads them.

CodeCompanion loads the configured rules files into the next chat, and with them every file a
rules file includes with an ``@path`` line (its ``claude``, ``codecompanion`` and ``cli``
parsers, ``interactions/shared/rules/``). Which files those are is decided here by one port of
CodeCompanion's own code, kept equal to it by a differential test that runs CodeCompanion's Lua
on the same adversarial files (``tests/security/test_rules_differential.py``):

* **References.** CodeCompanion takes ``line:match("^%s*@(%S+)")`` on the lines of markdown
  paragraphs (or of whole sections), with Lua's byte-wise ``%s`` (space, tab, newline, vertical
  tab, form feed, carriage return; never a Unicode space). Every ``@`` followed by such
  non-space bytes, anywhere in the file, is taken here: a superset of every paragraph, section
  and list item CodeCompanion looks at (a container's marker such as ``- `` or ``> `` holds no
  ``@``), so nothing CodeCompanion includes is missed; a reference inside a code block or in
  prose is judged too.
* **Resolution.** ``vim.fs.normalize`` (``~`` at the start is ``$HOME``, ``$NAME`` anywhere is
  the variable's value, ``.`` and ``..`` collapsed as text) and ``vim.fs.joinpath`` ported
  byte for byte; the ``claude`` parser's try relative to the rules file's directory, then
  ``helpers.add_files_or_buffers``'s try relative to Neovim's working directory, then the path
  itself. Every candidate is judged, whether it exists or not (what exists may change).

A rules file is fine when every candidate of every reference leads, once symlinks are resolved,
into the project and not into a denied path, and is a regular file or directory when it exists.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from run_bash.paths import is_under, lmode
from run_bash.sandbox.hostread import HostRead, read_nonblocking
from run_bash.sandbox.places import Places

# A rules file larger than this is not something an agent should load into a chat.
MAX_RULES_BYTES = 1024 * 1024
# References judged per rules file.
MAX_REFS = 1024
# Entries of a rules directory (CodeCompanion reads it whole, subdirectories included) past which
# it is a problem in itself.
MAX_DIR_ENTRIES = 256

# Lua's %S: a byte that is not one of isspace()'s six (LuaJIT's own table, whatever the locale).
_REF_RE = re.compile(rb"@([^ \t\n\x0b\x0c\r]+)")
_VAR_RE = re.compile(rb"\$([A-Za-z0-9_]+)")
_SLASHES_RE = re.compile(rb"//+")


def include_refs(data: bytes) -> list[bytes]:
    """Every ``@reference`` of a rules file (see the module docstring), once each."""
    return list(dict.fromkeys(m.group(1) for m in _REF_RE.finditer(data)))


def _resolve_dot(path: bytes) -> bytes:
    """``vim.fs``'s ``path_resolve_dot``."""
    absolute = path.startswith(b"/")
    parts: list[bytes] = []
    for part in path.split(b"/"):
        if part in (b".", b""):
            continue
        if part == b"..":
            if parts and parts[-1] != b"..":
                parts.pop()
            elif not absolute:
                parts.append(part)
        else:
            parts.append(part)
    return (b"/" if absolute else b"") + b"/".join(parts)


def nvim_normalize(path: bytes, home: bytes, env: Mapping[bytes, bytes]) -> bytes:
    """``vim.fs.normalize(path)`` on Linux (Neovim 0.11)."""
    if path == b"":
        return b""
    if path.startswith(b"~"):
        if home.endswith(b"/"):
            home = home[:-1]
        path = home + path[1:]

    def var(m: re.Match[bytes]) -> bytes:
        value = env.get(m.group(1))
        return m.group(0) if value is None else value

    path = _VAR_RE.sub(var, path)
    double = path.startswith(b"//") and not path.startswith(b"///")
    path = (b"/" if double else b"") + _resolve_dot(path)
    return path or b"."


def nvim_joinpath(*parts: bytes) -> bytes:
    """``vim.fs.joinpath(...)`` on Linux."""
    return _SLASHES_RE.sub(b"/", b"/".join(parts))


def _head(path: bytes) -> bytes:
    """``fnamemodify(path, ":h")``."""
    stripped = path.rstrip(b"/")
    if b"/" not in stripped:
        return b"." if stripped else path
    head = stripped.rsplit(b"/", 1)[0]
    return head or b"/"


def include_candidates(
    ref: bytes, rules_file: str, cwds: Iterable[str], env: Mapping[str, str], home: str
) -> list[str]:
    """Every path CodeCompanion may read for ``@ref`` in ``rules_file``, for each working
    directory Neovim may have (``cwds``); absolute, not yet resolved through symlinks."""
    benv = {os.fsencode(k): os.fsencode(v) for k, v in env.items()}
    bhome = os.fsencode(env.get("HOME") or home)
    out: dict[str, None] = {}
    rules = os.fsencode(rules_file)
    for cwd_s in cwds:
        cwd = os.fsencode(cwd_s)
        # file.path is fnamemodify(path, ":p:."): relative to the working directory when under it.
        rel = rules[len(cwd) + 1 :] if rules.startswith(cwd.rstrip(b"/") + b"/") else rules
        tries = [ref]
        if not ref.startswith((b"/", b"~")):  # the claude parser: relative to the rules file
            tries.append(nvim_normalize(nvim_joinpath(_head(rel), ref), bhome, benv))
        for t in tries:
            p = nvim_normalize(t, bhome, benv)
            for cand in (nvim_joinpath(cwd, p), p if p.startswith(b"/") else None):
                if cand is not None:
                    # A C call sees the string up to its first NUL byte.
                    cand = cand.split(b"\0", 1)[0] or b"."
                    out[os.fsdecode(os.path.join(cwd, cand))] = None
    return list(out)


def cwds_of(hr: HostRead) -> list[str]:
    """The working directories Neovim may have when it reads the project's rules files."""
    return list(dict.fromkeys((hr.cwd, *hr.roots)))


def rules_include_paths(hr: HostRead, path: str) -> list[str]:
    """The paths a rules name's references may lead to (for their trusted state, and to watch):
    a rules file's, or those of every file in a rules directory (``rules_tree``)."""
    out: list[str] = []
    for f in rules_tree(path)[1] if stat.S_ISDIR(lmode(path)) else [path]:
        data = read_nonblocking(f, MAX_RULES_BYTES)
        if data is None:
            continue
        for ref in include_refs(data)[:MAX_REFS]:
            out += include_candidates(ref, f, cwds_of(hr), hr.env, hr.home)
    return list(dict.fromkeys(out))


def rules_tree(path: str) -> tuple[list[str], list[str]]:
    """A rules directory's directories (itself first) and the other entries in them, links not
    followed, as far as ``MAX_DIR_ENTRIES`` entries: one with more is a problem whatever they
    hold (``rules_dir_problems``)."""
    dirs_out: list[str] = []
    rest: list[str] = []
    for root, dirs, files in os.walk(path):
        dirs_out.append(root)
        rest += [os.path.join(root, n) for n in files]
        rest += [os.path.join(root, d) for d in dirs if os.path.islink(os.path.join(root, d))]
        if len(dirs_out) + len(rest) > MAX_DIR_ENTRIES:
            break
    return dirs_out, rest


# One problem of a rules name, whole: ("type" or "content", why, the entry it is about, the file
# whose reference (or the entry itself) makes it one).
Problem = tuple[str, str, str, str]


def rules_file_problems(hr: HostRead, path: str) -> list[Problem]:
    """Every problem of a regular rules file (``rules_problems`` gives the first): its size, its
    count of references, and each reference that leads out, into a denied path or to what is
    not a regular file."""
    data = read_nonblocking(path, MAX_RULES_BYTES)
    if data is None:
        return [
            ("content", f"is larger than {MAX_RULES_BYTES} bytes or cannot be read", path, path)
        ]
    refs = include_refs(data)
    if len(refs) > MAX_REFS:
        return [("content", f"has more than {MAX_REFS} @ references", path, path)]
    denied = Places(hr.denied)
    out: list[Problem] = []
    for ref in refs:
        for t in include_candidates(ref, path, cwds_of(hr), hr.env, hr.home):
            why = _candidate_problem(hr, denied, ref, t)
            if why is not None:
                out.append((why[0], why[1], why[2] if len(why) > 2 else path, path))
    return list(dict.fromkeys(out))


def rules_dir_problems(hr: HostRead, path: str) -> list[Problem]:
    """Every problem of a rules directory (CodeCompanion reads it recursively, following links):
    too many entries (the directory itself), a link out of the project, and each file's own."""
    out: list[Problem] = []
    count = 0
    for root, dirs, files in os.walk(path):
        for n in [*dirs, *files]:
            count += 1
            p = os.path.join(root, n)
            if count > MAX_DIR_ENTRIES:
                return [("type", "is a directory with too many entries", path, path)]
            if os.path.islink(p) and not hr.is_project(os.path.realpath(p)):
                out.append(("type", f"holds {n}, a link out of the project", p, p))
        for n in files:
            p = os.path.join(root, n)
            mode = lmode(p)
            if not mode or stat.S_ISLNK(mode):
                continue  # a link (judged above), or gone since the listing
            if stat.S_ISREG(mode):
                out += rules_file_problems(hr, p)
            else:
                out += [(k, w, p, p) for k, w, *_ in rules_problems(hr, p)]
    return out


def _first_link(path: str, roots: Iterable[str]) -> str | None:
    """The first symlink on the way to ``path`` inside one of ``roots`` (what to move away)."""
    for root in roots:
        if not is_under(path, root):
            continue
        cur = root
        for part in os.path.relpath(path, root).split(os.sep):
            cur = os.path.join(cur, part)
            if os.path.islink(cur):
                return cur
    return None


def _show(ref: bytes) -> str:
    text = ref.decode(errors="backslashreplace")
    return text if len(text) <= 120 else text[:117] + "..."


def rules_problems(hr: HostRead, path: str) -> list[tuple[Any, ...]]:
    """What is wrong with a rules name: ("type", why, path-to-quarantine) for an entry that is not
    a regular file in the project, ("content", why) for a reference that may lead out of the
    project or into a denied path. Empty when it is fine (or absent)."""
    try:
        st = os.lstat(path)
    except OSError:
        return []
    if stat.S_ISLNK(st.st_mode) or stat.S_ISDIR(st.st_mode):
        if stat.S_ISLNK(st.st_mode):
            real = os.path.realpath(path)
            if not hr.is_project(real):
                return [("type", f"is a symlink to {real}, outside the project", path)]
            if os.path.isdir(real):
                return [("type", "is a symlink to a directory", path)]
            return rules_problems(hr, real) if real != path else []
        return rules_dir_problems(hr, path)[:1]
    if not stat.S_ISREG(st.st_mode):
        return [("type", "is not a regular file (reading it would hang the editor)", path)]
    data = read_nonblocking(path, MAX_RULES_BYTES)
    if data is None:
        return [("content", f"is larger than {MAX_RULES_BYTES} bytes or cannot be read")]
    refs = include_refs(data)
    if len(refs) > MAX_REFS:
        return [("content", f"has more than {MAX_REFS} @ references")]
    denied = Places(hr.denied)
    for ref in refs:
        for t in include_candidates(ref, path, cwds_of(hr), hr.env, hr.home):
            why = _candidate_problem(hr, denied, ref, t)
            if why is not None:
                return [why]
    return []


def _candidate_problem(hr: HostRead, denied: Places, ref: bytes, t: str) -> tuple[Any, ...] | None:
    real = os.path.realpath(t)
    # A symlink on the way decides where it leads.
    if real != os.path.normpath(t) and (not hr.is_project(real) or real in denied):
        where = _first_link(os.path.normpath(t), hr.roots) or t
        return ("type", f"includes @{_show(ref)}, which leads to {real}", where)
    if not any(is_under(real, r) for r in hr.roots):
        return ("content", f"includes @{_show(ref)} ({real}, outside the project)")
    if real in denied:
        return ("content", f"includes @{_show(ref)} ({real}, a denied path)")
    try:
        tst = os.lstat(real)
    except OSError:
        return None
    if not (stat.S_ISREG(tst.st_mode) or stat.S_ISDIR(tst.st_mode)):
        return ("type", f"includes @{_show(ref)}, which is not a regular file", real)
    return None


def include_paths_of(hr: HostRead, names: Sequence[str]) -> list[str]:
    """Every rules name and every path its references may lead to."""
    out: list[str] = []
    for n in names:
        out += [n, *rules_include_paths(hr, n)]
    return list(dict.fromkeys(out))
