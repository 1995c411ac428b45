"""Commands that run other commands or code, with their real option syntax. Pure.

A handler receives the words after the command name and returns the wrapped command's words
(the analysis then judges that command, and follows it if it wraps too), or None after analysing
what it runs itself (code given as text, a shell's input, several commands). It records an
unknown whenever what runs cannot be told before running.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from run_bash.checker.options import (
    NONE,
    OPTIONAL,
    REQUIRED,
    Spec,
    skip_options,
    wrapper_options,
)
from run_bash.checker.parser import words_of
from run_bash.checker.words import Arg, command_name, decode_echo, expand

if TYPE_CHECKING:
    from run_bash.checker.unwrap import Analysis, Ctx

Handler = Callable[["Analysis", list[Arg], "Ctx"], "list[Arg] | None"]

_PYTHON = re.compile(r"python(?:\d+(?:\.\d+)*)?")
_ENV_WORD = re.compile(r"[^=]*=")  # env and sudo take any word with `=` as an assignment
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MAX_INPUTS = 32
# Start-up files of interactive and login shells.
RC_FILES = ("~/.bashrc", "~/.bash_profile", "~/.bash_login", "~/.profile", "~/.zshrc", "~/.kshrc")


def _longs(required: str = "", flags: str = "", optional: str = "") -> dict[str, int]:
    out = dict.fromkeys(required.split(), REQUIRED)
    out.update(dict.fromkeys(flags.split(), NONE))
    out.update(dict.fromkeys(optional.split(), OPTIONAL))
    return out


def _dynamic_options(ana: Analysis, name: str, ctx: Ctx) -> None:
    ana.unknown(f"passes `{name}` options only known at run time", ctx.text)


def runner(
    spec: Spec,
    *,
    skip: int = 0,
    no_command: str = "",
    assignments: bool = False,
    no_args: str = "",
) -> Handler:
    """A command runner: ``NAME [OPTIONS] [skip operands] COMMAND [ARGS]``.

    ``no_command``: options after which no command follows (``command -v``). ``no_args``: what
    runs when no command is given ("stdin": a shell reading its input).
    """

    def handler(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
        parsed = wrapper_options(args, spec)
        if parsed is None:
            _dynamic_options(ana, ctx.text.split(" ", 1)[0], ctx)
            return None
        if any(opt in parsed.opts for opt in no_command.split()):
            return None
        starts = [parsed.index + skip] + [k + skip for k in parsed.alternatives]
        inner: list[list[Arg]] = []
        for k in starts:
            if assignments:
                k = _skip_assignments(ana, args, k, ctx)
            inner.append(args[k:])
        if not inner[0]:
            if no_args == "stdin":
                ana.stdin_code(ctx, "shell code")
            return None
        for alt in inner[1:]:
            if alt and alt != inner[0]:
                ana.chain(list(alt), ctx)
        return inner[0]

    return handler


def _skip_assignments(ana: Analysis, args: list[Arg], k: int, ctx: Ctx) -> int:
    """Skip ``NAME=value`` words (env, sudo) and judge the special ones."""
    while k < len(args):
        a = args[k]
        text = a.value if a.value is not None else a.prefix
        m = _ENV_WORD.match(text)
        if not m:
            break
        name = m.group()[:-1]
        if name.startswith("BASH_FUNC_"):
            ana.unknown(f"defines a function through the environment (`{a.text}`)", ctx.text)
        value = Arg.lit(a.value[len(name) + 1 :]) if a.value is not None else Arg(a.text, None)
        ctx.env[name] = value
        ana.special_variable(name, value, ctx)
        k += 1
    return k


# -- sudo, env, shells --------------------------------------------------------------------------

_SUDO = Spec(
    short_value="aCcDgpRrTtUuh",
    short_flags="AbEeHiKklnPSsVv",
    longs=_longs(
        "auth-type chdir chroot close-from group host login-class other-user prompt role type "
        "command-timeout user",
        "askpass background edit help list non-interactive preserve-groups remove-timestamp "
        "reset-timestamp shell stdin validate version login set-home bell",
        "preserve-env",
    ),
)


def _sudo(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    parsed = wrapper_options(args, _SUDO)
    if parsed is None:
        _dynamic_options(ana, "sudo", ctx)
        return None
    opts = parsed.opts
    if any(o in opts for o in ("e", "l", "v", "V", "K", "edit", "list", "validate", "version")):
        return None
    k = _skip_assignments(ana, args, parsed.index, ctx)
    rest = args[k:]
    shell = "s" in opts or "i" in opts or "shell" in opts or "login" in opts
    if shell and not rest:
        ana.stdin_code(ctx, "shell code")
        return None
    if shell:
        _shell_mode(ana, rest, ctx)  # the shell runs the words with -c
        return None
    return rest or None


_ENV = Spec(
    short_value="uCSPa",
    short_flags="i0v",
    longs=_longs(
        "unset chdir split-string argv0",
        "ignore-environment null debug list-signal-handling help version",
        "ignore-signal default-signal block-signal",
    ),
)


def _env(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    k = 0
    pre: list[Arg] = []
    while True:
        # A lone `-` means `-i` (start with an empty environment), even after `--`.
        while k < len(args) and args[k].value in ("-", "--"):
            k += 1
        parsed = wrapper_options(args[k:], _ENV)
        if parsed is None:
            _dynamic_options(ana, "env", ctx)
            return None
        split = parsed.opts.get("S", parsed.opts.get("split-string"))
        if split is not None or "S" in parsed.opts or "split-string" in parsed.opts:
            words = words_of(split) if split is not None else None
            if words is None:
                ana.unknown("passes `env -S` a string it cannot split", ctx.text)
                return None
            pre.extend(a for w in words for a in expand(w.text, w.parts))
        k += parsed.index
        while k < len(args) and args[k].value == "-":
            k += 1
        before = k
        k = _skip_assignments(ana, args, k, ctx)
        if k >= len(args) or not (args[k].value or "").startswith("-"):
            break
        if k == before and args[k].value != "-":
            break
    rest = pre + args[k:]
    if pre:
        # `env -S 'a b' c`: the split words may hold assignments and options again.
        return [Arg.lit("env"), *rest]
    return rest or None


def _interactive_flag(v: str) -> bool:
    if v in ("--login", "--interactive"):
        return True
    return v.startswith("-") and not v.startswith("--") and any(ch in v[1:] for ch in "il")


def _shell(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    from run_bash.checker.unwrap import STDIN_FILES, Scope

    command: Arg | None = None
    command_mode = stdin_mode = False
    i, n = 0, len(args)
    while i < n:
        a = args[i]
        v = a.value
        if v is None:
            if a.may_be_option:
                _dynamic_options(ana, "sh", ctx)
                return None
            break
        if v in ("--", "-"):
            i += 1
            break
        if v.startswith("--"):
            name, eq, val = v[2:].partition("=")
            i += 1
            if name in ("command", "init-command"):  # fish
                word = Arg.lit(val) if eq else (args[i] if i < n else None)
                i += 0 if eq else 1
                if word is not None:
                    ana.code(word, ctx, "shell code")
            elif name in ("rcfile", "init-file") and not eq:
                if i < n:
                    ana.sourced_file(args[i], ctx, f"`--{name}`")
                i += 1
            continue
        if v[:1] in "-+" and len(v) > 1:
            i += 1
            for ch in v[1:]:
                if ch == "c":
                    command_mode = True
                elif ch == "s":
                    stdin_mode = True
                elif ch == "C" and v[0] == "-":  # fish: init command
                    if i < n:
                        ana.code(args[i], ctx, "shell code")
                    i += 1
                elif ch in "oO":
                    i += 1  # -o option / -O shopt take the next word
            continue
        break
    rest = args[i:]
    interactive = any(_interactive_flag(a.value or "") for a in args[:i])
    if interactive:
        for rc in RC_FILES:
            content = ana.written_file(rc)
            if content is not False:
                ana.script_run(Arg.lit(rc), [], ctx, shell=True)
    if command_mode:
        command = rest[0] if rest else None
        if command is not None:
            ana.code(command, ctx, "shell code", Scope(list(rest[2:])))
        return None
    if stdin_mode or not rest:
        ana.stdin_code(ctx, "shell code")
        return None
    script = rest[0]
    if script.value in STDIN_FILES:
        ana.stdin_code(ctx, "shell code")
    else:
        ana.script_run(script, rest[1:], ctx, shell=True)
    return None


def _eval(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    if args and args[0].value == "--":
        args = args[1:]
    if not args:
        return None
    if any(a.value is None for a in args):
        dyn = next(a for a in args if a.value is None)
        ana.unknown(f"evaluates code only known at run time (`{dyn.text}`)", ctx.text)
        return None
    ana.source(" ".join(a.value or "" for a in args), ctx.depth + 1, ctx.scope)
    return None


def _source(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    if args and args[0].value == "--":
        args = args[1:]
    if args:
        ana.sourced_file(args[0], ctx, "`source`", list(args[1:]))
    return None


def _trap(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    res = skip_options(args, "", {})
    if res is None:
        return None
    k, opts = res
    if "l" in opts or "p" in opts or k >= len(args) or len(args) - k < 2:
        return None
    action = args[k]
    if action.value in ("-", ""):
        return None
    ana.code(action, ctx, "trap code")
    return None


# -- find, xargs, parallel, fd ------------------------------------------------------------------


def _find(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
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
            Arg("{}", None, "./") if a.value is not None and "{}" in a.value else a
            for a in args[start:i]
        ]
        if inner:
            # The verdict names the inner command (`rm -rf {}`), not the whole find.
            sub = _sub_ctx(ctx, " ".join(a.text for a in args[start:i]))
            ana.chain(inner, sub)
        i += 1
    return None


def _sub_ctx(ctx: Ctx, text: str) -> Ctx:
    from run_bash.checker.unwrap import Ctx as _Ctx

    return _Ctx(ctx.cmd, ctx.depth, text, ctx.scope, dict(ctx.env), False)


_XARGS = Spec(
    short_value="aEdILnPs",
    short_optional="eil",
    short_flags="0oprtx",
    longs=_longs(
        "arg-file delimiter max-args max-procs max-chars process-slot-var",
        "null no-run-if-empty interactive verbose exit open-tty show-limits help version",
        "eof replace max-lines",
    ),
)


def _xargs(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    parsed = wrapper_options(args, _XARGS)
    if parsed is None:
        _dynamic_options(ana, "xargs", ctx)
        return None
    opts = parsed.opts
    repl = opts.get("I") or opts.get("replace")
    if repl is None and ("i" in opts or "replace" in opts):
        repl = opts.get("i") or "{}"
    starts = [parsed.index, *parsed.alternatives]
    for n, k in enumerate(starts):
        inner = args[k:]
        if not inner:
            continue
        if repl:
            inner = [
                Arg(a.text, None, "") if a.value is not None and repl in a.value else a
                for a in inner
            ]
        else:
            inner = [*inner, Arg("<xargs input>", None)]  # input items are appended
        if n == 0:
            return inner
        ana.chain(inner, ctx)
    return None


_PARALLEL = Spec(
    short_value="aCdEIjnNPsSL",
    short_optional="eil",
    short_flags="0kmqrtuvXgZ",
    longs=_longs(
        "arg-file arg-file-sep arg-sep basefile bf colsep compress-program decompress-program "
        "delimiter env halt header jobs joblog load max-args max-replace-args max-lines "
        "memfree nice results res retries return sshlogin sshloginfile slf tagstring timeout "
        "tmpdir workdir wd delay block block-size recstart recend id trc ssh max-chars "
        "transfer-file tf limit termseq shebang-wrap csv-sep sqlmaster sqlandworker",
        "keep-order quote ungroup group line-buffer lb tag dry-run pipe spreadstdin pipepart "
        "null no-run-if-empty verbose will-cite citation progress eta xargs plus no-notice "
        "shuf semaphore sem fg bg onall nonall transfer cleanup bar joblog-append linebuffer "
        "keep help version number-of-cpus number-of-cores round-robin roundrobin ctag",
        "eof replace",
    ),
)
_PARALLEL_SEPS = (":::", "::::", ":::+", "::::+")
_PLACEHOLDER = re.compile(r"\{(?:[0-9]*[./]*[./]?|#|%|=.*?=)\}")


def _literal(text: str) -> Callable[[re.Match[str]], str]:
    """A ``re.sub`` replacement that inserts ``text`` as is (no backslash escapes)."""
    return lambda _m: text


def _parallel(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    parsed = wrapper_options(args, _PARALLEL)
    if parsed is None:
        _dynamic_options(ana, "parallel", ctx)
        return None
    rest = args[parsed.index :]
    cut = next((k for k, a in enumerate(rest) if a.value in _PARALLEL_SEPS), len(rest))
    template, sources = rest[:cut], rest[cut:]
    inputs: list[Arg] = []
    from_files = "a" in parsed.opts or "arg-file" in parsed.opts
    k = 0
    while k < len(sources):
        sep = sources[k].value
        k += 1
        while k < len(sources) and sources[k].value not in _PARALLEL_SEPS:
            if sep in (":::", ":::+"):
                inputs.append(sources[k])
            else:
                from_files = True
            k += 1
    read_input = not sources or from_files
    if any(a.value is None for a in template):
        dyn = next(a for a in template if a.value is None)
        ana.unknown(f"runs commands only known at run time (`{dyn.text}`)", ctx.text)
        return None
    line = " ".join(
        shlex.quote(a.value or "")
        if not _PLACEHOLDER.search(a.value or "") and a.value != (a.value or "").strip()
        else (a.value or "")
        for a in template
    )
    runs: list[str] = []
    for value in inputs[:MAX_INPUTS]:
        if value.value is None:
            ana.unknown(
                f"runs commands built from input only known at run time (`{value.text}`)", ctx.text
            )
            return None
        quoted = shlex.quote(value.value)
        if not template or _PLACEHOLDER.fullmatch(template[0].value or ""):
            # No command, or a replacement string as the command: the input is the command.
            command = value.value
            runs.append(_PLACEHOLDER.sub(_literal(command), line) if template else command)
        elif _PLACEHOLDER.search(line):
            runs.append(_PLACEHOLDER.sub(_literal(quoted), line))
        else:
            runs.append(f"{line} {quoted}")
    if len(inputs) > MAX_INPUTS:
        ana.unknown("runs too many commands to analyse", ctx.text)
    if read_input:
        if not template:
            ana.unknown("runs command lines read from its input", ctx.text)
        else:
            unknown = '"$parallel_input"'
            runs.append(
                _PLACEHOLDER.sub(unknown, line)
                if _PLACEHOLDER.search(line)
                else f"{line} {unknown}"
            )
    for text in runs:
        ana.source(text, ctx.depth + 1, ctx.scope)
    return None


def _fd(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    i, n = 0, len(args)
    while i < n:
        v = args[i].value
        i += 1
        if v not in ("-x", "--exec", "-X", "--exec-batch"):
            continue
        start = i
        while i < n and args[i].value != ";":
            i += 1
        inner = [
            Arg(a.text, None, "./")
            if a.value is not None and _FD_PLACEHOLDER.search(a.value)
            else a
            for a in args[start:i]
        ]
        if inner:
            ana.chain(inner, _sub_ctx(ctx, " ".join(a.text for a in args[start:i])))
        i += 1
    return None


_FD_PLACEHOLDER = re.compile(r"\{(?:|/|//|\.|/\.)\}")


# -- other runners ------------------------------------------------------------------------------


def _flock(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    spec = Spec(
        short_value="wEc",
        short_flags="sxunoFvhV",
        longs=_longs(
            "timeout wait conflict-exit-code command",
            "shared exclusive unlock nonblock nb close no-fork verbose help version",
        ),
    )
    parsed = wrapper_options(args, spec)
    if parsed is None:
        _dynamic_options(ana, "flock", ctx)
        return None
    shell_code = parsed.opts.get("c", parsed.opts.get("command"))
    rest = args[parsed.index + 1 :]
    if shell_code is None and rest and rest[0].value in ("-c", "--command") and len(rest) > 1:
        ana.code(rest[1], ctx, "shell code")
        return None
    if shell_code is not None:
        ana.code(Arg.lit(shell_code), ctx, "shell code")
        return None
    return rest or None


def _watch(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    spec = Spec(
        short_value="nqs",
        short_flags="bcCdegprtwx",
        longs=_longs(
            "interval equexit shotsdir",
            "exec beep color no-color errexit chgexit no-title no-wrap precise no-rerun help "
            "version",
            "differences",
        ),
    )
    parsed = wrapper_options(args, spec)
    if parsed is None:
        _dynamic_options(ana, "watch", ctx)
        return None
    rest = args[parsed.index :]
    if not rest:
        return None
    if "x" in parsed.opts or "exec" in parsed.opts:
        return rest
    if any(a.value is None for a in rest):
        dyn = next(a for a in rest if a.value is None)
        ana.unknown(f"runs shell code only known at run time (`{dyn.text}`)", ctx.text)
        return None
    ana.source(" ".join(a.value or "" for a in rest), ctx.depth + 1, ctx.scope)
    return None


def _su(ana: Analysis, args: list[Arg], ctx: Ctx, runuser: bool = False) -> list[Arg] | None:
    # su permutes options, so -c may come after the user name.
    value_short = "cgGsw" + ("u" if runuser else "")
    value_long = {
        "command",
        "session-command",
        "group",
        "supp-group",
        "shell",
        "whitelist-environment",
        *(("user",) if runuser else ()),
    }
    user_mode = False
    operands: list[Arg] = []
    i, n = 0, len(args)
    while i < n:
        a = args[i]
        v = a.value
        i += 1
        if v is None:
            if a.may_be_option:
                _dynamic_options(ana, "su", ctx)
                return None
            operands.append(a)
            continue
        if v == "--":
            operands.extend(args[i:])
            break
        if v.startswith("--"):
            name, eq, val = v[2:].partition("=")
            full = next((x for x in sorted(value_long) if x.startswith(name)), name) if name else ""
            if full in value_long:
                word = Arg.lit(val) if eq else (args[i] if i < n else None)
                if not eq:
                    i += 1
                if full in ("command", "session-command") and word is not None:
                    ana.code(word, ctx, "shell code")
                    return None
                user_mode = user_mode or full == "user"
            continue
        if v.startswith("-") and len(v) > 1:
            for j, ch in enumerate(v[1:], start=1):
                if ch in value_short:
                    if j + 1 < len(v):
                        word = Arg.lit(v[j + 1 :])
                    else:
                        word = args[i] if i < n else None
                        i += 1
                    if ch == "c" and word is not None:
                        ana.code(word, ctx, "shell code")
                        return None
                    user_mode = user_mode or ch == "u"
                    break
            continue
        operands.append(a)
        if runuser and user_mode:
            operands.extend(args[i:])
            break
    if runuser and user_mode:
        return operands or None
    return None


def _runuser(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    return _su(ana, args, ctx, runuser=True)


def _python(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
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
                    if value in ("pip", "pip3", "twine"):
                        return [Arg.lit("pip" if value == "pip3" else value, value), *args[i:]]
                    return None
                break
    return None


def _busybox(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    if args and args[0].value is not None and args[0].value.startswith("-"):
        return None
    return args or None


def _package_command(word: Arg) -> Arg:
    """The command a package runner runs for a package spec (``@scope/pkg@1`` → ``pkg``)."""
    if word.value is None:
        return word
    name = re.sub(r"(?<=.)@[^/]*$", "", word.value)
    name = name.rsplit("/", 1)[-1] if name.startswith("@") else name
    name = re.sub(r"^(?:npm:|github:|git\+)", "", name)
    return Arg.lit(command_name(name) or name, word.text)


def _npx(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    spec = Spec(
        short_value="pcw",
        short_flags="yqn",
        longs=_longs(
            "package call shell workspace prefix registry cache userconfig loglevel",
            "yes no quiet no-install ignore-existing include-workspace-root workspaces silent",
        ),
    )
    parsed = wrapper_options(args, spec)
    if parsed is None:
        _dynamic_options(ana, "npx", ctx)
        return None
    call = parsed.opts.get("c", parsed.opts.get("call"))
    if call is not None:
        ana.code(Arg.lit(call), ctx, "shell code")
        return None
    rest = args[parsed.index :]
    if not rest:
        return None
    return [_package_command(rest[0]), *rest[1:]]


def _shell_mode(ana: Analysis, rest: list[Arg], ctx: Ctx) -> None:
    if any(a.value is None for a in rest):
        dyn = next(a for a in rest if a.value is None)
        ana.unknown(f"runs shell code only known at run time (`{dyn.text}`)", ctx.text)
        return
    ana.source(" ".join(a.value or "" for a in rest), ctx.depth + 1, ctx.scope)


def _subcommands(global_spec: Spec, table: Mapping[str, Handler], *, name: str) -> Handler:
    """A tool whose subcommands run commands (``uv run``, ``pnpm dlx``, ``nix develop -c``)."""

    def handler(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
        parsed = wrapper_options(args, global_spec)
        if parsed is None:
            return None  # the tool's own rule judges dynamic words where it matters
        k = parsed.index
        if k >= len(args) or args[k].value is None:
            return None
        sub = table.get(args[k].value or "")
        if sub is None:
            return None
        return sub(ana, args[k + 1 :], ctx)

    handler.__name__ = f"_{name}"
    return handler


def _then_command(spec: Spec, *, package: bool = False, shell_flags: str = "") -> Handler:
    """A subcommand followed by options and the command to run."""

    def handler(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
        parsed = wrapper_options(args, spec)
        if parsed is None:
            _dynamic_options(ana, ctx.text.split(" ", 1)[0], ctx)
            return None
        rest = args[parsed.index :]
        if any(f in parsed.opts for f in shell_flags.split()):
            _shell_mode(ana, rest, ctx)
            return None
        for alt in parsed.alternatives:
            if args[alt:]:
                ana.chain(list(args[alt:]), ctx)
        if not rest:
            return None
        return [_package_command(rest[0]), *rest[1:]] if package else rest

    return handler


def _code_option(spec: Spec, options: str, *, rest_is_command: bool = False) -> Handler:
    """A tool whose option holds shell code (``nix-shell --run CODE``, ``script -c CODE``)."""

    def handler(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
        parsed = wrapper_options(args, spec)
        if parsed is None:
            _dynamic_options(ana, ctx.text.split(" ", 1)[0], ctx)
            return None
        for opt in options.split():
            if opt in parsed.opts and parsed.opts[opt] is not None:
                ana.code(Arg.lit(parsed.opts[opt] or ""), ctx, "shell code")
                return None
        if rest_is_command:
            return args[parsed.index :] or None
        return None

    return handler


def _nix(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    # `nix develop … -c CMD ARGS`, `nix shell PKGS -c CMD ARGS`, `nix run PKG -- ARGS`.
    for k, a in enumerate(args):
        if a.value in ("-c", "--command"):
            return args[k + 1 :] or None
    if args and args[0].value == "run":
        ana.unknown("runs a program from a Nix package", ctx.text)
    return None


def _nix_shell(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    for k, a in enumerate(args):
        v = a.value or ""
        if v in ("--run", "--command") and k + 1 < len(args):
            ana.code(args[k + 1], ctx, "shell code")
        elif v.startswith(("--run=", "--command=")):
            ana.code(Arg.lit(v.split("=", 1)[1]), ctx, "shell code")
    return None


def _sg(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    k = 1 if args and args[0].value == "-" else 0
    rest = args[k + 1 :]  # after the group
    if rest and rest[0].value == "-c":
        rest = rest[1:]
    if rest:
        _shell_mode(ana, rest, ctx)
    return None


def _at(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    spec = Spec(
        short_value="qftu",
        short_flags="mMlrdbcvVK",
        longs={},
    )
    opts: dict[str, str | None] = {}
    k = 0
    while k < len(args):  # at permutes: options may follow the time
        parsed = wrapper_options(args[k:], spec)
        if parsed is None:
            _dynamic_options(ana, "at", ctx)
            return None
        opts.update(parsed.opts)
        k += parsed.index + 1
    if any(o in opts for o in ("l", "r", "d", "c")):
        return None
    if "f" in opts:
        ana.sourced_file(Arg.lit(opts["f"] or ""), ctx, "`at -f`")
        return None
    ana.stdin_code(ctx, "shell code")
    return None


_TMUX_COMMANDS: dict[str, tuple[str, Spec]] = {
    "new-session": ("shell", Spec("cefFnstxy", "", "AdDEPX")),
    "new-window": ("shell", Spec("ceFnt", "", "abdkPS")),
    "split-window": ("shell", Spec("celtFp", "", "bdefhIPvZ")),
    "respawn-pane": ("shell", Spec("cet", "", "k")),
    "respawn-window": ("shell", Spec("cet", "", "k")),
    "run-shell": ("shell", Spec("cdt", "", "bC")),
    "if-shell": ("first", Spec("t", "", "bF")),
    "pipe-pane": ("shell", Spec("t", "", "IOo")),
    "display-popup": ("shell", Spec("bcdehsStTwxy", "", "BCEN")),
    "send-keys": ("keys", Spec("cNt", "", "FHKlMRX")),
}
_TMUX_ALIASES = {
    "new": "new-session",
    "neww": "new-window",
    "splitw": "split-window",
    "respawnp": "respawn-pane",
    "respawnw": "respawn-window",
    "run": "run-shell",
    "if": "if-shell",
    "pipep": "pipe-pane",
    "popup": "display-popup",
    "send": "send-keys",
}
_TMUX_KEYS = {"Enter": "\n", "C-m": "\n", "C-j": "\n", "KPEnter": "\n", "Space": " ", "Tab": "\t"}


def _tmux(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    glob = wrapper_options(args, Spec("cfLST", "", "2CDlNuvV"))
    if glob is None:
        _dynamic_options(ana, "tmux", ctx)
        return None
    if glob.opts.get("c") is not None:
        ana.code(Arg.lit(glob.opts["c"] or ""), ctx, "shell code")
    rest = args[glob.index :]
    commands: list[list[Arg]] = [[]]
    for a in rest:
        if a.value == ";" or (a.value or "").endswith("\\;"):
            commands.append([])
        else:
            commands[-1].append(a)
    for words in commands:
        if not words or words[0].value is None:
            if words:
                ana.unknown(
                    f"runs a tmux command only known at run time (`{words[0].text}`)", ctx.text
                )
            continue
        name = _TMUX_ALIASES.get(words[0].value, words[0].value)
        if name not in _TMUX_COMMANDS:
            full = [c for c in _TMUX_COMMANDS if c.startswith(name)]
            name = full[0] if len(full) == 1 else name
        if name not in _TMUX_COMMANDS:
            continue
        kind, spec = _TMUX_COMMANDS[name]
        parsed = wrapper_options(words[1:], spec)
        if parsed is None:
            _dynamic_options(ana, "tmux", ctx)
            return None
        operands = words[1 + parsed.index :]
        if kind == "keys":
            literal = "l" in parsed.opts
            keys: list[str] = []
            for a in operands:
                if a.value is None:
                    ana.unknown(f"types keys only known at run time (`{a.text}`)", ctx.text)
                    return None
                keys.append(a.value if literal else _TMUX_KEYS.get(a.value, a.value))
            ana.source("".join(keys), ctx.depth + 1, ctx.scope)
        elif kind == "first":
            if operands and "F" not in parsed.opts:
                ana.code(operands[0], ctx, "shell code")
        elif operands and not (name == "run-shell" and "C" in parsed.opts):
            _shell_mode(ana, operands, ctx)
    return None


def _screen(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    i, n = 0, len(args)
    while i < n:
        v = args[i].value
        if v is None:
            if args[i].may_be_option:
                _dynamic_options(ana, "screen", ctx)
                return None
            break
        if v in ("-ls", "-list", "-wipe", "-v", "-h", "--help", "-Q"):
            return None
        if v in ("-Logfile", "-logfile"):
            i += 2
            continue
        if v == "--":
            i += 1
            break
        if not v.startswith("-") or v == "-":
            break
        i += 1
        for j, ch in enumerate(v[1:], start=1):
            if ch == "X":
                return _screen_command(ana, args[i:], ctx)
            if ch in "cehpSstT":
                if j + 1 == len(v):
                    i += 1
                break
    return args[i:] or None


def _screen_command(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    if not args or args[0].value is None:
        ana.unknown("sends screen a command only known at run time", ctx.text)
        return None
    name = args[0].value
    rest = args[1:]
    if name == "stuff":
        if any(a.value is None for a in rest):
            ana.unknown("types text only known at run time into a screen window", ctx.text)
            return None
        text = " ".join(a.value or "" for a in rest)
        text = re.sub(r"\^[MJ]", "\n", decode_echo(text))
        ana.source(text, ctx.depth + 1, ctx.scope)
    elif name in ("exec", "screen"):
        return rest or None
    return None


def _make(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    from run_bash.checker.unwrap import NO_INPUT, STDIN_FILES

    makefiles: list[Arg] = []
    evals: list[str] = []
    directory = False
    i, n = 0, len(args)
    while i < n:
        a = args[i]
        v = a.value
        i += 1
        if v is None:
            if a.may_be_option and not (len(a.prefix) > 1 and a.prefix[1] in "jlOo"):
                _dynamic_options(ana, "make", ctx)
                return None
            continue
        if v == "--":
            break
        if v.startswith("--"):
            name, eq, val = v[2:].partition("=")
            if name in ("file", "makefile", "eval", "directory"):
                word = Arg.lit(val) if eq else (args[i] if i < n else Arg.lit(""))
                i += 0 if eq else 1
                if name == "eval":
                    evals.append(word.value if word.value is not None else "\0")
                elif name == "directory":
                    directory = True
                else:
                    makefiles.append(word)
            elif (
                name
                in (
                    "include-dir",
                    "old-file",
                    "assume-old",
                    "what-if",
                    "new-file",
                    "assume-new",
                    "jobserver-style",
                )
                and not eq
            ):
                i += 1
            continue
        if v.startswith("-") and len(v) > 1:
            for j, ch in enumerate(v[1:], start=1):
                if ch in "fCEIoW":
                    word = (
                        Arg.lit(v[j + 1 :])
                        if j + 1 < len(v)
                        else (args[i] if i < n else Arg.lit(""))
                    )
                    if j + 1 >= len(v):
                        i += 1
                    if ch == "f":
                        makefiles.append(word)
                    elif ch == "E":
                        evals.append(word.value if word.value is not None else "\0")
                    elif ch == "C":
                        directory = True
                    break
                if ch in "jlO":
                    if j + 1 == len(v) and i < n and (args[i].value or "").isdigit():
                        i += 1
                    break
    texts: list[str] = []
    for text in evals:
        if text == "\0":
            ana.unknown("evaluates makefile text only known at run time", ctx.text)
            return None
        texts.append(text)
    for mk in makefiles:
        if mk.proc:
            body = ana.printed_source(mk.text[2:-1])
            if body is None or body is NO_INPUT:
                ana.unknown("runs a makefile from a process substitution", ctx.text)
                return None
            texts.append(body)
        elif mk.value in STDIN_FILES:
            body = ana.stdin_text(ctx.cmd, ctx.scope)
            if body is None or body is NO_INPUT:
                ana.unknown("runs a makefile read from its input, only known at run time", ctx.text)
                return None
            texts.append(body)
        elif mk.value is None:
            ana.unknown(f"runs a makefile only known at run time (`{mk.text}`)", ctx.text)
            return None
        else:
            content = ana.written_file(mk.value)
            if content is None:
                ana.unknown(f"runs `{mk.value}`, which this command writes at run time", ctx.text)
                return None
            if isinstance(content, str):
                texts.append(content)
    if not makefiles and not directory:
        for default in ("GNUmakefile", "makefile", "Makefile"):
            content = ana.written_file("./" + default)
            if content is None:
                ana.unknown(f"runs `{default}`, which this command writes at run time", ctx.text)
                return None
            if isinstance(content, str):
                texts.append(content)
                break
    for text in texts:
        for code in makefile_code(text):
            ana.source(code, ctx.depth + 1, ctx.scope)
    return None


_MAKE_INLINE = re.compile(r"^[^\t#=:;]+::?(?!=)[^=;]*;(.*)$")
_MAKE_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_.-]*)\s*(?:::=|:=|\?=|\+=|=|!=)\s*(.*)$")
_MAKE_REF = re.compile(r"\$[({]([A-Za-z_][A-Za-z0-9_.-]*)[)}]")
_MAKE_AUTO = re.compile(r"\$(?:[@<^?*+|%]|[({][@<^?*+%][DF]?[)}])")
_MAKE_SHELL = re.compile(r"\$[({]shell\s")


def makefile_code(text: str) -> list[str]:
    """The shell code in a makefile: recipe lines, ``$(shell …)`` and ``!=`` assignments."""
    variables = {"RM": "rm -f", "MAKE": "make", "SHELL": "/bin/sh"}
    lines = text.replace("\\\n", "\n\0").split("\n")
    out: list[str] = []
    recipe: list[str] = []

    def flush() -> None:
        if recipe:
            out.append(_make_expand("\n".join(recipe), variables))
            recipe.clear()

    for raw in lines:
        continued = raw.startswith("\0")
        line = raw.lstrip("\0")
        if raw.startswith("\t") or (continued and recipe):
            body = line[1:] if line.startswith("\t") else line
            if continued and recipe:
                recipe[-1] += " " + body
            else:
                recipe.append(body.lstrip("@-+ \t"))
            continue
        flush()
        inline = _MAKE_INLINE.match(line)
        if inline:
            out.append(_make_expand(inline.group(1), variables))
        m = _MAKE_ASSIGN.match(line)
        if m:
            variables.setdefault(m.group(1), m.group(2))
            if line.split("=", 1)[0].rstrip().endswith("!"):
                out.append(_make_expand(m.group(2), variables))
        for sm in _MAKE_SHELL.finditer(line):
            out.append(_make_expand(_balanced_make(line, sm.end()), variables))
    flush()
    return out


def _balanced_make(line: str, k: int) -> str:
    depth = 1
    start = k
    while k < len(line) and depth:
        if line[k] in "({":
            depth += 1
        elif line[k] in ")}":
            depth -= 1
        k += 1
    return line[start : k - 1]


def _make_expand(code: str, variables: dict[str, str]) -> str:
    for _ in range(4):
        code = _MAKE_REF.sub(lambda m: variables.get(m.group(1), m.group(0)), code)
    code = _MAKE_AUTO.sub("target", code)
    return code.replace("$$", "$")


def _bwrap(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    two = {
        "setenv", "bind", "bind-try", "dev-bind", "dev-bind-try", "ro-bind", "ro-bind-try",
        "file", "bind-data", "ro-bind-data", "symlink", "chmod",
    }  # fmt: skip
    one = {
        "args", "uid", "gid", "hostname", "chdir", "unsetenv", "lock-file", "sync-fd",
        "remount-ro", "exec-label", "file-label", "proc", "dev", "tmpfs", "mqueue", "dir",
        "seccomp", "add-seccomp-fd", "block-fd", "userns-block-fd", "info-fd",
        "json-status-fd", "cap-add", "cap-drop", "perms", "size", "userns", "userns2",
        "pidns", "argv0",
    }  # fmt: skip
    i, n = 0, len(args)
    while i < n:
        v = args[i].value
        if v is None:
            if args[i].may_be_option:
                _dynamic_options(ana, "bwrap", ctx)
                return None
            break
        if v == "--":
            i += 1
            break
        if not v.startswith("--"):
            break
        name = v[2:]
        i += 1 + (2 if name in two else 1 if name in one else 0)
    return args[i:] or None


def _pee(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    for a in args:
        if a.value is not None and a.value.startswith("-"):
            continue
        ana.code(a, ctx, "shell code")  # pee runs each argument as a shell command
    return None


def _bind(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``bind -x '"\\C-x": CMD'``: CMD runs when the key is pressed."""
    for k, a in enumerate(args):
        v = a.value or ""
        if v.startswith("-") and "x" in v[1:]:
            binding = (
                Arg.lit(v[v.index("x") + 1 :])
                if not v.endswith("x")
                else (args[k + 1] if k + 1 < len(args) else Arg.lit(""))
            )
            if binding.value is None:
                ana.unknown("binds a key to a command only known at run time", ctx.text)
                continue
            _, sep, code = binding.value.partition(":")
            if sep:
                ana.source(code.strip().strip("'\""), ctx.depth + 1, ctx.scope)
    return None


def _mapfile(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    res = skip_options(args, "dnOsuCc", {})
    if res is None:
        return None
    _, opts = res
    if "C" in opts and opts["C"] is not None:
        ana.code(_option_word(args, "C"), ctx, "`mapfile -C` callback code")
    _name_sink(ana, args, ctx)
    return None


def _option_word(args: list[Arg], letter: str) -> Arg:
    """The word holding a short option's value (so a dynamic value stays unknown)."""
    for k, a in enumerate(args):
        v = a.value or ""
        if v.startswith("-") and not v.startswith("--") and letter in v[1:]:
            j = v.index(letter, 1)
            if j + 1 < len(v):
                return Arg.lit(v[j + 1 :])
            return args[k + 1] if k + 1 < len(args) else Arg.lit("")
    return Arg.lit("")


def _completion(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    res = skip_options(args, "oAGWFCXPSabcdefgjksuvEDI", {})
    if res is None:
        ana.unknown("passes completion options only known at run time", ctx.text)
        return None
    _, opts = res
    if "C" in opts:
        ana.code(_option_word(args, "C"), ctx, "completion command code")
    return None


def _name_sink(ana: Analysis, args: list[Arg], ctx: Ctx) -> None:
    """Builtins taking variable names: a subscript in a name is evaluated (``read 'a[$(…)]'``)."""
    for a in args:
        v = a.value if a.value is not None else None
        if v is None or ("[" in v and not v.startswith("-")):
            ana.sinks.append(ctx.text)
            return


def _read(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    _name_sink(ana, args, ctx)
    return None


def _printf(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    if args and args[0].value == "-v":
        _name_sink(ana, args[1:2], ctx)
    return None


def _test(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    if any(a.value == "-v" for a in args):
        _name_sink(ana, [a for a in args if a.value not in ("-v", "]", "!")], ctx)
    return None


def _unset(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    _name_sink(ana, args, ctx)
    return None


def _getopts(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    _name_sink(ana, args[1:2], ctx)
    return None


def _wait(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    if args and args[0].value == "-p":
        _name_sink(ana, args[1:2], ctx)
    return None


def _shell_words(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``yarn exec CODE…``, ``bun exec CODE``: the words are a shell command line."""
    _shell_mode(ana, args, ctx)
    return None


def _let(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    ana.sinks.append(ctx.text)
    return None


def _declare(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    flags = ""
    words = {w.text: w for w in ctx.cmd.words}
    for a in args:
        v = a.value
        if v is not None and v[:1] in "-+" and len(v) > 1 and "=" not in v:
            flags += v[1:]
            continue
        text = v if v is not None else a.prefix
        name, eq, value = text.partition("=")
        if "[" in name or (v is None and not eq):
            ana.sinks.append(ctx.text)
        if not eq:
            continue
        name = name.split("[", 1)[0].rstrip("+")
        word = words.get(a.text)
        if name in ("BASH_CMDS", "BASH_ALIASES") and word is not None:
            ana.rebind_word(name, word, ctx)
            continue
        if value.startswith("(") and ("a" in flags or "A" in flags):
            ana.sinks.append(ctx.text)
        ana.special_variable(name, Arg.lit(value) if v is not None else Arg(a.text, None), ctx)
    if "i" in flags or "n" in flags:
        ana.sinks.append(ctx.text)
    return None


def _alias(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    for a in args:
        if a.value is not None and a.value.startswith("-"):
            continue
        text = a.value if a.value is not None else a.prefix
        name, eq, value = text.partition("=")
        if not eq:
            if a.value is None:
                ana.unknown(f"defines an alias only known at run time (`{a.text}`)", ctx.text)
            continue
        ana.aliases[name] = value if a.value is not None else None
    return None


def _hash(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    res = skip_options(args, "p", {})
    if res is None:
        ana.unknown("rebinds commands with `hash` options only known at run time", ctx.text)
        return None
    k, opts = res
    if "p" not in opts:
        return None
    path = opts["p"]
    word = _option_word(args, "p")
    target = command_name(path) if path is not None and word.value is not None else None
    for a in args[k:]:
        if a.value is None:
            ana.unknown(f"rebinds a command name only known at run time (`{a.text}`)", ctx.text)
            continue
        ana.hashed[a.value] = target
    return None


def _enable(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    if any((a.value or "").startswith("-") and "f" in (a.value or "") for a in args) or any(
        a.value is None and a.may_be_option for a in args
    ):
        ana.unknown("loads a builtin command from a shared object", ctx.text)
    return None


def _git(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    from run_bash.checker.gitcode import git_handler

    return git_handler(ana, args, ctx)


def _exec(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    res = skip_options(args, "a", {})
    if res is None:
        _dynamic_options(ana, "exec", ctx)
        return None
    k, _ = res
    ctx.first = True  # `exec` looks the command up like the shell does
    return args[k:] or None


def _command(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    res = skip_options(args, "", {})
    if res is None:
        _dynamic_options(ana, "command", ctx)
        return None
    k, opts = res
    if "v" in opts or "V" in opts:
        return None
    return args[k:] or None


def _entr(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    parsed = wrapper_options(args, Spec("", "", "acdnprsz"))
    if parsed is None:
        _dynamic_options(ana, "entr", ctx)
        return None
    rest = args[parsed.index :]
    if "s" in parsed.opts and rest:
        ana.code(rest[0], ctx, "shell code")
        return None
    return rest or None


_NPM_EXEC = _then_command(
    Spec("pcw", "", "yq", _longs("package call workspace", "yes no include-workspace-root")),
    package=True,
)
_PNPM_RUNNERS: dict[str, Handler] = {
    "dlx": _then_command(
        Spec("p", "", "sc", _longs("package", "silent shell-mode")),
        package=True,
        shell_flags="c shell-mode",
    ),
    "exec": _then_command(
        Spec("C", "", "rc", _longs("filter dir", "recursive parallel shell-mode no-bail")),
        shell_flags="c shell-mode",
    ),
}


def _npm_exec(ana: Analysis, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    parsed = wrapper_options(
        args,
        Spec("pcw", "", "yq", _longs("package call workspace", "yes no include-workspace-root")),
    )
    if parsed is None:
        _dynamic_options(ana, "npm exec", ctx)
        return None
    call = parsed.opts.get("c", parsed.opts.get("call"))
    if call is not None:
        ana.code(Arg.lit(call), ctx, "shell code")
        return None
    rest = args[parsed.index :]
    return [_package_command(rest[0]), *rest[1:]] if rest else None


_RUN_SPEC = Spec(complete=False)

WRAPPERS: dict[str, Handler] = {
    "sudo": _sudo,
    "doas": runner(Spec("uC", "", "nsL"), no_command="C L"),
    "env": _env,
    "exec": _exec,
    "nohup": runner(Spec()),
    "nice": runner(
        Spec("n", "", "0123456789", _longs("adjustment", "help version")),
    ),
    "timeout": runner(
        Spec("sk", "", "v", _longs("signal kill-after", "preserve-status foreground verbose")),
        skip=1,
    ),
    "time": runner(
        Spec("fo", "", "apqv", _longs("format output", "append portability quiet verbose")),
    ),
    "command": _command,
    "builtin": runner(Spec()),
    "stdbuf": runner(Spec("ioe", "", "", _longs("input output error", "help version"))),
    "ionice": runner(
        Spec("cnpPu", "", "th", _longs("class classdata pid pgid uid", "ignore help version")),
        no_command="p P u pid pgid uid",
    ),
    "setsid": runner(Spec("", "", "cfw", _longs("", "ctty fork wait help version"))),
    "flock": _flock,
    "chroot": runner(
        Spec("", "", "", _longs("userspec groups", "skip-chdir help version")),
        skip=1,
    ),
    "xargs": _xargs,
    "parallel": _parallel,
    "find": _find,
    "fd": _fd,
    "fdfind": _fd,
    "eval": _eval,
    "source": _source,
    ".": _source,
    "watch": _watch,
    "su": _su,
    "runuser": _runuser,
    "trap": _trap,
    "git": _git,
    "busybox": _busybox,
    "toybox": _busybox,
    "unbuffer": runner(Spec()),
    "chrt": runner(
        Spec(
            "TPD",
            "",
            "abdfioerRmpvhV",
            _longs(
                "sched-runtime sched-period sched-deadline",
                "all-tasks batch deadline fifo idle other rr ext reset-on-fork max pid verbose "
                "help version",
            ),
        ),
        skip=1,
        no_command="p pid m max h help V version",
    ),
    "taskset": runner(
        Spec("", "", "apcfhV", _longs("", "all-tasks pid cpu-list help version")),
        skip=1,
        no_command="p pid",
    ),
    "pkexec": runner(
        Spec("", "", "", _longs("user", "disable-internal-agent keep-cwd version help"))
    ),
    "strace": runner(
        Spec(
            "eoOpPsSuaXbEIU",
            "",
            "cCdDfFhiknqrtTvVwxyYzZ",
            _longs(
                "trace signal status abbrev verbose raw read write fault inject kvm output "
                "attach trace-path string-limit summary-sort-by user columns env decode-fds "
                "seccomp-bpf summary-columns detach-on interruptible const-print-style "
                "secontext quiet timestamps trace-fds",
                "follow-forks output-separately summary summary-only summary-wall-clock "
                "syscall-times syscall-number decode-pids absolute-timestamps relative-"
                "timestamps no-abbrev debug help version instruction-pointer stack-trace "
                "successful-only failed-only",
            ),
        ),
        no_command="p attach h help V version",
    ),
    "ltrace": runner(
        Spec(
            "aADeFlnopsuwx",
            "",
            "bcCfhiLrStTV",
            _longs("align demangle indent library output", "help version"),
        ),
        no_command="p",
    ),
    "fakeroot": runner(
        Spec("lisb", "", "uhv", _longs("lib faked fd-base", "unknown-is-real help version")),
        no_args="stdin",
    ),
    "unshare": runner(
        Spec(
            "RwSGl",
            "",
            "fuimnpUCTrch",
            _longs(
                "map-user map-group map-users map-groups propagation setgroups root wd "
                "setuid setgid monotonic boottime load-interp",
                "fork map-root-user map-current-user map-auto keep-caps help version",
                "mount uts ipc net pid user cgroup time kill-child mount-proc mount-binfmt",
            ),
        ),
        no_args="stdin",
    ),
    "nsenter": runner(
        Spec(
            "tSGW",
            "muinpUCTrw",
            "aeFZch",
            _longs(
                "target setuid setgid wdns",
                "all env no-fork follow-context join-cgroup preserve-credentials keep-caps "
                "help version",
                "mount uts ipc net pid user cgroup time root wd",
            ),
        ),
        no_args="stdin",
    ),
    "systemd-run": runner(
        Spec(
            "upEHM",
            "",
            "dtPqGrSh",
            _longs(
                "unit property description slice setenv working-directory uid gid nice "
                "service-type host machine on-active on-boot on-startup on-unit-active "
                "on-unit-inactive on-calendar on-clock-change on-timezone-change path-property "
                "socket-property timer-property json expand-environment",
                "same-dir pty pipe quiet collect wait shell user system scope remain-after-exit "
                "send-sighup no-block no-ask-password slice-inherit help version",
            ),
        ),
        no_command="S shell",
    ),
    "npx": _npx,
    "bunx": _then_command(Spec("p", "", "", _longs("package", "bun silent")), package=True),
    "pnpx": _then_command(Spec("p", "", "", _longs("package", "")), package=True),
    "npm": _subcommands(
        Spec("wC", "", "gq", _longs("prefix workspace", "global")),
        {"exec": _npm_exec, "x": _npm_exec},
        name="npm",
    ),
    "pnpm": _subcommands(
        Spec("Cw", "", "r", _longs("dir filter workspace", "recursive")),
        _PNPM_RUNNERS,
        name="pnpm",
    ),
    "yarn": _subcommands(
        Spec("", "", "", _longs("cwd")),
        {
            "dlx": _then_command(Spec("p", "", "q", _longs("package", "quiet")), package=True),
            "exec": _shell_words,
        },
        name="yarn",
    ),
    "bun": _subcommands(
        Spec(),
        {
            "x": _then_command(Spec("p", "", "", _longs("package", "bun")), package=True),
            "exec": _shell_words,
        },
        name="bun",
    ),
    "uv": _subcommands(
        Spec(
            "",
            "",
            "qvn",
            _longs(
                "directory project cache-dir config-file",
                "quiet verbose offline no-cache native-tls",
            ),
        ),
        {
            "run": _then_command(
                Spec(
                    "wp",
                    "",
                    "",
                    _longs(
                        "with with-editable with-requirements python package extra group "
                        "env-file directory project index default-index index-url "
                        "extra-index-url find-links only-group no-group",
                        "isolated no-project frozen locked no-sync all-extras all-packages "
                        "no-dev dev active no-env-file quiet verbose offline",
                    ),
                )
            ),
            "tool": _subcommands(
                Spec(),
                {
                    "run": _then_command(
                        Spec("wp", "", "", _longs("with from python", "isolated")), package=True
                    )
                },
                name="uv tool",
            ),
        },
        name="uv",
    ),
    "uvx": _then_command(Spec("wp", "", "", _longs("with from python", "isolated")), package=True),
    "poetry": _subcommands(
        Spec("CP", "", "qvn", _longs("directory project", "quiet verbose no-interaction")),
        {"run": _then_command(Spec())},
        name="poetry",
    ),
    "pipenv": _subcommands(Spec(), {"run": _then_command(Spec())}, name="pipenv"),
    "pdm": _subcommands(
        Spec(), {"run": _then_command(Spec("", "", "", _longs("", "")))}, name="pdm"
    ),
    "hatch": _subcommands(Spec(), {"run": _then_command(Spec())}, name="hatch"),
    "conda": _subcommands(
        Spec(),
        {
            "run": _then_command(
                Spec("np", "", "", _longs("name prefix cwd", "no-capture-output live-stream"))
            )
        },
        name="conda",
    ),
    "bundle": _subcommands(Spec(), {"exec": _then_command(Spec())}, name="bundle"),
    "direnv": _subcommands(Spec(), {"exec": runner(Spec(), skip=1)}, name="direnv"),
    "mise": _subcommands(
        Spec(), {"exec": _then_command(_RUN_SPEC), "x": _then_command(_RUN_SPEC)}, name="mise"
    ),
    "asdf": _subcommands(Spec(), {"exec": _then_command(Spec())}, name="asdf"),
    "nix": _nix,
    "nix-shell": _nix_shell,
    "script": _code_option(
        Spec(
            "EIOBTmc",
            "t",
            "aefqhV",
            _longs(
                "echo log-in log-out log-io log-timing logging-format command",
                "append return flush force quiet help version",
                "timing",
            ),
        ),
        "c command",
    ),
    "sg": _sg,
    "at": _at,
    "batch": _at,
    "tmux": _tmux,
    "screen": _screen,
    "make": _make,
    "gmake": _make,
    "gosu": runner(Spec(), skip=1),
    "su-exec": runner(Spec(), skip=1),
    "setpriv": runner(
        Spec(
            "d",
            "",
            "",
            _longs(
                "reuid regid groups inh-caps ambient-caps bounding-set securebits pdeathsig "
                "selinux-label apparmor-profile landlock-access landlock-rule ruid euid rgid "
                "egid",
                "dump clear-groups keep-groups init-groups nnp no-new-privs reset-env help version",
            ),
        )
    ),
    "dumb-init": runner(Spec("r", "", "cvVh", _longs("rewrite", "single-child verbose"))),
    "tini": runner(Spec("pe", "", "hsvwgl")),
    "eatmydata": runner(Spec()),
    "catchsegv": runner(Spec()),
    "xvfb-run": runner(
        Spec(
            "efnpsw",
            "",
            "alh",
            _longs(
                "error-file auth-file server-num xauth-protocol server-args wait",
                "auto-servernum listen-tcp help",
            ),
        )
    ),
    "dbus-run-session": runner(Spec("", "", "", _longs("config-file dbus-daemon", "help"))),
    "dbus-launch": runner(
        Spec(
            "",
            "",
            "",
            _longs(
                "config-file autolaunch",
                "sh-syntax csh-syntax "
                "exit-with-session exit-with-x11 binary-syntax close-stderr "
                "version help",
            ),
        )
    ),
    "ssh-agent": runner(Spec("aEPtO", "", "cDdsk")),
    "valgrind": runner(Spec("", "", "vqhd", complete=False)),
    "prlimit": runner(
        Spec(
            "po",
            "cdefilmnqrstuvxy",
            "hV",
            _longs(
                "pid output",
                "noheadings raw verbose help version",
                "as core cpu data fsize locks memlock msgqueue nice nofile nproc rss rtprio "
                "rttime sigpending stack",
            ),
        ),
        no_command="p pid",
    ),
    "numactl": runner(
        Spec(
            "imNCpP",
            "",
            "lsHaVh",
            _longs(
                "interleave membind cpunodebind physcpubind preferred preferred-many weighted-"
                "interleave",
                "localalloc show hardware all balancing huge length offset shm strict touch",
            ),
        ),
        no_command="s show H hardware",
    ),
    "cgexec": runner(Spec("g", "", "rh", _longs("", "sticky"))),
    "firejail": runner(Spec("", "", "", complete=False)),
    "bwrap": _bwrap,
    "sem": _parallel,
    "flatpak-spawn": runner(
        Spec(
            "",
            "",
            "",
            _longs(
                "forward-fd env unset-env directory app-path usr-path sandbox-expose "
                "sandbox-expose-ro sandbox-flag",
                "host watch-bus clear-env latest-version sandbox no-network expose-pids "
                "share-pids verbose help",
            ),
        )
    ),
    "distrobox-host-exec": runner(Spec()),
    "host-spawn": runner(Spec()),
    "toolbox": _subcommands(
        Spec(),
        {"run": _then_command(Spec("cdr", "", "", _longs("container distro release")))},
        name="toolbox",
    ),
    "faketime": runner(Spec("m", "", "f", _longs("exclude-monotonic", "")), skip=1),
    "chronic": runner(Spec("", "", "ev")),
    "ifne": runner(Spec("", "", "n")),
    "nocache": runner(Spec("n", "", "")),
    "rlwrap": runner(Spec("abcCDefFgHiIlmnNoOpPqrRsStTvwWz", "", "", complete=False)),
    "torsocks": runner(Spec("uPaidh", "", "", _longs("user pass address port", "isolate"))),
    "proxychains": runner(Spec("f", "", "q")),
    "proxychains4": runner(Spec("f", "", "q")),
    "lckdo": runner(Spec("", "", "qw"), skip=1),
    "pee": _pee,
    "bind": _bind,
    "proot": runner(Spec("rbwqkvimRS", "", "0Vh")),
    "entr": _entr,
    "mapfile": _mapfile,
    "readarray": _mapfile,
    "compgen": _completion,
    "complete": _completion,
    "read": _read,
    "printf": _printf,
    "test": _test,
    "[": _test,
    "let": _let,
    "declare": _declare,
    "typeset": _declare,
    "local": _declare,
    "export": _declare,
    "readonly": _declare,
    "unset": _unset,
    "getopts": _getopts,
    "wait": _wait,
    "alias": _alias,
    "hash": _hash,
    "enable": _enable,
}
for _shell_name in (
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "rbash", "yash", "posh", "fish", "csh",
    "tcsh", "oksh", "loksh",
):  # fmt: skip
    WRAPPERS[_shell_name] = _shell


_LOADER = re.compile(r"ld(?:-linux[\w.-]*|-musl[\w.-]*)?\.so(?:\.\d+)*")
_LOADER_RUN = runner(
    Spec(
        "",
        "",
        "",
        _longs(
            "library-path preload argv0 audit glibc-hwcaps-prepend glibc-hwcaps-mask",
            "inhibit-cache inhibit-rpath verify list list-tunables list-diagnostics help",
        ),
    ),
    no_command="list verify list-tunables list-diagnostics help",
)


def handler_for(name: str) -> Handler | None:
    """The handler of a command that runs other commands or code, if ``name`` is one."""
    handler = WRAPPERS.get(name)
    if handler is None and _PYTHON.fullmatch(name):
        return _python
    if handler is None and _LOADER.fullmatch(name):
        return _LOADER_RUN  # the dynamic loader runs the program named after its options
    return handler
