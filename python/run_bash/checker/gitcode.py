"""Code that git runs: aliases, configuration values that are commands, ``ext::`` URLs. Pure.

git takes configuration from ``-c key=value``, ``--config-env=key=VAR``, the
``GIT_CONFIG_COUNT`` / ``GIT_CONFIG_KEY_n`` / ``GIT_CONFIG_VALUE_n`` (and
``GIT_CONFIG_PARAMETERS``) environment, config files the line writes and includes, and
``git config KEY VALUE`` earlier in the same command line. From it:

* an alias whose name is the subcommand is expanded (an alias may call another alias; a ``!``
  alias is shell code);
* the values of keys git runs as commands (``core.sshCommand``, ``core.pager``, ``diff.external``,
  ``credential.helper`` with ``!``, …) are analysed as shell code;
* keys that make git run programs the checker cannot see pause: ``core.*`` keys not known to be
  inert, ``core.hooksPath``, ``protocol.*.allow`` for transports that run commands,
  ``include.path`` of a file the line does not write;
* ``git config`` storing an alias, a command key, a forced push refspec or a mirror is judged by
  what later git commands will do with it.
"""

from __future__ import annotations

import re
from typing import Literal, overload

from run_bash.checker.model import Ctx, Hit, Scope, Walker
from run_bash.checker.options import Read, opts, read, values_of
from run_bash.checker.parser import words_of
from run_bash.checker.words import Arg, expand, wordlist

GIT_GLOBAL = opts(
    "-Cc: -pPhv --git-dir= --work-tree= --namespace= --super-prefix= --config-env= "
    "--attr-source= --exec-path[=] --list-cmds= --paginate --no-pager --no-replace-objects "
    "--no-lazy-fetch --no-optional-locks --no-advice --bare --literal-pathspecs "
    "--glob-pathspecs --noglob-pathspecs --icase-pathspecs --html-path --man-path --info-path "
    "--version --help",
    abbrev=False,
    exhaustive=True,
)
# gc's expiry keys (``gc.<pattern>.reflogExpire`` too) and what goes when they are short.
# Each with what it deletes and git's own default as git writes it (any other date may be sooner:
# git's dates are not read here).
_GC_EXPIRY = {
    "pruneexpire": ("unreachable commits", "2.weeks.ago"),
    "reflogexpire": ("reflog entries, the way back to lost commits,", "90.days.ago"),
    "reflogexpireunreachable": ("reflog entries, the way back to lost commits,", "30.days.ago"),
}
# Configuration keys (lower case) whose value git runs as a shell command.
_CODE_KEYS = re.compile(
    r"core\.(?:sshcommand|pager|editor|fsmonitor|askpass|gitproxy|alternaterefscommand)"
    r"|diff\.external|sequence\.editor|gpg\.program|gpg\.[^.]+\.program"
    r"|uploadpack\.packobjectshook|sendemail\.sendmailcmd|sendemail\.tocmd|sendemail\.cccmd"
    r"|pager\..+|diff\..+\.(?:command|textconv)|difftool\..+\.cmd|mergetool\..+\.cmd"
    r"|merge\..+\.driver|filter\..+\.(?:clean|smudge|process)|browser\..+\.cmd|man\..+\.cmd"
    r"|credential\.(?:.+\.)?helper|remote\..+\.(?:uploadpack|receivepack|vcs)"
    r"|gpg\.ssh\.defaultkeycommand|trailer\..+\.(?:cmd|command)|interactive\.difffilter"
    r"|submodule\..+\.update|sendemail\.smtpserver"
)
# `core.*` keys that only change how git reads and writes its own data.
_INERT_CORE = frozenset(
    wordlist(
        "filemode hidedotfiles ignorecase precomposeunicode protecthfs protectntfs trustctime "
        "splitindex untrackedcache checkstat quotepath eol safecrlf autocrlf checkroundtripencoding "
        "symlinks ignorestat prefersymlinkrefs alternaterefsprefixes bare logallrefupdates "
        "repositoryformatversion sharedrepository warnambiguousrefs compression loosecompression "
        "packedgitwindowsize packedgitlimit deltabasecachelimit bigfilethreshold excludesfile "
        "attributesfile commentchar commentstring filesreflocktimeout packedrefstimeout whitespace "
        "fsync fsyncmethod fsyncobjectfiles preloadindex unsetenvvars restrictinheritedhandles "
        "createobject notesref commitgraph usereplacerefs multipackindex sparsecheckout "
        "sparsecheckoutcone abbrev maxtreedepth longpaths fscache fsmonitorhookversion "
        "checkroundtripencoding"
    )
)
_SAFE_PROTOCOLS = frozenset({"file", "http", "https", "git", "ssh"})
_BOOLEAN = frozenset({"true", "false", "yes", "no", "on", "off", "1", "0", ""})
_CONFIG_VALUE_OPTIONS = frozenset(
    {"-f", "--file", "--blob", "--type", "--default", "--comment", "--value", "-t"}
)
_INCLUDE = re.compile(r"include\.path|includeif\..+\.path")
_SECTION = re.compile(r'\[\s*([A-Za-z0-9.-]+)(?:\s+"((?:[^"\\]|\\.)*)")?\s*\](.*)')
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
    "grep": ("O", "open-files-in-pager"),
    "send-email": ("", "sendmail-cmd to-cmd cc-cmd header-cmd smtp-server"),
}

Config = list[tuple[str | None, Arg]]

# The environment that says where git's work tree is, kept with the configuration the command
# gets under keys no configuration has (``worktree`` in ``reading`` reads them).
WORK_TREE_VAR, GIT_DIR_VAR = "GIT_WORK_TREE", "GIT_DIR"
WORK_TREE_KEY, GIT_DIR_KEY = "\0env.git_work_tree", "\0env.git_dir"


def git(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """Follow git aliases and judge configuration and URLs git would run as code."""
    top = read(args, GIT_GLOBAL, permute=False)
    if top.dynamic:
        return None  # the git rule pauses for a global option only known at run time
    config = _config(ana, top, ctx)
    for key, value in config:
        if key is None:
            ana.unknown(f"sets git configuration only known at run time (`{value.text}`)", ctx.text)
        else:
            _judge_key(ana, key, value, ctx)
    ctx.config.update({k: v.value for k, v in config if k is not None and v.value is not None})
    for var, key in ((WORK_TREE_VAR, WORK_TREE_KEY), (GIT_DIR_VAR, GIT_DIR_KEY)):
        # Where git's work tree is, from the environment (``$`` for a value known at run time).
        found = _env_value(ana, var, ctx, missing=True)
        if found is not None:
            ctx.config[key] = found.value if found.value is not None else "$"
    for a in args:
        if a.value is not None and a.value.startswith("ext::"):
            _ext_url(ana, a.value, ctx)
    k = top.first
    if k >= len(args) or args[k].value is None:
        return None
    sub = args[k].value or ""
    if sub == "config":
        _git_config(ana, args[k + 1 :], ctx)
        return None
    _commands_given(ana, sub, args[k + 1 :], ctx)
    hook_dirs = [
        v.value.rstrip("/") + "/" for key, v in config if key == "core.hookspath" and v.value
    ]
    for path in list(ana.written):
        if "hooks/" in path or any(path.startswith(d) or f"/{d}" in path for d in hook_dirs):
            ana.script_run(Arg.lit(path), [], ctx)  # a hook this line writes runs when git does
    alias_key = f"alias.{sub.lower()}"
    stored = [(key, v) for key, v in ana.git_config if key == alias_key]
    for key, value in reversed(stored + config):
        if key != alias_key:
            continue
        if value.value is None:
            ana.unknown(f"runs a git alias only known at run time (`{value.text}`)", ctx.text)
            return None
        body = value.value
        if body.startswith("!"):
            # git runs `sh -c 'BODY "$@"' BODY ARGS…`: the arguments reach the body's end.
            rest = list(args[k + 1 :])
            code = f'{body[1:]} "$@"' if rest else body[1:]
            ana.source(code, ctx.depth + 1, Scope(rest), ctx=ctx)
            return None
        words = words_of(body)
        if words is None:
            ana.unknown(f"runs a git alias that cannot be read (`{body}`)", ctx.text)
            return None
        expanded = [a for w in words for a in expand(w.text, w.parts)]
        # Keep the global options: the alias may call another alias defined there.
        return [Arg.lit("git"), *args[:k], *expanded, *args[k + 1 :]]
    return None


def _judge_key(ana: Walker, key: str, value: Arg, ctx: Ctx) -> None:
    """Judge one configuration key git will use."""
    section, _, rest = key.partition(".")
    name = rest.rsplit(".", 1)[-1]
    if _CODE_KEYS.fullmatch(key):
        _config_code(ana, key, value, ctx)
    elif key == "core.hookspath":
        if value.value not in ("/dev/null", ""):
            ana.unknown(f"makes git run hooks from `{value.text}`, which it cannot see", ctx.text)
    elif section == "core" and rest not in _INERT_CORE:
        ana.unknown(f"sets `{key}`, which may make git run other programs", ctx.text)
    elif section == "gc" and name in _GC_EXPIRY:
        # `git gc`, and the one git starts on its own after a commit or a fetch, reads these.
        what, default = _GC_EXPIRY[name]
        if value.value is None or value.value.lower() not in ("never", "false", default):
            ctx.hits.append(Hit(f"makes git's garbage collection delete {what} sooner (`{key}`)"))
    elif section == "protocol" and name == "allow":
        transport = rest[: -len(".allow")] if rest.endswith(".allow") else ""
        unsafe = transport not in _SAFE_PROTOCOLS if transport else value.value in (None, "always")
        if unsafe and value.value != "never":
            ana.unknown(f"lets git use transports that run commands (`{key}`)", ctx.text)
    elif (key.startswith("url.") and key.endswith("insteadof")) or key.endswith(".url"):
        ext = value.value is None or value.value.startswith("ext::") or key.startswith("url.ext::")
        if ext:
            ana.unknown(f"points git at a URL that may run a command (`{key}`)", ctx.text)


def _ext_url(ana: Walker, url: str, ctx: Ctx) -> None:
    """``ext::CMD ARGS``: git runs CMD (``% `` is a space in an argument, ``%%`` a percent)."""
    words: list[str] = [""]
    text = url[len("ext::") :]
    k = 0
    while k < len(text):
        ch = text[k]
        if ch == "%" and k + 1 < len(text):
            nxt = text[k + 1]
            words[-1] += {" ": " ", "%": "%", "s": "git-upload-pack", "S": "upload-pack"}.get(
                nxt, ""
            )
            k += 2
            continue
        if ch == " ":
            words.append("")
        else:
            words[-1] += ch
        k += 1
    argv = [Arg.lit(w) for w in words if w]
    if argv:
        ana.chain(argv, ctx.sub(" ".join(words)))


def _config(ana: Walker, top: Read, ctx: Ctx) -> Config:
    """Configuration this git command gets from its options and environment."""
    config: Config = []
    for (name, _), word in zip(top.opts, top.words, strict=True):
        if word is None:
            continue
        if name == "c":
            if word.value is None:
                key = word.prefix.partition("=")[0] if "=" in word.prefix else None
                config.append((key.lower() if key else None, Arg(word.text, None)))
            else:
                key, eq, val = word.value.partition("=")
                config.append((key.lower(), Arg.lit(val if eq else "true")))
        elif name == "config-env":
            text = word.value if word.value is not None else word.prefix
            key, eq, var = text.partition("=")
            if not eq or word.value is None:
                config.append((key.lower() if eq else None, Arg(word.text, None)))
            else:
                config.append((key.lower(), _env_value(ana, var, ctx)))
        elif name == "exec-path" and word.value:
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
                key = key_arg.value.lower() if key_arg.value is not None else None
                config.append((key, value_arg))
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
    return [(k, v) for k, v in config if k is None or not _INCLUDE.fullmatch(k)]


def _config_file(ana: Walker, path: Arg, ctx: Ctx) -> Config:
    """Entries of a git config file this command line writes (others are asked about)."""
    content = ana.written_file(path.value) if path.value is not None else None
    if not isinstance(content, str):
        if path.value not in ("/dev/null", ""):
            ana.unknown(
                f"uses git configuration from `{path.text}`, which may make git run commands",
                ctx.text,
            )
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
def _env_value(ana: Walker, name: str, ctx: Ctx, *, missing: Literal[False] = False) -> Arg: ...
@overload
def _env_value(ana: Walker, name: str, ctx: Ctx, *, missing: Literal[True]) -> Arg | None: ...
def _env_value(ana: Walker, name: str, ctx: Ctx, *, missing: bool = False) -> Arg | None:
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


def _config_code(ana: Walker, key: str, value: Arg, ctx: Ctx) -> None:
    if value.value is None:
        ana.unknown(
            f"sets `{key}`, which git runs as a command, to something only known at run time",
            ctx.text,
        )
        return
    text = value.value
    if (key.startswith("pager.") or key == "core.fsmonitor") and text.lower() in _BOOLEAN:
        return
    if key.startswith("submodule.") and not text.startswith("!"):
        return  # `checkout`, `rebase`, `merge`, `none`; `!CMD` runs CMD
    if key.startswith("submodule."):
        text = text[1:]
    if key == "sendemail.smtpserver" and "/" not in text:
        return  # a host name; an absolute path (`$PWD/s.sh` too) is a program git runs
    if key.startswith("credential.") and key.endswith("helper"):
        if text.startswith("!"):
            text = text[1:]
        elif not text.startswith("/"):
            return  # `store`, `cache --timeout=60`: git's own credential-<name> helper
    ana.source(text, ctx.depth + 1, ctx=ctx)


def _git_config(ana: Walker, args: list[Arg], ctx: Ctx) -> None:
    """``git config [options] KEY VALUE`` / ``git config set KEY VALUE``: stored for later git
    commands, and judged by what they will do with it."""
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
    ana.git_config.append((key, value))
    parts = key.split(".")
    if key.startswith("alias."):
        if value.value is None:
            ana.unknown("stores a git alias only known at run time", ctx.text)
        elif value.value.startswith("!"):
            ana.source(value.value[1:], ctx.depth + 1, ctx=ctx)
        else:
            words = words_of(value.value)
            argv = [a for w in words or () for a in expand(w.text, w.parts)]
            if words is None or any(a.value is None for a in argv):
                ana.unknown(f"stores a git alias that cannot be read (`{value.text}`)", ctx.text)
            elif argv and argv[0].value != key[len("alias.") :]:
                ana.chain([Arg.lit("git"), *argv], ctx.sub(f"git {value.value}"))
    elif (
        parts[0] == "remote"
        and parts[-1] == "mirror"
        and (value.value or "true").lower() in ("true", "yes", "on", "1", "")
    ):
        ctx.hits.append(Hit(f"makes later pushes mirror the remote (`{key}`), deleting its refs"))
    elif parts[0] == "remote" and parts[-1] == "push" and (value.value or "+").startswith("+"):
        ctx.hits.append(Hit(f"makes later pushes force-push (`{key}` is a `+` refspec)"))
    elif _INCLUDE.fullmatch(key):
        for included, entry in _config_file(ana, value, ctx):
            if included is not None:
                _judge_key(ana, included, entry, ctx)
    else:
        _judge_key(ana, key, value, ctx)


def _commands_given(ana: Walker, sub: str, args: list[Arg], ctx: Ctx) -> None:
    """``rebase --exec CMD``, ``clone -u CMD``, ``bisect run CMD…``, ``submodule foreach CMD``."""
    if sub == "bisect" and args and args[0].value == "run":
        if args[1:]:
            ana.chain(list(args[1:]), ctx)
        return
    if sub == "submodule":
        # `submodule [--quiet] foreach [--recursive] CMD…`: the command keeps its own options.
        at = next((k for k, a in enumerate(args) if a.value == "foreach"), None)
        lead = args[:at] if at is not None else []
        if at is not None and all((a.value or "").startswith("-") for a in lead):
            words = list(args[at + 1 :])
            while words and words[0].value in ("--recursive", "-q", "--quiet", "--"):
                done, words = words[0].value == "--", words[1:]
                if done:
                    break
            if any(a.value is None for a in words):
                ana.unknown("runs a command only known at run time in each submodule", ctx.text)
            elif len(words) == 1:
                ana.source(words[0].value or "", ctx.depth + 1, ctx=ctx)
            elif words:  # several words are the command and its arguments, not shell code
                ana.chain(words, ctx)
        return
    if sub in ("clone", "submodule"):
        _clone_config(ana, args, ctx)
    short, longs = _COMMAND_OPTIONS.get(sub, ("", ""))
    for k, a in enumerate(args):
        v = a.value
        if v is None or not longs:
            continue
        word: Arg | None = None
        long = next((x for x in longs.split() if v == f"--{x}" or v.startswith(f"--{x}=")), "")
        if long and "=" in v:
            word = Arg.lit(v.split("=", 1)[1])
        elif (long or (short and v == f"-{short}")) and sub != "grep":
            word = args[k + 1] if k + 1 < len(args) else None
        elif short and v.startswith(f"-{short}") and len(v) > 2 and not v.startswith("--"):
            word = Arg.lit(v[2:])
        if word is not None and not (long == "smtp-server" and (word.value or "/")[0] != "/"):
            ana.code(word, ctx, "code git runs")


def _clone_config(ana: Walker, args: list[Arg], ctx: Ctx) -> None:
    """``git clone -c KEY=VALUE`` configures the new repository before git uses it; a
    ``--template`` directory brings its hooks."""
    if any((a.value or "").startswith("--template") for a in args):
        ana.unknown("installs git hooks from a template directory", ctx.text)
    for word in values_of(args, "-c --config"):
        if word.value is None:
            ana.unknown(f"sets git configuration only known at run time (`{word.text}`)", ctx.text)
        else:
            key, eq, value = word.value.partition("=")
            _judge_key(ana, key.lower(), Arg.lit(value if eq else "true"), ctx)
