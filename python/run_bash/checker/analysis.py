"""Seeing through wrappers, nested shells and the script's own data: which commands run. Pure.

:class:`Analysis` walks a parsed script. For each simple command it records the command, reads
its words once against its row of the command table (:mod:`.table`) and lets the row's runners
(:mod:`.runners`) say what it runs: the wrapped command (judged and followed in turn), code given
as text (``bash -c STR``, ``eval``, heredocs, pipes and process substitutions fed to a shell,
``trap``, options that hold commands, a script or task file the same line writes and then runs).

It also follows what the script does to its own data, because bash does:

* literal assignments (``f=-rf; rm "$f" x``) are propagated into later words; a quoted expansion
  the script sets to something unknown counts as a possible option where options are written;
  ``$HOME`` is ``~`` and ``$PWD`` the directory the command runs in, as far as ``cd`` tells;
* strings that hold ``$(``, a backtick or ``<(`` are evaluated as code when the script also has a
  place where bash evaluates a variable's value (arithmetic, ``${!v}``, ``printf -v``, …);
* commands rebound by ``alias``, ``hash -p`` or ``BASH_CMDS`` are judged as their targets;
* files it writes (also through ``exec 3>f`` and ``>&3``) and git configuration it sets.

Whatever cannot be determined statically is recorded as unknown, so the checker can fail closed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import count
from typing import Any

from run_bash.checker import printed
from run_bash.checker.builtins import BUILTINS
from run_bash.checker.model import (
    NO_INPUT,
    SAFE,
    SHELLS,
    STDIN_FILES,
    UNKNOWN,
    Ctx,
    Scope,
    Unknown,
    in_dir,
)
from run_bash.checker.parser import expansions, parse, words_of
from run_bash.checker.reading import Reading, read_row
from run_bash.checker.runners import run
from run_bash.checker.syntax import (
    Cmd,
    Compound,
    ForVar,
    Item,
    Problem,
    Redir,
    Sink,
    Unparsable,
    Word,
    Words,
)
from run_bash.checker.table import INIT_SCRIPT_DIRS, lookup_names, row_for
from run_bash.checker.tasks import project_files
from run_bash.checker.words import (
    DYN,
    LIT,
    OPAQUE,
    RAW,
    SPLIT,
    Arg,
    Part,
    Resolver,
    command_name,
    decode_echo,
    expand,
    normalize_path,
    var_name,
    wordlist,
)

MAX_DEPTH = 8
MAX_CHAIN = 32
MAX_CODE = 400_000  # characters of nested code analysed in one check (beyond: fail closed)
MAX_CARRIERS = 64
CODE_MARKERS = ("$(", "`", "<(", ">(")
# Variables whose value a program runs as a shell command.
CODE_VARIABLES = frozenset(
    wordlist(
        "PROMPT_COMMAND GIT_SSH_COMMAND GIT_SSH GIT_PAGER PAGER MANPAGER GIT_EDITOR EDITOR VISUAL "
        "GIT_SEQUENCE_EDITOR GIT_EXTERNAL_DIFF GIT_ASKPASS SSH_ASKPASS SUDO_ASKPASS GIT_PROXY_COMMAND "
        "SYSTEMD_PAGER BROWSER RSYNC_RSH RSYNC_CONNECT_PROG CVS_RSH FZF_DEFAULT_COMMAND"
    )
)
# less runs LESSOPEN/LESSCLOSE as a shell command: `|cmd %s` (a leading `|`, `||` or `-`).
LESS_VARIABLES = frozenset({"LESSOPEN", "LESSCLOSE"})
# Prompt strings: bash expands `$(…)` in them when it shows them (PS4 with `set -x`).
PROMPT_VARIABLES = frozenset({"PS0", "PS1", "PS2", "PS3", "PS4"})
# Files a shell sources on start-up.
STARTUP_VARIABLES = frozenset({"BASH_ENV", "ENV"})
# What the dynamic loader reads: code a program loads before its own (any file, as a changed
# PATH is for the program's name).
LOADER_VARIABLES = frozenset({"LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT"})
# Options other programs read from the environment that may hold code-running options.
OPTION_VARIABLES = {"TAR_OPTIONS": "tar"}
_SPECIAL = (
    CODE_VARIABLES
    | LESS_VARIABLES
    | PROMPT_VARIABLES
    | STARTUP_VARIABLES
    | set(OPTION_VARIABLES)
    | LOADER_VARIABLES
    | {"BASH_CMDS", "BASH_ALIASES", "PATH"}
)
_FD_PATH = re.compile(r"/(?:dev/fd|proc/(?:self|\d+)/fd)/\d+")
_SHEBANG = re.compile(r"#![ \t]*(\S+)(?:[ \t]+(\S+))?")
_PATH_PRODUCERS = re.compile(r"\s*(?:mktemp|pwd|realpath|readlink\s+-[a-z]*f)\b[^;&|`$()]*\s*$")
_LOCATE = re.compile(r"\s*(?:which|command\s+-v|type\s+-P)\s+([A-Za-z0-9_.+-]+)\s*")
_PRINTERS = re.compile(r"\s*(?:echo|printf|cat|base64|xxd|rev|tr|true|:)\b")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# `${NAME…}` with an operator, a subscript or `!`: (indirect, name, subscript, operator, word).
_PARAM_OPERATOR = re.compile(
    r"\$\{(!?)([A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!-])(\[[^]]*\])?"
    r"(:?[-=?+]|##?|%%?|//?|/[#%]|\^\^?|,,?|@|:)?(.*)\}",
    re.S,
)
# `${f@Q}` quotes the value (it starts with a quote); `${f@U}`, `${f@u}`, `${f@L}` change its
# case: none of them gives an option the value is not.
_SAME_OPERAND = frozenset("QUuL")
_SUBSCRIPTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\[([^\]]*)\]\+?=")
_DATA_BUILTINS = frozenset(
    wordlist(
        "alias hash declare typeset local export readonly read mapfile readarray getopts printf set"
    )
)
_WRITERS = frozenset(wordlist("tee cp mv install ln rsync scp curl wget dd sed sponge perl"))
_CD = frozenset({"cd", "pushd", "popd"})


@dataclass(slots=True)
class Found:
    """A command that runs: ``argv[0]`` is its name (basename), ``text`` the source running it.

    ``reading`` is its words read against its row of the table (None without a row); ``cwd`` the
    directory it runs in, relative to where the line started (None when unknown); ``elsewhere``:
    it runs on another machine or root, where undo does not reach; ``home``: the line sets
    ``HOME`` (for it or anywhere), so a ``~`` it is given is not the user's home.
    """

    name: str
    argv: list[Arg]
    text: str
    reading: Reading | None = None
    cwd: str | None = "."
    elsewhere: bool = False
    home: bool = False


@dataclass
class Analysis:
    """Every command found in a script, in source order, plus unknowns (for failing closed)."""

    events: list[Found | Unknown] = field(default_factory=list)
    variables: dict[str, list[Any]] = field(default_factory=dict)
    aliases: dict[str, str | None] = field(default_factory=dict)
    hashed: dict[str, str | None] = field(default_factory=dict)
    written: dict[str, list[object]] = field(default_factory=dict)
    git_config: list[tuple[str, Arg]] = field(default_factory=list)
    sinks: list[str] = field(default_factory=list)
    carriers: list[str] = field(default_factory=list)
    ifs_changed: bool = False
    # PATH or the loader's variables set: a command name may then run (or load) a file this
    # line wrote
    path_changed: bool = False
    unbounded: list[str] = field(default_factory=list)  # writes to files it cannot name
    devices: list[str] = field(default_factory=list)  # `> /dev/sda`: devices it writes
    followed: set[str] = field(default_factory=set)  # written files whose content was read
    budget: int = MAX_CODE
    _carrier_set: set[str] = field(default_factory=set)
    _reading: set[str] = field(default_factory=set)
    _values: dict[str, frozenset[str]] = field(default_factory=dict)
    _resolving: set[str] = field(default_factory=set)
    _bare_refs: set[str] = field(default_factory=set)  # `declare -n r`: r=NAME names its target
    _any_target: bool = False  # such a nameref given a target only known at run time
    _expanding_alias: set[tuple[str, str]] = field(default_factory=set)
    _cwd: dict[tuple[int, ...], str | None] = field(default_factory=dict)
    _away: set[tuple[int, ...]] = field(default_factory=set)  # scopes run where undo cannot reach
    _fed: set[tuple[int, ...]] = field(default_factory=set)  # scopes code started (Ctx.fed)
    _fds: dict[str, str] = field(default_factory=dict)
    _ids: Any = field(default_factory=lambda: count(1_000_000))

    # -- entry points -----------------------------------------------------------------------------

    def run(self, src: str) -> None:
        """Analyse a whole command line."""
        self.source(src, 0, Scope())
        self._evaluate_carriers()

    def unknown(self, reason: str, text: str) -> None:
        """Record a place where what runs cannot be determined."""
        self.events.append(Unknown(reason, text))

    def source(
        self,
        src: str,
        depth: int,
        scope: Scope | None = None,
        *,
        ctx: Ctx | None = None,
        same_shell: bool = False,
    ) -> None:
        """Analyse a script; code a command runs (``ctx``) starts in its directory, in a
        process of its own unless ``same_shell`` (``eval``, ``source``)."""
        scope = scope or Scope()
        if depth > MAX_DEPTH:
            self.unknown("nests shells too deeply to analyse", src.strip())
            return
        self.budget -= len(src)
        if self.budget < 0:
            self.unknown("holds too much code to analyse", src.strip()[:200])
            return
        items = parse(src)
        if ctx is not None:
            base = ctx.cmd.scope if same_shell else (*ctx.cmd.scope, next(self._ids))
            if not same_shell or ctx.cwd != self.cwd_of(base):
                self._cwd[base] = ctx.cwd
            if ctx.elsewhere:
                self._away.add(base)
            if ctx.fed:
                self._fed.add(base)
            for item in items:
                if isinstance(item, Cmd):
                    item.scope = (*base, *item.scope)
        self._prepass(items, scope)
        for item in items:
            if isinstance(item, Cmd):
                self.command(item, depth, scope)
            elif isinstance(item, Problem):
                self.events.append(Unknown(_problem_reason(item.reason), item.text, True))
            elif isinstance(item, Sink):
                self.sinks.append(item.text)
            elif isinstance(item, Words):
                for word in item.words:
                    self._carriers_of(word)
            elif isinstance(item, ForVar):
                for word in item.words or ():
                    self._carriers_of(word)

    def code(self, word: Arg, ctx: Ctx, what: str, scope: Scope | None = None) -> None:
        """Analyse code passed as one word (``sh -c WORD``); unknown when it is not static."""
        if word.value is None:
            self.unknown(f"runs {what} only known at run time (`{word.text}`)", ctx.text)
        else:
            self.source(word.value, ctx.depth + 1, scope or ctx.scope, ctx=ctx)

    # -- the directory a command runs in ----------------------------------------------------------

    def cwd_of(self, scope: tuple[int, ...]) -> str | None:
        """Where a command in ``scope`` runs: the last ``cd`` in it or in a scope around it."""
        for k in range(len(scope), -1, -1):
            key = scope[:k]
            if key in self._cwd:
                return self._cwd[key]
        return "."

    def cd_targets(self) -> list[str | None]:
        """Every directory the line's ``cd`` went to (None: only known at run time)."""
        return list(self._cwd.values())

    def _cd(self, name: str, args: list[Arg], ctx: Ctx) -> None:
        """``cd DIR``/``pushd DIR``/``popd``: later commands of this scope run elsewhere."""
        cmd = ctx.cmd
        ops = [a for a in args if a.value is None or not a.value.startswith("-") or a.value == "-"]
        target: str | None = None
        if name == "popd" or cmd.looped or cmd.in_func or cmd.piped or cmd.pipe_from:
            target = None  # a loop, function or pipeline: where it ends up is not followed
        elif not ops:
            target = "~"
        elif ops[0].value is not None and ops[0].value != "-":
            target = in_dir(ctx.cwd, ops[0].value)
            head = ops[0].value.split("/", 1)[0]
            searched = head not in ("", ".", "..") and not head.startswith("~")
            if searched and ("CDPATH" in ctx.env or self.values("CDPATH") is not None):
                target = None  # `cd NAME` looks in the directories of CDPATH first
        self._cwd[cmd.scope] = target

    # -- the script's data ------------------------------------------------------------------------

    def _prepass(self, items: list[Item], scope: Scope) -> None:
        """Collect variables, rebound names and written files before judging commands."""
        for item in items:
            if isinstance(item, Cmd):
                for word in item.assigns:
                    self._assignment_value(word, scope, item)
                    if word.assign and word.assign[0] in ("BASH_CMDS", "BASH_ALIASES"):
                        self.rebind_word(word.assign[0], word, Ctx(item, 0, item.text, scope))
                if item.words:
                    self._builtin_data(item, scope)
                for redir in item.redirs:
                    self._redirected(item, redir, scope)
            elif isinstance(item, ForVar):
                if item.words is None:
                    self._add_value(item.name, UNKNOWN)
                for w in item.words or []:
                    for a in self.expand_word(w, scope, item.in_func):
                        if a.value is not None and not a.glob:
                            self._add_value(item.name, a.value)
                        elif a.glob or (a.prefix and not a.prefix.startswith("-")):
                            self._add_value(item.name, SAFE)
                        else:
                            self._add_value(item.name, UNKNOWN)
            elif isinstance(item, Compound):
                for redir in item.redirs:
                    if redir.writes_file:
                        span = item.span
                        self._write(redir, scope, lambda s=span: self.printed_source(s.text, scope))

    def _redirected(self, cmd: Cmd, redir: Redir, scope: Scope) -> None:
        """Files a command writes: ``> f``, and ``>&3`` after ``exec 3>f``."""
        if redir.writes_file:
            path = self._write(redir, scope, lambda c=cmd: printed.printed(self, c, scope))
            if path is not None and redir.fd not in ("", "1", "2"):
                self._fds[redir.fd] = path
        elif redir.op in (">", ">>", ">|") and redir.target is not None and redir.fd:
            path = self._write(redir, scope, lambda: "")  # `exec 3>f`: opens f on fd 3
            if path is not None:
                self._fds[redir.fd] = path
        elif redir.op == ">&" and redir.fd in ("", "1"):
            fd = redir.dup or (redir.target.text.strip("${}") if redir.target else "")
            fd = next((k for k in self._fds if k.strip("{}") == fd), fd)
            if fd in self._fds:
                self._store(self._fds[fd], lambda c=cmd: printed.printed(self, c, scope), True)

    def _add_value(self, name: str, value: Any) -> None:
        self.variables.setdefault(name, []).append(value)
        self._values.clear()
        if name == "IFS":
            self.ifs_changed = True

    def _assignment_value(self, word: Word, scope: Scope, cmd: Cmd) -> None:
        assert word.assign is not None
        name, sub, append = word.assign
        if not name:
            return
        if word.elements is not None or sub is not None:
            self._add_value(name, UNKNOWN)
            return
        parts = word.parts[word.vstart :]
        if name in self._bare_refs:
            # `declare -n r; r=c`: r now stands for c, and later `r=v` sets c.
            target = self._assigned(parts, scope, cmd.in_func)
            if _IDENT.fullmatch(target):
                self._add_value(target, UNKNOWN)
            else:
                self._any_target = True
                self._values.clear()
        self._add_value(name, (parts, scope, cmd.in_func, append))

    def values(self, name: str) -> frozenset[str] | None:
        """The values the script may give ``name`` (None when it never sets it)."""
        sources = self.variables.get(name)
        if self._any_target:
            return frozenset({UNKNOWN})
        if sources is None:
            return None
        cached = self._values.get(name)
        if cached is not None:
            return cached
        if name in self._resolving:
            return frozenset({UNKNOWN})
        self._resolving.add(name)
        out: set[str] = set()
        last: set[str] = set()  # the values before an append (`v+=x`)
        try:
            for src in sources:
                if isinstance(src, str):
                    out.add(src)
                    last = {src}
                    continue
                parts, scope, in_func, append = src
                value = self._assigned(parts, scope, in_func)
                if append:
                    known = not value.startswith("\0") and last
                    if known and len(last) <= 16 and not any(v.startswith("\0") for v in last):
                        last = {v + value for v in last}
                    else:
                        last = {UNKNOWN}
                    out |= last
                else:
                    out.add(value)
                    last = {value}
        finally:
            self._resolving.discard(name)
        result = frozenset(out)
        self._values[name] = result
        return result

    def _assigned(self, parts: list[Part], scope: Scope, in_func: bool) -> str:
        """The value one assignment gives (UNKNOWN / SAFE when it is not static)."""
        if _path_producer(parts):
            return SAFE
        args = expand("", parts, self.resolver(scope, in_func))
        if len(args) == 1 and args[0].value is not None:
            return args[0].value
        if not args:
            return ""
        if args[0].prefix and not args[0].prefix.startswith("-"):
            return SAFE
        return UNKNOWN

    def resolver(self, scope: Scope, in_func: bool, cwd: str | None = ".") -> Resolver:
        """The function that gives expansions the values the script sets (see words.expand)."""

        def resolve(text: str) -> object:
            name = var_name(text)
            if name is None:
                if text.startswith("$(") and not text.startswith("$(("):
                    return self._substitution_value(text[2:-1], cwd)
                return self._operator_value(text)
            if name.isdigit():
                if name == "0":
                    return None
                if in_func:
                    return OPAQUE
                if scope.positional is None:
                    return None
                k = int(name)
                if k > len(scope.positional):
                    return ""
                arg = scope.positional[k - 1]
                return arg.value if arg.value is not None else OPAQUE
            vals = self.values(name)
            if vals is None:
                # The home directory is `~` however it is written; PWD is where it runs.
                return "~" if name == "HOME" else cwd if name == "PWD" else None
            if len(vals) == 1:
                (only,) = vals
                if not only.startswith("\0"):
                    return OPAQUE if self.ifs_changed else only
            if UNKNOWN in vals or any(v.startswith("-") for v in vals):
                return OPAQUE
            return None

        return resolve

    def _operator_value(self, text: str) -> object:
        """``${f:--rf}``, ``${f/a/-b}``, ``${!g}``, ``${a[0]}``: OPAQUE when the value could be
        one the script gives or an option; None (left as it stands) otherwise."""
        m = _PARAM_OPERATOR.fullmatch(text)
        if m is None:
            return None
        indirect, name, subscript, operator, word = m.groups()
        if indirect or re.search(r"[-$`]", (subscript or "") + word):
            return OPAQUE  # through another variable, or a word that may be an option
        if not name.isidentifier():
            # A positional or special parameter (`${1:-…}`, `${1@L}`): its value is the
            # caller's, which the operator only makes harder to read.
            return OPAQUE if operator else None
        vals = self.values(name)
        if vals is None:
            return None  # as `"$f"` for a variable the script does not set
        if operator == "@" and word not in _SAME_OPERAND:
            return OPAQUE  # `${f@E}`, `${f@P}` decode escapes; `${f@A}` gives `declare -x f=…`
        # A value of the script's own: unknown, or one that an operator may turn into an option
        # (`f=a-b; "${f#a}"`; a pattern taken off the front of a path, `${f#build/}`).
        trims = (operator or "")[:1] in ("#", "/", ":") and operator not in (":-", ":=", ":?", ":+")
        if UNKNOWN in vals or any("-" in v or (trims and v == SAFE) for v in vals):
            return OPAQUE
        return None

    def environment(self, name: str, value: Arg) -> None:
        """A variable a wrapper puts in the environment of the command it runs (``env m=v``)."""
        self._add_value(name, value.value if value.value is not None else UNKNOWN)

    def _substitution_value(self, body: str, cwd: str | None) -> object:
        """The output of ``$(body)`` when it is a static printer, else None.

        ``$(which NAME)`` and ``$(command -v NAME)`` print where NAME is: a path whose basename
        is NAME, which is all a command word needs. ``$(pwd)`` is where the command runs.
        """
        m = _LOCATE.fullmatch(body)
        if m:
            return "/usr/bin/" + m.group(1)
        if body.strip() == "pwd":
            return cwd
        if not _PRINTERS.match(body):
            return None
        out = self.printed_source(body)
        if out is None or out is NO_INPUT:
            return None
        return out.rstrip("\n")

    def expand_word(self, word: Word, scope: Scope, in_func: bool) -> list[Arg]:
        """The argument words ``word`` becomes, with the script's known values filled in."""
        return expand(word.text, word.parts, self.resolver(scope, in_func))

    def expand_words(self, cmd: Cmd, scope: Scope) -> list[Arg]:
        """The argument words of a simple command."""
        resolve = self.resolver(scope, cmd.in_func, self.cwd_of(cmd.scope))
        return [a for w in cmd.words for a in expand(w.text, w.parts, resolve)]

    # -- builtins that set data -------------------------------------------------------------------

    def _builtin_data(self, cmd: Cmd, scope: Scope) -> None:
        head = cmd.words[0].reserved() or cmd.words[0].text
        if head not in _DATA_BUILTINS and head not in _WRITERS:
            return
        args = self.expand_words(cmd, scope)
        if not args or args[0].value is None:
            return
        name, rest = args[0].value, args[1:]
        if name in _WRITERS:
            self._writer(name, rest, cmd, scope)
        elif name in ("declare", "typeset", "local", "export", "readonly"):
            flags = ""
            for a in rest:
                v = a.value if a.value is not None else a.prefix
                if a.value is not None and v[:1] == "-" and "=" not in v:
                    flags += v[1:]
                # A nameref (`declare -n r=c`) reads and sets the variable it names; `export -n`
                # takes the export away.
                ref = "n" in flags and name != "export"
                var, eq, val = v.partition("=")
                if eq and _IDENT.fullmatch(var):
                    known = a.value is not None and not ref
                    self._add_value(var, val if known else UNKNOWN)
                    if ref and _IDENT.fullmatch(val):
                        self._add_value(val, UNKNOWN)
                elif ref and _IDENT.fullmatch(v):
                    self._add_value(v, UNKNOWN)  # `declare -n r`: names a variable set later
                    self._bare_refs.add(v)
        elif name in ("read", "mapfile", "readarray", "getopts"):
            for a in rest:
                if a.value and _IDENT.fullmatch(a.value):
                    self._add_value(a.value, UNKNOWN)
        elif name == "printf":
            if len(rest) >= 2 and rest[0].value == "-v" and rest[1].value:
                self._add_value(rest[1].value, UNKNOWN)
        elif name == "set":
            if rest and rest[0].value == "--":
                scope.positional = rest[1:]
        elif name in ("alias", "hash"):
            # Rebound names apply to every later use, also inside functions defined earlier.
            BUILTINS[name](self, rest, Ctx(cmd, 0, cmd.text, scope))

    def _writer(self, name: str, args: list[Arg], cmd: Cmd, scope: Scope) -> None:
        """Record files that ``tee``, ``cp``, ``curl -o`` … write (content unknown but tee's)."""
        if name == "tee":
            append = any(x.value in ("-a", "--append") for x in args)
            for a in args:
                if a.value is not None and not a.value.startswith("-"):
                    self._store(a.value, lambda: self.stdin_text(cmd, scope), append)
            return
        targets: list[Arg] = []
        if name in ("cp", "mv", "install", "ln", "rsync", "scp"):
            operands = [a for a in args if a.value is None or not a.value.startswith("-")]
            if len(operands) == 2 and operands[0].value and operands[1].value:
                copied = self.written_file(operands[0].value)
                if isinstance(copied, str):
                    self._store(operands[1].value, copied, False)
                    return
            targets = operands[-1:]
        elif name in ("curl", "wget"):
            named = ("-o", "--output") if name == "curl" else ("-O", "--output-document")
            for k, a in enumerate(args):
                if a.value in named and k + 1 < len(args):
                    targets.append(args[k + 1])
                elif a.value and a.value.startswith(("--output=", "--output-document=")):
                    targets.append(Arg.lit(a.value.split("=", 1)[1]))
            remote = ("-O", "--remote-name", "--remote-name-all", "-J", "--remote-header-name")
            if (name == "wget" and not targets) or (
                name == "curl" and any(a.value in remote for a in args)
            ):
                self.unbounded.append(f"`{name}` saves under a name the server gives")
        elif name == "dd":
            targets = [Arg.lit(a.value[3:]) for a in args if a.value and a.value.startswith("of=")]
        elif name == "sed" and any(
            a.value and a.value.startswith(("-i", "--in-place")) for a in args
        ):
            # The files after its code (the first operand, or `-e CODE`'s).
            targets = [a for a in args if a.value and not a.value.startswith("-")][1:]
        elif name == "sponge" or (
            name == "perl" and any(re.fullmatch(r"-[a-zA-Z]*i.*", a.value or "") for a in args)
        ):
            targets = [a for a in args if a.value and not a.value.startswith("-")]
        for t in targets:
            if t.value is not None:
                self._store(t.value, None, False)

    def _write(self, redir: Redir, scope: Scope, content: Any) -> str | None:
        target = redir.target
        if target is None:
            return None
        args = expand(target.text, target.parts, self.resolver(scope, False))
        if len(args) == 1 and args[0].proc:
            return None  # `> >(cmd)`: a command reads it
        if len(args) != 1 or args[0].value is None:
            self.unbounded.append(f"`> {target.text}` writes a file only known at run time")
            return None
        if args[0].value.startswith("/dev/"):
            self.devices.append(args[0].value)
            return None
        self._store(args[0].value, content, redir.op in (">>", "&>>"))
        return args[0].value

    def _store(self, path: str, content: Any, append: bool) -> None:
        """Record a written file; ``content`` is its text, None, or a function giving it (only
        called if something runs the file)."""
        key = normalize_path(path)
        pieces = self.written.setdefault(key, []) if append else []
        pieces.append(content)
        self.written[key] = pieces

    def written_file(self, path: str, *, follow: bool = False) -> str | bool | None:
        """A file this command line writes: its content (None: unknown), or False.

        ``follow``: the caller judges the content as code, so a command that runs project
        files later need not judge it again (a reader of plain data does not say so)."""
        if not self.written and not self.unbounded:
            return False
        key = normalize_path(path)
        if key not in self.written:
            base = key.rsplit("/", 1)[-1]
            key = next(
                (k for k in self.written if k.rsplit("/", 1)[-1] == base and base not in "..."),
                "",
            )
            if not key:
                return None if self.unbounded else False
        if key in self._reading:
            return None  # `cat f > f`: the content depends on itself
        self._reading.add(key)
        try:
            out: list[str] = []
            for piece in self.written[key]:
                text = piece() if callable(piece) else piece
                if text is None or text is NO_INPUT:
                    return None
                out.append(str(text))
            if follow:
                self.followed.add(key)
            return "".join(out)
        finally:
            self._reading.discard(key)

    # -- commands ---------------------------------------------------------------------------------

    def command(self, cmd: Cmd, depth: int, scope: Scope) -> None:
        """Analyse one simple command."""
        ctx = Ctx(cmd, depth, cmd.text, scope, cwd=self.cwd_of(cmd.scope))
        if self._away:
            ctx.elsewhere = any(cmd.scope[:k] in self._away for k in range(len(cmd.scope) + 1))
        if self._fed:
            ctx.fed = any(cmd.scope[:k] in self._fed for k in range(len(cmd.scope) + 1))
        for word in cmd.assigns:
            self._carriers_of(word)
            self.assignment(word, ctx, prefix=bool(cmd.words))
        for word in cmd.words:
            self._carriers_of(word)
        for redir in cmd.redirs:
            if redir.body is not None:
                self.carrier(redir.body)
            elif redir.target is not None:
                self._carriers_of(redir.target)
        if not cmd.words:
            return
        args = self.expand_words(cmd, scope)
        if args:
            self.chain(args, ctx)

    def assignment(self, word: Word, ctx: Ctx, prefix: bool) -> None:
        """Judge an assignment to a variable that bash or a program treats specially."""
        assert word.assign is not None
        name, sub, _ = word.assign
        parts = word.parts[word.vstart :]
        if not prefix and name not in _SPECIAL:
            return
        if word.elements is not None and name not in _SPECIAL:
            ctx.env[name] = Arg(word.text, None)
            return
        if word.elements is not None:
            values = [self.expand_word(e, ctx.scope, ctx.cmd.in_func) for e in word.elements]
            elements = [a for v in values for a in v] + [Arg.lit(t) for t in word.plain_elements]
        else:
            elements = expand(word.text, parts, self.resolver(ctx.scope, ctx.cmd.in_func))
        if prefix:
            ctx.env[name] = elements[0] if len(elements) == 1 else Arg(word.text, None)
        if name in ("BASH_CMDS", "BASH_ALIASES"):
            self.rebind_word(name, word, ctx)
            return
        if sub is not None and word.elements is None:
            return
        for value in elements or [Arg.lit("")]:
            self.special_variable(name, value, ctx)

    def special_variable(self, name: str, value: Arg, ctx: Ctx) -> None:
        """Judge a value given to a variable that is code (PROMPT_COMMAND, PAGER, PS4, …)."""
        if name in CODE_VARIABLES:
            self.code(value, ctx, f"`{name}` code")
        elif name in LESS_VARIABLES:
            text = value.value
            code = Arg.lit(text.lstrip("|-").replace("%s", "file")) if text is not None else value
            self.code(code, ctx, f"`{name}` code")
        elif name in OPTION_VARIABLES:
            # Options the program reads from the environment: judged as if on its command line.
            parsed = words_of(value.value) if value.value is not None else None
            words = [a for w in parsed or () for a in expand(w.text, w.parts)]
            if parsed is None:
                words = [value if value.value is None else Arg(value.value, None)]
            self.chain([Arg.lit(OPTION_VARIABLES[name]), *words], ctx.sub(ctx.text))
        elif name in PROMPT_VARIABLES:
            self.sinks.append(f"{name}=…")
            if value.value is not None:
                self.carrier(value.value)
        elif name in STARTUP_VARIABLES:
            self.sourced_file(value, ctx, f"`{name}`")
        elif name == "PATH" or name in LOADER_VARIABLES:
            self.path_changed = True

    def rebind_word(self, name: str, word: Word, ctx: Ctx) -> None:
        """``BASH_CMDS[ls]=/bin/rm``, ``BASH_ALIASES=([ls]='rm -rf')``: later uses of the name
        are judged as the target."""
        table = self.hashed if name == "BASH_CMDS" else self.aliases
        pairs: list[tuple[str | None, Arg]] = []
        if word.elements is not None:
            if word.plain_elements:
                self.unknown(f"sets `{name}` in a way that cannot be read", ctx.text)
                return
            for element in word.elements:
                if element.assign is None:
                    self.unknown(f"sets `{name}` in a way that cannot be read", ctx.text)
                    return
                pairs.append((_static_key(element.assign[1]), self._value_after_eq(element, ctx)))
        else:
            m = _SUBSCRIPTED.match(word.text)
            pairs.append((_static_key(m.group(1)) if m else None, self._value_after_eq(word, ctx)))
        for key, value in pairs:
            if key is None:
                self.unknown(
                    f"rebinds a command name only known at run time via `{name}`", ctx.text
                )
            elif name == "BASH_CMDS":
                table[key] = command_name(value.value) if value.value is not None else None
            else:
                table[key] = value.value

    def _value_after_eq(self, word: Word, ctx: Ctx) -> Arg:
        vals = self.expand_word(word, ctx.scope, ctx.cmd.in_func)
        if len(vals) == 1 and vals[0].value is not None and "=" in vals[0].value:
            return Arg.lit(vals[0].value.split("=", 1)[1])
        return Arg(word.text, None)

    # -- carriers and sinks -----------------------------------------------------------------------

    def _carriers_of(self, word: Word) -> None:
        text = word.text
        if not ("$(" in text or "`" in text or "(" in text or "\\" in text):
            return
        self.carrier("".join(t for t, k in word.parts if k in (RAW, LIT)))
        for element in word.elements or ():
            if element.plain is None:
                self._carriers_of(element)

    def carrier(self, text: str) -> None:
        """Remember a string holding code bash would run if it evaluated the string."""
        found = any(m in text for m in CODE_MARKERS)
        if not found and "\\" in text:
            text = decode_echo(text)
            found = any(m in text for m in CODE_MARKERS)
        if found and text not in self._carrier_set:
            self._carrier_set.add(text)
            self.carriers.append(text)

    def _evaluate_carriers(self) -> None:
        """When bash evaluates variable values somewhere, analyse the strings that hold code."""
        if not self.sinks:
            return
        for name in list(self.variables):
            for value in self.values(name) or ():
                if not value.startswith("\0"):
                    self.carrier(value)
        done = 0
        while self.sinks and done < len(self.carriers):
            if done >= MAX_CARRIERS:
                self.unknown(
                    "holds too many strings of code to analyse where bash evaluates values",
                    self.sinks[0],
                )
                return
            text = self.carriers[done]
            done += 1
            items: list[Item] = []
            try:
                expansions(text, items)
            except (Unparsable, RecursionError) as err:
                why = err.reason if isinstance(err, Unparsable) else "nests too deeply"
                self.unknown(
                    f"holds code that could not be parsed ({why}), and `{self.sinks[0]}` "
                    "evaluates values as code",
                    text,
                )
                continue
            for item in items:
                if isinstance(item, Cmd):
                    self.command(item, 1, Scope())
                elif isinstance(item, Problem):
                    self.unknown(_problem_reason(item.reason), item.text)

    # -- chains of wrappers -----------------------------------------------------------------------

    def chain(self, args: list[Arg], ctx: Ctx) -> None:
        """Record ``args`` as a command and follow it through wrappers."""
        for _ in range(MAX_CHAIN):
            if not args:
                return
            head = args[0]
            if head.value is None or head.glob:
                what = "a command only known at run time" if head.value is None else "a glob"
                self.unknown(f"runs {what} (`{head.text}`)", ctx.text)
                return
            name = command_name(head.value)
            if not name:
                return
            if "/" in head.value and normalize_path(head.value).rsplit("/", 1)[0] in (
                INIT_SCRIPT_DIRS
            ):
                args = [Arg.lit("service", head.text), Arg.lit(name), *args[1:]]
                continue  # an init script's action is a service's
            if (
                ctx.first
                and name in self.aliases
                and (name, self.aliases[name]) not in self._expanding_alias
            ):
                self._run_alias(name, args, ctx)
                return
            ctx.first = False
            if name in self.hashed:
                target = self.hashed[name]
                if target is None:
                    self.unknown(
                        f"runs `{name}`, which is rebound to a command only known at run time",
                        ctx.text,
                    )
                    return
                name = target
            row = row_for(name)
            before = self.unbounded[:]  # what the command itself writes does not count for it
            reading = read_row(name, row, args[1:]) if row is not None else None
            argv = [Arg.lit(name, head.text), *args[1:]]
            home = "HOME" in ctx.env or self.values("HOME") is not None
            self.events.append(Found(name, argv, ctx.text, reading, ctx.cwd, ctx.elsewhere, home))
            if name in _CD:
                self._cd(name, args[1:], ctx)
            if "/" in head.value:
                self.script_run(head, args[1:], ctx)
            elif self.path_changed and (self.written or self.unbounded):
                self.script_run(Arg.lit("./" + head.value), args[1:], ctx)
            if reading is None:
                project_files(self, lookup_names(name), before, ctx)
                for hit in ctx.hits:  # no row of its own to carry them
                    self.unknown(hit.reason, ctx.text)
                ctx.hits = []
                return
            stored = {k: v.value for k, v in self.git_config if v.value is not None}
            inner = run(self, reading, ctx)
            project_files(self, lookup_names(name), before, ctx)
            # What the runners found in code it runs, and the git configuration it gets.
            reading.hits, ctx.hits = ctx.hits, []
            reading.config, ctx.config = {**stored, **ctx.config}, {}
            if inner is None:
                return
            args = inner
        self.unknown("wraps commands too deeply to analyse", ctx.text)

    def _run_alias(self, name: str, args: list[Arg], ctx: Ctx) -> None:
        value = self.aliases[name]
        if value is None:
            self.unknown(f"runs `{name}`, which an alias defines at run time", ctx.text)
            return
        words = ctx.cmd.words
        rest = (
            " ".join(w.text for w in words[1:])
            if words and args[0].text == words[0].text
            else (" ".join(a.text for a in args[1:]))
        )
        # bash does not expand an alias inside its own text; a redefined one is another alias.
        self._expanding_alias.add((name, value))
        try:
            code = f"{value} {rest}" if rest else value
            self.source(code, ctx.depth + 1, ctx.scope, ctx=ctx, same_shell=True)
        finally:
            self._expanding_alias.discard((name, value))

    # -- code read from files, pipes and process substitutions ------------------------------------

    def script_run(self, path: Arg, args: list[Arg], ctx: Ctx, *, shell: bool = False) -> None:
        """A file run as a program (``./s.sh``) or script (``bash s.sh``): analyse it when this
        command line wrote it; a file it wrote with unknown content pauses."""
        content = self._script_text(path, ctx, shell)
        if content is not None and (shell or _is_shell_script(content)):
            self.source(content, ctx.depth + 1, Scope(list(args)), ctx=ctx)
        elif content is not None:
            # `./t.py` with `#!/usr/bin/env python3`: judged as `python3 ./t.py`.
            m = re.match(r"#![ \t]*(\S+)[ \t]*(.*)", content)
            words = [m.group(1), *m.group(2).split()] if m else []
            while words and command_name(words[0]) == "env":
                words = [w for w in words[1:] if w != "-S"]
            if words:
                self.chain([*(Arg.lit(w) for w in words), path, *args], ctx.sub(ctx.text))

    def _script_text(self, path: Arg, ctx: Ctx, shell: bool) -> str | None:
        if path.proc:
            self.proc_code(path, ctx, "shell code")
            return None
        if path.value is None:
            if shell and (path.split or path.opaque or not path.prefix):
                self.unknown(f"runs a script only known at run time (`{path.text}`)", ctx.text)
            return None
        if _FD_PATH.fullmatch(path.value):
            self.unknown(f"runs code read from a file descriptor (`{path.value}`)", ctx.text)
            return None
        content = self.written_file(in_dir(ctx.cwd, path.value) or path.value, follow=True)
        if content is None:
            self.unknown(f"runs `{path.value}`, which this command writes at run time", ctx.text)
            return None
        return content if isinstance(content, str) else None

    def script_text(self, path: Arg, ctx: Ctx) -> str | None:
        """The text of a script an interpreter runs, when this line wrote it (else None)."""
        return self._script_text(path, ctx, True)

    def sourced_file(self, path: Arg, ctx: Ctx, what: str, args: list[Arg] | None = None) -> None:
        """A file bash sources (``source F``, ``BASH_ENV=F``)."""
        if path.proc:
            self.proc_code(path, ctx, f"code sourced by {what}")
        elif path.value in STDIN_FILES:
            self.stdin_code(ctx, "sourced code")
        elif path.value is None:
            if path.split or path.opaque or not path.prefix:
                self.unknown(f"sources a file only known at run time (`{path.text}`)", ctx.text)
        else:
            content = self._script_text(path, ctx, True)
            if content is not None:
                scope = Scope(list(args or []))
                self.source(content, ctx.depth + 1, scope, ctx=ctx, same_shell=True)

    def proc_code(self, word: Arg, ctx: Ctx, what: str) -> None:
        """Code read from a process substitution ``<(…)``: what its commands print."""
        body = word.text
        text = self.printed_source(body[2:-1]) if body.startswith(("<(", ">(")) else None
        if text is None or text is NO_INPUT:
            self.unknown(f"runs {what} from a process substitution", ctx.text)
            return
        self.source(text, ctx.depth + 1, ctx=ctx)

    def stdin_code(self, ctx: Ctx, what: str) -> None:
        """Analyse code a shell reads from its standard input."""
        text = self.input_of(ctx)
        if text is NO_INPUT:
            return
        if text is None:
            self.unknown(f"runs {what} read from its input, only known at run time", ctx.text)
            return
        self.source(text, ctx.depth + 1, ctx=ctx)

    def stdin_text(self, cmd: Cmd, scope: Scope) -> str | None:
        """What a command reads on stdin, when static (NO_INPUT when stdin is not redirected)."""
        return printed.stdin_text(self, cmd, scope)

    def input_of(self, ctx: Ctx) -> str | None:
        """What ``ctx``'s command reads on stdin; a command code started reads what the code
        may write to it: only known at run time."""
        text = self.stdin_text(ctx.cmd, ctx.scope)
        return None if ctx.fed and text is NO_INPUT else text

    def printed_source(self, src: str, scope: Scope | None = None) -> str | None:
        """What a script writes on stdout, when static."""
        return printed.printed_source(self, src, scope)


def _static_key(sub: str | None) -> str | None:
    if sub is None:
        return None
    args = expand(sub, [(sub, RAW)]) if "$" not in sub and "`" not in sub else []
    if len(args) == 1 and args[0].value is not None:
        v = args[0].value.strip("'\"")
        return v or None
    return None


def _path_producer(parts: list[Part]) -> bool:
    """``$(mktemp)``, ``$(pwd)``, … : output that is a path, never an option."""
    if len(parts) != 1 or parts[0][1] not in (DYN, SPLIT):
        return False
    text = parts[0][0]
    return text.startswith("$(") and _PATH_PRODUCERS.match(text[2:-1]) is not None


def _is_shell_script(content: str) -> bool:
    """True when a file runs as shell code: a shell shebang or none (bash runs it itself)."""
    m = _SHEBANG.match(content)
    if not m:
        return True
    prog = command_name(m.group(1))
    if prog == "env" and m.group(2):
        prog = command_name(m.group(2))
    return prog in SHELLS


def _problem_reason(reason: str) -> str:
    if reason.startswith("nests"):
        return reason
    return f"could not be parsed: it {reason}"
