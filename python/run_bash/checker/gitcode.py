"""Code that git runs: aliases and configuration values that are shell commands. Pure.

git takes configuration from ``-c key=value``, ``--config-env=key=VAR`` and the
``GIT_CONFIG_COUNT`` / ``GIT_CONFIG_KEY_n`` / ``GIT_CONFIG_VALUE_n`` (and
``GIT_CONFIG_PARAMETERS``) environment. An alias whose name is the subcommand is expanded (an
alias may call another alias; a ``!`` alias is shell code), and the values of keys that git runs
as commands (``core.sshCommand``, ``core.pager``, ``diff.external``, ``credential.helper`` with
``!``, …) are analysed as shell code. ``git config KEY VALUE`` storing such a value is analysed
too, since later git commands will run it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal, overload

from run_bash.checker.parser import words_of
from run_bash.checker.rules import git_split
from run_bash.checker.words import Arg, expand

if TYPE_CHECKING:
    from run_bash.checker.unwrap import Analysis, Ctx

# Configuration keys (lower case) whose value git runs as a shell command.
_CODE_KEYS = re.compile(
    r"core\.(?:sshcommand|pager|editor|fsmonitor|askpass|gitproxy)"
    r"|diff\.external|sequence\.editor|gpg\.program|gpg\.[^.]+\.program"
    r"|uploadpack\.packobjectshook|sendemail\.sendmailcmd|sendemail\.tocmd|sendemail\.cccmd"
    r"|pager\..+|diff\..+\.(?:command|textconv)|difftool\..+\.cmd|mergetool\..+\.cmd"
    r"|merge\..+\.driver|filter\..+\.(?:clean|smudge|process)|browser\..+\.cmd|man\..+\.cmd"
    r"|credential\.(?:.+\.)?helper|remote\..+\.(?:uploadpack|receivepack)"
)
_BOOLEAN = frozenset({"true", "false", "yes", "no", "on", "off", "1", "0", ""})
_CONFIG_VALUE_OPTIONS = frozenset(
    {"-f", "--file", "--blob", "--type", "--default", "--comment", "--value", "-t"}
)
MAX_ALIASES = 16

Config = list[tuple[str | None, Arg]]


def git_handler(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """Follow git aliases and judge configuration git would run as code."""
    split = git_split(args)
    if isinstance(split, Arg):
        return None  # the git rule pauses for a global option only known at run time
    opts, k = split
    config = _config(ana, opts, ctx)
    for key, value in config:
        if key is None:
            ana.unknown(f"sets git configuration only known at run time (`{value.text}`)", ctx.text)
        elif _CODE_KEYS.fullmatch(key):
            _config_code(ana, key, value, ctx)
    if k >= len(args):
        return None
    sub = args[k]
    if sub.value is None:
        return None
    if sub.value == "config":
        _git_config(ana, args[k + 1 :], ctx)
        return None
    _commands_given(ana, sub.value, args[k + 1 :], ctx)
    hook_dirs = [
        v.value.rstrip("/") + "/" for key, v in config if key == "core.hookspath" and v.value
    ]
    for path in list(ana.written):
        if "hooks/" in path or any(path.startswith(d) or f"/{d}" in path for d in hook_dirs):
            # A hook this line writes runs when git reaches it.
            ana.script_run(Arg.lit(path), [], ctx)
    alias_key = f"alias.{sub.value.lower()}"
    for key, value in reversed(config):
        if key is None:
            continue
        if key != alias_key:
            continue
        if value.value is None:
            ana.unknown(f"runs a git alias only known at run time (`{value.text}`)", ctx.text)
            return None
        body = value.value
        if body.startswith("!"):
            from run_bash.checker.unwrap import Scope

            ana.source(body[1:], ctx.depth + 1, Scope(list(args[k + 1 :])))
            return None
        words = words_of(body)
        if words is None:
            ana.unknown(f"runs a git alias that cannot be read (`{body}`)", ctx.text)
            return None
        expanded = [a for w in words for a in expand(w.text, w.parts)]
        # Keep the global options: the alias may call another alias defined there.
        return [Arg.lit("git"), *args[:k], *expanded, *args[k + 1 :]]
    return None


def _config(ana: Analysis, opts: list[tuple[str, Arg | None]], ctx: Ctx) -> Config:
    config: Config = []
    for name, word in opts:
        if word is None:
            continue
        if name == "-c":
            if word.value is None:
                key = word.prefix.partition("=")[0] if "=" in word.prefix else None
                config.append((key.lower() if key else None, Arg(word.text, None)))
            else:
                key, eq, val = word.value.partition("=")
                config.append((key.lower(), Arg.lit(val if eq else "true")))
        elif name == "--config-env":
            text = word.value if word.value is not None else word.prefix
            key, eq, var = text.partition("=")
            if not eq or word.value is None:
                config.append((key.lower() if eq else None, Arg(word.text, None)))
            else:
                config.append((key.lower(), _env_value(ana, var, ctx)))
        elif name == "--exec-path" and word is not None:
            ana.unknown("runs git's own programs from another directory", ctx.text)
    count = _env_value(ana, "GIT_CONFIG_COUNT", ctx, missing=True)
    if count is not None:
        if count.value is None or not count.value.isdigit():
            ana.unknown(
                "sets git configuration from the environment only known at run time", ctx.text
            )
        else:
            for n in range(min(int(count.value), 64)):
                key_arg = _env_value(ana, f"GIT_CONFIG_KEY_{n}", ctx)
                value_arg = _env_value(ana, f"GIT_CONFIG_VALUE_{n}", ctx)
                config.append(
                    (key_arg.value.lower() if key_arg.value is not None else None, value_arg)
                )
    params = _env_value(ana, "GIT_CONFIG_PARAMETERS", ctx, missing=True)
    if params is not None:
        words = words_of(params.value) if params.value is not None else None
        if words is None:
            ana.unknown(
                "sets git configuration from `GIT_CONFIG_PARAMETERS` it cannot read", ctx.text
            )
        else:
            for w in words:
                vals = expand(w.text, w.parts)
                param = vals[0].value if len(vals) == 1 else None
                if param is None:
                    config.append((None, Arg(w.text, None)))
                    continue
                key, _, val = param.partition("=")
                config.append((key.lower(), Arg.lit(val)))
    if _env_value(ana, "GIT_EXEC_PATH", ctx, missing=True) is not None:
        ana.unknown("runs git's own programs from the directory in `GIT_EXEC_PATH`", ctx.text)
    files = [v for k, v in config if k is not None and _INCLUDE.fullmatch(k)]
    for var in ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG"):
        value = _env_value(ana, var, ctx, missing=True)
        if value is not None:
            files.append(value)
    for path in files[:16]:
        config.extend(_config_file(ana, path, ctx))
    return config


_INCLUDE = re.compile(r"include\.path|includeif\..+\.path")
_SECTION = re.compile(r'\[\s*([A-Za-z0-9.-]+)(?:\s+"((?:[^"\\]|\\.)*)")?\s*\](.*)')


def _config_file(ana: Analysis, path: Arg, ctx: Ctx) -> Config:
    """Entries of a git config file this command line writes (others are not followed)."""
    if path.value is None:
        return []
    content = ana.written_file(path.value)
    if content is None:
        ana.unknown(f"uses git configuration from `{path.value}`, written at run time", ctx.text)
        return []
    if not isinstance(content, str):
        return []
    out: Config = []
    section = ""
    for raw in content.splitlines():
        line = raw.strip()
        m = _SECTION.match(line)
        if m:
            section = m.group(1).lower() + (f".{m.group(2)}" if m.group(2) is not None else "")
            line = m.group(3).strip()
        if not line or line[0] in "#;":
            continue
        key, eq, value = line.partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1]
        out.append((f"{section}.{key.strip()}".lower(), Arg.lit(value if eq else "true")))
    return out


@overload
def _env_value(ana: Analysis, name: str, ctx: Ctx, *, missing: Literal[False] = False) -> Arg: ...
@overload
def _env_value(ana: Analysis, name: str, ctx: Ctx, *, missing: Literal[True]) -> Arg | None: ...
def _env_value(ana: Analysis, name: str, ctx: Ctx, *, missing: bool = False) -> Arg | None:
    """The value ``name`` has in the command's environment (None: not set, with ``missing``)."""
    if name in ctx.env:
        return ctx.env[name]
    values = ana.values(name)
    if values is None:
        return None if missing else Arg(f"${name}", None)
    if len(values) == 1:
        (only,) = values
        if not only.startswith("\0"):
            return Arg.lit(only)
    return Arg(f"${name}", None)


def _config_code(ana: Analysis, key: str, value: Arg, ctx: Ctx) -> None:
    if value.value is None:
        ana.unknown(
            f"sets `{key}`, which git runs as a command, to something only known at run time",
            ctx.text,
        )
        return
    text = value.value
    if (key.startswith("pager.") or key == "core.fsmonitor") and text.lower() in _BOOLEAN:
        return
    if key.startswith("credential.") and key.endswith("helper"):
        if text.startswith("!"):
            text = text[1:]
        elif not text.startswith("/"):
            return  # `store`, `cache --timeout=60`: git's own credential-<name> helper
    ana.source(text, ctx.depth + 1)


def _git_config(ana: Analysis, args: list[Arg], ctx: Ctx) -> None:
    """``git config [options] KEY VALUE`` / ``git config set KEY VALUE``: a stored command."""
    operands: list[Arg] = []
    i, n = 0, len(args)
    while i < n:
        a = args[i]
        v = a.value
        i += 1
        if v is not None and v.startswith("-") and v != "-":
            if v in _CONFIG_VALUE_OPTIONS:
                i += 1
            continue
        operands.append(a)
    if operands and operands[0].value in ("set", "add"):
        operands = operands[1:]
    if len(operands) < 2 or operands[0].value is None:
        return
    key = operands[0].value.lower()
    value = operands[1]
    if key.startswith("alias."):
        if value.value is None:
            ana.unknown("stores a git alias only known at run time", ctx.text)
        elif value.value.startswith("!"):
            ana.source(value.value[1:], ctx.depth + 1)
    elif _CODE_KEYS.fullmatch(key):
        _config_code(ana, key, value, ctx)


# Subcommand options whose value is a command git runs: (short, long) per subcommand.
_COMMAND_OPTIONS = {
    "rebase": ("x", "exec"),
    "difftool": ("x", "extcmd"),
    "clone": ("u", "upload-pack"),
    "fetch": ("", "upload-pack"),
    "pull": ("", "upload-pack"),
    "ls-remote": ("", "upload-pack"),
    "push": ("", "receive-pack"),
    "archive": ("", "exec"),
}


def _commands_given(ana: Analysis, sub: str, args: list[Arg], ctx: Ctx) -> None:
    """``rebase --exec CMD``, ``clone -u CMD``, ``bisect run CMD…``, ``submodule foreach CMD``."""
    from run_bash.checker.unwrap import Scope

    if sub == "bisect" and args and args[0].value == "run":
        if args[1:]:
            ana.chain(list(args[1:]), ctx)
        return
    if sub == "submodule":
        rest = [a for a in args if a.value is None or not a.value.startswith("-")]
        if rest and rest[0].value == "foreach" and len(rest) > 1:
            words = rest[1:]
            if any(a.value is None for a in words):
                ana.unknown("runs a command only known at run time in each submodule", ctx.text)
            else:
                ana.source(" ".join(a.value or "" for a in words), ctx.depth + 1, Scope())
        return
    short, long = _COMMAND_OPTIONS.get(sub, ("", ""))
    if not long:
        return
    for k, a in enumerate(args):
        v = a.value
        if v is None:
            continue
        word: Arg | None = None
        if v.startswith(f"--{long}="):
            word = Arg.lit(v.split("=", 1)[1])
        elif v == f"--{long}" or (short and v == f"-{short}"):
            word = args[k + 1] if k + 1 < len(args) else None
        elif short and v.startswith(f"-{short}") and len(v) > 2 and not v.startswith("--"):
            word = Arg.lit(v[2:])
        if word is not None:
            ana.code(word, ctx, "code git runs")
