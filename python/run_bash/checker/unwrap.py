"""Seeing through wrappers and nested shells: which commands a command line really runs. Pure.

:class:`Analysis` walks a parsed script. For each simple command it records the command, then, when
the command is a wrapper (``sudo``, ``env``, ``timeout``, ``xargs``, ``find -exec``, ``sh -c``, …),
works out the wrapped command with the wrapper's real option syntax and records that too. Code
handed over as text (``bash -c STR``, ``eval``, ``su -c``, ``watch``, heredocs and here-strings fed
to a shell, ``trap``) is parsed again as a script. Whatever cannot be determined statically is
recorded as unknown, so the checker can fail closed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from run_bash.checker.options import OPTIONAL, REQUIRED, skip_options
from run_bash.checker.parser import Cmd, Problem, parse, words_of
from run_bash.checker.rules import git_split
from run_bash.checker.words import Arg, command_name, decode_echo, expand

MAX_DEPTH = 8
MAX_CHAIN = 32
SHELLS = frozenset(
    {"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "rbash", "yash", "posh", "fish"}
)
_PYTHON = re.compile(r"python(?:\d+(?:\.\d+)*)?")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_STDIN_FILES = frozenset({"/dev/stdin", "/dev/fd/0", "/proc/self/fd/0", "-"})


@dataclass
class Found:
    """A command that runs: ``argv[0]`` is its name (basename), ``text`` the source running it."""

    name: str
    argv: list[Arg]
    text: str


@dataclass
class Unknown:
    """A place where the command (or code) that runs cannot be determined statically."""

    reason: str
    text: str


@dataclass
class Analysis:
    """Every command found in a script, in source order, plus unknowns (for failing closed)."""

    events: list[Found | Unknown] = field(default_factory=list)

    # -- scripts ----------------------------------------------------------------------------------

    def source(self, src: str, depth: int = 0) -> None:
        """Analyse a script."""
        if depth > MAX_DEPTH:
            self.events.append(Unknown("nests shells too deeply to analyse", src.strip()))
            return
        for item in parse(src):
            if isinstance(item, Problem):
                self.events.append(Unknown(item.reason, item.text))
            else:
                self.command(item, depth)

    def command(self, cmd: Cmd, depth: int) -> None:
        """Analyse one simple command."""
        args = [a for w in cmd.words for a in expand(w.text, w.parts)]
        if args:
            self.chain(args, cmd, depth, cmd.text)

    def chain(self, args: list[Arg], cmd: Cmd, depth: int, text: str) -> None:
        """Record ``args`` as a command and follow it through wrappers."""
        for _ in range(MAX_CHAIN):
            if not args:
                return
            head = args[0]
            if head.value is None or head.glob:
                what = "a command only known at run time" if head.value is None else "a glob"
                self.events.append(Unknown(f"runs {what} (`{head.text}`)", text))
                return
            name = command_name(head.value)
            if not name:
                return
            self.events.append(Found(name, [Arg.lit(name, head.text), *args[1:]], text))
            handler = WRAPPERS.get(name)
            if handler is None and _PYTHON.fullmatch(name):
                handler = _python
            if handler is None:
                return
            inner = handler(self, args[1:], cmd, depth, text)
            if inner is None:
                return
            args = inner
        self.events.append(Unknown("wraps commands too deeply to analyse", text))

    def code(self, word: Arg, depth: int, text: str, what: str) -> None:
        """Analyse code passed as one word (``sh -c WORD``); unknown when it is not static."""
        if word.value is None:
            self.events.append(Unknown(f"runs {what} only known at run time (`{word.text}`)", text))
        else:
            self.source(word.value, depth + 1)

    def stdin_code(self, cmd: Cmd, depth: int, text: str, what: str) -> None:
        """Analyse code a shell reads from its standard input."""
        if cmd.heredoc is not None:
            self.source(cmd.heredoc, depth + 1)
        elif cmd.herestring is not None:
            args = expand(cmd.herestring.text, cmd.herestring.parts)
            self.code(
                args[0] if len(args) == 1 else Arg(cmd.herestring.text, None), depth, text, what
            )
        elif cmd.stdin_file:
            return
        elif isinstance(cmd.pipe_from, Cmd):
            piped = _printed_text(cmd.pipe_from)
            if piped is None:
                self.events.append(Unknown(f"runs {what} read from a pipe", text))
            else:
                self.source(piped, depth + 1)
        elif cmd.pipe_from is True:
            self.events.append(Unknown(f"runs {what} read from a pipe", text))


def _printed_text(cmd: Cmd) -> str | None:
    """What ``echo``/``printf``/``cat`` with static input writes, or None when not static."""
    args = [a for w in cmd.words for a in expand(w.text, w.parts)]
    if not args or any(a.value is None for a in args):
        return None
    name = command_name(args[0].value or "")
    values = [a.value or "" for a in args[1:]]
    if name == "echo":
        escapes = False
        while values and re.fullmatch(r"-[neE]+", values[0]):
            escapes = escapes or "e" in values[0]
            values.pop(0)
        body = " ".join(values)
        return decode_echo(body) if escapes else body
    if name == "printf" and values and "%" not in values[0]:
        return decode_echo(values[0])
    if name == "cat" and not values:
        if cmd.heredoc is not None:
            return cmd.heredoc
        if cmd.herestring is not None:
            hs = expand(cmd.herestring.text, cmd.herestring.parts)
            return hs[0].value if len(hs) == 1 else None
    return None


Handler = Callable[[Analysis, list[Arg], Cmd, int, str], "list[Arg] | None"]


def _unknown_options(ana: Analysis, name: str, text: str) -> None:
    ana.events.append(Unknown(f"passes `{name}` options only known at run time", text))


def _simple(
    short_arg: str = "",
    longs: dict[str, int] | None = None,
    *,
    skip: int = 0,
    no_command: str = "",
    assignments: bool = False,
) -> Handler:
    """A wrapper whose command follows its options (and ``skip`` operands)."""

    def handler(
        ana: Analysis, args: list[Arg], cmd: Cmd, depth: int, text: str
    ) -> list[Arg] | None:
        res = skip_options(args, short_arg, longs)
        if res is None:
            _unknown_options(ana, text.split(None, 1)[0], text)
            return None
        k, opts = res
        if any(opt in opts for opt in no_command.split()):
            return None
        k += skip
        if assignments:
            while (
                k < len(args) and args[k].value is not None and _ENV_NAME.match(args[k].value or "")
            ):
                k += 1
        return args[k:] if k < len(args) else None

    return handler


def _sudo(ana: Analysis, args: list[Arg], cmd: Cmd, depth: int, text: str) -> list[Arg] | None:
    longs = {
        k: REQUIRED
        for k in (
            "auth-type",
            "chdir",
            "chroot",
            "close-from",
            "group",
            "host",
            "login-class",
            "other-user",
            "prompt",
            "role",
            "type",
            "command-timeout",
            "user",
        )
    }
    longs.update(
        {
            "preserve-env": OPTIONAL,
            "edit": 0,
            "list": 0,
            "validate": 0,
            "version": 0,
            "help": 0,
            "remove-timestamp": 0,
        }
    )
    res = skip_options(args, "aCcDgpRrTtUu", longs)
    if res is None:
        _unknown_options(ana, "sudo", text)
        return None
    k, opts = res
    if any(
        o in opts for o in ("e", "l", "v", "V", "K", "h", "edit", "list", "validate", "version")
    ):
        return None
    while k < len(args) and args[k].value is not None and _ENV_NAME.match(args[k].value or ""):
        k += 1
    return args[k:] if k < len(args) else None


def _env(ana: Analysis, args: list[Arg], cmd: Cmd, depth: int, text: str) -> list[Arg] | None:
    longs = {
        "unset": REQUIRED,
        "chdir": REQUIRED,
        "split-string": REQUIRED,
        "argv0": REQUIRED,
        "ignore-environment": 0,
        "null": 0,
        "debug": 0,
        "ignore-signal": OPTIONAL,
        "default-signal": OPTIONAL,
        "block-signal": OPTIONAL,
        "list-signal-handling": 0,
        "help": 0,
        "version": 0,
    }
    res = skip_options(args, "uCSPa", longs)
    if res is None:
        _unknown_options(ana, "env", text)
        return None
    k, opts = res
    while k < len(args) and args[k].value is not None and _ENV_NAME.match(args[k].value or ""):
        k += 1
    split = opts.get("S", opts.get("split-string"))
    if "S" in opts or "split-string" in opts:
        words = words_of(split) if split is not None else None
        if words is None:
            ana.events.append(Unknown("passes `env -S` a string it cannot split", text))
            return None
        pre = [a for w in words for a in expand(w.text, w.parts)]
        return pre + args[k:]
    return args[k:] if k < len(args) else None


def _shell(ana: Analysis, args: list[Arg], cmd: Cmd, depth: int, text: str) -> list[Arg] | None:
    command_mode = stdin_mode = False
    i, n = 0, len(args)
    value_longs = {"--rcfile", "--init-file"}
    while i < n:
        a = args[i]
        v = a.value
        if v is None:
            if a.may_be_option:
                _unknown_options(ana, "sh", text)
                return None
            break
        if v in ("--", "-"):
            i += 1
            break
        if v.startswith("--"):
            i += 2 if v in value_longs else 1
            continue
        if v[:1] in "-+" and len(v) > 1:
            i += 1
            for ch in v[1:]:
                if ch == "c":
                    command_mode = True
                elif ch == "s":
                    stdin_mode = True
                elif ch in "oO":
                    i += 1  # -o option / -O shopt take the next word
            continue
        break
    rest = args[i:]
    if command_mode:
        if not rest:
            return None
        ana.code(rest[0], depth, text, "shell code")
        return None
    if stdin_mode or not rest:
        ana.stdin_code(cmd, depth, text, "shell code")
        return None
    script = rest[0]
    if script.proc:
        ana.events.append(Unknown("runs shell code from a process substitution", text))
    elif script.value in _STDIN_FILES:
        ana.stdin_code(cmd, depth, text, "shell code")
    elif script.value is None and script.split:
        ana.events.append(Unknown(f"runs a script only known at run time (`{script.text}`)", text))
    return None


def _eval(ana: Analysis, args: list[Arg], cmd: Cmd, depth: int, text: str) -> list[Arg] | None:
    if args and args[0].value == "--":
        args = args[1:]
    if not args:
        return None
    if any(a.value is None for a in args):
        dyn = next(a for a in args if a.value is None)
        ana.events.append(Unknown(f"evaluates code only known at run time (`{dyn.text}`)", text))
        return None
    ana.source(" ".join(a.value or "" for a in args), depth + 1)
    return None


def _source(ana: Analysis, args: list[Arg], cmd: Cmd, depth: int, text: str) -> list[Arg] | None:
    if args and args[0].value == "--":
        args = args[1:]
    if not args:
        return None
    target = args[0]
    if target.proc:
        ana.events.append(Unknown("sources code from a process substitution", text))
    elif target.value in _STDIN_FILES:
        ana.stdin_code(cmd, depth, text, "sourced code")
    elif target.value is None and target.split:
        ana.events.append(Unknown(f"sources a file only known at run time (`{target.text}`)", text))
    return None


def _trap(ana: Analysis, args: list[Arg], cmd: Cmd, depth: int, text: str) -> list[Arg] | None:
    res = skip_options(args, "", {})
    if res is None:
        return None
    k, opts = res
    if "l" in opts or "p" in opts or k >= len(args) or len(args) - k < 2:
        return None
    action = args[k]
    if action.value in ("-", ""):
        return None
    ana.code(action, depth, text, "trap code")
    return None


def _find(ana: Analysis, args: list[Arg], cmd: Cmd, depth: int, text: str) -> list[Arg] | None:
    i, n = 0, len(args)
    while i < n:
        v = args[i].value
        i += 1
        if v not in ("-exec", "-execdir", "-ok", "-okdir"):
            continue
        start = i
        while i < n and args[i].value not in (";", "+"):
            i += 1
        inner = [
            Arg("{}", None) if a.value is not None and "{}" in a.value else a for a in args[start:i]
        ]
        if inner:
            # The verdict names the inner command (`rm -rf {}`), not the whole find.
            ana.chain(inner, cmd, depth, " ".join(a.text for a in args[start:i]))
        i += 1
    return None


def _xargs(ana: Analysis, args: list[Arg], cmd: Cmd, depth: int, text: str) -> list[Arg] | None:
    longs = {
        "arg-file": REQUIRED,
        "delimiter": REQUIRED,
        "eof": OPTIONAL,
        "replace": OPTIONAL,
        "max-lines": OPTIONAL,
        "max-args": REQUIRED,
        "max-procs": REQUIRED,
        "max-chars": REQUIRED,
        "process-slot-var": REQUIRED,
        "null": 0,
        "no-run-if-empty": 0,
        "interactive": 0,
        "verbose": 0,
        "exit": 0,
        "open-tty": 0,
        "show-limits": 0,
    }
    # -e, -i and -l take an optional value attached to the letter.
    norm: list[Arg] = []
    for a in args:
        v = a.value
        if v and re.fullmatch(r"-[eil].+", v):
            norm.append(Arg.lit(v[:2]))
            norm.append(Arg.lit(v[2:]))
            continue
        norm.append(a)
    res = skip_options(norm, "aEdILnPs", longs)
    if res is None:
        _unknown_options(ana, "xargs", text)
        return None
    k, opts = res
    repl = opts.get("I") or (opts.get("replace") if "replace" in opts else None)
    if repl is None and ("i" in opts or "replace" in opts):
        repl = "{}"
    inner = norm[k:]
    if not inner:
        return None
    if repl:
        return [Arg(a.text, None) if a.value is not None and repl in a.value else a for a in inner]
    # Input items are appended as extra operands.
    return [*inner, Arg("<xargs input>", None)]


def _flock(ana: Analysis, args: list[Arg], cmd: Cmd, depth: int, text: str) -> list[Arg] | None:
    longs = {
        "timeout": REQUIRED,
        "wait": REQUIRED,
        "conflict-exit-code": REQUIRED,
        "command": REQUIRED,
        "shared": 0,
        "exclusive": 0,
        "unlock": 0,
        "nonblock": 0,
        "nb": 0,
        "close": 0,
        "no-fork": 0,
        "verbose": 0,
    }
    res = skip_options(args, "wEc", longs)
    if res is None:
        _unknown_options(ana, "flock", text)
        return None
    k, opts = res
    shell_code = opts.get("c", opts.get("command"))
    rest = args[k + 1 :]
    if shell_code is None and rest and rest[0].value in ("-c", "--command") and len(rest) > 1:
        ana.code(rest[1], depth, text, "shell code")
        return None
    if shell_code is not None:
        ana.code(Arg.lit(shell_code), depth, text, "shell code")
        return None
    return rest or None


def _watch(ana: Analysis, args: list[Arg], cmd: Cmd, depth: int, text: str) -> list[Arg] | None:
    longs = {
        "interval": REQUIRED,
        "differences": OPTIONAL,
        "equexit": REQUIRED,
        "exec": 0,
        "beep": 0,
        "color": 0,
        "no-color": 0,
        "errexit": 0,
        "chgexit": 0,
        "no-title": 0,
        "no-wrap": 0,
        "precise": 0,
        "no-rerun": 0,
        "shotsdir": REQUIRED,
    }
    res = skip_options(args, "nqs", longs)
    if res is None:
        _unknown_options(ana, "watch", text)
        return None
    k, opts = res
    rest = args[k:]
    if not rest:
        return None
    if "x" in opts or "exec" in opts:
        return rest
    if any(a.value is None for a in rest):
        dyn = next(a for a in rest if a.value is None)
        ana.events.append(Unknown(f"runs shell code only known at run time (`{dyn.text}`)", text))
        return None
    ana.source(" ".join(a.value or "" for a in rest), depth + 1)
    return None


def _su(ana: Analysis, args: list[Arg], cmd: Cmd, depth: int, text: str) -> list[Arg] | None:
    # su permutes options, so -c may come after the user name.
    value_short = "cgGsw"
    value_long = {
        "command",
        "session-command",
        "group",
        "supp-group",
        "shell",
        "whitelist-environment",
    }
    i, n = 0, len(args)
    while i < n:
        a = args[i]
        v = a.value
        i += 1
        if v is None:
            if a.may_be_option:
                _unknown_options(ana, "su", text)
                return None
            continue
        if v == "--":
            break
        if v.startswith("--"):
            name, eq, val = v[2:].partition("=")
            full = (
                next((x for x in sorted(value_long) if x.startswith(name)), name) if name else name
            )
            if full in value_long:
                word = Arg.lit(val) if eq else (args[i] if i < n else None)
                if not eq:
                    i += 1
                if full in ("command", "session-command") and word is not None:
                    ana.code(word, depth, text, "shell code")
                    return None
            continue
        if v.startswith("-") and len(v) > 1:
            for j, ch in enumerate(v[1:], start=1):
                if ch in value_short:
                    if j + 1 < len(v):
                        word: Arg | None = Arg.lit(v[j + 1 :])
                    else:
                        word = args[i] if i < n else None
                        i += 1
                    if ch == "c" and word is not None:
                        ana.code(word, depth, text, "shell code")
                        return None
                    break
    return None


def _python(ana: Analysis, args: list[Arg], cmd: Cmd, depth: int, text: str) -> list[Arg] | None:
    i, n = 0, len(args)
    while i < n:
        v = args[i].value
        if v is None or not v.startswith("-") or v == "-":
            return None
        i += 1
        if v.startswith("--"):
            continue
        for j, ch in enumerate(v[1:], start=1):
            if ch == "c":
                return None
            if ch in "mWX":
                value = v[j + 1 :] if j + 1 < len(v) else (args[i].value if i < n else None)
                if j + 1 >= len(v):
                    i += 1
                if ch == "m":
                    if value in ("pip", "pip3"):
                        return [Arg.lit("pip", value), *args[i:]]
                    return None
                break
    return None


def _git(ana: Analysis, args: list[Arg], cmd: Cmd, depth: int, text: str) -> list[Arg] | None:
    """Follow ``git -c alias.NAME=…`` when NAME is the subcommand."""
    split = git_split(args)
    if isinstance(split, Arg):
        return None
    opts, k = split
    if k >= len(args) or args[k].value is None:
        return None
    sub = args[k].value
    for name, word in opts:
        if name != "-c" or word is None:
            continue
        if word.value is None:
            if word.prefix.startswith("alias.") or not word.prefix:
                ana.events.append(
                    Unknown(f"defines a git alias only known at run time (`{word.text}`)", text)
                )
            continue
        key, eq, val = word.value.partition("=")
        if eq and key.lower() == f"alias.{sub}".lower():
            if val.startswith("!"):
                ana.source(val[1:], depth + 1)
                return None
            alias_words = words_of(val)
            if alias_words is None:
                return None
            expanded = [a for w in alias_words for a in expand(w.text, w.parts)]
            return [Arg.lit("git"), *expanded, *args[k + 1 :]]
    return None


def _busybox(ana: Analysis, args: list[Arg], cmd: Cmd, depth: int, text: str) -> list[Arg] | None:
    if args and args[0].value is not None and args[0].value.startswith("-"):
        return None
    return args or None


WRAPPERS: dict[str, Handler] = {
    "sudo": _sudo,
    "doas": _simple("uC", no_command="C L"),
    "env": _env,
    "exec": _simple("a"),
    "nohup": _simple(),
    "nice": _simple("n", {"adjustment": REQUIRED}),
    "timeout": _simple(
        "sk",
        {"signal": REQUIRED, "kill-after": REQUIRED, "preserve-status": 0, "foreground": 0},
        skip=1,
    ),
    "time": _simple("fo", {"format": REQUIRED, "output": REQUIRED}),
    "command": _simple(no_command="v V"),
    "builtin": _simple(),
    "stdbuf": _simple("ioe", {"input": REQUIRED, "output": REQUIRED, "error": REQUIRED}),
    "ionice": _simple("cnpPu", {"class": REQUIRED, "classdata": REQUIRED}, no_command="p P u"),
    "setsid": _simple(),
    "flock": _flock,
    "chroot": _simple("", {"userspec": REQUIRED, "groups": REQUIRED}, skip=1),
    "xargs": _xargs,
    "find": _find,
    "eval": _eval,
    "source": _source,
    ".": _source,
    "watch": _watch,
    "su": _su,
    "trap": _trap,
    "git": _git,
    "busybox": _busybox,
    "toybox": _busybox,
    "unbuffer": _simple(),
    **dict.fromkeys(SHELLS, _shell),
}
