"""Option scanning with real command-line conventions (getopt_long and git's parse-options). Pure.

Handles short-option clusters (``-rf``), options with values (``-C dir``, ``-Cdir``,
``--git-dir=x``, ``--git-dir x``), unique-prefix abbreviations of long options (``--recur``),
``--`` ending the options, options after operands (GNU permutation) and words only known at run
time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from run_bash.checker.words import Arg

# Long-option arity.
NONE, REQUIRED, OPTIONAL = 0, 1, 2


@dataclass
class Scan:
    """The result of scanning a command's arguments.

    ``opts`` holds (name, value) in order: short options by their letter, long options by their
    full name (or, for an ambiguous abbreviation, every candidate joined by ``|``).
    ``unknown`` is the first word that could be an option but is only known at run time.
    """

    opts: list[tuple[str, str | None]] = field(default_factory=list)
    operands: list[Arg] = field(default_factory=list)
    unknown: Arg | None = None
    dashdash: bool = False

    def has(self, *names: str) -> bool:
        """True when any of ``names`` was given (an ambiguous abbreviation counts for each)."""
        for opt, _ in self.opts:
            if opt in names or ("|" in opt and any(n in opt.split("|") for n in names)):
                return True
        return False


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


def scan(
    args: Sequence[Arg],
    short_arg: str = "",
    longs: Mapping[str, int] | None = None,
    *,
    permute: bool = True,
    abbrev: bool = True,
    stop_after: int = -1,
) -> Scan:
    """Scan options and operands.

    Args:
        args: the words after the command name.
        short_arg: short option letters that take a value.
        longs: long option names (without ``--``) mapped to NONE / REQUIRED / OPTIONAL.
        permute: keep reading options after the first operand (GNU style).
        abbrev: accept unique prefixes of long options.
        stop_after: stop scanning once this many operands were seen (-1: never).
    """
    longs = longs or {}
    out = Scan()
    i, n = 0, len(args)
    while i < n:
        a = args[i]
        i += 1
        v = a.value
        if v is None:
            # A quoted expansion set by the script counts as a possible option only before the
            # first operand, where options are normally written.
            leading = not (a.opaque and not a.split and out.operands)
            if (
                a.may_be_option
                and leading
                and not (a.prefix.startswith("--") and "=" in a.prefix and not a.split)
            ):
                if out.unknown is None:
                    out.unknown = a
                continue
            if a.prefix.startswith("--") and "=" in a.prefix:
                name = resolve_long(a.prefix[2:].split("=", 1)[0], longs, abbrev)
                out.opts.append((name, None))
                continue
            out.operands.append(a)
        elif v == "--":
            out.dashdash = True
            out.operands.extend(args[i:])
            return out
        elif v.startswith("--"):
            name, eq, val = v[2:].partition("=")
            name = resolve_long(name, longs, abbrev)
            value: str | None = val if eq else None
            if not eq and longs.get(name) == REQUIRED and i < n:
                value = args[i].show()
                i += 1
            out.opts.append((name, value))
            continue
        elif v.startswith("-") and len(v) > 1:
            j = 1
            while j < len(v):
                ch = v[j]
                if ch in short_arg:
                    if j + 1 < len(v):
                        out.opts.append((ch, v[j + 1 :]))
                    elif i < n:
                        out.opts.append((ch, args[i].show()))
                        i += 1
                    else:
                        out.opts.append((ch, None))
                    break
                out.opts.append((ch, None))
                j += 1
            continue
        else:
            out.operands.append(a)
        if len(out.operands) == stop_after or (not permute and out.operands):
            out.operands.extend(args[i:])
            return out
    return out


def skip_options(
    args: Sequence[Arg],
    short_arg: str = "",
    longs: Mapping[str, int] | None = None,
    *,
    abbrev: bool = True,
) -> tuple[int, dict[str, str | None]] | None:
    """Skip a wrapper's own options (getopt with ``+``: options end at the first operand).

    Returns the index of the first operand (``len(args)`` when there is none) and the options seen
    as a dict, or None when an option word is only known at run time.
    """
    longs = longs or {}
    opts: dict[str, str | None] = {}
    i, n = 0, len(args)
    while i < n:
        a = args[i]
        v = a.value
        if v is None:
            if a.may_be_option:
                return None
            return i, opts
        if v == "--":
            return i + 1, opts
        if v.startswith("--"):
            name, eq, val = v[2:].partition("=")
            name = resolve_long(name, longs, abbrev)
            value: str | None = val if eq else None
            i += 1
            if not eq and longs.get(name) == REQUIRED and i < n:
                if args[i].value is None and args[i].split:
                    return None
                value = args[i].show()
                i += 1
            opts[name] = value
            continue
        if v.startswith("-") and len(v) > 1:
            i += 1
            j = 1
            while j < len(v):
                ch = v[j]
                if ch in short_arg:
                    if j + 1 < len(v):
                        opts[ch] = v[j + 1 :]
                    elif i < n:
                        if args[i].value is None and args[i].split:
                            return None
                        opts[ch] = args[i].show()
                        i += 1
                    else:
                        opts[ch] = None
                    break
                opts[ch] = ""
                j += 1
            continue
        return i, opts
    return n, opts


@dataclass(frozen=True)
class Spec:
    """A wrapper's own options, as its getopt reads them.

    ``short_value`` letters take a value (attached or the next word), ``short_optional`` ones
    only an attached value (``-j4``); ``short_flags`` take none. With ``complete``, an option
    not listed may take a value, so the word after it may be that value or the command.
    """

    short_value: str = ""
    short_optional: str = ""
    short_flags: str = ""
    longs: Mapping[str, int] = field(default_factory=dict)
    complete: bool = True


@dataclass
class Options:
    """Where a wrapper's operands start, the options seen and the other possible starts."""

    index: int
    opts: dict[str, str | None]
    alternatives: list[int]


def wrapper_options(args: Sequence[Arg], spec: Spec) -> Options | None:
    """Read a wrapper's options (they end at the first operand); None when one is dynamic.

    An option the spec does not list could take the next word as its value: the index after
    that word is kept in ``alternatives`` so the caller can check that reading too.
    """
    longs = spec.longs
    opts: dict[str, str | None] = {}
    alternatives: list[int] = []
    i, n = 0, len(args)
    while i < n:
        a = args[i]
        v = a.value
        if v is None:
            if not a.may_be_option:
                break
            if not _known_dynamic_option(a.prefix, spec):
                return None
            i += 1
            continue
        if v == "--":
            i += 1
            break
        if v.startswith("--"):
            name, eq, val = v[2:].partition("=")
            full = resolve_long(name, longs)
            i += 1
            if full in longs:
                value: str | None = val if eq else None
                if not eq and longs[full] == REQUIRED and i < n:
                    if args[i].value is None and args[i].split:
                        return None
                    value = args[i].show()
                    i += 1
                opts[full] = value
            else:
                opts[name] = val if eq else None
                if not eq and spec.complete:
                    alternatives.append(i + 1)
            continue
        if v.startswith("-") and len(v) > 1:
            i += 1
            j = 1
            while j < len(v):
                ch = v[j]
                if ch in spec.short_value:
                    if j + 1 < len(v):
                        opts[ch] = v[j + 1 :]
                    elif i < n:
                        if args[i].value is None and args[i].split:
                            return None
                        opts[ch] = args[i].show()
                        i += 1
                    else:
                        opts[ch] = None
                    break
                if ch in spec.short_optional:
                    opts[ch] = v[j + 1 :] or None
                    break
                opts[ch] = ""
                if spec.complete and ch not in spec.short_flags and j == len(v) - 1:
                    alternatives.append(i + 1)
                j += 1
            continue
        break
    return Options(i, opts, alternatives)


def _known_dynamic_option(prefix: str, spec: Spec) -> bool:
    """``-j$(nproc)``, ``--jobs=$N``: a known option whose value alone is dynamic."""
    if prefix.startswith("--"):
        name, eq, _ = prefix[2:].partition("=")
        return bool(eq) and resolve_long(name, spec.longs) in spec.longs
    for ch in prefix[1:]:
        if ch in spec.short_value or ch in spec.short_optional:
            return True
        if ch not in spec.short_flags:
            return False
    return False
