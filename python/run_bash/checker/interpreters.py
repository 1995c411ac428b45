"""Interpreters and other programs whose options or input hold code of their own. Pure.

Each runner finds the code a command runs and hands it to :func:`.languages.judge` (interpreter
one-liners, their input, scripts and test files this line writes) or reads it itself (Vim Ex
commands, sed's ``e``, debugger commands, Tcl, Emacs Lisp, SQL clients' shell escapes).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable
from dataclasses import dataclass

from run_bash.checker.languages import (
    AWK,
    GO,
    JAVASCRIPT,
    JULIA,
    LUA,
    MAX_CODE_CHARS,
    PERL,
    PHP,
    PYTHON,
    R_LANG,
    RUBY,
    Lang,
    judge,
    shell,
    unescape,
)
from run_bash.checker.model import NO_INPUT, REVERSIBLE, STDIN_FILES, Ctx, Hit, Walker
from run_bash.checker.options import Opts, opts, read, values_of
from run_bash.checker.reading import Handler, is_dry_run, operand_paths
from run_bash.checker.words import Arg, package_command, wordlist

# -- interpreters ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Interp:
    """An interpreter's command line: options carrying code, options that end its options."""

    lang: Lang
    spec: Opts
    code: str  # options whose value is code
    stops: str = ""  # options after which the rest are its arguments (`python -m`)
    program: bool = False  # its first operand is the program text (awk)
    files: str = ""  # options whose value is a script file (awk -f, php -f)
    noexec: str = ""  # options that only check the code, or forbid running programs
    prints: str = ""  # options after which, without a code option, the first operand is code
    judge: Callable[[Walker, str, Lang, Ctx], None] = judge  # how its code is judged


# Scripts a framework ships as its command-line tool, with rows of their own in the table.
_SCRIPT_TOOLS = frozenset({"manage.py", "artisan"})


def _script_tool(word: Arg) -> str | None:
    name = (word.value or "").rsplit("/", 1)[-1]
    return name if name in _SCRIPT_TOOLS else None


def interpreter(interp: Interp) -> Handler:
    """The runner of an interpreter: judge its one-liner, its input or its written script."""

    def runner(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
        got = read(args, interp.spec, permute=False)
        if got.dynamic:
            ana.unknown(f"passes {interp.lang.name} options only known at run time", ctx.text)
            return None
        if interp.noexec and got.has(*interp.noexec.split()):
            return None
        codes = got.values(*interp.code.split())
        files = got.values(*interp.files.split())
        if interp.lang is JAVASCRIPT:
            _node_options(ana, ctx)
        rest = args[got.first :]
        program = interp.program or (interp.prints and got.has(*interp.prints.split()))
        if program and not codes and not files and rest:
            codes, rest = [rest[0]], rest[1:]
        for word in codes:
            if word.value is None:
                ana.unknown(
                    f"runs {interp.lang.name} code only known at run time (`{word.text}`)", ctx.text
                )
            else:
                interp.judge(ana, word.value, interp.lang, ctx)
        if codes or (interp.stops and got.has(*interp.stops.split())):
            return None
        tool = _script_tool(rest[0]) if rest and not files else None
        if tool is not None:
            # `python manage.py flush`, `php artisan db:wipe`: judged as `manage.py flush`.
            ana.chain([Arg.lit(tool, rest[0].text), *rest[1:]], ctx)
        for word in files or rest[:1]:
            if word.value in STDIN_FILES:
                _stdin(ana, interp, ctx)
            elif word.proc:
                _proc(ana, interp, word, ctx)
            else:
                script = ana.script_text(word, ctx)
                if script is not None:
                    interp.judge(ana, script, interp.lang, ctx)
        if not files and not rest:
            _stdin(ana, interp, ctx)
        return None

    return runner


def _node_options(ana: Walker, ctx: Ctx) -> None:
    """``NODE_OPTIONS="--require ./x.js"``: modules node loads before the code."""
    value = ctx.env.get("NODE_OPTIONS")
    values = ana.values("NODE_OPTIONS") if value is None else None
    text = value.value if value is not None else next(iter(values or ()), None)
    if text is None or text.startswith("\0"):
        return
    words = text.split()
    for k, w in enumerate(words):
        module = w.split("=", 1)[1] if w.startswith(("--require=", "--import=")) else None
        if w in ("-r", "--require", "--import") and k + 1 < len(words):
            module = words[k + 1]
        if module:
            _judge_files(ana, [module], JAVASCRIPT, ctx)


def _stdin(ana: Walker, interp: Interp, ctx: Ctx) -> None:
    text = ana.input_of(ctx)
    if text is None:
        ana.unknown(
            f"runs {interp.lang.name} code read from its input, only known at run time", ctx.text
        )
    elif text is not NO_INPUT and isinstance(text, str) and not text.startswith("\0"):
        interp.judge(ana, text, interp.lang, ctx)


def _proc(ana: Walker, interp: Interp, word: Arg, ctx: Ctx) -> None:
    """A script read from a process substitution ``<(…)``: what its commands print."""
    text = ana.printed_source(word.text[2:-1]) if word.text.startswith("<(") else None
    if text is None or text is NO_INPUT:
        ana.unknown(f"runs {interp.lang.name} code from a process substitution", ctx.text)
    else:
        interp.judge(ana, text, interp.lang, ctx)


# Modules that are a command-line tool of the table: `python -m NAME` runs as that command.
_TOOL_MODULES = {
    **{n: n for n in wordlist("pip twine uv poetry hatch pdm flit pipx")},
    "pip3": "pip",
}


def python(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``python [options] -c CODE | -m MODULE | SCRIPT``: ``-m pip|twine|uv…`` runs that tool; the
    ``sitecustomize``/``usercustomize`` modules and ``.pth`` files this line writes run first."""
    _judge_files(ana, written(ana, ".", "sitecustomize.py", "usercustomize.py"), PYTHON, ctx)
    for pth in written(ana, ".", "*.pth"):
        text = ana.script_text(Arg.lit(pth), ctx) or ""
        lines = [line for line in text.splitlines() if line.startswith("import")]
        if lines:
            judge(ana, "\n".join(lines), PYTHON, ctx)
    got = read(args, _PYTHON.spec, permute=False)
    module = got.values("m")
    if module and not got.dynamic:
        name = module[-1].value
        rest = args[got.first :]
        if name in _TOOL_MODULES:
            return [Arg.lit(_TOOL_MODULES[name], module[-1].text), *rest]
        if name in ("pytest", "unittest"):
            return PYTEST(ana, rest, ctx)
        if name in ("cProfile", "profile", "pdb", "trace", "timeit") and rest:
            _judge_files(ana, [rest[-1].value or ""] if rest[-1].value else [], PYTHON, ctx)
        return None
    return _PYTHON_RUN(ana, args, ctx)


_PYTHON = Interp(
    PYTHON,
    opts(
        "-cmWXQ: -bBdEhiIOPqsSuvVx --check-hash-based-pycs= --help-env "
        "--help-xoptions --help-all --version"
    ),
    "c",
    "m",
)
_PYTHON_RUN = interpreter(_PYTHON)
INTERPRETERS: dict[str, Handler] = {
    "python": python,
    "pypy": python,
    **dict.fromkeys(
        ("node", "nodejs", "tsx", "ts-node", "ts-node-esm"),
        interpreter(
            Interp(
                JAVASCRIPT,
                opts(
                    "-erC: -pciv --eval= --print= --require= --import= --loader= "
                    "--input-type= --env-file= --conditions= --experimental-loader= "
                    "--check --interactive"
                ),
                "e eval print",
                noexec="c check",
                prints="p",
            )
        ),
    ),
    "ruby": interpreter(
        Interp(
            RUBY,
            opts(
                "-eIrCE: -xF:: -0/[0-7]* -W/[0-9]*|:[\\w-]* -T/[0-9]* -K/. -acdlnpsSvwyh "
                "--enable= --disable= --encoding="
            ),
            "e",
            noexec="c",
        )
    ),
    "perl": interpreter(
        Interp(
            PERL,
            opts(
                "-eEI: -MmFxCiD:: -l/[0-7]* -0/x[0-9a-fA-F]*|[0-7]* -d/t?(?:[:=].*)? "
                "-V/(?::.*)? -anpstTuUvwWXcShg"
            ),
            "e E",
            noexec="c",
        )
    ),
    "php": interpreter(
        Interp(PHP, opts("-rfcdzBREFt: -aChHiIlnqsSvw"), "r B R E", files="f F", noexec="l")
    ),
    **dict.fromkeys(("lua", "luajit"), interpreter(Interp(LUA, opts("-elbj: -ivEWO"), "e"))),
    "julia": interpreter(
        Interp(
            JULIA,
            opts(
                "-eELtOp: -iqv --eval= --print= --load= --project[=] --threads= "
                "--startup-file= --history-file= --color= --compile= --check-bounds="
            ),
            "e E eval print",
            files="L load",
        )
    ),
    "R": interpreter(
        Interp(
            R_LANG,
            opts(
                "-ef: --file= --args --vanilla --no-save --save --no-restore --no-environ "
                "--no-site-file --no-init-file --no-echo --quiet --silent --slave --interactive "
                "--restore --verbose"
            ),
            "e",
            files="f file",
        )
    ),
    "Rscript": interpreter(
        Interp(
            R_LANG,
            opts(
                "-e: --default-packages= --verbose --vanilla "
                "--no-environ --no-site-file --no-init-file"
            ),
            "e",
        )
    ),
    **dict.fromkeys(
        ("awk", "gawk", "mawk", "nawk", "busybox-awk"),
        interpreter(
            Interp(
                AWK,
                opts(
                    "-fvFEei: -bcCdDgMnNoOpPrsStVyz --file= --assign= --field-separator= "
                    "--source= --exec= --include= --load= --lint[=] --posix --traditional "
                    "--sandbox --re-interval --characters-as-bytes"
                ),
                "e source",
                program=True,
                files="f file E exec",
                noexec="sandbox",
            )
        ),
    ),
}


_IPYTHON = opts(
    "-cm: -i --profile= --ipython-dir= --config= --colors= --logfile= --logappend= --log-level= "
    "--profile-dir= --gui= --pylab[=] --matplotlib[=] --ext= --no-banner --banner --quick "
    "--classic --nosep --pdb --no-pdb --pprint --no-pprint --autoindent --no-autoindent "
    "--simple-prompt --no-simple-prompt --debug --quiet --init --no-confirm-exit"
)
_IPYTHON_SHELL = re.compile(r"^\s*!!?(.*)$")
_IPYTHON_MAGIC = re.compile(r"^\s*%|^[^#'\"]*=\s*[!%]|get_ipython", re.M)


def _ipython_code(ana: Walker, text: str, lang: Lang, ctx: Ctx) -> None:
    """IPython code: ``!cmd`` lines are shell commands; magics (``%…``, ``x = !cmd``,
    ``get_ipython()``) may run anything; the rest is Python."""
    if _IPYTHON_MAGIC.search(text):
        ana.unknown("runs IPython magics, which may run shell commands", ctx.text)
    python_lines = []
    for line in text.splitlines():
        m = _IPYTHON_SHELL.match(line)
        if m is None:
            python_lines.append(line)
        elif re.search(r"[{$]", m.group(1)):
            # `!git push {b}`, `!rm $f`: IPython fills in Python values first.
            ana.unknown("runs a shell command IPython fills in with Python values", ctx.text)
        else:
            ana.source(m.group(1), ctx.depth + 1, ctx=ctx)
    judge(ana, "\n".join(python_lines), lang, ctx)


_IPYTHON_RUNNER = interpreter(Interp(PYTHON, _IPYTHON, "c", judge=_ipython_code))


def ipython(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``ipython [-c CODE | -m MODULE | SCRIPT]``: Python whose ``!`` lines run shell code."""
    got = read(args, _IPYTHON, permute=False)
    module = got.values("m")
    if module and not got.dynamic:
        return [Arg.lit("python"), Arg.lit("-m"), *module[-1:], *args[got.first :]]
    return _IPYTHON_RUNNER(ana, args, ctx)


INTERPRETERS["ipython"] = ipython
INTERPRETERS["ipython3"] = ipython


def deno(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``deno eval CODE`` / ``deno run SCRIPT``."""
    if args and args[0].value == "eval" and len(args) > 1:
        rest = [a for a in args[1:] if not (a.value or "").startswith("-")]
        if rest:
            if rest[0].value is None:
                ana.unknown(
                    f"runs JavaScript code only known at run time (`{rest[0].text}`)", ctx.text
                )
            else:
                judge(ana, rest[0].value, JAVASCRIPT, ctx)
    elif args and args[0].value == "run":
        rest = [a for a in args[1:] if not (a.value or "").startswith("-")]
        if rest and (rest[0].value or "").startswith("npm:"):
            # `deno run npm:PKG ARGS` runs the package's command, as `npx PKG ARGS` does
            at = next(k for k, a in enumerate(args) if a is rest[0])
            ana.chain([package_command(rest[0]), *args[at + 1 :]], ctx)
            return None
        script = ana.script_text(rest[0], ctx) if rest else None
        if script is not None:
            judge(ana, script, JAVASCRIPT, ctx)
    elif args and args[0].value == "publish" and not is_dry_run(args):
        ctx.hits.append(Hit("publishes a package to the registry"))
    return None


INTERPRETERS["deno"] = deno
INTERPRETERS["bun"] = interpreter(
    Interp(JAVASCRIPT, opts("-e:p: --eval= --print="), "e eval p print")
)


# -- Vim, sed, gdb --------------------------------------------------------------------------------

_EX_RANGE = re.compile(r"^[\s:]*(?:[%.$]|\d+|'[<>a-z]|/[^/]*/|\?[^?]*\?|[+-]\d*|,|;)*\s*")
_EX_MODIFIERS = re.compile(
    r"^(?:(?:sil(?:ent)?!?|keepj(?:umps)?|keepa(?:lt)?|keepp(?:atterns)?|noa(?:utocmd)?|"
    r"lockm(?:arks)?|uns(?:ilent)?|verb(?:ose)?|vert(?:ical)?|tab|bo(?:tright)?|"
    r"to(?:pleft)?|aboveleft|belowright|hide|conf(?:irm)?|sandbox)\s+)*"
)
_EX_RUNS = frozenset(
    wordlist(
        "lua luado luafile py py3 python python3 pyfile py3file pydo py3do perl perldo "
        "ruby rubydo rubyfile tcl tcldo tclfile mzscheme call exe execute so source "
        "runtime ru mak make lmak lmake grep lgrep cexpr lexpr pe"
    )
)
_EX_SAFE_CALLS = re.compile(
    r"\b(?:system|systemlist|jobstart|termopen|libcall|vim\.fn|"
    r"os\.execute|io\.popen|vim\.system|execute)\b"
)


def ex_commands(ana: Walker, text: str, ctx: Ctx) -> None:
    """Vim Ex commands (``vim -c``, ``+cmd``): ``!cmd``, ``r !cmd``, ``w !cmd``, ``:terminal``
    run shell commands; commands that run scripts that may start programs pause."""
    for raw in re.split(r"(?<!\\)\|", text) if "!" not in text else [text]:
        cmd = _EX_MODIFIERS.sub("", _EX_RANGE.sub("", raw, count=1))
        m = re.match(r"(\w+)(!?)\s*(.*)", cmd, re.S)
        if cmd.startswith("!"):
            ana.source(cmd[1:], ctx.depth + 1, ctx=ctx)
        elif m and m.group(1) in ("r", "read", "w", "write") and m.group(3).startswith("!"):
            ana.source(m.group(3)[1:], ctx.depth + 1, ctx=ctx)
        elif m and m.group(1) in ("term", "terminal", "ter"):
            if m.group(3).strip():
                ana.source(
                    re.sub(r"^(?:\+\+\w+(?:=\S*)?\s+)*", "", m.group(3)), ctx.depth + 1, ctx=ctx
                )
        elif m and (m.group(1) in _EX_RUNS or _EX_SAFE_CALLS.search(cmd)):
            ana.unknown(
                f"runs Vim commands that may start programs (`{cmd.strip()[:60]}`)", ctx.text
            )
        elif m and m.group(1) in ("norm", "normal") and ":" in m.group(3):
            ana.unknown(
                f"types Vim commands that may start programs (`{cmd.strip()[:60]}`)", ctx.text
            )


_VIM = opts(
    "-cSiuUTdrwWqstoOp:: --cmd= -N -e -E -s -b -l -n -R -Z -y -m -M -h -v -x -X -V:: "
    "--clean --noplugin --headless --embed --listen= --startuptime= --remote "
    "--remote-silent --not-a-term --ttyfail --version --help",
    exhaustive=True,
)


def vim(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``vim -c CMD``, ``--cmd CMD``, ``+CMD``, ``-S FILE``, ``nvim -l SCRIPT``."""
    for k, a in enumerate(args):
        v = a.value
        nxt = args[k + 1] if k + 1 < len(args) else None
        word: Arg | None = None
        if v in ("-c", "--cmd") and nxt is not None:
            word = nxt
        elif v is not None and v.startswith("+") and len(v) > 1 and not v[1:].isdigit():
            word = Arg.lit(v[1:].lstrip("/") if v[1] == "/" else v[1:])
            if v[1] == "/":
                continue
        elif v in ("-S", "-l", "-u") and nxt is not None and nxt.value not in ("NONE", "NORC"):
            if nxt.value is not None and ana.written_file(nxt.value) is not False:
                ana.unknown(
                    f"runs `{nxt.value}`, a Vim or Lua script this command writes", ctx.text
                )
        elif v is None and a.prefix.startswith(("+", "-c")):
            word = a
        if word is not None:
            if word.value is None:
                ana.unknown(f"runs Vim commands only known at run time (`{word.text}`)", ctx.text)
            else:
                ex_commands(ana, word.value, ctx)
    return None


_SED_ADDRESS = re.compile(r"(?:\d+|\$|/[^/\n]*/)?(?:,(?:\d+|\$|/[^/\n]*/))?\s*!?\s*")


def _sed_e(ana: Walker, command: str, script: str, ctx: Ctx) -> None:
    if not command:
        ana.unknown("runs the line sed reads as a shell command (`e`)", ctx.text)
        return
    start = script.find(command)
    ana.source(script[start:].split("\n")[0] if start >= 0 else command, ctx.depth + 1, ctx=ctx)


def sed(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """GNU sed's ``e COMMAND`` and the ``e`` flag of ``s///e`` run shell commands."""
    got = read(
        args,
        opts(
            "-efl: -nrEsuzi:: --expression= --file= --line-length= "
            "--in-place[=] --null-data --posix --regexp-extended --separate "
            "--sandbox --debug --quiet --silent --unbuffered"
        ),
    )
    scripts = got.values("e", "expression") or got.operands[:1]
    if got.has("sandbox"):
        return None
    for word in scripts:
        if word.value is None:
            continue  # a script only known at run time; writes stay unpaused
        if len(word.value) > MAX_CODE_CHARS:
            ana.unknown("runs a sed script longer than the checker reads", ctx.text)
            continue
        text = re.sub(r"\\.", "xx", word.value)
        for m in re.finditer(
            r"(?<![A-Za-z_\\])s(.)(?:(?!\1).)*\1(?:(?!\1).)*\1([a-zA-Z0-9]*)", text
        ):
            if "e" in m.group(2):
                ana.unknown("runs the text sed edits as a shell command (`s///e`)", ctx.text)
        stripped = re.sub(
            r"(?<![A-Za-z_\\])s(.)(?:(?!\1).)*\1(?:(?!\1).)*\1[a-zA-Z0-9]*", ";", text
        )
        for line in stripped.split("\n"):
            for command in re.split(r"[;{}]", line):
                # The command after its address. Text commands (a, i, c, r, w …) take the rest
                # of the line as text; `e CMD` runs the rest of the line, `e` the line read.
                body = _SED_ADDRESS.sub("", command.strip(), count=1)
                if body[:1] in ("a", "i", "c", "r", "R", "w", "W", "b", "t", "T", ":"):
                    break
                if body == "e" or body.startswith(("e ", "e\t")):
                    _sed_e(ana, body[1:].strip(), word.value, ctx)
                    break
    return None


def less(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``less +CMD``: the commands less runs first; ``!CMD`` runs CMD in a shell and ``|mCMD``
    pipes to it (``+!rm x``, ``++!rm x``)."""
    for a in args:
        text = a.value if a.value is not None else a.prefix
        if not text.startswith("+") or a.value == "--":
            continue
        command = text.lstrip("+")
        if not command.startswith(("!", "|")):
            continue
        if a.value is None:
            ana.unknown(f"runs less commands only known at run time (`{a.text}`)", ctx.text)
            continue
        code = command[1:] if command[0] == "!" else command[2:]
        if code.strip():
            ana.source(code, ctx.depth + 1, ctx=ctx)
        else:
            ana.unknown("runs the last shell command less ran (`!`)", ctx.text)
    return None


def gdb(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``gdb --args PROGRAM ARGS`` runs PROGRAM; ``-ex 'shell CMD'``/``-ex '!CMD'`` run CMD."""
    for word in values_of(args, _GDB_COMMANDS):
        if word.value is None:
            ana.unknown(f"runs debugger commands only known at run time (`{word.text}`)", ctx.text)
            continue
        m = re.match(r"\s*(?:shell|!|platform\s+shell|pipe\s+[^|]*\|)\s*(.*)", word.value, re.S)
        if m:
            ana.source(m.group(1), ctx.depth + 1, ctx=ctx)
        elif re.match(r"\s*(?:python|py|python-interactive|pi)\s+(.*)", word.value, re.S):
            judge(ana, word.value.split(None, 1)[1] if " " in word.value else "", PYTHON, ctx)
        elif re.match(r"\s*(?:script|command\s+script)\b", word.value):
            ana.unknown(f"runs debugger scripts (`{word.value[:60]}`)", ctx.text)
    for k, a in enumerate(args):
        if a.value in ("--args", "-args", "--"):
            return args[k + 1 :] or None  # gdb --args PROGRAM ARGS, lldb -- PROGRAM ARGS
    return None


_GDB_COMMANDS = (
    "-ex --ex -iex --iex -eval-command --eval-command -o --one-line -O --source-before-file"
)


def zip_(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``zip -T -TT CMD``: CMD tests the archive."""
    for word in values_of(args, "-TT --unzip-command"):
        code = Arg.lit(word.value.replace("{}", '"$archive"')) if word.value else word
        ana.code(code, ctx, "shell code")
    return None


_TCL_COMMAND = re.compile(r"(?:^|[\[;\n{])\s*(exec|spawn|open|file\s+delete)\s+([^\]\n;]*)")


def tcl(ana: Walker, text: str, ctx: Ctx) -> None:
    """Tcl and expect: ``exec``/``spawn`` run their words, ``open "|cmd"`` a pipe, ``file
    delete`` deletes."""
    for m in _TCL_COMMAND.finditer(text):
        verb, rest = m.group(1), m.group(2).strip()
        words = [w.strip('{}"') for w in rest.split()]
        if verb.startswith("file"):
            paths = tuple(w for w in words if not w.startswith("-"))
            dynamic = any("$" in w or "[" in w for w in paths)
            what = "deletes files or directories (`file delete`, Tcl)"
            ctx.hits.append(Hit(what, REVERSIBLE, None if dynamic else paths))
        elif verb == "open":
            if rest.lstrip('{"').startswith("|"):
                shell(ana, None if "$" in rest else rest.strip('{}" ')[1:], rest, TCL, ctx)
        elif any("$" in w or "[" in w for w in words):
            ana.unknown(
                f"runs a program only known at run time (`{verb} {rest[:40]}`, Tcl)", ctx.text
            )
        else:
            while words and words[0].startswith("-") and words[0] != "--":
                words = words[1:]
            words = words[1:] if words[:1] == ["--"] else words
            if words:
                ana.chain([Arg.lit(w) for w in words], ctx.sub(" ".join(words)))


TCL = Lang("Tcl", {})
_ELISP_CALL = re.compile(
    r"\((shell-command(?:-to-string)?|async-shell-command|call-process-shell-command|"
    r"start-process-shell-command|call-process|process-lines|start-process|start-file-process|"
    r"make-process|delete-file|delete-directory)\b((?:[^()\"]|\"(?:[^\"\\]|\\.)*\"|\([^()]*\))*)\)"
)
_ELISP_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')


def elisp(ana: Walker, text: str, ctx: Ctx) -> None:
    """Emacs Lisp: shell commands, processes and deletes with literal strings."""
    for m in _ELISP_CALL.finditer(text):
        name, body = m.group(1), m.group(2)
        strings = [unescape(s) for s in _ELISP_STRING.findall(body)]
        dynamic = bool(re.sub(r'"(?:[^"\\]|\\.)*"|\bnil\b|\bt\b|:\w+|\d+|[\s()\']', "", body))
        if name.startswith("delete-"):
            paths = None if dynamic else tuple(strings[:1])
            ctx.hits.append(
                Hit(f"deletes files or directories (`{name}`, Emacs Lisp)", REVERSIBLE, paths)
            )
        elif not strings or (dynamic and "shell" in name):
            ana.unknown(f"starts a program only known at run time (`{name}`, Emacs Lisp)", ctx.text)
        elif "shell" in name:
            shell(ana, strings[0], name, TCL, ctx)
        else:
            argv = strings[1:] if name.startswith("start-") else strings
            if name == "make-process":
                argv = strings[1:] if ":name" in body else strings
            if argv:
                ana.chain([Arg.lit(w) for w in argv], ctx.sub(" ".join(argv)))


def expect(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``expect -c CMDS`` / ``expect SCRIPT`` / ``tclsh SCRIPT``."""
    got = read(args, opts("-cf: -bdDiNnv"), permute=False)
    codes = got.values("c")
    for word in codes:
        if word.value is None:
            ana.unknown(f"runs Tcl code only known at run time (`{word.text}`)", ctx.text)
        else:
            tcl(ana, word.value, ctx)
    for word in [*got.values("f"), *args[got.first : got.first + 1]]:
        text = ana.script_text(word, ctx) if word.value not in STDIN_FILES else None
        if text is not None:
            tcl(ana, text, ctx)
    if not codes and got.first >= len(args):
        text = ana.input_of(ctx)
        if isinstance(text, str) and not text.startswith("\0"):
            tcl(ana, text, ctx)
    return None


def emacs(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``emacs --eval EXPR``, ``-l FILE``, ``--script FILE``."""
    words = values_of(args, "--eval -eval")
    for path in values_of(args, "-l --load --script -scriptload"):
        text = ana.script_text(path, ctx)
        words.extend([Arg.lit(text)] if text is not None else [])
    for word in words:
        if word.value is None:
            ana.unknown(f"evaluates Lisp only known at run time (`{word.text}`)", ctx.text)
        else:
            elisp(ana, word.value, ctx)
    return None


SQL_CLIENTS = (
    "sqlite3",
    "psql",
    "mysql",
    "mariadb",
    "duckdb",
    "cqlsh",
    "clickhouse-client",
    "mycli",
    "litecli",
    "pgcli",
    "usql",
    "sqlcmd",
    "snowsql",
    "trino",
    "beeline",
    "hive",
    "spark-sql",
    "cockroach",
    "bq",
)
_SQL_SHELL = re.compile(
    r"(?m)^\s*(?:\\!|\.shell|\.system|system)\s+(.*)$"
    r"|^\s*(?:\\[og]|\.once|\.output|\.import|\.read)\s+['\"]?\|([^'\"\n]*)"
    r"|\bprogram\s+'([^']*)'",
    re.IGNORECASE,
)


# Statements that delete or change stored data; string literals and comments are taken out first,
# and a foreign key's `ON DELETE|UPDATE` action is not one.
_SQL_NOISE = re.compile(
    r"'(?:[^']|'')*'|--[^\n]*|/\*.*?\*/|\bon\s+(?:delete|update)\b", re.I | re.S
)
_SQL_DESTROYS = re.compile(r"\b(?:drop|truncate|delete)\b|\bupdate\s+[^\s;(]+\s+set\b", re.I)
SQL_DATA = "deletes or changes data in the database (`DROP`, `TRUNCATE`, `DELETE`, `UPDATE`)"
# Clients whose database is a local file named by their first operand: undo restores it.
_SQL_FILE_DB = {
    "litecli": "-e --execute -l --logfile --liteclirc",
    "sqlite3": "-cmd -init -separator -newline -nullvalue -vfs -mmap",
    "duckdb": "-c -s -cmd -init -separator -newline -nullvalue",
}
# Each client's options whose value is SQL (`psql -q` is quiet, `mysql -s` silent: not SQL).
_SQL_TEXT_OPTIONS = {
    "psql": "-c --command",
    "pgcli": "-c --command",
    "usql": "-c --command",
    "sqlite3": "-cmd",
    "duckdb": "-c -s -cmd",
    "clickhouse-client": "-q --query",
    "snowsql": "-q --query",
    "sqlcmd": "-Q -q",
    "trino": "--execute",
    "bq": "",
}
_SQL_EXECUTE = "-e --execute"  # mysql, mariadb, mycli, litecli, cqlsh, beeline, hive, cockroach


def _file_db_operands(name: str, args: list[Arg]) -> list[Arg]:
    """The operands of a file-database client (``sqlite3 [options] FILE [SQL…]``), past the
    values of its options."""
    valued = _SQL_FILE_DB[name].split()
    out: list[Arg] = []
    skip = False
    for a in args:
        v = a.value if a.value is not None else a.prefix
        if skip:
            skip = False
        elif v.startswith("-"):
            skip = v in valued
        else:
            out.append(a)
    return out


def _sql_hit(name: str, args: list[Arg]) -> Hit | None:
    """The hit for destructive SQL: reversible for a file database the line names."""
    if name not in _SQL_FILE_DB:
        return Hit(SQL_DATA)
    ops = _file_db_operands(name, args)
    if not ops or (
        ops[0].value is not None and (" " in ops[0].value or ops[0].value == ":memory:")
    ):
        return None  # no database file: an in-memory one
    return Hit(SQL_DATA, REVERSIBLE, operand_paths(ops[:1]))


def sql_client(name: str) -> Handler:
    """``sqlite3 … '.shell CMD'``, ``psql -c '\\! CMD'``, ``mysql -e 'system CMD'``: the shell
    escapes of SQL clients run commands (from options, operands, files the line writes or input).
    Statements that delete or change data (``DROP``, ``TRUNCATE``, ``DELETE``, ``UPDATE``) pause."""

    def runner(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
        options = _SQL_TEXT_OPTIONS.get(name, _SQL_EXECUTE)
        texts = values_of(args, options)
        for path in values_of(args, "-f --file -init"):
            text = ana.script_text(path, ctx)
            texts.extend([Arg.lit(text)] if text is not None else [])
        texts.extend(a for k, a in enumerate(args) if k and a.value and " " in a.value)
        # `-e"DROP …"`, `-cDROP`: a short option with its text attached.
        texts.extend(
            Arg.lit(a.value[2:])
            for a in args
            if a.value and a.value[:2] in options.split() and len(a.value) > 2 and a.value != "-cmd"
        )
        if name in _SQL_FILE_DB:  # after the database file, each operand is SQL
            texts.extend(a for a in _file_db_operands(name, args)[1:] if a.value is None)
        stdin = ana.input_of(ctx)
        if isinstance(stdin, str) and not stdin.startswith("\0"):
            texts.append(Arg.lit(stdin))
        destroys = False
        for word in texts:
            if word.value is None:
                ana.unknown(f"runs SQL only known at run time (`{word.text}`)", ctx.text)
                continue
            for m in _SQL_SHELL.finditer(word.value):
                command = next(g for g in m.groups() if g is not None)
                ana.source(command.rstrip(";"), ctx.depth + 1, ctx=ctx)
            destroys = destroys or bool(_SQL_DESTROYS.search(_SQL_NOISE.sub(" ", word.value)))
        hit = _sql_hit(name, args) if destroys else None
        if hit is not None:
            ctx.hits.append(hit)
        return None

    return runner


_MONGO_DESTROYS = re.compile(
    r"\.\s*(?:drop\w*|delete\w*|remove\w*|findOneAndDelete|findAndModify|update\w*|replace\w*|"
    r"bulkWrite|renameCollection|shutdown\w*|adminCommand|runCommand|eval)\s*\("
)


def mongo_shell(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``mongosh --eval CODE`` (or code on its input): calls that drop, delete or change data, or
    run server commands, pause; code only known at run time pauses."""
    texts = values_of(args, "--eval -eval")
    for path in values_of(args, "-f --file"):
        text = ana.script_text(path, ctx)
        texts.append(Arg.lit(text) if text is not None else path)
    stdin = ana.input_of(ctx)
    if isinstance(stdin, str) and not stdin.startswith("\0"):
        texts.append(Arg.lit(stdin))
    for word in texts:
        if word.value is None:
            ana.unknown(f"runs MongoDB code only known at run time (`{word.text}`)", ctx.text)
        elif _MONGO_DESTROYS.search(word.value):
            ctx.hits.append(Hit("deletes or changes data in the database, or runs server commands"))
            break
    return None


def written(ana: Walker, under: str, *patterns: str) -> list[str]:
    """Files this line writes under a directory whose names match glob ``patterns``."""
    prefix = "" if under in (".", "") else under.rstrip("/") + "/"
    return [
        path
        for path in ana.written
        if path.startswith(prefix)
        and any(fnmatch.fnmatchcase(path.rsplit("/", 1)[-1], p) for p in patterns)
    ]


def _judge_files(ana: Walker, paths: list[str], lang: Lang, ctx: Ctx) -> None:
    for path in paths:
        text = ana.script_text(Arg.lit(path), ctx)
        if text is not None:
            judge(ana, text, lang, ctx)


_TEST_VERBS = frozenset(wordlist("run watch dev related bench"))


def test_runner(lang: Lang, *patterns: str) -> Handler:
    """A test runner (``pytest``, ``jest``): the test files this line writes are code it runs."""

    def runner(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
        ops = [
            a
            for a in args
            if a.value is not None and not a.value.startswith("-") and a.value not in _TEST_VERBS
        ]
        for op in ops or [Arg.lit(".")]:
            path = (op.value or ".").split("::", 1)[0]
            if re.search(r"[^/.]\.\w+$", path):
                _judge_files(ana, [path], lang, ctx)
            else:
                _judge_files(ana, written(ana, path, *patterns), lang, ctx)
        return None

    return runner


PYTEST = test_runner(PYTHON, "test_*.py", "*_test.py", "conftest.py")
JS_TESTS = test_runner(JAVASCRIPT, "*.test.*", "*.spec.*", "*.test.js", "test*.js")


def go(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``go run FILE.go|DIR``, ``go test``: the Go files this line writes."""
    sub = args[0].value if args else None
    if sub not in ("run", "test", "generate"):
        return None
    ops = [a.value or "" for a in args[1:] if not (a.value or "-").startswith("-")]
    for op in ops or ["."]:
        files = [op] if op.endswith(".go") else written(ana, op.rstrip("./") or ".", "*.go")
        _judge_files(ana, files, GO, ctx)
    return None


RUNNERS: dict[str, Callable[[Walker, list[Arg], Ctx], list[Arg] | None]] = {
    **INTERPRETERS,
    **dict.fromkeys(("vim", "vi", "nvim", "view", "ex", "gvim", "vimdiff", "rvim", "evim"), vim),
    "sed": sed,
    "gsed": sed,
    "gdb": gdb,
    "less": less,
    "lldb": gdb,
    "zip": zip_,
    "go": go,
    "pytest": PYTEST,
    "py.test": PYTEST,
    **dict.fromkeys(("jest", "vitest", "mocha"), JS_TESTS),
    **dict.fromkeys(("expect", "tclsh", "wish"), expect),
    **dict.fromkeys(("emacs", "emacsclient"), emacs),
    **{name: sql_client(name) for name in SQL_CLIENTS},
    **dict.fromkeys(("mongosh", "mongo"), mongo_shell),
}
