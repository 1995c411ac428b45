"""gitignore(5) rules, matched byte for byte like git's wildmatch (``WM_PATHNAME``).

Pure: callers hand in the bytes of each ignore file; nothing here opens a file. Paths are relative to
the project, ``/``-separated, as ``str`` decoded with ``surrogateescape`` (names that are not UTF-8
round-trip); matching runs on their bytes, so ``?`` is one byte as in git.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

# POSIX classes for [[:name:]], ASCII like git's (it tests bytes with the C locale's ctype).
_CLASSES = {
    "alnum": rb"0-9A-Za-z",
    "alpha": rb"A-Za-z",
    "blank": rb" \t",
    "cntrl": rb"\x00-\x1f\x7f",
    "digit": rb"0-9",
    "graph": rb"\x21-\x7e",
    "lower": rb"a-z",
    "print": rb"\x20-\x7e",
    "punct": rb"!-/:-@\[-`{-~",
    "space": rb" \t\n\r\x0b\x0c",
    "upper": rb"A-Z",
    "xdigit": rb"0-9A-Fa-f",
}


def _escape_byte(b: int) -> bytes:
    return b"\\x%02x" % b


def _class(pat: bytes, i: int) -> tuple[bytes, int] | None:
    """Translate the bracket expression starting at ``pat[i] == '['``; None when unterminated
    (git's wildmatch then never matches)."""
    n = len(pat)
    i += 1
    negate = i < n and pat[i] in b"!^"
    if negate:
        i += 1
    parts: list[bytes] = []
    first = True
    while i < n:
        c = pat[i]
        if c == ord("]") and not first:
            body = b"".join(parts)
            # With WM_PATHNAME a class never matches '/'.
            return ((b"[^/" + body + b"]") if negate else (b"(?!/)[" + body + b"]")), i + 1
        first = False
        if c == ord("[") and pat[i + 1 : i + 2] == b":":
            end = pat.find(b":]", i + 2)
            if end < 0:
                return None
            name = pat[i + 2 : end].decode("ascii", "replace")
            if name not in _CLASSES:
                return None  # git: an unknown class name makes the pattern invalid
            parts.append(_CLASSES[name])
            i = end + 2
            continue
        if c == ord("\\"):
            i += 1
            if i >= n:
                return None
            c = pat[i]
        lo = c
        if i + 2 < n and pat[i + 1] == ord("-") and pat[i + 2] != ord("]"):
            hi = pat[i + 2]
            if hi == ord("\\"):
                if i + 3 >= n:
                    return None
                hi = pat[i + 3]
                i += 1
            parts.append(_escape_byte(lo) + b"-" + _escape_byte(hi) if lo <= hi else b"")
            i += 3
            continue
        parts.append(_escape_byte(lo))
        i += 1
    return None


def translate(pat: bytes) -> bytes | None:
    """A bytes regex (for ``fullmatch``) equivalent to wildmatch with WM_PATHNAME, or None when
    the pattern can never match."""
    out: list[bytes] = []
    i, n = 0, len(pat)
    while i < n:
        c = pat[i]
        if c == ord("*"):
            j = i
            while j < n and pat[j] == ord("*"):
                j += 1
            whole = (j - i >= 2) and (i == 0 or pat[i - 1] == ord("/"))
            if whole and j == n:
                out.append(b".*")
            elif whole and pat[j] == ord("/"):
                out.append(b"(?:.*/)?")
                j += 1
            else:
                out.append(b"[^/]*")
            i = j
        elif c == ord("?"):
            out.append(b"[^/]")
            i += 1
        elif c == ord("["):
            got = _class(pat, i)
            if got is None:
                return None
            out.append(got[0])
            i = got[1]
        elif c == ord("\\"):
            if i + 1 >= n:
                return None
            out.append(re.escape(pat[i + 1 : i + 2]))
            i += 2
        else:
            out.append(re.escape(pat[i : i + 1]))
            i += 1
    return b"".join(out)


@dataclass(frozen=True)
class Pattern:
    regex: re.Pattern[bytes]
    negate: bool
    dir_only: bool
    basename: bool  # no slash in the pattern: it matches the last component at any depth


def _strip_trailing_spaces(line: bytes) -> bytes:
    end = len(line)
    while end > 0 and line[end - 1] == ord(" "):
        # A space escaped by a backslash stays (count the backslashes before it).
        k, slashes = end - 2, 0
        while k >= 0 and line[k] == ord("\\"):
            slashes += 1
            k -= 1
        if slashes % 2:
            break
        end -= 1
    return line[:end]


def parse(data: bytes) -> list[Pattern]:
    """The patterns of one ignore file, in file order."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    out: list[Pattern] = []
    for raw in data.split(b"\n"):
        line = raw[:-1] if raw.endswith(b"\r") else raw
        line = _strip_trailing_spaces(line)
        if not line or line.startswith(b"#"):
            continue
        negate = line.startswith(b"!")
        if negate:
            line = line[1:]
        dir_only = line.endswith(b"/")
        if dir_only:
            line = line.rstrip(b"/")  # git strips one; "a//" cannot name a path anyway
        if not line:
            continue
        basename = b"/" not in line
        if line.startswith(b"/"):
            line = line[1:]
        rx = translate(line)
        if rx is None:
            continue
        out.append(Pattern(re.compile(rx, re.DOTALL), negate, dir_only, basename))
    return out


class Source:
    """The patterns of one ignore file, anchored at ``base`` (project-relative dir, "" for the root)."""

    __slots__ = ("any", "base", "patterns")

    def __init__(self, base: str, patterns: Sequence[Pattern]) -> None:
        self.base = base
        self.patterns = list(patterns)
        # One alternation to answer "does anything match?" fast; most paths match nothing.
        alts = [p.regex.pattern for p in self.patterns]
        self.any = (
            re.compile(b"|".join(b"(?:" + a + b")" for a in alts), re.DOTALL) if alts else None
        )

    def decide(self, rel: bytes, name: bytes, is_dir: bool) -> bool | None:
        """True ignored, False re-included (``!``), None when no pattern matches. ``rel`` is
        relative to ``base``."""
        if self.any is None or (
            self.any.fullmatch(name) is None and self.any.fullmatch(rel) is None
        ):
            return None
        for p in reversed(self.patterns):
            if p.dir_only and not is_dir:
                continue
            if p.regex.fullmatch(name if p.basename else rel) is not None:
                return not p.negate
        return None


class Rules:
    """The ignore sources that apply in one directory, innermost last (git's precedence: a
    deeper ``.gitignore`` overrides a shallower one, which overrides ``info/exclude``)."""

    __slots__ = ("sources",)

    def __init__(self, sources: Sequence[Source] = ()) -> None:
        self.sources = tuple(sources)

    def child(self, source: Source | None) -> Rules:
        return self if source is None else Rules((*self.sources, source))

    def ignored(self, path: str, is_dir: bool) -> bool:
        """Whether the project-relative ``path`` is ignored by these rules."""
        if not self.sources:
            return False
        bpath = os.fsencode(path)
        name = bpath.rpartition(b"/")[2]
        for src in reversed(self.sources):
            base = os.fsencode(src.base)
            rel = bpath[len(base) + 1 :] if base else bpath
            got = src.decide(rel, name, is_dir)
            if got is not None:
                return got
        return False
