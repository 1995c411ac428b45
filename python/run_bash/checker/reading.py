"""The shape of the command table and one reading of a command against its row. Pure.

A :class:`Row` describes a command the way its own parser sees it: its options (:mod:`.options`),
where its subcommand sits and the rows of its subcommands, what it runs (:class:`Command`,
:class:`Shell`, :class:`Each`, :class:`Code`, or a :class:`Custom` runner) and
which pause rules apply (:class:`Pause`, each with its effect class). :func:`read_row` walks a
command's words once against its row; the runners and the rules answer from that reading.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from run_bash.checker.model import IRREVERSIBLE, Ctx, Effect, Hit, Walker, unknown_hit
from run_bash.checker.options import NO_OPTS, Opts, Read, opts, read
from run_bash.checker.words import Arg, clean_path, join_path, wordlist

Check: TypeAlias = "Callable[[Reading, Level], Hit | None]"
Handler: TypeAlias = "Callable[[Walker, list[Arg], Ctx], list[Arg] | None]"


@dataclass(frozen=True)
class Pause:
    """A pause rule of one row, and the class of its effect.

    It matches when every condition given holds: ``when`` (any of these options is given),
    ``operands`` (an operand matches one of these globs) and not ``unless`` (none of these
    options), and, with ``dry_run``, the command is not a dry run (``--dry-run``, the last of its
    forms counting). Without conditions it always matches. ``check`` replaces the conditions with
    code. ``targets``: "operands" (the paths a reversible effect touches) or "worktree" (git's
    working tree). ``may`` says what a word only known at run time may do ("delete recursively").
    """

    reason: str
    when: str = ""
    unless: str = ""
    operands: tuple[str, ...] = ()
    dry_run: bool = False
    check: Check | None = None
    effect: Effect = IRREVERSIBLE
    targets: str = ""
    may: str = ""


@dataclass(frozen=True)
class Command:
    """The operands from the ``skip``-th on are a command and its arguments (a wrapper).

    ``unless``: options after which nothing runs (``command -v``). ``shell``: options that make the
    words shell code (``sudo -s``); ``quoted``: with them, each word is quoted first (sudo escapes
    every character but letters, digits, ``_``, ``-`` and ``$``), so the words are a command too
    (``sudo -i bash -c 'rm -rf x'`` runs ``bash -c 'rm -rf x'``). ``env``: ``NAME=value`` words
    come first. ``package``: the first word is a package spec (``npx @scope/pkg@1``). ``stdin``:
    with no command, a shell reads its input. ``chdir``: options that change the directory it
    runs in. ``dashdash``: a ``--`` among the operands starts the command (``aws-vault exec
    PROFILE -- CMD``). ``elsewhere``: it runs on another machine or root, where undo does not
    reach (``ssh``, ``chroot``).
    """

    skip: int = 0
    unless: str = ""
    shell: str = ""
    quoted: bool = False
    env: bool = False
    package: bool = False
    stdin: bool = False
    chdir: str = ""
    dashdash: bool = False
    elsewhere: bool = False
    prefix: str = ""  # words the wrapper puts before the command (`memray run x.py`: python)


@dataclass(frozen=True)
class Shell:
    """The operands from the ``skip``-th on, joined by spaces, are shell code (``watch``).

    ``argv``: options that make them a command instead (``watch -x``); ``unless`` as for Command.
    ``placeholders``: patterns replaced by an unknown file name (``{}``); ``elsewhere`` as for
    Command.
    """

    skip: int = 0
    argv: str = ""
    unless: str = ""
    placeholders: tuple[str, ...] = ()
    elsewhere: bool = False


@dataclass(frozen=True)
class Each:
    """Every operand is shell code of its own (``pee``, ``hyperfine``)."""

    placeholders: tuple[str, ...] = ()


@dataclass(frozen=True)
class Code:
    """Options whose value is shell code (``script -c``, ``tar --to-command``).

    With ``keys``, the value is ``KEY=CODE`` (or ``KEY CODE`` when ``sep`` has a space) and only
    those keys (lower case, globs allowed) are code: ``ssh -o ProxyCommand=…``. ``placeholders``:
    patterns replaced by an unknown file name. ``elsewhere`` as for Command.
    """

    options: str
    keys: tuple[str, ...] = ()
    sep: str = "="
    placeholders: tuple[str, ...] = ()
    elsewhere: bool = False


@dataclass(frozen=True)
class Custom:
    """A runner written in code: gets the words after the name (or subcommand)."""

    fn: Handler


Run = Command | Shell | Each | Code | Custom


@dataclass(frozen=True)
class Row:
    """One command (or subcommand) of the table.

    ``opts``: its options (for a row with ``subs``: the ones before the subcommand). ``subs``: the
    rows of its subcommands; the ``skip``-th operand picks one, through ``alias`` or, with
    ``prefixes``, a unique prefix. ``permute``: options may follow operands (GNU); a wrapper's end
    at its command. ``inherit``: its subcommands also accept these options (aws). ``toolchain``:
    a leading ``+word`` is not the subcommand (``cargo +nightly``). ``code``: its runners judge
    code it runs (an interpreter's one-liner) and may find reasons to pause in it.
    """

    opts: Opts = NO_OPTS
    subs: Mapping[str, Row] = field(default_factory=dict)
    alias: Mapping[str, str] = field(default_factory=dict)
    prefixes: bool = False
    skip: int = 0
    permute: bool = True
    inherit: bool = False
    toolchain: bool = False
    code: bool = False
    runs: tuple[Run, ...] = ()
    pauses: tuple[Pause, ...] = ()

    def pausing(self) -> bool:
        """True when a pause rule applies to this row or a subcommand's."""
        return bool(self.pauses) or self.code or any(sub.pausing() for sub in self.subs.values())

    def sub(self, word: str) -> tuple[str, Row] | None:
        """The subcommand ``word`` names, with its row."""
        key = self.alias.get(word, word)
        row = self.subs.get(key)
        if row is None and self.prefixes and len(word) > 1:
            hits = [k for k in (*self.subs, *self.alias) if k.startswith(word)]
            names = {self.alias.get(k, k) for k in hits}
            if len(names) == 1:
                key = names.pop()
                row = self.subs.get(key)
        return (key, row) if row is not None else None


def always(reason: str) -> Row:
    """A command that always pauses."""
    return Row(pauses=(Pause(reason),))


def subs(reason: str, names: str, *, dry_run: bool = False) -> dict[str, Row]:
    """Subcommand rows (space-separated ``names``) that pause with one reason."""
    return dict.fromkeys(wordlist(names), Row(pauses=(Pause(reason, dry_run=dry_run),)))


def wrapper(spec: str = "", **kw: Any) -> Row:
    """A command that runs the rest of its line (after its options, see :class:`Command`)."""
    return Row(opts(spec), permute=False, runs=(Command(**kw),))


def runs_sub(name: str, spec: str = "", **kw: Any) -> dict[str, Row]:
    """A subcommand that runs the rest of its line (``poetry run CMD``)."""
    return {name: wrapper(spec, **kw)}


def custom(fn: Handler, spec: Opts | None = None) -> Row:
    """A command whose runner is written in code."""
    return Row(spec or NO_OPTS, permute=False, runs=(Custom(fn),))


@dataclass
class Level:
    """One level of a reading: the command or a subcommand, its words and their options."""

    name: str
    row: Row
    args: list[Arg]
    read: Read


@dataclass
class Reading:
    """A command's words read against its row: one level per (sub)command.

    ``hidden`` is a word only known at run time where the subcommand is (or that hides where it
    is); ``hits`` are pause reasons its runners found in code it runs (an interpreter one-liner);
    ``config`` is git configuration the command line sets for it (lower-case keys).
    """

    name: str
    args: list[Arg]
    levels: list[Level]
    hidden: Arg | None = None
    hits: list[Hit] = field(default_factory=list)
    config: dict[str, str] = field(default_factory=dict)  # git configuration the line sets

    @property
    def leaf(self) -> Level:
        """The innermost level."""
        return self.levels[-1]

    @property
    def path(self) -> str:
        """The command and its subcommands, as written in reasons (``git stash``)."""
        return " ".join(level.name for level in self.levels)


def _dry_run_words(args: Sequence[Arg]) -> list[Arg]:
    """Drop the boolean after ``--dry-run`` (``--dry-run false``) so it is not an operand."""
    return [
        a
        for k, a in enumerate(args)
        if not (k and args[k - 1].value == "--dry-run" and a.value in ("true", "false"))
    ]


def read_row(name: str, row: Row, args: Sequence[Arg]) -> Reading:
    """Read ``args`` (the words after the command name) against ``row``, level by level."""
    words = _dry_run_words(args) if any(a.value == "--dry-run" for a in args) else list(args)
    reading = Reading(name, list(args), [])
    spec = row.opts
    while True:
        if not row.subs:
            reading.levels.append(Level(name, row, words, read(words, spec, permute=row.permute)))
            return reading
        start = 1 if row.toolchain and words and (words[0].value or "").startswith("+") else 0
        got = read(words[start:], spec, permute=False)
        reading.levels.append(Level(name, row, words, got))
        if got.dynamic:
            reading.hidden = got.unknown
            return reading
        # An option the row does not list may take the next word: try there too.
        at = -1
        for k in [got.first, *got.alternatives]:
            if k + row.skip < len(words) - start:
                word = words[start + k + row.skip]
                if word.value is None or row.sub(word.value) is not None:
                    at = k + row.skip
                    break
        if at < 0:
            return reading
        word = words[start + at]
        if word.value is None:
            reading.hidden = word
            return reading
        found = row.sub(word.value)
        assert found is not None
        name, sub = found
        words = words[start + at + 1 :]
        spec = sub.opts + row.opts if sub.inherit else sub.opts
        row = sub


FALSE_WORDS = frozenset({"false", "no", "off", "0", "none"})


def is_dry_run(args: Sequence[Arg]) -> bool:
    """``--dry-run`` is in effect: the last of ``--dry-run``, ``--dry-run=false``,
    ``--dry-run false``, ``--no-dry-run`` wins (``--dryrun`` is aws's spelling)."""
    state = False
    for k, a in enumerate(args):
        v = a.value
        if v is None:
            continue
        if v in ("--dry-run", "--dryrun"):
            nxt = args[k + 1].value if k + 1 < len(args) else None
            state = nxt is None or nxt.lower() not in FALSE_WORDS
        elif v.startswith(("--dry-run=", "--dryrun=")):
            state = v.split("=", 1)[1].lower() not in FALSE_WORDS
        elif v == "--no-dry-run":
            state = False
    return state


def operand_paths(operands: Sequence[Arg]) -> tuple[str, ...] | None:
    """The operands as paths, or None when one is only known at run time."""
    out: list[str] = []
    for a in operands:
        if a.value is None or a.proc:
            return None
        out.append(clean_path(a.value))
    return tuple(out)


def worktree(reading: Reading) -> tuple[str, ...] | None:
    """git's working tree: ``.`` or the ``-C`` directories joined, and there the one
    ``--work-tree`` or ``GIT_WORK_TREE`` names. None when it cannot be told: a value only known
    at run time, or a repository named (``--git-dir``, ``GIT_DIR``) or configured
    (``core.worktree``) without a work tree, whose configuration says where its work tree is."""
    from run_bash.checker.gitcode import GIT_DIR_KEY, WORK_TREE_KEY

    top = reading.levels[0].read
    path = "."
    for word in top.values("C"):
        if word.value is None:
            return None
        path = join_path(path, word.value)
    tree = top.get("work-tree")
    if tree is None:
        tree = reading.config.get(WORK_TREE_KEY)
    if tree is None:
        named = top.get("git-dir") is not None or GIT_DIR_KEY in reading.config
        return None if named or "core.worktree" in reading.config else (path,)
    return (join_path(path, tree),) if tree and "$" not in tree else None


def judge(reading: Reading) -> list[Hit]:
    """Every pause rule of the reading's rows that matches, in order."""
    hits = list(reading.hits)
    last = reading.leaf.row
    if reading.hidden is not None and last.pausing():
        hits.append(unknown_hit(f"run a paused `{reading.path}` subcommand", reading.hidden))
    for level in reading.levels:
        for pause in level.row.pauses:
            hit = _judge(pause, reading, level)
            if hit is not None:
                hits.append(hit)
    return hits


def _judge(p: Pause, reading: Reading, level: Level) -> Hit | None:
    if p.check is not None:
        return p.check(reading, level)
    r = level.read
    if p.unless and any(lv.read.has(*p.unless.split()) for lv in reading.levels):
        return None
    matched = not p.when or r.has(*p.when.split())
    dynamic: Arg | None = r.unknown if p.when and not matched else None
    if matched and p.operands:
        matched = False
        for op in r.operands:
            if op.value is None:
                if op.may_be_option or not op.prefix:
                    dynamic = dynamic or op
            elif any(fnmatch.fnmatchcase(op.value, pat) for pat in p.operands):
                matched = True
    if matched:
        if p.dry_run and is_dry_run(reading.args):
            return None
        if p.targets == "operands":
            paths = operand_paths(r.operands) if r.unknown is None else None
            # `rm -r lnk/`, `rm -r src/*/`: a final `/` makes the name resolve through a symlink.
            follows = any((a.value or "").endswith("/") for a in r.operands)
            return Hit(p.reason, p.effect, paths, follows=follows)
        if p.targets == "worktree":
            return Hit(p.reason, p.effect, worktree(reading))
        return Hit(p.reason, p.effect)
    if dynamic is not None:
        return unknown_hit(p.may or f"match a `{reading.path}` pause rule", dynamic)
    return None
