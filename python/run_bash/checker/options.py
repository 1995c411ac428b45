"""Reading a command's options the way its own parser does (getopt_long, git, Go flags). Pure.

One reader serves every command: short-option clusters (``-rf``), values attached or in the next
word (``-C dir``, ``-Cdir``, ``--git-dir=x``, ``--git-dir x``), optional values (``-j4``),
unique-prefix abbreviations of long options (``--recur``), ``--`` ending the options, options
after operands (GNU permutation) or not (a wrapper's options end at its command), single-dash
long options (``-chdir=x``, Go and terraform style) and words only known at run time.

Options are described by a spec string, one token per option or group of letters:
``-x`` a flag, ``-Cc:`` letters taking a value, ``-j::`` a value only when attached,
``--force`` a long flag, ``--git-dir=`` a long option taking a value, ``--color[=]`` one taking an
optional attached value. ``-l/[0-7]*`` is a letter whose attached value is only what the regular
expression matches, the cluster going on after it (perl's ``-l`` and ``-0`` take digits:
``-lne`` is ``-l -n -e``).
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache

from run_bash.checker.words import Arg

# Long-option arity.
NONE, REQUIRED, OPTIONAL = 0, 1, 2


@dataclass(frozen=True)
class Opts:
    """The options a command (or one level of it) accepts.

    ``exhaustive``: every option that takes a value is listed, so an unlisted one takes none.
    Otherwise (the default) an unlisted option may take the next word as its value, and a wrapper
    reading checks both readings (``alternatives``). ``go``: ``-name`` is a long option.
    """

    value: str = ""
    optional: str = ""
    flags: str = ""
    longs: Mapping[str, int] = field(default_factory=dict)
    abbrev: bool = True
    exhaustive: bool = False
    go: bool = False
    attached: Mapping[str, str] = field(default_factory=dict)  # letter -> its value's pattern

    def __add__(self, other: Opts) -> Opts:
        return Opts(
            self.value + other.value,
            self.optional + other.optional,
            self.flags + other.flags,
            {**self.longs, **other.longs},
            self.abbrev and other.abbrev,
            self.exhaustive and other.exhaustive,
            self.go or other.go,
            {**self.attached, **other.attached},
        )


@cache
def opts(
    spec: str = "", *, abbrev: bool = True, exhaustive: bool = False, go: bool = False
) -> Opts:
    """Build :class:`Opts` from a spec string (see the module docstring)."""
    value, optional, flags = [], [], []
    longs: dict[str, int] = {}
    attached: dict[str, str] = {}
    for token in spec.split():
        if token[2:3] == "/" and not token.startswith("--"):
            attached[token[1]] = token[3:]
        elif token.startswith("--"):
            if token.endswith("[=]"):
                longs[token[2:-3]] = OPTIONAL
            elif token.endswith("="):
                longs[token[2:-1]] = REQUIRED
            else:
                longs[token[2:]] = NONE
        elif token.endswith("::"):
            optional.append(token[1:-2])
        elif token.endswith(":"):
            value.append(token[1:-1])
        else:
            flags.append(token[1:])
    return Opts(
        "".join(value), "".join(optional), "".join(flags), longs, abbrev, exhaustive, go, attached
    )


NO_OPTS = opts()


@dataclass
class Read:
    """What reading the options found.

    ``opts`` holds (name, value) in order: short options by their letter, long ones by their full
    name (an ambiguous abbreviation: every candidate joined by ``|``). ``first`` is the index of
    the first operand. ``unknown`` is the first word only known at run time that could be an
    option; in wrapper mode (no permutation) such a word that is not a known option with a dynamic
    value sets ``dynamic`` and stops the reading. ``alternatives`` are other places the operands
    may start, after an unlisted option that may have taken the next word.
    """

    opts: list[tuple[str, str | None]] = field(default_factory=list)
    words: list[Arg | None] = field(default_factory=list)  # each option's value as a word
    operands: list[Arg] = field(default_factory=list)
    first: int = 0
    unknown: Arg | None = None
    dynamic: bool = False
    dashdash: bool = False
    alternatives: list[int] = field(default_factory=list)

    def has(self, *names: str) -> bool:
        """True when any of ``names`` was given (an ambiguous abbreviation counts for each)."""
        for opt, _ in self.opts:
            if opt in names or ("|" in opt and any(n in opt.split("|") for n in names)):
                return True
        return False

    def add(self, name: str, value: str | None, word: Arg | None = None) -> None:
        """Record an option; ``word`` is its value as a word (default: the literal value)."""
        self.opts.append((name, value))
        self.words.append(word if word is not None or value is None else Arg.lit(value))

    def get(self, *names: str) -> str | None:
        """The value of the last of ``names`` given ("" for a flag), else None."""
        found: str | None = None
        for opt, value in self.opts:
            if opt in names:
                found = "" if value is None else value
        return found

    def values(self, *names: str) -> list[Arg]:
        """The value words of every one of ``names`` given with a value, in order."""
        return [
            w
            for (o, _), w in zip(self.opts, self.words, strict=True)
            if o in names and w is not None
        ]


def values_of(args: Sequence[Arg], names: str) -> list[Arg]:
    """The value words of options ``names`` (``-x V``, ``--long V``, ``--long=V``), in order,
    found without a spec: for commands whose own parser is unusual (``zip -TT``, ``emacs
    -eval``, ``gdb -ex``)."""
    wanted = names.split()
    out: list[Arg] = []
    for k, a in enumerate(args):
        v = a.value or ""
        if v in wanted and k + 1 < len(args):
            out.append(args[k + 1])
        elif v.startswith("--") and v.split("=", 1)[0] in wanted and "=" in v:
            out.append(Arg.lit(v.split("=", 1)[1]))
    return out


def resolve_long(name: str, longs: Mapping[str, int], abbrev: bool = True) -> str:
    """Resolve a long option name (without ``--``), allowing unique-prefix abbreviations."""
    if name in longs or not abbrev:
        return name
    hits = [opt for opt in longs if opt.startswith(name)]
    if len(hits) == 1:
        return hits[0]
    if hits:
        return "|".join(sorted(hits))
    return name


def _known_dynamic(prefix: str, spec: Opts) -> str | None:
    """``-j$(nproc)``, ``--jobs=$N``: the known option whose value alone is dynamic."""
    if prefix.startswith("--") or (spec.go and prefix.startswith("-")):
        name, eq, _ = prefix.lstrip("-").partition("=")
        full = resolve_long(name, spec.longs, spec.abbrev)
        return full if eq and full in spec.longs else None
    for ch in prefix[1:]:
        if ch in spec.value or ch in spec.optional:
            return ch
        if ch not in spec.flags:
            return None
    return None


_OPTION_CHARS = frozenset(string.ascii_letters + string.digits + "-_=+")
_EXTGLOB = re.compile(r"[?*+@!]\(")


def glob_may_be_option(pattern: str) -> bool:
    """Whether a glob may match a file name that reads as an option (``-rf``, ``--force``) or a
    ``+refspec``: it can start with ``-`` or ``+`` and its other literal characters are ones
    options are made of (no option has the dot of ``*.o``)."""
    if _EXTGLOB.search(pattern):
        return True
    i, n, first = 0, len(pattern), True
    while i < n:
        ch = pattern[i]
        end = pattern.find("]", i + 2) if ch == "[" else -1
        if ch in "*?":
            starts = True
        elif end > 0:
            body = pattern[i + 1 : end]
            starts = body[:1] in "!^" or "+" in body or body[:1] == "-" or body[-1:] == "-"
            i = end
        elif ch in _OPTION_CHARS:
            starts = ch in "-+"
        else:
            return False
        if first and not starts:
            return False
        i, first = i + 1, False
    return True


def read(
    args: Sequence[Arg], spec: Opts = NO_OPTS, *, permute: bool = True, stop_after: int = -1
) -> Read:
    """Read options and operands of ``args`` (the words after the command name).

    Args:
        spec: the options the command accepts.
        permute: keep reading options after operands (GNU); otherwise the options end at the first
            operand (a wrapper, a tool's global options before its subcommand).
        stop_after: stop once this many operands were seen (-1: never); the rest are operands.
    """
    out = Read()
    longs = spec.longs
    i, n = 0, len(args)
    seen = False  # an operand was seen (the first one's index is out.first)
    while i < n:
        a = args[i]
        v = a.value
        if v is None:
            prefix = a.prefix
            keyed = prefix.startswith("--") and "=" in prefix and not a.split
            if permute:
                # A quoted expansion set by the script counts as a possible option only before
                # the first operand, where options are normally written.
                leading = not (a.opaque and not a.split and out.operands)
                if a.may_be_option and leading and not keyed:
                    out.unknown = out.unknown or a
                    i += 1
                    continue
                if keyed:
                    name, _, value = prefix[2:].partition("=")
                    tail = Arg(a.text, None, value, a.split, a.glob, a.proc, a.opaque)
                    out.add(resolve_long(name, longs, spec.abbrev), None, tail)
                    i += 1
                    continue
            elif a.may_be_option:
                known = _known_dynamic(prefix, spec)
                if known is None:
                    out.unknown = out.unknown or a
                    out.dynamic = True
                    out.first = i
                    return out
                out.add(known, None, Arg(a.text, None))
                i += 1
                continue
            if not seen:
                seen, out.first = True, i
            out.operands.append(a)
        elif a.glob and (permute or not seen) and glob_may_be_option(v):
            # A file name the glob matches may be an option (`touch -- -rf; rm * x`).
            out.unknown = out.unknown or a
            if not permute:
                out.dynamic, out.first = True, i
                return out
            if v.startswith("-"):
                i = _option(args, i, spec, out)
                continue
            if not seen:
                seen, out.first = True, i
            out.operands.append(a)
        elif v == "--" and not (seen and not permute):
            out.dashdash = True
            if not seen:
                out.first = i + 1
            out.operands.extend(args[i + 1 :])
            return out
        elif v.startswith("-") and len(v) > 1 and (permute or not seen):
            i = _option(args, i, spec, out)
            if out.dynamic and not permute:
                # An unquoted expansion as an option's value may be several words.
                out.unknown = out.unknown or args[i - 1]
                out.first = i
                return out
            continue
        else:
            if not seen:
                seen, out.first = True, i
            out.operands.append(a)
        i += 1
        if seen and (not permute or len(out.operands) == stop_after):
            out.operands.extend(args[i:])
            return out
    if not seen:
        out.first = n
    return out


def _value(args: Sequence[Arg], i: int, out: Read) -> Arg:
    word = args[i]
    if word.value is None and word.split:
        out.dynamic = True  # only a wrapper reading cares: the value may be several words
    return word


def _option(args: Sequence[Arg], i: int, spec: Opts, out: Read) -> int:
    """Read the option word at ``i`` (and its value word); return the index after them."""
    v = args[i].value or ""
    n = len(args)
    i += 1
    if v.startswith("--") or (spec.go and v[1] != "-"):
        name, eq, val = v.lstrip("-").partition("=")
        full = resolve_long(name, spec.longs, spec.abbrev)
        value: str | None = val if eq else None
        arity = spec.longs.get(full)
        if not eq and arity == REQUIRED and i < n:
            word = _value(args, i, out)
            out.add(full, word.show(), word)
            return i + 1
        if not eq and arity is None and not spec.exhaustive:
            out.alternatives.append(i + 1)
        out.add(full, value)
        return i
    j = 1
    while j < len(v):
        ch = v[j]
        pattern = spec.attached.get(ch)
        if pattern is not None:
            m = re.compile(pattern).match(v, j + 1)
            end = m.end() if m else j + 1
            out.add(ch, v[j + 1 : end] or None)
            j = end
            continue
        if ch in spec.value:
            if j + 1 < len(v):
                out.add(ch, v[j + 1 :])
            elif i < n:
                word = _value(args, i, out)
                out.add(ch, word.show(), word)
                i += 1
            else:
                out.add(ch, None)
            return i
        if ch in spec.optional:
            out.add(ch, v[j + 1 :] or None)
            return i
        out.add(ch, None)
        if j == len(v) - 1 and ch not in spec.flags and not spec.exhaustive:
            out.alternatives.append(i + 1)
        j += 1
    return i
