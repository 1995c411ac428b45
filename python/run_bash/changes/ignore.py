"""gitignore(5) rules, matched byte for byte like git's wildmatch (``WM_PATHNAME``), in time
linear in the name for each pattern (see Glob).

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


class Glob:
    """One path component's wildmatch pattern (no ``/``), matched in O(len(name) * len(pattern)).

    Regular expressions with several ``[^/]*`` backtrack exponentially (``*a*a*a*a*a*b`` against
    a long name of ``a``s takes seconds, then hours): the ignore files are written by the command
    under watch, so the matcher must not let them stall the host. The pattern is cut at its
    ``*`` runs into fixed-width segments; the first is matched at the start, the last at the
    end, and the ones between at their leftmost place in order, which is exact for ``*`` (it
    can match any span) and never backtracks.
    """

    __slots__ = ("segments", "star")

    def __init__(self, segments: list[tuple[re.Pattern[bytes], int]], star: bool) -> None:
        self.segments = segments  # (fixed-width regex, width), split at each run of '*'
        self.star = star

    @classmethod
    def compile(cls, pat: bytes) -> Glob | None:
        """None when the pattern can never match (an unterminated class, a trailing backslash)."""
        segments: list[tuple[re.Pattern[bytes], int]] = []
        atoms: list[bytes] = []
        i, n = 0, len(pat)
        star = False
        while i < n:
            c = pat[i]
            if c == ord("*"):
                star = True
                segments.append((re.compile(b"".join(atoms), re.DOTALL), len(atoms)))
                atoms = []
                while i < n and pat[i] == ord("*"):
                    i += 1
                continue
            if c == ord("?"):
                atoms.append(b"[^/]")
                i += 1
            elif c == ord("["):
                got = _class(pat, i)
                if got is None:
                    return None
                atoms.append(got[0])
                i = got[1]
            elif c == ord("\\"):
                if i + 1 >= n:
                    return None
                atoms.append(re.escape(pat[i + 1 : i + 2]))
                i += 2
            else:
                atoms.append(re.escape(pat[i : i + 1]))
                i += 1
        segments.append((re.compile(b"".join(atoms), re.DOTALL), len(atoms)))
        return cls(segments, star)

    def match(self, name: bytes) -> bool:
        segs = self.segments
        if not self.star:
            return segs[0][0].fullmatch(name) is not None
        first, fw = segs[0]
        last, lw = segs[-1]
        end = len(name) - lw
        if end < fw or (fw and first.match(name, 0, fw) is None):
            return False
        pos = fw
        for rx, w in segs[1:-1]:
            if not w:
                continue
            m = rx.search(name, pos, end)
            if m is None:
                return False
            pos = m.end()
        return pos <= end and (not lw or last.fullmatch(name, end) is not None)


STARSTAR = None  # a whole "**" component: zero or more components


def compile_path(pat: bytes) -> list[Glob | None] | None:
    """Components of an anchored pattern (``None`` stands for ``**``), or None if it can never
    match."""
    comps: list[Glob | None] = []
    for part in pat.split(b"/"):
        if len(part) >= 2 and part.strip(b"*") == b"":  # "**", "***"...: any depth
            if not comps or comps[-1] is not STARSTAR:
                comps.append(STARSTAR)
            continue
        g = Glob.compile(part)
        if g is None:
            return None
        comps.append(g)
    return comps


def compile_anchored(pat: bytes) -> list[list[Glob | None]]:
    """An anchored pattern as alternatives of ``compile_path`` components (empty: never matches).

    git compares the pattern's literal prefix (up to its first ``*?[\\``) byte for byte and
    wildmatches only the rest, so a ``**`` right after that prefix counts as the start of a
    component even in the middle of one: ``a**/b`` is ``a`` + anything (slashes too) + ``/b``,
    and its ``**/`` may match nothing at all, gluing ``a`` to ``b`` (it matches ``ab``).
    """
    k = 0
    while k < len(pat) and pat[k] not in b"*?[\\":
        k += 1
    run = k
    while run < len(pat) and pat[run] == ord("*"):
        run += 1
    rest = pat[run:]
    if k == 0 or run - k < 2 or pat[k - 1] == ord("/") or rest[:1] not in (b"", b"/"):
        comps = compile_path(pat)
        return [] if comps is None else [comps]
    head = compile_path(pat[:k] + b"*")
    if head is None:
        return []
    if not rest:  # "x/a**": x/a<anything>, at any depth below it too
        return [head, [*head, STARSTAR]]
    tail = compile_path(rest[1:])
    alts = [[*head, STARSTAR, *tail]] if tail is not None else []
    return alts + compile_anchored(pat[:k] + rest[1:])


def match_path(comps: list[Glob | None], parts: list[bytes]) -> bool:
    """Whether the path components ``parts`` match ``comps``; O(len(comps) * len(parts)) glob
    matches. A trailing ``**`` needs at least one component ("abc/**" is what is inside abc)."""
    n = len(parts)
    # ok[j]: comps[i:] match parts[j:], filled from the last pattern component back.
    ok = [False] * (n + 1)
    ok[n] = True
    for i in range(len(comps) - 1, -1, -1):
        c = comps[i]
        new = [False] * (n + 1)
        if c is STARSTAR:
            if i == len(comps) - 1:
                new = [j < n for j in range(n + 1)]
            else:
                acc = False
                for j in range(n, -1, -1):
                    acc = acc or ok[j]
                    new[j] = acc
        else:
            for j in range(n):
                new[j] = ok[j + 1] and c.match(parts[j])
        ok = new
    return ok[0]


@dataclass(frozen=True)
class Pattern:
    """One line of an ignore file, compiled."""

    negate: bool
    dir_only: bool
    glob: Glob | None  # a pattern with no slash: it matches the last component at any depth
    # Otherwise: the path relative to the ignore file's directory (alternatives, see
    # compile_anchored).
    comps: list[list[Glob | None]] | None

    def match(self, rel_parts: list[bytes], name: bytes) -> bool:
        if self.glob is not None:
            return self.glob.match(name)
        return any(match_path(c, rel_parts) for c in self.comps or ())


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
            line = line[:-1]  # one slash, as git: "a//" is "a/" with a directory flag
        if not line:
            continue
        if b"/" not in line:
            glob = Glob.compile(line)
            if glob is not None:
                out.append(Pattern(negate, dir_only, glob, None))
            continue
        alts = compile_anchored(line[1:] if line.startswith(b"/") else line)
        if alts:
            out.append(Pattern(negate, dir_only, None, alts))
    return out


class Source:
    """The patterns of one ignore file, anchored at ``base`` (project-relative dir, "" for the root)."""

    __slots__ = ("base", "patterns")

    def __init__(self, base: str, patterns: Sequence[Pattern]) -> None:
        self.base = base
        self.patterns = list(patterns)

    def decide(self, rel: bytes, name: bytes, is_dir: bool) -> bool | None:
        """True ignored, False re-included (``!``), None when no pattern matches. ``rel`` is
        relative to ``base``."""
        parts: list[bytes] = []
        for p in reversed(self.patterns):
            if p.dir_only and not is_dir:
                continue
            if p.glob is None and not parts:
                parts = rel.split(b"/")
            if p.match(parts, name):
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
