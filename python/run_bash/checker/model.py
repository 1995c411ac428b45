"""What the checker's parts share: findings, hits, the analysis context and its interface. Pure.

Every other module of the checker imports from here, never from :mod:`.analysis`: the runners,
checks and readers of printed text and git configuration get the analysis as a :class:`Walker`
(the interface below), so the modules form no import circle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

from run_bash.checker.syntax import Cmd, Word
from run_bash.checker.words import Arg, join_path, wordlist

Effect = Literal["reversible", "irreversible"]
REVERSIBLE: Effect = "reversible"
IRREVERSIBLE: Effect = "irreversible"

SHELLS = frozenset(
    wordlist("sh bash dash zsh ksh mksh ash rbash yash posh fish csh tcsh oksh loksh")
)
STDIN_FILES = frozenset({"/dev/stdin", "/dev/fd/0", "/proc/self/fd/0", "-"})
# Possible values of a variable set by the script.
UNKNOWN = "\0unknown"  # set to something only known at run time
SAFE = "\0safe"  # set to something unknown that does not start with `-` (a path, a file name)
NO_INPUT = "\0no-input"  # a command's stdin is not redirected
EXTERNAL = "\0external"  # stdin is a file this command line does not write


@dataclass(frozen=True)
class Hit:
    """One reason to pause.

    A rule returns ``reason`` as the end of the sentence "`<command>` …"; the verdict fills in
    ``rule`` and ``command`` and makes ``reason`` the whole sentence. ``effect`` says whether undo
    can take the effect back (``reversible``: it stays inside the files of ``targets``) or not.
    ``targets`` are the paths a reversible effect touches, as the checker resolved them (``~``
    for the home directory), or None when they cannot be told. ``unknown`` marks a fail-closed
    hit: what decides is only known at run time. ``follows``: the effect follows symlinks it
    finds under its targets (``find -L``, ``rm -r dir/``, ``truncate``), so a symlink there
    takes it wherever the symlink points. ``sources``: for git, the commits (as written) whose
    files a reversible effect writes besides the index and ``HEAD`` (``checkout REV -- .``,
    ``restore --source=REV``); None when they cannot be told. ``index``: for git, a reversible
    effect that also writes the index (``reset --hard``, ``checkout REV -- .``, ``restore
    --staged --worktree``): what is staged there is gone, and undo does not restore the index.
    ``overwrites``: for git's forced rename or copy of a branch (``branch -M``), the repository's
    directory as the line names it, the branch it replaces (``refs/heads/NAME``) and the branch
    renamed (``""``: the current one). Nothing is lost when no branch of that name exists before
    the line runs, or when it is the one renamed: the gate asks git, the checker cannot.
    ``prunes``: for a ``fetch`` (``pull``, ``remote update``, ``remote add -f``) that prunes
    tags only if the repository's configuration says so (``fetch.pruneTags``,
    ``remote.NAME.pruneTags``, with pruning on), the repository's directory as the line names
    it, the remote (``*``: git's default one, several or any) and ``prune`` when the line itself
    prunes (``""``: the configuration decides that too). The gate asks git for that
    configuration; the checker does not read it.
    """

    reason: str
    effect: Effect = IRREVERSIBLE
    targets: tuple[str, ...] | None = None
    unknown: bool = False
    rule: str | None = None
    command: str | None = None
    follows: bool = False
    sources: tuple[str, ...] | None = ()
    index: bool = False
    overwrites: tuple[str, str, str] | None = None
    prunes: tuple[str, str, str] | None = None

    def to_dict(self) -> dict[str, object]:
        """A plain dict, safe for JSON and msgpack."""
        return {
            "reason": self.reason,
            "rule": self.rule,
            "command": self.command,
            "effect": self.effect,
            "targets": list(self.targets) if self.targets is not None else None,
            "follows": self.follows,
            "sources": list(self.sources) if self.sources is not None else None,
            "index": self.index,
            "overwrites": list(self.overwrites) if self.overwrites is not None else None,
            "prunes": list(self.prunes) if self.prunes is not None else None,
        }


def unknown_hit(what: str, word: Arg) -> Hit:
    """The fail-closed hit for a word only known at run time: "may <what>: `word` is …"."""
    return Hit(f"may {what}: `{word.text}` is only known at run time", unknown=True)


def in_dir(cwd: str | None, path: str) -> str | None:
    """``path`` as seen from the directory the command line started in (None: unknown)."""
    if cwd is None and not path.startswith(("/", "~")):
        return None
    return join_path(cwd or ".", path)


@dataclass(slots=True)
class Unknown:
    """A place where the command (or code) that runs cannot be determined statically."""

    reason: str
    text: str
    syntax: bool = False  # the source could not be parsed


class Scope:
    """What a script knows about its positional parameters (``bash -c CODE NAME ARGS``)."""

    __slots__ = ("positional",)

    def __init__(self, positional: list[Arg] | None = None) -> None:
        self.positional = positional


@dataclass(slots=True)
class Ctx:
    """One simple command being analysed, and what wrappers added to its environment.

    ``cwd`` is where it runs, relative to where the line started (None: unknown);
    ``elsewhere`` marks a command run where undo cannot reach (another machine or root).
    Runners add to ``hits`` the reasons to pause they find in code the command runs, and git's
    runner puts the configuration the command line gives git in ``config``.
    """

    cmd: Cmd
    depth: int
    text: str
    scope: Scope
    env: dict[str, Arg] = field(default_factory=dict)
    first: bool = True  # the current word is where the shell itself looks the command up
    cwd: str | None = "."
    elsewhere: bool = False
    hits: list[Hit] = field(default_factory=list)
    fed: bool = False  # started by code, which may write to its stdin (`os.popen("sh", "w")`)
    config: dict[str, str] = field(default_factory=dict)

    def sub(self, text: str) -> Ctx:
        """The context of a command a wrapper runs, named by its own text (``rm -rf {}``)."""
        return Ctx(
            self.cmd,
            self.depth,
            text,
            self.scope,
            dict(self.env),
            False,
            self.cwd,
            self.elsewhere,
            fed=self.fed,
        )


class Walker(Protocol):
    """What runners, checks and readers may ask of the analysis."""

    sinks: list[str]
    aliases: dict[str, str | None]
    hashed: dict[str, str | None]
    written: dict[str, list[object]]
    variables: dict[str, list[object]]
    unbounded: list[str]
    followed: set[str]
    git_config: list[tuple[str, Arg]]

    def unknown(self, reason: str, text: str) -> None:
        """Record a place where what runs cannot be determined."""

    def source(
        self,
        src: str,
        depth: int,
        scope: Scope | None = None,
        *,
        ctx: Ctx | None = None,
        same_shell: bool = False,
    ) -> None:
        """Analyse a script (code ``ctx``'s command runs: in its directory)."""

    def code(self, word: Arg, ctx: Ctx, what: str, scope: Scope | None = None) -> None:
        """Analyse code passed as one word; unknown when it is not static."""

    def chain(self, args: list[Arg], ctx: Ctx) -> None:
        """Record ``args`` as a command and follow it through wrappers."""

    def script_run(self, path: Arg, args: list[Arg], ctx: Ctx, *, shell: bool = False) -> None:
        """A file run as a program or script: analysed when this command line wrote it."""

    def sourced_file(self, path: Arg, ctx: Ctx, what: str, args: list[Arg] | None = None) -> None:
        """A file a shell sources."""

    def stdin_code(self, ctx: Ctx, what: str) -> None:
        """Analyse code a shell reads from its standard input."""

    def stdin_text(self, cmd: Cmd, scope: Scope) -> str | None:
        """What a command reads on stdin, when static (NO_INPUT when not redirected)."""

    def input_of(self, ctx: Ctx) -> str | None:
        """What ``ctx``'s command reads on stdin, as ``stdin_text``; None (unknown) for a
        command started by code, which may write to it."""

    def printed_source(self, src: str, scope: Scope | None = None) -> str | None:
        """What a script writes on stdout, when static."""

    def written_file(self, path: str, *, follow: bool = False) -> str | bool | None:
        """A file this command line writes: its content (None: unknown), or False."""

    def script_text(self, path: Arg, ctx: Ctx) -> str | None:
        """The text of a script file this line wrote, for an interpreter (else None)."""

    def expand_word(self, word: Word, scope: Scope, in_func: bool) -> list[Arg]:
        """The argument words ``word`` becomes, with the script's known values filled in."""

    def expand_words(self, cmd: Cmd, scope: Scope) -> list[Arg]:
        """The argument words of a simple command."""

    def values(self, name: str) -> frozenset[str] | None:
        """The values the script may give ``name`` (None when it never sets it)."""

    def special_variable(self, name: str, value: Arg, ctx: Ctx) -> None:
        """Judge a value given to a variable that programs run as code."""

    def environment(self, name: str, value: Arg) -> None:
        """A variable a wrapper puts in the environment of the command it runs (``env m=v``)."""

    def rebind_word(self, name: str, word: Word, ctx: Ctx) -> None:
        """Judge ``BASH_CMDS``/``BASH_ALIASES`` assignments."""
