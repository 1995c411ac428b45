"""Words after the shell's static expansions: quote removal, ``$'…'``, brace expansion. Pure.

The parser keeps every word as a list of parts (text, kind). :func:`expand` turns one parsed word
into the argument words bash would pass, as far as they can be known without running anything:
a part that depends on the run time (``$x``, ``$(…)``) makes the word's ``value`` unknown.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from itertools import groupby

# Part kinds of a parsed word.
RAW = 0  # unquoted literal text: subject to brace expansion and globbing
LIT = 1  # quoted or escaped literal text
DYN = 2  # expansion known only at run time, quoted (stays one word)
SPLIT = 3  # unquoted expansion known only at run time (may split into several words)
PROC = 4  # process substitution <(…) / >(…): a path known only at run time
FIELD = 5  # the known value of an unquoted expansion: split at IFS and globbed, no brace expansion
OPQ = 6  # a quoted expansion the script itself sets to a value known only at run time

Part = tuple[str, int]

MAX_BRACE_WORDS = 1024
MAX_BRACE_CHARS = 200_000


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
    opaque: bool = False

    @classmethod
    def lit(cls, value: str, text: str | None = None) -> Arg:
        """A word whose value is known."""
        return cls(text if text is not None else value, value, value)

    @property
    def may_be_option(self) -> bool:
        """True when the word is only known at run time and could start with ``-``.

        That is a word starting with ``-``, with an unquoted expansion (``$f``, ``$(…)``,
        ``"$@"``) or with a quoted one the script sets at run time (``f=$(…); rm "$f"``);
        ``build/$f`` or ``"$HOME"`` stay operands.
        """
        return self.value is None and (
            self.prefix.startswith("-") or (not self.prefix and (self.split or self.opaque))
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
    group = m.lastindex
    assert group is not None  # every alternative of _ANSI_C has a group
    text = m.group(group)
    if group == 1:
        return _ESC[text]
    if group == 2:
        return chr(int(text, 8) & 0xFF)
    if group == 3:
        return chr(int(text, 16))
    if group == 6:
        return chr(ord(text) & 0x1F)
    code = int(text, 16)
    return chr(code) if code <= 0x10FFFF else "\ufffd"


_ESCAPE = re.compile(
    r"(\\(?:[abeEfnrtv\\'\"?]|[0-7]{1,3}|x[0-9a-fA-F]{1,2}|u[0-9a-fA-F]{1,4}"
    r"|U[0-9a-fA-F]{1,8}|c.))",
    re.S,
)


@lru_cache(maxsize=4096)
def _escape(text: str) -> str:
    m = _ANSI_C.fullmatch(text)
    assert m is not None
    return _ansi_sub(m)


def decode_ansi_c(body: str) -> str:
    """Decode the body of a ``$'…'`` word the way bash does."""
    if "\\" not in body:
        return body
    pieces = _ESCAPE.split(body)  # text, escape, text, escape, …
    pieces[1::2] = [_escape(e) for e in pieces[1::2]]
    return "".join(pieces)


def decode_echo(body: str) -> str:
    """Decode ``echo -e`` / ``printf`` backslash escapes (close enough for the checker)."""
    return decode_ansi_c(body.replace("\\0", "\\"))


# -- brace expansion ----------------------------------------------------------------------------

# Brace expansion works on the word as one string plus a mask saying what each character is:
# an unquoted character (active), a quoted one, or a placeholder for a dynamic part. Slicing
# strings keeps the cost linear in the word's length for each word produced.
_ACTIVE = 1
_QUOTED = 0
_DYNAMIC = 2
_PLACEHOLDER = "\ue000"
_BRACE_CHARS = re.compile(r"[{},]")
_RUN = re.compile(rb"\x01+|\x00+|\x02")

_RANGE = re.compile(
    r"(-?\d+)\.\.(-?\d+)(?:\.\.(-?\d+))?$|([A-Za-z])\.\.([A-Za-z])(?:\.\.(-?\d+))?$"
)

Masked = tuple[str, bytes]


def _encode(parts: list[Part]) -> tuple[Masked, list[Part]]:
    text: list[str] = []
    mask = bytearray()
    dynamic: list[Part] = []
    for part, kind in parts:
        if kind == RAW:
            text.append(part)
            mask += b"\x01" * len(part)
        elif kind == LIT:
            text.append(part)
            mask += b"\x00" * len(part)
        else:
            text.append(_PLACEHOLDER)
            mask.append(_DYNAMIC)
            dynamic.append((part, kind))
    return ("".join(text), bytes(mask)), dynamic


def _decode(word: Masked, dynamic: list[Part]) -> list[Part]:
    text, mask = word
    parts: list[Part] = []
    k = 0
    for m in _RUN.finditer(mask):
        run = m.group()
        if run[0] == _DYNAMIC:
            parts.append(dynamic[k])
            k += 1
        else:
            parts.append((text[m.start() : m.end()], RAW if run[0] == _ACTIVE else LIT))
    return parts


def _range(text: str, mask: bytes) -> list[Masked] | None:
    if _DYNAMIC in mask:
        return None
    m = _RANGE.match(text)
    if not m:
        return None
    if m.group(1) is not None:
        lo, hi, step = int(m.group(1)), int(m.group(2)), abs(int(m.group(3) or 1)) or 1
        if abs(hi - lo) // step > MAX_BRACE_WORDS:
            raise OverflowError
        seq = range(lo, hi + 1, step) if lo <= hi else range(lo, hi - 1, -step)
        return [(str(n), b"\x00" * len(str(n))) for n in seq]
    a, b, step = ord(m.group(4)), ord(m.group(5)), abs(int(m.group(6) or 1)) or 1
    seq = range(a, b + 1, step) if a <= b else range(a, b - 1, -step)
    return [(chr(c), b"\x00") for c in seq]


def _first_brace(word: Masked, start: int) -> tuple[int, int, list[Masked]] | None:
    """The leftmost ``{…}`` at or after ``start`` that expands: (open, close, alternatives).

    One pass with a stack pairs the braces and collects each pair's top-level commas; it stops as
    soon as no later brace can open further left.
    """
    text, mask = word
    stack: list[tuple[int, list[int]]] = []
    best: tuple[int, int, list[Masked]] | None = None
    for m in _BRACE_CHARS.finditer(text, start):
        b = m.start()
        if mask[b] != _ACTIVE:
            continue
        ch = text[b]
        if ch == "{":
            if best is not None and not stack:
                break
            stack.append((b, []))
        elif ch == "," and stack:
            stack[-1][1].append(b)
        elif ch == "}" and stack:
            a, commas = stack.pop()
            if best is not None and best[0] < a:
                continue
            if commas:
                if len(commas) >= MAX_BRACE_WORDS:
                    raise OverflowError
                bounds = [a, *commas, b]
                alts = [
                    (text[bounds[k] + 1 : bounds[k + 1]], mask[bounds[k] + 1 : bounds[k + 1]])
                    for k in range(len(bounds) - 1)
                ]
            else:
                ranged = _range(text[a + 1 : b], mask[a + 1 : b])
                if ranged is None:
                    continue
                alts = ranged
            best = (a, b, alts)
    return best


def _brace(word: Masked, budget: list[int], out: list[Masked], start: int = 0) -> None:
    # Braces left of the one expanded did not expand, so each result is scanned from there on.
    found = _first_brace(word, start)
    if found is None:
        out.append(word)
        if len(out) > MAX_BRACE_WORDS:
            raise OverflowError
        return
    a, b, alts = found
    text, mask = word
    pre, post = (text[:a], mask[:a]), (text[b + 1 :], mask[b + 1 :])
    for alt_text, alt_mask in alts:
        budget[0] -= len(pre[0]) + len(alt_text) + len(post[0])
        if budget[0] < 0:
            raise OverflowError
        _brace((pre[0] + alt_text + post[0], pre[1] + alt_mask + post[1]), budget, out, a)


# -- words ----------------------------------------------------------------------------------------


def _glob_in(text: str) -> bool:
    if "*" in text or "?" in text or "+(" in text or "@(" in text or "!(" in text:
        return True  # wildcards and extglob groups (`@(rm)` may match a file named rm)
    k = text.find("[")
    return k >= 0 and "]" in text[k + 1 :]


def _raw_glob(parts: list[Part], kinds: set[int]) -> bool:
    """True when an unquoted run of the word holds a glob character."""
    if RAW not in kinds and FIELD not in kinds:
        return False
    for raw, group in groupby(parts, key=lambda p: p[1] == RAW or p[1] == FIELD):
        if raw and _glob_in("".join(text for text, _ in group)):
            return True
    return False


def _kinds(parts: list[Part]) -> set[int]:
    return {kind for _, kind in set(parts)}  # the set drops repeats at C speed


def _arg_from_parts(source: str, parts: list[Part], kinds: set[int] | None = None) -> Arg:
    kinds = _kinds(parts) if kinds is None else kinds
    value: list[str] = []
    for k, (text, kind) in enumerate(parts):
        if kind in (RAW, FIELD, LIT):
            value.append(text)
            continue
        prefix = "".join(value)
        rest = _kinds(parts[k:]) if k else kinds
        opaque = kind == OPQ and not prefix
        glob = _raw_glob(parts, kinds)
        return Arg(source, None, prefix, SPLIT in rest, glob, PROC in rest, opaque)
    joined = "".join(value)
    return Arg(source, joined, joined, False, _raw_glob(parts, kinds), False)


_IFS = re.compile(r"[ \t\n]+")


def _fields(parts: list[Part]) -> list[list[Part]]:
    """Split a word at the IFS whitespace of its unquoted expansion results (FIELD parts)."""
    words: list[list[Part]] = []
    current: list[Part] = []
    content = False
    for text, kind in parts:
        if kind != FIELD:
            current.append((text, kind))
            content = True
            continue
        pieces = _IFS.split(text)
        for k, piece in enumerate(pieces):
            if k:
                if content:
                    words.append(current)
                current, content = [], False
            if piece:
                current.append((piece, FIELD))
                content = True
    if content:
        words.append(current)
    return words


_VAR_REF = re.compile(r"\$(?:([A-Za-z_][A-Za-z0-9_]*|[0-9])|\{([A-Za-z_][A-Za-z0-9_]*|[0-9]+)\})")

# The resolver: given a part's source text (``$x``, ``${x}``, ``$(…)``) return its value when the
# script makes it known, OPAQUE when the script sets it to something unknown, None to leave it.
OPAQUE = object()
Resolver = Callable[[str], "str | object | None"]


def resolve_parts(parts: list[Part], resolve: Resolver) -> list[Part]:
    """Replace expansions the script makes known (``f=-rf; rm "$f"``) by their values."""
    texts = {text for text, kind in set(parts) if kind in (DYN, SPLIT) and text[:1] in "$`"}
    if not texts:
        return parts
    values = {text: resolve(text) for text in texts}
    if all(v is None for v in values.values()):
        return parts
    out: list[Part] = []
    for text, kind in parts:
        value = values.get(text) if kind in (DYN, SPLIT) else None
        if value is None:
            out.append((text, kind))
        elif value is OPAQUE:
            out.append((text, OPQ if kind == DYN else SPLIT))
        else:
            assert isinstance(value, str)
            out.append((value, LIT if kind == DYN else FIELD))
    return out


def _may_brace(parts: list[Part]) -> bool:
    """Cheap necessary condition for brace expansion: `{`, then `,` or `..`, then `}`."""
    raw = "".join(text for text, kind in parts if kind == RAW)
    i = raw.find("{")
    if i < 0:
        return False
    j = raw.rfind("}")
    return j > i and (raw.find(",", i, j) >= 0 or raw.find("..", i, j) >= 0)


def expand(source: str, parts: list[Part], resolve: Resolver | None = None) -> list[Arg]:
    """Expand one parsed word into the argument words it becomes (brace expansion included).

    With ``resolve``, expansions whose value the script makes known are replaced by it (and an
    unquoted one is split into fields like bash does).
    """
    if len(parts) == 1:
        text, kind = parts[0]
        if kind == LIT:
            return [Arg(source, text, text)]
        if kind == RAW and "{" not in text:
            return [Arg(source, text, text, False, _glob_in(text), False)]
    if resolve is not None:
        parts = resolve_parts(parts, resolve)
    kinds = _kinds(parts)
    if RAW not in kinds or not _may_brace(parts):
        variants = [parts]
    else:
        word, dynamic = _encode(parts)
        expanded: list[Masked] = []
        try:
            _brace(word, [MAX_BRACE_CHARS], expanded)
        except (OverflowError, RecursionError):
            return [Arg(source, None, "", True)]
        variants = [parts] if len(expanded) == 1 else [_decode(v, dynamic) for v in expanded]
    out: list[Arg] = []
    for variant in variants:
        if FIELD in kinds:
            out.extend(_arg_from_parts(source, f) for f in _fields(variant))
        else:
            out.append(_arg_from_parts(source, variant, kinds if variant is parts else None))
    return out


def var_name(text: str) -> str | None:
    """The variable a ``$name`` / ``${name}`` / ``$1`` part refers to, else None."""
    m = _VAR_REF.fullmatch(text)
    if not m:
        return None
    return m.group(1) or m.group(2)


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


def clean_path(path: str) -> str:
    """A path without ``//``, ``.`` segments and a final ``/``; ``..`` stays (the kernel resolves
    it after symlinks, so ``a/../b`` is only ``b`` when ``a`` is a real directory)."""
    absolute = path.startswith("/")
    kept = [seg for seg in path.split("/") if seg not in ("", ".")]
    joined = "/".join(kept)
    return "/" + joined if absolute else joined or "."


def join_path(base: str, path: str) -> str:
    """``path`` seen from the directory ``base`` (both as written; ``~`` is the home)."""
    if path.startswith(("/", "~")) or base == ".":
        return clean_path(path)
    return clean_path(f"{base}/{path}")


def wordlist(text: str) -> list[str]:
    """The words of a space-separated list written as one string (tables of names)."""
    return text.split()


def command_name(value: str) -> str:
    """The name a command word runs, for rule lookup: the basename of a normalized path."""
    if "/" not in value:
        return value
    norm = normalize_path(value)
    return norm.rsplit("/", 1)[-1] if norm not in ("/", ".", "..") else ""


# Packages whose command has another name than the package (`npx firebase-tools …` runs
# `firebase`): the package runner runs that command.
PACKAGE_BINS = {
    "firebase-tools": "firebase",
    "aws-cdk": "cdk",
    "cdktf-cli": "cdktf",
    "netlify-cli": "netlify",
    "@cloudflare/wrangler": "wrangler",
    "@railway/cli": "railway",
    "@changesets/cli": "changeset",
    "@vscode/vsce": "vsce",
    "sequelize-cli": "sequelize",
    "fkill-cli": "fkill",
}


def package_command(word: Arg) -> Arg:
    """The command a package runner runs for a package spec (``@scope/pkg@1`` → ``pkg``)."""
    if word.value is None:
        return word
    name = re.sub(r"(?<=.)@[^/]*$", "", word.value)
    name = re.sub(r"^(?:npm:|github:|git\+)", "", name)
    if name in PACKAGE_BINS:
        return Arg.lit(PACKAGE_BINS[name], word.text)
    name = name.rsplit("/", 1)[-1] if name.startswith("@") else name
    return Arg.lit(command_name(name) or name, word.text)
