"""What commands run: the engine for the table's run descriptors, and runners written in code.

:func:`run` interprets a reading's :class:`~.reading.Command`, :class:`~.reading.Shell`,
:class:`~.reading.Each` and :class:`~.reading.Code` descriptors. The
runners below are for commands whose syntax is their own (shells, ``env``, ``xargs``,
``parallel``, ``find -exec``, ``make``, ``tmux``, bash builtins, …). A runner gets the words after
the command name and returns the wrapped command's words (the analysis then judges that command
and follows it if it wraps too), or None after analysing what it runs itself. It records an
unknown whenever what runs cannot be told before running. Pure.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
from collections.abc import Callable

from run_bash.checker.checks import FIND_LEADING
from run_bash.checker.model import EXTERNAL, NO_INPUT, STDIN_FILES, Ctx, Hit, Scope, Walker
from run_bash.checker.options import Opts, opts, read, values_of
from run_bash.checker.parser import words_of
from run_bash.checker.reading import (
    Code,
    Command,
    Custom,
    Each,
    Handler,
    Level,
    Reading,
    Shell,
)
from run_bash.checker.syntax import Cmd
from run_bash.checker.words import (
    Arg,
    clean_path,
    command_name,
    decode_echo,
    expand,
    join_path,
    package_command,
    wordlist,
)

_ENV_WORD = re.compile(r"[^=]*=")  # env and sudo take any word with `=` as an assignment
MAX_INPUTS = 32
# Start-up files of interactive and login shells.
RC_FILES = (
    "~/.bashrc",
    "~/.bash_profile",
    "~/.bash_login",
    "~/.bash_logout",
    "~/.profile",
    "~/.zshrc",
    "~/.kshrc",
)


def dynamic_options(ana: Walker, name: str, ctx: Ctx) -> None:
    """Record that ``name``'s options are only known at run time (its command may be anywhere)."""
    ana.unknown(f"passes `{name}` options only known at run time", ctx.text)


def shell_words(ana: Walker, words: list[Arg], ctx: Ctx, holes: tuple[str, ...] = ()) -> None:
    """Analyse words a program joins with spaces and runs as shell code."""
    dyn = next((a for a in words if a.value is None), None)
    if dyn is not None:
        ana.unknown(f"runs shell code only known at run time (`{dyn.text}`)", ctx.text)
        return
    code = _fill(" ".join(a.value or "" for a in words), holes)
    ana.source(code, ctx.depth + 1, ctx.scope, ctx=ctx)


def _fill(code: str, holes: tuple[str, ...]) -> str:
    """Replace placeholders (patterns such as ``\\{\\}``) by a word only known at run time."""
    for hole in holes:
        code = re.sub(hole, '"$placeholder"', code)
    return code


def _filled(word: Arg, holes: tuple[str, ...]) -> Arg:
    return Arg.lit(_fill(word.value, holes)) if word.value and holes else word


def chdir(ctx: Ctx, word: Arg | None) -> None:
    """The wrapped command runs in the directory ``word`` (None: not changed)."""
    if word is None or ctx.cwd is None:
        return
    ctx.cwd = None if word.value is None else join_path(ctx.cwd, word.value)


def skip_assignments(ana: Walker, args: list[Arg], k: int, ctx: Ctx) -> int:
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
        ana.environment(name, value)
        ana.special_variable(name, value, ctx)
        k += 1
    return k


# -- the engine -----------------------------------------------------------------------------------


def run(ana: Walker, reading: Reading, ctx: Ctx) -> list[Arg] | None:
    """Analyse what a command runs, by its row; return the words of the command it wraps.

    Code, files and runners apply at every level; "the rest is a command" (Command, Shell) only
    at the innermost one, the subcommand the words name.
    """
    inner: list[Arg] | None = None
    for level in reading.levels:
        leaf = level is reading.leaf
        for spec in level.row.runs:
            if isinstance(spec, (Command, Shell)) and not leaf:
                continue
            got = _run(ana, spec, level, ctx)
            if got and inner is None:
                inner = got
            elif got:
                ana.chain(got, ctx)
    return inner


def _run(
    ana: Walker, spec: Command | Shell | Each | Code | Custom, level: Level, ctx: Ctx
) -> list[Arg] | None:
    r = level.read
    if isinstance(spec, Custom):
        return spec.fn(ana, level.args, ctx)
    if isinstance(spec, Code):
        if spec.elsewhere and r.values(*spec.options.split()):
            ctx.elsewhere, ctx.cwd = True, None
        for word in r.values(*spec.options.split()):
            code = _keyed(word, spec) if spec.keys else word
            if code is not None:
                ana.code(_filled(code, spec.placeholders), ctx, "shell code")
        return None
    if isinstance(spec, Each):
        for op in r.operands:
            ana.code(_filled(op, spec.placeholders), ctx, "shell code")
        return None
    if r.dynamic:
        dynamic_options(ana, level.name, ctx)
        return None
    if spec.unless and r.has(*spec.unless.split()):
        return None
    words = level.args[r.first + spec.skip :]
    if spec.elsewhere:
        ctx.elsewhere, ctx.cwd = True, None
    if isinstance(spec, Shell):
        if spec.argv and r.has(*spec.argv.split()):
            return words or None
        if words:
            shell_words(ana, words, ctx, spec.placeholders)
        return None
    if words and words[0].value == "--":
        words = words[1:]  # `aws-vault exec PROFILE -- CMD`: the separator before the command
    elif spec.dashdash:
        cut = next((k for k, a in enumerate(words) if a.value == "--"), -1)
        if cut > 0:
            ana.chain(words[cut + 1 :], ctx)  # `mise exec TOOL… -- CMD`: after any number
    if spec.chdir:
        chdir(ctx, next(iter(r.values(*spec.chdir.split())[-1:]), None))
    if spec.shell and r.has(*spec.shell.split()):
        if spec.env:
            words = words[skip_assignments(ana, words, 0, ctx) :]
        if words:
            shell_words(ana, words, ctx)
            if spec.quoted:
                # Each word stays one (only `$` is left to the shell): judged as a command too.
                ana.chain(list(words), ctx)
        else:
            ana.stdin_code(ctx, "shell code")
        return None
    for k in r.alternatives:
        alt = level.args[k + spec.skip :]
        if alt and alt != words:
            ana.chain(list(alt), ctx)
    if spec.env:
        words = words[skip_assignments(ana, words, 0, ctx) :]
    if not words:
        if spec.stdin:
            ana.stdin_code(ctx, "shell code")
        return None
    if spec.prefix:
        return [*(Arg.lit(w) for w in spec.prefix.split()), *words]
    return [package_command(words[0]), *words[1:]] if spec.package else words


def _keyed(word: Arg, spec: Code) -> Arg | None:
    """The code in ``KEY=CODE`` when KEY is one of the spec's keys (a dynamic word may be)."""
    text = (word.value if word.value is not None else word.prefix).lstrip()
    m = re.match(r"([^\s=]+)\s*[=\s]\s*" if " " in spec.sep else r"([^=]+)=", text)
    if m is None:
        return word if word.value is None else None  # a word only known at run time may be
    if not any(fnmatch.fnmatchcase(m.group(1).lower(), k) for k in spec.keys):
        return None
    if word.value is None:
        return word
    return Arg.lit(word.value.lstrip()[m.end() :].strip("'\""))


# -- shells, env, eval ----------------------------------------------------------------------------


def _interactive_flag(v: str) -> bool:
    if v in ("--login", "--interactive"):
        return True
    return v.startswith("-") and not v.startswith("--") and any(ch in v[1:] for ch in "il")


def shell(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``sh [options] [-c CODE [NAME ARGS] | SCRIPT ARGS]``; ``-n`` only checks the syntax."""
    command_mode = stdin_mode = noexec = False
    i, n = 0, len(args)
    while i < n:
        a = args[i]
        v = a.value
        if v is None:
            if a.may_be_option:
                dynamic_options(ana, "sh", ctx)
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
            elif name == "no-execute" or name == "noexec":
                noexec = True
            continue
        if v[:1] in "-+" and len(v) > 1:
            i += 1
            for ch in v[1:]:
                if ch == "c":
                    command_mode = True
                elif ch == "s":
                    stdin_mode = True
                elif ch == "n" and v[0] == "-":
                    noexec = True
                elif ch == "C" and v[0] == "-":  # fish: init command
                    if i < n:
                        ana.code(args[i], ctx, "shell code")
                    i += 1
                elif ch in "oO":
                    noexec = noexec or (i < n and args[i].value == "noexec" and v[0] == "-")
                    i += 1  # -o option / -O shopt take the next word
            continue
        break
    rest = args[i:]
    if noexec:
        return None  # `bash -n x.sh`: reads the script for syntax errors, runs nothing
    if any(_interactive_flag(a.value or "") for a in args[:i]):
        for rc in RC_FILES:
            if ana.written_file(rc) is not False:
                ana.script_run(Arg.lit(rc), [], ctx, shell=True)
    if command_mode:
        if rest:
            ana.code(rest[0], ctx, "shell code", Scope(list(rest[2:])))
        return None
    if stdin_mode or not rest or rest[0].value in STDIN_FILES:
        ana.stdin_code(ctx, "shell code")
        return None
    ana.script_run(rest[0], rest[1:], ctx, shell=True)
    return None


REDIS_CLI = opts(
    "-hpsaunirdc: --user= --pass= --askpass -x -e --tls --cacert= --cert= --key= --eval="
)


def hub(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``hub`` is git with GitHub commands added: ``hub -C d push -f`` is ``git -C d push -f``."""
    return [Arg.lit("git"), *args]


def unread_input(lang: str) -> Handler:
    """An interpreter of a language the checker does not read, run without a script: it runs
    the code on its input (``zx <<< CODE``, ``echo CODE | jshell``)."""

    def runner(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
        if any(a.value is None or not a.value.startswith("-") for a in args):
            return None  # a script, judged by its name
        if ana.input_of(ctx) is not NO_INPUT:
            ctx.hits.append(Hit(f"runs {lang} code the checker cannot read, from its input"))
        return None

    return runner


def redis_cli(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``redis-cli`` without a command runs the commands it reads, from its input when that is
    not the terminal."""
    got = read(args, REDIS_CLI)
    if got.dynamic or got.operands or got.has("eval"):
        return None
    if ana.input_of(ctx) is not NO_INPUT:
        ana.unknown("runs Redis commands read from its input", ctx.text)
    return None


_ENV = opts(
    "-uCSPa: -i0v --unset= --chdir= --split-string= --argv0= --ignore-environment --null --debug "
    "--list-signal-handling --help --version --ignore-signal[=] --default-signal[=] "
    "--block-signal[=]"
)


def env(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``env [-i] [-C DIR] [-S STRING] [NAME=VALUE…] [COMMAND [ARGS]]`` (a lone ``-`` is -i)."""
    k = 0
    pre: list[Arg] = []
    while True:
        while k < len(args) and args[k].value in ("-", "--"):
            k += 1
        got = read(args[k:], _ENV, permute=False)
        if got.dynamic:
            dynamic_options(ana, "env", ctx)
            return None
        chdir(ctx, next(iter(got.values("C", "chdir")[-1:]), None))
        if got.has("S", "split-string"):
            split = got.get("S", "split-string")
            # env's own escapes (`\_` is a space) and `${VAR}` are not shell words: not read.
            words = words_of(split) if split and not re.search(r"[\\$]", split) else None
            if words is None:
                ana.unknown("passes `env -S` a string it cannot split", ctx.text)
                return None
            pre.extend(a for w in words for a in expand(w.text, w.parts))
        k += got.first
        while k < len(args) and args[k].value == "-":
            k += 1
        before = k
        k = skip_assignments(ana, args, k, ctx)
        if k >= len(args) or not (args[k].value or "").startswith("-"):
            break
        if k == before and args[k].value != "-":
            break
    if pre:
        # `env -S 'a b' c`: the split words may hold assignments and options again.
        return [Arg.lit("env"), *pre, *args[k:]]
    return args[k:] or None


def eval_(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``eval WORDS``: the words joined are code."""
    if args and args[0].value == "--":
        args = args[1:]
    dyn = next((a for a in args if a.value is None), None)
    if dyn is not None:
        ana.unknown(f"evaluates code only known at run time (`{dyn.text}`)", ctx.text)
    elif args:
        code = " ".join(a.value or "" for a in args)
        ana.source(code, ctx.depth + 1, ctx.scope, ctx=ctx, same_shell=True)
    return None


def source(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``source FILE ARGS`` / ``. FILE``."""
    if args and args[0].value == "--":
        args = args[1:]
    if args:
        ana.sourced_file(args[0], ctx, "`source`", list(args[1:]))
    return None


def trap(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``trap CODE SIGNAL…``."""
    got = read(args, opts("-l -p", exhaustive=True), permute=False)
    ops = got.operands
    if (
        not got.dynamic
        and not got.has("l", "p")
        and len(ops) >= 2
        and ops[0].value not in ("-", "")
    ):
        ana.code(ops[0], ctx, "trap code")
    return None


def exec_(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``exec [-cl] [-a NAME] COMMAND``: looks the command up like the shell does."""
    got = read(args, opts("-a: -c -l", exhaustive=True), permute=False)
    if got.dynamic:
        dynamic_options(ana, "exec", ctx)
        return None
    ctx.first = True
    return args[got.first :] or None


# -- find, fd, xargs, parallel --------------------------------------------------------------------


def _under(root: Arg | None, ctx: Ctx) -> Arg:
    """The file name a placeholder stands for: a path under the search root ``root`` (None: a
    root only known at run time, which may even be an option)."""
    if root is None or root.value is None:
        return Arg("{}", None, "", split=True)
    return Arg("{}", None, join_path(ctx.cwd or ".", root.value).rstrip("/") + "/")


def _exec_words(
    ana: Walker,
    words: list[Arg],
    ctx: Ctx,
    hole: Callable[[str], bool],
    roots: list[Arg | None],
    append: bool = False,
) -> None:
    """A command ``find -exec``/``fd -x`` runs: placeholders become a file name under one of the
    search ``roots``; with ``append`` (fd) a command without one gets the file names last."""
    if not words:
        return
    has_hole = any(a.value is not None and hole(a.value) for a in words)
    text = " ".join(a.text for a in words)
    for root in roots:
        name = _under(root, ctx)
        inner = [name if a.value is not None and hole(a.value) else a for a in words]
        if append and not has_hole:
            inner.append(name)
        # The verdict names the inner command (`rm -rf {}`), not the whole find.
        ana.chain(inner, ctx.sub(text))


def _find_roots(args: list[Arg]) -> list[Arg | None]:
    """find's starting points (``.`` when none is given); None for one only known at run time."""
    i, n = 0, len(args)
    while i < n and (args[i].value in FIND_LEADING or (args[i].value or "")[:2] in ("-D", "-O")):
        i += 2 if args[i].value in ("-D", "-O") else 1
    roots: list[Arg | None] = []
    while i < n:
        a = args[i]
        if a.value is None:
            roots.append(None)
        elif a.value.startswith("-") or a.value in ("(", "!", ")", ","):
            break
        else:
            roots.append(a)
        i += 1
    return roots or [Arg.lit(".")]


def find(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``find … -exec CMD {} ;`` (also ``-execdir``, ``-ok``, ``-okdir``): ``{}`` is a path under
    one of the starting points (``-execdir``: ``./NAME`` in the directory of the file)."""
    roots = _find_roots(args)
    i, n = 0, len(args)
    while i < n:
        v = args[i].value
        i += 1
        if v in ("-exec", "-execdir", "-ok", "-okdir"):
            start = i
            while i < n and args[i].value not in (";", "+"):
                i += 1
            _exec_words(ana, args[start:i], ctx, lambda w: "{}" in w, roots)
            i += 1
    return None


_FD_HOLE = re.compile(r"\{(?:|/|//|\.|/\.)\}")
_FD = opts(
    "-dEtecSoj: -HIusigFalLp0qhV1 --max-depth= --min-depth= --exact-depth= --exclude= --type= "
    "--extension= --size= --changed-within= --changed-before= --change-newer-than= "
    "--change-older-than= --newer= --older= --owner= --format= --color= --threads= "
    "--max-results= --base-directory= --path-separator= --search-path= --ignore-file= "
    "--max-buffer-time= --batch-size= --and= --hyperlink[=] --strip-cwd-prefix[=] --hidden "
    "--no-hidden --no-ignore --ignore --no-ignore-vcs --ignore-vcs --no-ignore-parent "
    "--no-global-ignore-file --no-require-git --unrestricted --case-sensitive --ignore-case "
    "--glob --regex --fixed-strings --absolute-path --relative-path --list-details --follow "
    "--no-follow --full-path --print0 --prune --one-file-system --quiet --show-errors "
    "--help --version",
    exhaustive=True,
)


def fd(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``fd [PATTERN] [PATH…] -x CMD`` / ``-X CMD``: CMD gets paths under the search roots, last
    when it has no placeholder."""
    i, n = 0, len(args)
    rest: list[Arg] = []
    runs: list[list[Arg]] = []
    while i < n:
        a = args[i]
        i += 1
        if a.value in ("-x", "--exec", "-X", "--exec-batch"):
            start = i
            while i < n and args[i].value != ";":
                i += 1
            runs.append(args[start:i])
            i += 1
        else:
            rest.append(a)
    if not runs:
        return None
    got = read(rest, _FD)
    roots: list[Arg | None] = [*got.operands[1:], *got.values("search-path")] or [Arg.lit(".")]
    if got.unknown is not None or got.has("strip-cwd-prefix"):
        roots = [None]  # a root, or the file names themselves (no `./`), may be anything
    base = got.values("base-directory")
    if base:
        sub = ctx.sub(ctx.text)
        chdir(sub, base[-1])
        ctx = sub
        roots = [r if r is None or r.value is None or ctx.cwd is not None else None for r in roots]
    for words in runs:
        _exec_words(ana, words, ctx, lambda w: bool(_FD_HOLE.search(w)), roots, append=True)
    return None


_XARGS = opts(
    "-aEdILnPs: -eil:: -0oprtx --arg-file= --delimiter= --max-args= --max-procs= --max-chars= "
    "--process-slot-var= --null --no-run-if-empty --interactive --verbose --exit --open-tty "
    "--show-limits --help --version --eof[=] --replace[=] --max-lines[=]"
)


def xargs(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``xargs [options] COMMAND``: input items are appended or replace ``-I`` strings."""
    got = read(args, _XARGS, permute=False)
    if got.dynamic:
        dynamic_options(ana, "xargs", ctx)
        return None
    repl = got.get("I") or got.get("replace")
    if not repl and got.has("i", "replace"):
        repl = got.get("i") or "{}"
    # An input item may be an option or a `+refspec` unless the input is known not to be one.
    dashes = got.has("a", "arg-file") or _input_may_be_option(ana, ctx)
    for n, k in enumerate([got.first, *got.alternatives]):
        inner = args[k:]
        if not inner:
            continue
        if repl:
            inner = [
                Arg(a.text, None, a.value.split(repl, 1)[0], dashes)
                if a.value is not None and repl in a.value
                else a
                for a in inner
            ]
        else:
            inner = [*inner, Arg("<xargs input>", None, "", dashes)]  # input items are appended
        if n == 0:
            return inner
        ana.chain(inner, ctx)
    return None


_OPTION_ITEM = re.compile(r"""(?:^|\s)['"]?[-+]""")


def _input_may_be_option(ana: Walker, ctx: Ctx) -> bool:
    """Whether a word of what the command reads on stdin (its items, for xargs and parallel)
    may start with ``-`` or ``+``: only input this line prints is known not to. find prints
    paths under its starting points (``./x`` for none), never an option, unless it prints
    something else (``-printf``, what ``-exec`` runs)."""
    text = ana.input_of(ctx)
    if isinstance(text, str) and text not in (NO_INPUT, EXTERNAL):
        return _OPTION_ITEM.search(text) is not None
    source = ctx.cmd.pipe_from
    if isinstance(source, Cmd) and ctx.cmd.stdin is None:
        words = ana.expand_words(source, ctx.scope)
        printing = ("-printf", "-exec", "-execdir", "-ok", "-okdir")
        if (
            words
            and words[0].value is not None
            and command_name(words[0].value) == "find"
            and not any(a.value is None or a.value in printing for a in words[1:])
        ):
            roots = _find_roots(words[1:])
            return not all(r is not None and (r.value or "-")[:1] not in "-+" for r in roots)
    return True


_PARALLEL = opts(
    "-aCdEIjnNPsSL: -eil:: -0kmqrtuvXgZ --arg-file= --arg-file-sep= --arg-sep= --basefile= --bf= "
    "--colsep= --compress-program= --decompress-program= --delimiter= --env= --halt= --header= "
    "--jobs= --joblog= --load= --max-args= --max-replace-args= --max-lines= --memfree= --nice= "
    "--results= --res= --retries= --return= --sshlogin= --sshloginfile= --slf= --tagstring= "
    "--timeout= --tmpdir= --workdir= --wd= --delay= --block= --block-size= --recstart= --recend= "
    "--id= --trc= --ssh= --max-chars= --transfer-file= --tf= --limit= --termseq= --shebang-wrap= "
    "--csv-sep= --sqlmaster= --sqlandworker= --keep-order --quote --ungroup --group "
    "--line-buffer --lb --tag --dry-run --pipe --spreadstdin --pipepart --null "
    "--no-run-if-empty --verbose --will-cite --citation --progress --eta --xargs --plus "
    "--no-notice --shuf --semaphore --sem --fg --bg --onall --nonall --transfer --cleanup --bar "
    "--joblog-append --linebuffer --keep --help --version --number-of-cpus --number-of-cores "
    "--round-robin --roundrobin --ctag --eof[=] --replace[=]"
)
_PARALLEL_SEPS = (":::", "::::", ":::+", "::::+")
_PLACEHOLDER = re.compile(r"\{(?:[0-9]*[./]*[./]?|#|%|=.*?=)\}")


def _literal(text: str) -> Callable[[re.Match[str]], str]:
    """A ``re.sub`` replacement that inserts ``text`` as is (no backslash escapes)."""
    return lambda _m: text


def parallel(ana: Walker, args: list[Arg], ctx: Ctx, semaphore: bool = False) -> list[Arg] | None:
    """GNU ``parallel``/``sem``: its command line with each ``:::`` input filled in; as a
    semaphore (``sem``, ``--semaphore``) it runs its command line once and reads no input."""
    got = read(args, _PARALLEL, permute=False)
    semaphore = semaphore or got.has("semaphore", "sem")
    if got.dynamic:
        dynamic_options(ana, "parallel", ctx)
        return None
    rest = args[got.first :]
    cut = next((k for k, a in enumerate(rest) if a.value in _PARALLEL_SEPS), len(rest))
    template, sources = rest[:cut], rest[cut:]
    inputs: list[Arg] = []
    from_files = got.has("a", "arg-file")
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
    dyn = next((a for a in template if a.value is None), None)
    if dyn is not None:
        ana.unknown(f"runs commands only known at run time (`{dyn.text}`)", ctx.text)
        return None
    line = " ".join(
        shlex.quote(v) if not _PLACEHOLDER.search(v) and v != v.strip() else v
        for v in (a.value or "" for a in template)
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
    if semaphore and not sources and template:
        runs.append(line)
    elif not sources or from_files:
        if not template:
            ana.unknown("runs command lines read from its input", ctx.text)
        else:
            # Unquoted, an input that may be an option (or a `+refspec`) counts as one.
            dashes = from_files or _input_may_be_option(ana, ctx)
            hole = "$parallel_input" if dashes else '"$parallel_input"'
            runs.append(
                _PLACEHOLDER.sub(hole, line) if _PLACEHOLDER.search(line) else f"{line} {hole}"
            )
    for text in runs:
        ana.source(text, ctx.depth + 1, ctx.scope, ctx=ctx)
    return None


# -- other runners --------------------------------------------------------------------------------

_FLOCK = opts(
    "-wEc: -sxunoFvhV --timeout= --wait= --conflict-exit-code= --command= --shared --exclusive "
    "--unlock --nonblock --nb --close --no-fork --verbose --help --version"
)


def sem(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """GNU ``sem``: ``parallel --semaphore``."""
    return parallel(ana, args, ctx, semaphore=True)


def flock(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``flock [options] FILE COMMAND…`` or ``flock FILE -c CODE``."""
    got = read(args, _FLOCK, permute=False)
    if got.dynamic:
        dynamic_options(ana, "flock", ctx)
        return None
    code = got.values("c", "command")
    rest = args[got.first + 1 :]
    if not code and rest and rest[0].value in ("-c", "--command") and len(rest) > 1:
        code = [rest[1]]
    if code:
        ana.code(code[-1], ctx, "shell code")
        return None
    return rest or None


def su(ana: Walker, args: list[Arg], ctx: Ctx, runuser: bool = False) -> list[Arg] | None:
    """``su [options] [-] [USER] [-c CODE]`` (options permute, so -c may follow the user)."""
    spec = opts(
        "-cgGsw: --command= --session-command= --group= --supp-group= --shell= "
        "--whitelist-environment=" + (" -u: --user=" if runuser else "")
    )
    head = read(args, spec, stop_after=1)
    if runuser and head.has("u", "user") and not head.dynamic:
        return head.operands or None  # `runuser -u USER COMMAND…`: the command is not read
    got = read(args, spec)
    if got.unknown is not None:
        dynamic_options(ana, "su", ctx)
        return None
    code = got.values("c", "command", "session-command")
    if code:
        ana.code(code[0], ctx, "shell code")
    return None


def runuser(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``runuser -u USER COMMAND…`` or like ``su``."""
    return su(ana, args, ctx, runuser=True)


def busybox(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``busybox APPLET ARGS``."""
    if args and args[0].value is not None and args[0].value.startswith("-"):
        return None
    return args or None


def coreutils(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``coreutils --coreutils-prog=NAME ARGS`` runs NAME."""
    if args and (args[0].value or "").startswith("--coreutils-prog="):
        name = (args[0].value or "").split("=", 1)[1]
        return [Arg.lit(name, args[0].text), *args[1:]]
    if args and args[0].value is None and args[0].prefix.startswith("--coreutils-prog"):
        ana.unknown(f"runs a program only known at run time (`{args[0].text}`)", ctx.text)
    return None


CARGO_GLOBAL = opts(
    "-CZ: -vq --color= --config= --locked --offline --frozen --verbose --quiet --list --version",
    abbrev=False,
)
# cargo's built-in commands and their aliases: a user-defined alias cannot replace these.
CARGO_BUILTINS = frozenset(
    wordlist(
        "add b bench build c check clean config d doc fetch fix generate-lockfile git-checkout "
        "help info init install locate-project login logout metadata new owner package pkgid "
        "publish r read-manifest remove report rm run rustc rustdoc search t test tree "
        "uninstall update vendor verify-project version yank"
    )
)


def cargo(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``cargo NAME``: a name that is not a built-in command may be an alias (``[alias]`` of a
    config file, ``--config alias.NAME=…``, ``CARGO_ALIAS_NAME``); one this line may define is
    unknown."""
    words = args[1:] if args and (args[0].value or "").startswith("+") else args
    got = read(words, CARGO_GLOBAL, permute=False)
    if got.dynamic or not got.operands:
        return None
    sub = got.operands[0]
    if sub.value in CARGO_BUILTINS:
        return None
    variables = [*ctx.env, *ana.variables]
    sources = [
        *(f"`--config {w.text}`" for w in got.values("config")),
        *(f"`{v}`" for v in variables if v.startswith("CARGO_ALIAS_") or v == "CARGO_HOME"),
        *(f"`{p}`" for p in ana.written if ".cargo/config" in p or p.startswith(".cargo/")),
    ]
    if sub.value is None or sources:
        ana.unknown(
            f"runs `cargo {sub.text}`, which may be an alias that {sources[0]} defines"
            if sources
            else f"runs a cargo command only known at run time (`{sub.text}`)",
            ctx.text,
        )
    return None


_PACKAGE_MANAGERS = frozenset(wordlist("npm npx pnpm pnpx yarn yarnpkg"))


def corepack(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``corepack npm|pnpm|yarn[@VERSION] ARGS``: the package manager with ARGS; its own
    subcommands (``enable``, ``install``, ``use`` …) run nothing of the line."""
    if not args:
        return None
    head = args[0]
    if head.value is None:
        ana.unknown(f"runs a package manager only known at run time (`{head.text}`)", ctx.text)
        return None
    name = head.value.split("@", 1)[0]
    if name in _PACKAGE_MANAGERS:
        return [Arg.lit(name, head.text), *args[1:]]
    return None


def nix(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``nix develop|shell … -c CMD``; ``nix run PKG`` runs a program from a package."""
    for k, a in enumerate(args):
        if a.value in ("-c", "--command"):
            return args[k + 1 :] or None
    if args and args[0].value == "run":
        ana.unknown("runs a program from a Nix package", ctx.text)
    return None


def sg(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``sg GROUP [-c] CODE``."""
    k = 1 if args and args[0].value == "-" else 0
    rest = args[k + 1 :]
    if rest and rest[0].value == "-c":
        rest = rest[1:]
    if rest:
        shell_words(ana, rest, ctx)
    return None


def at(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``at``/``batch``: run the shell code on their input (or ``-f FILE``) later, from the
    system's scheduler: outside the sandbox, where undo does not reach."""
    got = read(args, opts("-qftu: -mMlrdbcvVK", exhaustive=True))
    if got.unknown is not None:
        dynamic_options(ana, "at", ctx)
        return None
    if got.has("l", "r", "d", "c", "V"):
        return None
    ctx.hits.append(Hit("schedules shell code to run later, outside the sandbox"))
    files = got.values("f")
    if files:
        ana.sourced_file(files[-1], ctx, "`at -f`")
    else:
        ana.stdin_code(ctx, "shell code")
    return None


_TMUX_COMMANDS: dict[str, tuple[str, Opts]] = {
    "new-session": ("shell", opts("-cefFnstxy: -AdDEPX")),
    "new-window": ("shell", opts("-ceFnt: -abdkPS")),
    "split-window": ("shell", opts("-celtFp: -bdefhIPvZ")),
    "respawn-pane": ("shell", opts("-cet: -k")),
    "respawn-window": ("shell", opts("-cet: -k")),
    "run-shell": ("shell", opts("-cdt: -bC")),
    "if-shell": ("first", opts("-t: -bF")),
    "pipe-pane": ("shell", opts("-t: -IOo")),
    "display-popup": ("shell", opts("-bcdehsStTwxy: -BCEN")),
    "send-keys": ("keys", opts("-cNt: -FHKlMRX")),
    **dict.fromkeys(("kill-server", "kill-session", "kill-window", "kill-pane"), ("kill", opts())),
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
    "killp": "kill-pane",
    "killw": "kill-window",
}
_TMUX_KEYS = {"Enter": "\n", "C-m": "\n", "C-j": "\n", "KPEnter": "\n", "Space": " ", "Tab": "\t"}


def tmux(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """tmux commands that run shell code or type keys into a shell."""
    top = read(args, opts("-cfLST: -2CDlNuvV"), permute=False)
    if top.dynamic:
        dynamic_options(ana, "tmux", ctx)
        return None
    for word in top.values("c"):
        ana.code(word, ctx, "shell code")
    commands: list[list[Arg]] = [[]]
    for a in args[top.first :]:
        if a.value == ";" or (a.value or "").endswith("\\;"):
            commands.append([])
        else:
            commands[-1].append(a)
    for words in commands:
        if not words:
            continue
        if words[0].value is None:
            ana.unknown(f"runs a tmux command only known at run time (`{words[0].text}`)", ctx.text)
            continue
        name = _TMUX_ALIASES.get(words[0].value, words[0].value)
        full = [c for c in _TMUX_COMMANDS if c.startswith(name)]
        name = full[0] if name not in _TMUX_COMMANDS and len(full) == 1 else name
        if name not in _TMUX_COMMANDS:
            continue
        kind, spec = _TMUX_COMMANDS[name]
        if kind == "kill":
            ctx.hits.append(Hit("kills tmux sessions and the processes running in them"))
            continue
        got = read(words[1:], spec, permute=False)
        if got.dynamic:
            dynamic_options(ana, "tmux", ctx)
            return None
        operands = words[1 + got.first :]
        if kind == "keys":
            keys: list[str] = []
            for a in operands:
                if a.value is None:
                    ana.unknown(f"types keys only known at run time (`{a.text}`)", ctx.text)
                    return None
                keys.append(a.value if got.has("l") else _TMUX_KEYS.get(a.value, a.value))
            ana.source("".join(keys), ctx.depth + 1, ctx.scope, ctx=ctx)
        elif kind == "first":
            if operands and not got.has("F"):
                ana.code(operands[0], ctx, "shell code")
        elif operands and not (name == "run-shell" and got.has("C")):
            shell_words(ana, operands, ctx)
    return None


def screen(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``screen [options] COMMAND`` and ``screen -X stuff|exec …``."""
    i, n = 0, len(args)
    command = False
    while i < n:
        v = args[i].value
        if v is None:
            if args[i].may_be_option:
                dynamic_options(ana, "screen", ctx)
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
                command = True  # the command is the first operand: `screen -X -S s quit`
            elif ch in "cehpSstT":
                i += 1 if j + 1 == len(v) else 0
                break
    if command:
        return _screen_command(ana, args[i:], ctx)
    return args[i:] or None


def _screen_command(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    if not args or args[0].value is None:
        ana.unknown("sends screen a command only known at run time", ctx.text)
        return None
    name, rest = args[0].value, args[1:]
    if name == "stuff":
        if any(a.value is None for a in rest):
            ana.unknown("types text only known at run time into a screen window", ctx.text)
            return None
        text = re.sub(r"\^[MJ]", "\n", decode_echo(" ".join(a.value or "" for a in rest)))
        ana.source(text, ctx.depth + 1, ctx.scope, ctx=ctx)
    elif name in ("exec", "screen"):
        return rest or None
    elif name in ("quit", "kill", "pow_detach"):
        ctx.hits.append(Hit("kills screen windows and the processes running in them"))
    return None


_BWRAP_TWO = frozenset(
    wordlist(
        "setenv bind bind-try dev-bind dev-bind-try ro-bind ro-bind-try file bind-data "
        "ro-bind-data symlink chmod"
    )
)
_BWRAP_ONE = frozenset(
    wordlist(
        "args uid gid hostname chdir unsetenv lock-file sync-fd remount-ro exec-label file-label proc "
        "dev tmpfs mqueue dir seccomp add-seccomp-fd block-fd userns-block-fd info-fd json-status-fd "
        "cap-add cap-drop perms size userns userns2 pidns argv0"
    )
)


def bwrap(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``bwrap [--option ARGS…] COMMAND``: some options take two words."""
    i, n = 0, len(args)
    while i < n:
        v = args[i].value
        if v is None:
            if args[i].may_be_option:
                dynamic_options(ana, "bwrap", ctx)
                return None
            break
        if v == "--":
            i += 1
            break
        if not v.startswith("--"):
            break
        name = v[2:]
        i += 1 + (2 if name in _BWRAP_TWO else 1 if name in _BWRAP_ONE else 0)
    ctx.cwd = None  # the sandbox's file system is its own
    return args[i:] or None


def bind(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``bind -x '"\\C-x": CMD'``: CMD runs when the key is pressed."""
    for k, a in enumerate(args):
        v = a.value or ""
        if v.startswith("-") and "x" in v[1:]:
            if not v.endswith("x"):
                binding = Arg.lit(v[v.index("x") + 1 :])
            else:
                binding = args[k + 1] if k + 1 < len(args) else Arg.lit("")
            if binding.value is None:
                ana.unknown("binds a key to a command only known at run time", ctx.text)
                continue
            _, sep, code = binding.value.partition(":")
            if sep:
                ana.source(code.strip().strip("'\""), ctx.depth + 1, ctx.scope, ctx=ctx)
    return None


_SSD = opts(
    "-xapnuNPIkrdcgsRo: -SKTVbmqtvhCO --exec= --startas= --pidfile= --name= --user= --chuid= "
    "--nicelevel= --procsched= --iosched= --umask= --chroot= --chdir= --group= --signal= "
    "--retry= --ppid= --output= --notify-timeout= --start --stop --status --test --oknodo "
    "--quiet --verbose --background --make-pidfile --remove-pidfile --no-close"
)


def start_stop_daemon(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``start-stop-daemon --start --exec PROG [--startas PROG] -- ARGS`` runs PROG."""
    got = read(args, _SSD)
    if got.has("K", "stop", "T", "status", "t", "test"):
        return None
    programs = got.values("a", "startas") or got.values("x", "exec")
    if not programs:
        return None
    chdir(ctx, next(iter(got.values("d", "chdir")[-1:]), None))
    cut = next((k for k, a in enumerate(args) if a.value == "--"), len(args))
    return [programs[-1], *args[cut + 1 :]]


def rvm(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``rvm VERSION… do COMMAND``."""
    cut = next((k for k, a in enumerate(args) if a.value == "do"), -1)
    return args[cut + 1 :] or None if cut >= 0 else None


def scl(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``scl enable COLLECTION… -- COMMAND`` or ``scl enable COLLECTION 'COMMAND'``."""
    if not args or args[0].value not in ("enable", "run"):
        return None
    cut = next((k for k, a in enumerate(args) if a.value == "--"), -1)
    if cut >= 0:
        return args[cut + 1 :] or None
    if len(args) >= 3:
        shell_words(ana, args[-1:], ctx)
    return None


_SSH_CODE_LINE = re.compile(
    r"(?im)^\s*(?:ProxyCommand|LocalCommand|KnownHostsCommand|RemoteCommand)\s*=?\s*(.+)$"
    r"|^\s*Match\b.*\bexec\s+\"([^\"]*)\""
)


def ssh_config(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """A config file ssh reads (``-F FILE``, ``~/.ssh/config``) that this line writes: its
    ``ProxyCommand``, ``LocalCommand`` and ``Match exec`` lines run commands."""
    files = values_of(args, "-F") or [Arg.lit("~/.ssh/config")]
    for path in files:
        text = ana.written_file(path.value) if path.value is not None else False
        if text is None:
            ana.unknown(
                f"reads ssh configuration from `{path.text}`, written at run time", ctx.text
            )
        elif isinstance(text, str):
            for m in _SSH_CODE_LINE.finditer(text):
                ana.source(m.group(1) or m.group(2), ctx.depth + 1, ctx=ctx)
    return None


def remote_shell(spec: Opts, code: Code) -> Handler:
    """``ssh [options] HOST [options] [--] [COMMAND…]``: ssh reads options again after the host
    (``code`` says which of them run locally); the command is shell code run on the host."""

    def run(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
        head = read(args, spec, permute=False)
        if head.dynamic:
            dynamic_options(ana, "ssh", ctx)
            return None
        if not head.operands:
            return None
        tail = read(args[head.first + 1 :], spec, permute=False)
        if tail.dynamic:
            dynamic_options(ana, "ssh", ctx)
            return None
        for word in tail.values(*code.options.split()):
            local = _keyed(word, code)
            if local is not None:
                ana.code(local, ctx, "shell code")
        words = args[head.first + 1 + tail.first :]
        if words:
            ctx.elsewhere, ctx.cwd = True, None
            shell_words(ana, words, ctx)
        return None

    return run


def exec_in(spec: Opts) -> Handler:
    """``kubectl exec POD [flags] -- COMMAND…``: flags anywhere before ``--``, the command after
    it (without it, the operands after the pod); it runs in the pod."""

    def run(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
        cut = next((k for k, a in enumerate(args) if a.value == "--"), -1)
        got = read(args[:cut] if cut >= 0 else args, spec)
        if got.unknown is not None:
            dynamic_options(ana, "kubectl exec", ctx)
            return None
        words = args[cut + 1 :] if cut >= 0 else got.operands[1:]
        if not words:
            return None
        ctx.elsewhere, ctx.cwd = True, None
        return words

    return run


_PROJECT_VARS = ("$PWD", "${PWD}", "$(pwd)", "`pwd`")
HOST_MOUNT = "gives the container host files outside the project, which it may change as root"
HOST_RIGHTS = "runs a container with the host's rights"


def _host_source(word: Arg) -> str | None:
    """Where a ``-v SRC:DST`` or ``--mount source=SRC`` reaches on the host: "" for the project
    or a named volume, the path when it is outside the project, "?" when only known at run
    time."""
    text = word.text.replace('"', "").replace("'", "")
    if word.value is None:
        m = re.search(r"(?:^|,)(?:source|src)=([^,]*)", text)
        src = m.group(1) if m else text
        if src.startswith(_PROJECT_VARS) and ".." not in src:
            return ""
        return "?"
    value = word.value
    if value.startswith("type=") or "source=" in value or "src=" in value:
        fields = dict(f.partition("=")[::2] for f in value.split(","))
        if fields.get("type", "volume") not in ("bind", "volume"):
            return ""
        src = fields.get("source", fields.get("src", ""))
        if fields.get("type", "volume") == "volume" and "/" not in src:
            return ""
    else:
        src = value.split(":", 1)[0] if ":" in value else ""
    if not src or ("/" not in src and not src.startswith(("~", "."))):
        return ""  # an anonymous or named volume
    if src.startswith(("/", "~")) or clean_path(src).startswith(".."):
        return src
    return ""


def container_run(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``docker run --entrypoint PROG IMAGE ARGS``: PROG runs with ARGS (in the container). The
    container daemon is outside the sandbox: a bind mount of host files outside the project,
    ``--privileged`` or the host's namespaces give the container what the sandbox withholds."""
    got = read(args, CONTAINER_RUN, permute=False)
    for word in got.values("v", "volume", "mount"):
        src = _host_source(word)
        if src == "?":
            ctx.hits.append(
                Hit(
                    f"may give the container host files outside the project, which it may change as root: `{word.text}` is only known at run time"
                )
            )
            break
        if src:
            ctx.hits.append(Hit(f"{HOST_MOUNT} (`{word.text}`)"))
            break
    if got.has("privileged", "cap-add", "device", "security-opt") or any(
        (w.value or "?").startswith("host") for w in got.values("pid", "ipc", "userns", "uts")
    ):
        ctx.hits.append(Hit(HOST_RIGHTS))
    entry = got.values("entrypoint")
    if not entry or got.dynamic:
        return None
    ctx.elsewhere, ctx.cwd = True, None
    return [*entry[-1:], *args[got.first + 1 :]]


CONTAINER_RUN = opts(
    "-vepwulhm: -ditPq --volume= --env= --env-file= --publish= --workdir= --user= --name= "
    "--network= --net= --entrypoint= --mount= --label= --label-file= --add-host= --cpus= "
    "--memory= --platform= --restart= --runtime= --shm-size= --ulimit= --device= --cap-add= "
    "--cap-drop= --security-opt= --tmpfs= --hostname= --dns= --log-driver= --log-opt= --pull= "
    "--gpus= --pid= --ipc= --userns= --uts= --volumes-from= --link= --expose= --health-cmd= "
    "--cidfile= --group-add= --init --rm --privileged --read-only --detach --interactive --tty "
    "--publish-all --no-healthcheck --quiet"
)


def coverage_run(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``coverage run [-m] PROGRAM ARGS`` runs Python on the program or module."""
    got = read(
        args,
        opts(
            "-pmaL --source= --omit= --include= --rcfile= --data-file= "
            "--context= --concurrency= --append --branch --parallel-mode "
            "--timid --pylib --module"
        ),
        permute=False,
    )
    rest = args[got.first :]
    if got.dynamic or not rest:
        return None
    module = [Arg.lit("-m")] if got.has("m", "module") else []
    return [Arg.lit("python"), *module, *rest]
