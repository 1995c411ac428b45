"""What a command writes, when that is known before it runs: ``echo``, ``printf``, ``cat`` of a
heredoc, decoders such as ``base64 -d``. Pure.

The checker uses it for code fed to a shell (``echo … | bash``, ``bash < <(printf …)``), for files
a command line writes and then runs, and for option words built by ``$(echo -rf)``. Anything it
cannot evaluate exactly is None, which the caller treats as unknown (and so fails closed).
"""

from __future__ import annotations

import base64
import binascii
import re
import shlex

from run_bash.checker.model import EXTERNAL, NO_INPUT, STDIN_FILES, Scope, Walker
from run_bash.checker.parser import parse
from run_bash.checker.syntax import FED, Cmd, Problem
from run_bash.checker.words import command_name, decode_echo

MAX_OUTPUT = 1_000_000
# Commands that print nothing on stdout (a producer may run them between its echos).
SILENT = frozenset(
    {":", "true", "false", "cd", "export", "set", "shopt", "sleep", "test", "[", "unset"}
)
_ECHO_FLAGS = re.compile(r"-[neE]+")
_FORMAT = re.compile(r"%(%|[-+ #0]*\d*(?:\.\d+)?[sbdicq])")


def stdin_text(ana: Walker, cmd: Cmd, scope: Scope) -> str | None:
    """What ``cmd`` reads on stdin: text, None (unknown) or NO_INPUT (stdin not redirected).

    A file this command line did not write is not followed: EXTERNAL.
    """
    redir = cmd.stdin
    if redir is not None:
        if redir.op in ("<<", "<<-"):
            return redir.body or ""
        target = redir.target
        if target is None:
            return None
        args = ana.expand_word(target, scope, cmd.in_func)
        if len(args) != 1:
            return None
        arg = args[0]
        if redir.op == "<<<":
            return None if arg.value is None else arg.value + "\n"
        if arg.proc:
            return printed_source(ana, arg.text[2:-1], scope)
        if arg.value is None or arg.value in STDIN_FILES:
            return None
        content = ana.written_file(arg.value)
        if content is False:
            return EXTERNAL
        return content if isinstance(content, str) else None
    if cmd.pipe_from is FED:
        return None
    if isinstance(cmd.pipe_from, Cmd):
        return printed(ana, cmd.pipe_from, scope)
    if cmd.pipe_from is not None:
        return printed_source(ana, cmd.pipe_from.text, scope)
    return NO_INPUT


def _input(ana: Walker, cmd: Cmd, scope: Scope) -> str | None:
    text = stdin_text(ana, cmd, scope)
    if text is NO_INPUT or text is EXTERNAL:
        return None
    return text


def printed(ana: Walker, cmd: Cmd, scope: Scope) -> str | None:
    """What a simple command writes on stdout, or None when that is not static."""
    args = ana.expand_words(cmd, scope)
    if not args or any(a.value is None for a in args):
        return None
    name = command_name(args[0].value or "")
    values = [a.value or "" for a in args[1:]]
    if name in SILENT:
        return ""
    if name == "echo":
        escapes, newline = False, True
        while values and _ECHO_FLAGS.fullmatch(values[0]):
            escapes = ("e" in values[0] or escapes) and "E" not in values[0]
            newline = newline and "n" not in values[0]
            values.pop(0)
        body = " ".join(values)
        return (decode_echo(body) if escapes else body) + ("\n" if newline else "")
    if name == "printf":
        if values[:1] == ["--"]:
            values = values[1:]
        if not values or values[0].startswith("-"):
            return "" if values[:1] == ["-v"] else None
        return printf(values[0], values[1:])
    if name in ("cat", "tee"):
        files = [v for v in values if v != "-u"] if name == "cat" else []
        if any(v.startswith("-") and v != "-" for v in files):
            return None
        if not files or files == ["-"]:
            return _input(ana, cmd, scope)
        out: list[str] = []
        for f in files:
            content = _input(ana, cmd, scope) if f == "-" else ana.written_file(f)
            if not isinstance(content, str):
                return None
            out.append(content)
        return "".join(out)
    data = _input(ana, cmd, scope) if name in ("base64", "xxd", "rev") else None
    if data is None:
        return None
    if (
        name == "base64"
        and values
        and all(v in ("-d", "--decode", "-di", "-id", "-i") for v in values)
    ):
        try:
            raw = base64.b64decode("".join(data.split()) + "==", validate=False)
        except (binascii.Error, ValueError):
            return None
        return raw.decode("utf-8", "replace")
    if (name == "xxd" and sorted(values) in (["-p", "-r"], ["-ps", "-r"], ["-r", "-ps"])) or (
        name == "xxd" and values in (["-rp"], ["-r", "-p"], ["-p", "-r"], ["-rps"])
    ):
        try:
            return bytes.fromhex("".join(data.split())).decode("utf-8", "replace")
        except ValueError:
            return None
    if name == "rev" and not values:
        return "".join(line[::-1] + "\n" for line in data.splitlines())
    return None


def printf(fmt: str, args: list[str]) -> str | None:
    """``printf FORMAT ARGS`` for the conversions bash's printf shares with C (None if others)."""
    fmt = decode_echo(fmt)
    out: list[str] = []
    k = 0
    while True:
        used = 0
        bad = False

        def conv(m: re.Match[str]) -> str:
            nonlocal k, used, bad
            spec = m.group(1)
            if spec == "%":
                return "%"
            arg = args[k] if k < len(args) else ""
            k += 1
            used += 1
            kind = spec[-1]
            flags = spec[:-1]
            try:
                if kind == "s":
                    return ("%" + flags + "s") % arg
                if kind == "b":
                    return ("%" + flags + "s") % decode_echo(arg)
                if kind in "di":
                    return ("%" + flags + "d") % int(arg or "0", 0)
                if kind == "c":
                    return arg[:1]
                return shlex.quote(arg)
            except (ValueError, TypeError):
                bad = True
                return ""

        out.append(_FORMAT.sub(conv, fmt))
        if bad or sum(len(x) for x in out) > MAX_OUTPUT:
            return None
        if not used or k >= len(args):
            return "".join(out)


def printed_source(ana: Walker, src: str, scope: Scope | None = None) -> str | None:
    """What a script (a ``<(…)`` body, a compound command) writes on stdout, when static."""
    scope = scope or Scope()
    out: list[str] = []
    for item in parse(src):
        if isinstance(item, Problem):
            return None
        if not isinstance(item, Cmd) or item.nested or item.piped or not item.words:
            continue
        if any(r.writes_file and r.fd in ("", "1") for r in item.redirs):
            continue
        text = printed(ana, item, scope)
        if text is None:
            return None
        out.append(text)
    return "".join(out)
