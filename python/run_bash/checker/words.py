"""Words after the shell's static expansions: quote removal, ``$'…'``, brace expansion. Pure.

The parser keeps every word as a list of parts (text, kind). :func:`expand` turns one parsed word
into the argument words bash would pass, as far as they can be known without running anything:
a part that depends on the run time (``$x``, ``$(…)``) makes the word's ``value`` unknown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Part kinds of a parsed word.
RAW = 0  # unquoted literal text: subject to brace expansion and globbing
LIT = 1  # quoted or escaped literal text
DYN = 2  # expansion known only at run time, quoted (stays one word)
SPLIT = 3  # unquoted expansion known only at run time (may split into several words)
PROC = 4  # process substitution <(…) / >(…): a path known only at run time

Part = tuple[str, int]

MAX_BRACE_WORDS = 1024


@dataclass(slots=True)
class Arg:
    """One argument word as bash would pass it, as far as it is known before running.

    ``value`` is None when part of the word is only known at run time; ``prefix`` is then the
    static text before the first such part. ``split`` means an unquoted expansion is in the word,
    so it may become several words (one of which may look like an option).
    """

    text: str
    value: str | None
    prefix: str = ""
    split: bool = False
    glob: bool = False
    proc: bool = False

    @classmethod
    def lit(cls, value: str, text: str | None = None) -> Arg:
        """A word whose value is known."""
        return cls(text if text is not None else value, value, value)

    @property
    def may_be_option(self) -> bool:
        """True when the word is only known at run time and could start with ``-``.

        That is a word starting with ``-`` or with an unquoted expansion (``$f``, ``$(…)``,
        ``"$@"``); ``build/$f`` or ``"$f"`` stay operands.
        """
        return self.value is None and (
            self.prefix.startswith("-") or (self.split and not self.prefix)
        )

    def show(self) -> str:
        """The value when known, else the source text."""
        return self.value if self.value is not None else self.text


_ESC = {
    "a": "\a",
    "b": "\b",
    "e": "\x1b",
    "E": "\x1b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}
_ANSI_C = re.compile(
    r"\\(?:([abeEfnrtv\\'\"?])|([0-7]{1,3})|x([0-9a-fA-F]{1,2})|u([0-9a-fA-F]{1,4})"
    r"|U([0-9a-fA-F]{1,8})|c(.))",
    re.S,
)


def _ansi_sub(m: re.Match[str]) -> str:
    simple, octal, hx, u4, u8, ctrl = m.groups()
    if simple is not None:
        return _ESC[simple]
    if octal is not None:
        return chr(int(octal, 8) & 0xFF)
    if hx is not None:
        return chr(int(hx, 16))
    if ctrl is not None:
        return chr(ord(ctrl) & 0x1F)
    code = int(u4 or u8, 16)
    return chr(code) if code <= 0x10FFFF else "\ufffd"


def decode_ansi_c(body: str) -> str:
    """Decode the body of a ``$'…'`` word the way bash does."""
    if "\\" not in body:
        return body
    return _ANSI_C.sub(_ansi_sub, body)


def decode_echo(body: str) -> str:
    """Decode ``echo -e`` / ``printf`` backslash escapes (close enough for the checker)."""
    return decode_ansi_c(body.replace("\\0", "\\"))


# -- brace expansion ----------------------------------------------------------------------------

# A brace-expansion item: (char, active) for literal characters; (part_text, kind) for dynamic
# parts, marked by a kind >= DYN in the second slot.
Item = tuple[str, int]
_ACTIVE = 0
_QUOTED = 1

_RANGE = re.compile(
    r"(-?\d+)\.\.(-?\d+)(?:\.\.(-?\d+))?$|([A-Za-z])\.\.([A-Za-z])(?:\.\.(-?\d+))?$"
)


def _items(parts: list[Part]) -> list[Item]:
    items: list[Item] = []
    for text, kind in parts:
        if kind == RAW:
            items.extend((ch, _ACTIVE) for ch in text)
        elif kind == LIT:
            items.extend((ch, _QUOTED) for ch in text)
        else:
            items.append((text, kind))
    return items


def _range(items: list[Item]) -> list[list[Item]] | None:
    if any(kind >= DYN for _, kind in items):
        return None
    m = _RANGE.match("".join(ch for ch, _ in items))
    if not m:
        return None
    if m.group(1) is not None:
        lo, hi, step = int(m.group(1)), int(m.group(2)), abs(int(m.group(3) or 1)) or 1
        if abs(hi - lo) // step > MAX_BRACE_WORDS:
            return None
        seq = range(lo, hi + 1, step) if lo <= hi else range(lo, hi - 1, -step)
        return [[(ch, _QUOTED) for ch in str(n)] for n in seq]
    a, b, step = ord(m.group(4)), ord(m.group(5)), abs(int(m.group(6) or 1)) or 1
    seq = range(a, b + 1, step) if a <= b else range(a, b - 1, -step)
    return [[(chr(c), _QUOTED)] for c in seq]


def _brace(items: list[Item], budget: list[int]) -> list[list[Item]]:
    n = len(items)
    for a in range(n):
        if items[a] != ("{", _ACTIVE):
            continue
        depth = 0
        commas: list[int] = []
        b = a + 1
        while b < n:
            ch, kind = items[b]
            if kind == _ACTIVE:
                if ch == "{":
                    depth += 1
                elif ch == "}":
                    if depth == 0:
                        break
                    depth -= 1
                elif ch == "," and depth == 0:
                    commas.append(b)
            b += 1
        if b >= n:
            continue
        if commas:
            bounds = [a, *commas, b]
            alts = [items[bounds[k] + 1 : bounds[k + 1]] for k in range(len(bounds) - 1)]
        else:
            ranged = _range(items[a + 1 : b])
            if ranged is None:
                continue
            alts = ranged
        pre, post = items[:a], items[b + 1 :]
        out: list[list[Item]] = []
        for alt in alts:
            out.extend(_brace(pre + alt + post, budget))
            if len(out) > budget[0]:
                raise OverflowError
        return out
    return [items]


# -- words ----------------------------------------------------------------------------------------


def _glob_in(text: str) -> bool:
    if "*" in text or "?" in text:
        return True
    k = text.find("[")
    return k >= 0 and "]" in text[k + 1 :]


def _arg_from_parts(source: str, parts: list[Part]) -> Arg:
    value: list[str] = []
    prefix: str | None = None
    split = glob = proc = False
    raw_run = ""
    for text, kind in parts:
        if kind == RAW:
            value.append(text)
            raw_run += text
            continue
        if raw_run:
            glob = glob or _glob_in(raw_run)
            raw_run = ""
        if kind == LIT:
            value.append(text)
            continue
        if prefix is None:
            prefix = "".join(value)
        split = split or kind == SPLIT
        proc = proc or kind == PROC
    if raw_run:
        glob = glob or _glob_in(raw_run)
    if prefix is None:
        joined = "".join(value)
        return Arg(source, joined, joined, False, glob, False)
    return Arg(source, None, prefix, split, glob, proc)


def _arg_from_items(source: str, items: list[Item]) -> Arg:
    parts: list[Part] = []
    for ch, kind in items:
        if kind == _ACTIVE:
            parts.append((ch, RAW))
        elif kind == _QUOTED:
            parts.append((ch, LIT))
        else:
            parts.append((ch, kind))
    return _arg_from_parts(source, parts)


def expand(source: str, parts: list[Part]) -> list[Arg]:
    """Expand one parsed word into the argument words it becomes (brace expansion included)."""
    if not any(kind == RAW and "{" in text for text, kind in parts):
        return [_arg_from_parts(source, parts)]
    try:
        variants = _brace(_items(parts), [MAX_BRACE_WORDS])
    except (OverflowError, RecursionError):
        return [Arg(source, None, "", True)]
    if len(variants) == 1:
        return [_arg_from_parts(source, parts)]
    return [_arg_from_items(source, v) for v in variants]


# -- paths ---------------------------------------------------------------------------------------


def normalize_path(path: str) -> str:
    """Normalize a path lexically: collapse ``//``, resolve ``.`` and ``..``, drop a final ``/``."""
    absolute = path.startswith("/")
    out: list[str] = []
    for seg in path.split("/"):
        if seg in ("", "."):
            continue
        if seg == "..":
            if out and out[-1] != "..":
                out.pop()
            elif not absolute:
                out.append("..")
            continue
        out.append(seg)
    joined = "/".join(out)
    if absolute:
        return "/" + joined
    return joined or "."


def command_name(value: str) -> str:
    """The name a command word runs, for rule lookup: the basename of a normalized path."""
    if "/" not in value:
        return value
    norm = normalize_path(value)
    return norm.rsplit("/", 1)[-1] if norm not in ("/", ".", "..") else ""
