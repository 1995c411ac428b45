"""Runs and the change store (``run_bash.changes``): what each run changed, and undo.

``RunChanges`` is the hook ``SessionManager`` calls around every command: ``begin`` before it is
spawned (the spawn waits for it), ``finish`` when it is over (exit, timeout, kill, host shutdown),
before its final result is sent, so the result carries the change set's summary. It also answers
the host's change-set requests (changes, diff, plan, undo, runs, usage).

Threading: every ``ChangeStore`` call may block on the project's files, which a sandboxed command
controls (a FUSE mount, a huge tree), so each one runs on this hook's worker threads and the host
loop only awaits it. The one exception is ``finish_now`` at host shutdown, when every command has
been killed and nothing is left to wait for but the store.

What a session carries (``Session.changes``, sent to Lua and written to the audit log): None while
nothing is known (undo off, not started, still running); ``{"not_recorded": why}``; or
``{"summary", "counts", "paths", "undo"}`` (``summary`` is "" when the run changed nothing;
``undo`` is the command that takes the run back, when there is something to take back).

The approval gate asks this hook whether undo covers what a command's reversible pause reasons
name (``coverage``, from the project's index in memory: it never waits for the store), and a run
started on that answer is checked again on the snapshot taken just before it starts
(``confirm``): what changed in between makes it ask after all.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from run_bash.config import UndoConfig
from run_bash.errors import UsageError

if TYPE_CHECKING:  # the store is imported on first use: the host starts without it
    from run_bash.changes import ChangeSet, ChangeStore, Limits, NotRecorded, Snapshot, Token

log = logging.getLogger("run_bash")

T = TypeVar("T")
STAGED_MAX = 65536  # bytes of names git may list about its index
WORKERS = 4
# A project found too big to record (undo.max_files, undo.max_store) is not walked again for this
# long: finding that out reads it up to the cap, which would otherwise delay every run there.
TOO_BIG_RECHECK_S = 1800.0
DIFF_MAX_BYTES = 8 * 1024 * 1024  # a longer diff is cut (a buffer of it would stall the editor)
# A run whose change set could not be written at host shutdown within this time has none.
SHUTDOWN_FINISH_S = 3.0
PROJECT_CACHE_S = 5.0  # how long the gate trusts where a directory's project is
QUIET = "\0"  # marks a reason not to record that is no news to the agent (no project here)


class _Backend(Protocol):
    @property
    def isolates(self) -> bool: ...


class Run(Protocol):
    """What the hook reads and sets on a session."""

    id: str
    cmd: str
    cwd: str
    notices: list[str]
    changes: dict[str, Any] | None
    change_token: Token | None
    # What undo must cover for the run to go without asking (None: it was not asked about),
    # and why it must ask after all (set by ``begin``).
    cover: CoverSpec | None
    hold: str | None

    @property
    def backend(self) -> _Backend: ...


def describe(cs: ChangeSet) -> dict[str, Any]:
    """A finished run's change set as a session carries it."""
    out = {"summary": cs.summary(), "counts": cs.counts(), "paths": cs.brief()}
    if cs.changes:
        out["undo"] = f":RunBashUndo {cs.run_id}"
    return out


@dataclass(frozen=True)
class CoverSpec:
    """What undo must cover for a command to run without asking: ``paths`` (absolute, ``..`` as
    written), git's own effects (``git``: the repository's index does not count) or, when a
    reason's targets are not known (``everything``), every place the sandbox lets the run
    write. ``inplace``: a reason writes files in place, so a file with another name is not
    covered. ``follow``: the ones of ``paths`` under which a reason follows symlinks (``find
    -L``, ``truncate src/*``, ``rm -r src/*/``): a symlink there is not covered, what it points to
    is not what undo kept. ``git_only``: every reason is git's own (reset, checkout, restore,
    clean without ``-x``), which never touches an ignored file git does not track: in the index,
    in ``HEAD`` or in a commit of ``sources`` (the ones the reasons take files from).
    ``index``: the work trees (absolute) of git's reasons that also write the index (``reset
    --hard``, ``checkout REV -- .``): what is staged there is not kept by undo."""

    cwd: str
    paths: tuple[str, ...] = ()
    git: bool = False
    everything: bool = False
    inplace: bool = False
    follow: tuple[str, ...] = ()
    git_only: bool = False
    sources: tuple[str, ...] = ()
    index: tuple[str, ...] = ()

    def plain(self) -> dict[str, Any]:
        """The spec as plain data (the gate's answer carries it to the run)."""
        return {
            "cwd": self.cwd,
            "paths": list(self.paths),
            "git": self.git,
            "everything": self.everything,
            "inplace": self.inplace,
            "follow": list(self.follow),
            "git_only": self.git_only,
            "sources": list(self.sources),
            "index": list(self.index),
        }

    @classmethod
    def from_plain(cls, data: Mapping[str, Any], cwd: str) -> CoverSpec:
        """``plain()``'s data back; what is missing takes the strict answer (every place the
        run can write, files written in place, symlinks followed under every path, git's reasons
        writing the index of the working directory)."""
        paths = tuple(str(p) for p in data.get("paths") or ())
        follow = data.get("follow", paths)
        base = str(data.get("cwd") or cwd)
        index = data.get("index", [base] if data.get("git") else [])
        if not (isinstance(index, list) and all(isinstance(i, str) for i in index)):
            index = [base]  # not what ``plain`` writes: the strict answer
        return cls(
            str(data.get("cwd") or cwd),
            paths,
            bool(data.get("git")),
            data.get("everything") is not False,
            data.get("inplace") is not False,
            tuple(str(p) for p in follow or ()),
            data.get("git_only") is True and isinstance(data.get("sources"), list),
            tuple(str(s) for s in data.get("sources") or ()),
            tuple(index),
        )


@dataclass(frozen=True)
class Cover:
    """The gate's question answered: ``why`` undo does not cover it ("" when it does)."""

    why: str = ""

    @property
    def ok(self) -> bool:
        return not self.why


GLOB_CHARS = frozenset("*?[")

# Commands that touch no file (a redirection is not a command: it makes a plain file), and
# wrappers that start the command they name as it is (that command is listed on its own).
INERT = frozenset(
    {
        "cd",
        "pushd",
        "popd",
        "echo",
        "printf",
        "true",
        "false",
        ":",
        "pwd",
        "sleep",
        "test",
        "[",
        "env",
        "nice",
        "nohup",
        "timeout",
        "time",
        "command",
        "builtin",
        "exec",
        "stdbuf",
        "ionice",
        "chrt",
        "taskset",
        "setsid",
    }
)
# Commands known to make no name for data that exists (no symlink, hard link, rename, copy of a
# symlink, mount) and to run no code of their own. Any other command in a line with a reversible
# reason may make a target name something else before that reason acts on it (``ln -s .git x;
# rm -rf x/*``, ``cp -s .git/HEAD x; truncate -s0 x``, ``python3 -c 'os.symlink(…)'``,
# ``mv .git/objects build/; rm -rf build``): the line then goes without asking only when
# everything the run can write is covered.
PLAIN = INERT | frozenset(
    {
        "rm",
        "rimraf",
        "rmdir",
        "unlink",
        "truncate",
        "shred",
        "find",
        "mkdir",
        "touch",
        "ls",
        "cat",
        "head",
        "tail",
        "wc",
        "grep",
    }
)
# Commands that, with nothing but ``INERT`` ones beside them, act on what the index shows: git
# never writes through a symlink in the work tree (nor below one), and a symlink it checks out
# is followed by no other command of the line. What the index shows is asked of git before the
# line runs: it holds for the line's git only while nothing changes what git reads first
# (``as_asked``).
ALONE = frozenset({"git"})
# The rules whose reversible reasons only unlink names (``rm``, ``find -delete``) or, for git,
# replace a file by a new one: a file with another name keeps its data there. Any other
# reversible reason (``truncate``, ``shred``) counts as writing files in place.
UNLINKERS = frozenset({"rm", "rimraf", "find", "git"})


# Where a program named by its path is the system's own: no run can write there.
SYSTEM_PROGRAMS = ("/usr/bin/", "/bin/", "/usr/sbin/", "/sbin/")


def _program_known(word: str, path_changed: bool) -> bool:
    """Whether the command a line names as ``word`` is the program the table judges by its name:
    found on the ``PATH`` the line did not change (its entries that runs can write are read-only
    in the run), or named by a path into the system's own directories. A path into the project
    (``./rm``) or one found after the line set ``PATH`` may be any file."""
    if any(c in word for c in "$`\"'\\"):
        return False  # named through an expansion or quoting: what it names is not read here
    if "/" not in word:
        return not path_changed
    return word.startswith(SYSTEM_PROGRAMS) and ".." not in word.split("/")


def as_asked(commands: Sequence[Sequence[str]], writes: Sequence[object], env: bool) -> bool:
    """Whether the line's git reads what the gate asked git about before the line runs (the
    index, ``HEAD``, the refs, the ignore rules, the configuration): it is the line's only git
    command, given no option before its subcommand but ``-C DIR``, in the environment the line
    started with (no variable set: ``HOME``, ``XDG_CONFIG_HOME`` and ``GIT_*`` choose what git reads;
    no ``env``, which may clear or unset them), and the line writes no file (a redirection may
    write ``.gitignore``). Anything else may change git's reading first: ``echo '!big/' >>
    .gitignore; git clean -fd``, ``git add -f big && git reset --hard``, ``git -c
    core.excludesFile=/dev/null clean -fd``, ``HOME=/tmp git clean -fd``."""
    gits = [argv for argv in commands if argv and argv[0] == "git"]
    if len(gits) != 1 or writes or env or any(argv and argv[0] == "env" for argv in commands):
        return False
    words = list(gits[0][1:])
    while words and words[0].startswith("-"):
        if words[0] != "-C" or len(words) < 2:
            return False
        words = words[2:]
    return True


def _reshaper(
    commands: Sequence[Sequence[str]],
    programs: Sequence[object] | None = None,
    path_changed: bool = False,
    writes: Sequence[object] = (),
    env_changed: bool = True,
) -> str | None:
    """The first command of the line that may make a name for existing data before another acts
    on it, or change what git reads before git acts (None: none can). ``programs``: each command
    as the line names it (None: unknown, as is every command then); ``writes`` and
    ``env_changed``: what the line writes and whether it sets a variable (``Verdict``)."""
    if programs is None or len(programs) != len(commands):
        return "an unknown program" if commands else None
    for argv, word in zip(commands, programs, strict=True):
        if argv and not (isinstance(word, str) and _program_known(word, path_changed)):
            return str(word)  # any file: it may do anything another command would
    names = [argv[0] for argv in commands if argv]
    if all(n in ALONE or n in INERT for n in names):
        if "git" not in names or as_asked(commands, writes, env_changed):
            return None
        return "git"
    return next((n for n in names if n not in PLAIN), None)


def _absolute(base: str, path: str) -> str:
    """``path`` from ``base``, without ``//`` and ``.``; ``..`` stays (the kernel resolves it
    after what comes before it, which may be a symlink: ``coverage`` resolves it)."""
    joined = path if path.startswith("/") else f"{base}/{path}"
    kept = [p for p in joined.split("/") if p not in ("", ".")]
    return "/" + "/".join(kept)


def _climbed(logical: str, path: str) -> list[str]:
    """``path`` from the working directory as named (``logical``), when it starts by
    climbing out of it (``../x``): the shell's ``cd ..`` goes to the parent of the name, not of
    the directory it is (they differ when a symlink is on the way); [] for any other path."""
    parts = [p for p in path.split("/") if p not in ("", ".")]
    up = next((i for i, p in enumerate(parts) if p != ".."), len(parts))
    if not up:
        return []
    top = logical.rstrip("/").split("/")
    return [_absolute("/".join(top[: max(1, len(top) - up)]) or "/", "/".join(parts[up:]))]


def cover_spec(
    cwd: str,
    hits: Sequence[Mapping[str, Any]],
    home: str | None,
    commands: Sequence[Sequence[str]] = (),
    programs: Sequence[object] | None = None,
    path_changed: bool = False,
    writes: Sequence[object] = (),
    env_changed: bool = True,
) -> CoverSpec:
    """The paths the pause list's reversible reasons name, as absolute paths (a glob stands for
    the directory it is in; ``~`` for ``home``); git's reasons stand for the whole project.
    ``commands`` (every simple command the pause list saw) with one that is not ``PLAIN``: every
    place the run can write. A reason without targets (unknown, or none named) also stands for
    every place the run can write. ``programs`` and ``path_changed``: how the line names each
    command and whether it sets ``PATH`` (``Verdict.programs``): a command that may be any file
    also stands for every place the run can write. So does a git reason when the line may
    change what its git reads before it acts (``writes``, ``env_changed``: ``as_asked``). A
    target of a reason that follows symlinks (the hit's ``follows``, a write in place, a glob
    with more after it: ``src/*/x``) is one under which a symlink is not covered."""
    base = os.path.realpath(cwd)
    # The shell's own `cd ..` and `$PWD/..` climb the directory as named (`a/lnk` to `a`), the
    # kernel's `..` the one it is (`lnk`'s target's parent): a climb is checked both ways.
    logical = os.path.abspath(cwd)
    paths: list[str] = []
    follow: list[str] = []
    git = False
    everything = _reshaper(commands, programs, path_changed, writes, env_changed) is not None
    inplace = False
    sources: list[str] = []
    known_sources = True
    index: list[str] = []
    for hit in hits:
        targets = hit.get("targets")
        if hit.get("rule") == "git":
            git = True
            if hit.get("index") is not False and isinstance(targets, (list, tuple)):
                # Missing: the strict answer. Unknown targets: every place, which asks anyway.
                index += [_absolute(base, t) for t in targets if isinstance(t, str) and t]
            got = hit.get("sources")
            if isinstance(got, (list, tuple)) and all(isinstance(s, str) for s in got):
                sources += got
            else:
                known_sources = False  # a commit it takes files from cannot be told
        writes_in_place = hit.get("rule") not in UNLINKERS
        if writes_in_place:
            inplace = True
        # Missing: the strict answer (a verdict from before the checker said).
        follows = writes_in_place or hit.get("follows") is not False
        if not isinstance(targets, (list, tuple)) or not targets:
            everything = True  # unknown targets, or none where the reason says it touches some
            continue
        for t in targets:
            if not isinstance(t, str) or not t:
                everything = True
                continue
            if t == "~" or t.startswith("~/"):
                if not home:
                    everything = True
                    continue
                t = home + t[1:]
            elif t.startswith("~"):
                everything = True  # another user's home
                continue
            parts = t.split("/")
            cut = next((i for i, p in enumerate(parts) if GLOB_CHARS & set(p)), len(parts))
            t = "/".join(parts[:cut]) or ("/" if t.startswith("/") else ".")
            named = [_absolute(base, t)]
            if logical != base and not t.startswith("/"):
                named += _climbed(logical, t)
            for path in named:
                paths.append(path)
                if follows or cut < len(parts) - 1:  # `src/*/x` resolves the names `*` matches
                    follow.append(path)
    return CoverSpec(
        base,
        tuple(dict.fromkeys(paths)),
        git,
        everything,
        inplace,
        tuple(dict.fromkeys(follow)),
        git and known_sources and bool(hits) and all(h.get("rule") == "git" for h in hits),
        tuple(dict.fromkeys(sources)),
        tuple(dict.fromkeys(index)),
    )


def _untracked(project: str, rel: str, sources: Sequence[str] = ()) -> bool:
    """Whether git tracks no file under ``rel`` (project-relative), as git itself says in the
    repository that holds it (a nested one's own index; a clean environment and a timeout): not
    in the index, not in ``HEAD`` (``reset --hard`` writes what ``HEAD`` has) and not in any of
    ``sources`` (the commits a reason takes files from, as written). Any doubt is False."""
    from run_bash.sandbox import gitask

    where, name = os.path.split(rel)
    top = ["--literal-pathspecs", "-C", os.path.join(project, where)]
    asks = [["ls-files", "-z", "--cached", "--", name]]
    for rev in ("HEAD", *sources):
        if rev.startswith("-"):
            return False
        asks.append(["ls-tree", "-r", "-z", "--name-only", rev, "--", name])
    for ask in asks:
        try:
            rc, out, _err = gitask.run_git([*top, *ask], "", {}, clean=True, limit=4096)
        except Exception:
            return False
        if rc != 0 or out != "":
            return False
    return True


def _staged(where: str) -> str | None:
    """Why the index of the repository that holds ``where`` holds content that neither ``HEAD``
    nor the working tree has, as git itself says (a clean environment and a timeout): a file
    staged and then edited again (``git add -p``), staged and then deleted, a merge's
    conflicts. A write of the index throws it away, and undo gives back only the working tree.
    None when there is none (what is staged is also in the file, which undo keeps). Any doubt
    is a reason."""
    from run_bash.sandbox import gitask

    cannot = "git cannot tell what its index holds, which undo does not restore"
    top = ["-C", where, "diff", "--name-only", "--no-renames", "-z"]
    try:
        rc, out, _err = gitask.run_git([*top, "--cached"], "", {}, clean=True, limit=STAGED_MAX)
        staged = [n for n in out.split("\0") if n]
        if rc != 0:
            return cannot
        if not staged:
            return None
        spec = [f":(top,literal){n}" for n in staged]
        rc, out, _err = gitask.run_git([*top, "--", *spec], "", {}, clean=True, limit=STAGED_MAX)
    except Exception:
        return cannot
    if rc != 0:
        return cannot
    names = [n for n in out.split("\0") if n]
    if not names:
        return None
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return f"the index holds staged content the files no longer have ({shown}), which undo does not restore"


def _limits(config: UndoConfig) -> Limits:
    from run_bash.changes import Limits

    return Limits(
        max_file_size=config.max_file_size,
        max_files=config.max_files,
        keep=config.keep,
        max_store=config.max_store,
        ignored_file_max=config.ignored_file_max,
        ignored_total=config.ignored_total,
    )


class RunChanges:
    """The change store of one host, on its own worker threads.

    Args:
        root: the store directory (``stdpath("state")/run_bash/undo``, passed by Lua); None when
            the host was given none: runs are then not recorded and queries are refused.
        config: the ``undo`` options.
        loop: the host loop, which awaits the workers.
        home: the user's home directory (never a project).
    """

    def __init__(
        self,
        root: str | None,
        config: UndoConfig,
        *,
        loop: asyncio.AbstractEventLoop,
        home: str | None = None,
    ) -> None:
        self.root = root
        self.config = config
        self.loop = loop
        self.home = home
        self._store: ChangeStore | None = None
        self._store_mu = threading.Lock()  # several worker threads may need it first at once
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=WORKERS, thread_name_prefix="run_bash-undo"
        )
        self._kept: set[str] = set()
        self._too_big: dict[str, tuple[float, NotRecorded]] = {}  # project -> (when, outcome)
        self.diff_max = DIFF_MAX_BYTES
        # What a sandboxed run in a directory may write: (grants, verified caches), from the
        # sandbox's rules (``policy.writable_grants``); set by the service. None: the project.
        self.grants: Callable[[str], tuple[list[str], list[str]]] | None = None
        # Another run still running in a project (project, this run's id or None) -> its id;
        # set by the service (``SessionManager``'s sessions). None: no other run is known.
        self.others: Callable[[str, str | None], str | None] | None = None
        self._projects: dict[str, tuple[float, str | None, str | None]] = {}  # cwd -> found
        self._warming: set[str] = set()
        self._closed = False  # ``close``: the host is exiting

    # -- configuration ---------------------------------------------------------------------------

    @property
    def recording(self) -> bool:
        """Whether new runs are recorded (``undo.enabled`` and a store to record into)."""
        return self.root is not None and self.config.enabled

    def configure(self, config: UndoConfig) -> None:
        """Use ``config`` from now on (runs in progress finish under it too)."""
        self.config = config
        self._too_big.clear()  # the limits may have changed
        with self._store_mu:
            if self._store is not None:
                self._store.limits = _limits(config)

    @property
    def store(self) -> ChangeStore:
        if self.root is None:
            raise UsageError("no undo store: the host was started without one (RUN_BASH_UNDO)")
        with self._store_mu:
            if self._store is None:
                from run_bash.changes import ChangeStore

                self._store = ChangeStore(self.root, _limits(self.config), home=self.home)
            return self._store

    def private_paths(self) -> list[str]:
        """Paths no sandboxed command may read or change: the store. It is created (empty, 0700)
        when missing, undo off included: the backends cover a denied path that exists, and a
        missing one under a writable grant could be created and filled by a run, then trusted
        by this host once undo records."""
        if not self.root:
            return []
        with contextlib.suppress(OSError):  # one that cannot be made cannot be made inside either
            os.makedirs(self.root, mode=0o700, exist_ok=True)
        return [self.root]

    def is_kept(self, run_id: str) -> bool:
        """Whether the change set of ``run_id`` (a run of this host) is still kept, as of the last
        run that ended. Never blocks: pruning of session history asks it on the loop."""
        return run_id in self._kept

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        return await self.loop.run_in_executor(self._pool, fn, *args)

    # -- around a run ----------------------------------------------------------------------------

    async def begin(self, s: Run) -> None:
        """Snapshot the run's project before its command is spawned. Never raises: a run that
        cannot be recorded gets the notice "changes not recorded: <why>" and runs anyway.

        A run the gate let through because undo covers it (``s.cover``) is checked again on
        this snapshot; when undo no longer covers it, ``s.cover`` gets why (a ``Cover``) and the
        caller asks the user before it starts (the snapshot is dropped)."""
        if not self.recording:
            if s.cover is not None:
                s.cover, s.hold = None, "undo is off (undo.enabled)"
            return
        writable = self._writable(s.cwd) if s.backend.isolates else None
        spec = s.cover
        busy = self._busy(spec, s.cwd, s.id) if spec is not None else None
        if busy is not None:
            s.cover, s.hold = None, busy
            return
        try:
            token, why, uncovered = await self._call(
                self._begin, s.id, s.cwd, s.cmd, writable, spec
            )
        except Exception as err:
            log.exception("recording the changes of %s failed", s.id)
            token, why, uncovered = None, f"internal error ({err}; details in the log)", None
        if uncovered is not None or (spec is not None and why is not None):
            s.cover = None
            s.hold = uncovered or f"undo cannot record this run: {(why or '').removeprefix(QUIET)}"
            return
        self._began(s, token, why)

    def begin_here(self, s: Run) -> None:
        """``begin`` on the calling worker thread, for a run the gate did not let through on
        undo's word (``s.cover`` is None: nothing to check again, never a reason to ask): the
        launch's worker takes the snapshot and then prepares the sandbox, with no hop back to
        the loop between them. Never raises."""
        assert s.cover is None, "a run covered by undo is checked again on the loop (begin)"
        if not self.recording:
            return
        try:
            writable = self._writable(s.cwd) if s.backend.isolates else None
            token, why, _uncovered = self._begin(s.id, s.cwd, s.cmd, writable, None)
        except Exception as err:
            log.exception("recording the changes of %s failed", s.id)
            token, why = None, f"internal error ({err}; details in the log)"
        self._began(s, token, why)

    @staticmethod
    def _began(s: Run, token: Token | None, why: str | None) -> None:
        """What ``begin`` found, on the run: its token, or why it is not recorded."""
        if why is not None:
            quiet = why.startswith(QUIET)
            why = why.removeprefix(QUIET)
            if not quiet:
                s.notices.append(f"changes not recorded: {why}")
            s.changes = {"not_recorded": why}
        else:
            s.change_token = token

    def _writable(self, cwd: str) -> list[str] | None:
        if self.grants is None:
            return None
        grants, _caches = self.grants(cwd)
        return [os.path.realpath(g) for g in grants]

    def _begin(
        self,
        run_id: str,
        cwd: str,
        cmd: str,
        writable: list[str] | None = None,
        spec: CoverSpec | None = None,
    ) -> tuple[Token | None, str | None, str | None]:
        """(token, None, None), (None, why the run is not recorded, None), or (None, None, why
        undo does not cover what the gate let through). A quiet reason (no project here) is
        marked with a leading ``QUIET``."""
        from run_bash.changes import NotRecorded

        store = self.store
        project = store.project_for(cwd)[0]
        known = self._too_big.get(project) if project else None
        if known is not None and time.monotonic() - known[0] < TOO_BIG_RECHECK_S:
            return None, known[1].reason, None
        got = store.begin(run_id, cwd, label=cmd, writable=writable)
        if project and isinstance(got, NotRecorded) and got.lasting:
            self._too_big[project] = (time.monotonic(), got)
        elif project:
            self._too_big.pop(project, None)
        if isinstance(got, NotRecorded):
            return None, (QUIET if got.quiet else "") + got.reason, None
        if spec is not None:
            why = self._covers(got.project, got.before, spec, writable)
            if why:
                store.abandon(got)
                return None, None, why
            got.unasked = True  # its change set is the way back the gate promised: kept longer
        return got, None, None

    def _finish(self, token: Token) -> ChangeSet:
        cs = self.store.finish(token)
        if cs.changes:  # kept (what retention drops meanwhile: ``refresh_kept``)
            self._kept = self._kept | {token.run_id}
        return cs

    async def refresh_kept(self) -> None:
        """Learn which change sets are kept now (a run's just recorded, less what retention
        dropped meanwhile); ``is_kept`` answers from it. Lists every project's change sets: the
        manager calls it after a recorded run's result, not before. A run recorded while the
        listing was made stays counted (the listing may have missed its change set)."""
        before = self._kept
        try:
            listed = await self._call(self.store.kept_ids)
        except Exception:
            if not self._closed:  # (closed: the host is exiting, and nothing asks any more)
                log.exception("listing the kept change sets failed")
            return
        self._kept = listed | (self._kept - before)

    def finish_here(self, s: Run) -> None:
        """Record what the run changed; its summary goes on the session (``changes``). On the
        calling worker thread: the one that has just made the run's post-run check, with no hop
        back to the loop between them. Never raises."""
        token, s.change_token = s.change_token, None
        if token is None:
            return
        try:
            s.changes = describe(self._finish(token))
        except Exception as err:
            log.exception("recording the changes of %s failed", s.id)
            s.changes = {"not_recorded": f"internal error ({err}; details in the log)"}
            s.notices.append(f"changes not recorded: internal error ({err})")

    async def abandon(self, s: Run) -> None:
        """Forget a begun run whose command never started."""
        token, s.change_token = s.change_token, None
        if token is not None:
            try:
                await self._call(self.store.abandon, token)
            except Exception:
                log.exception("abandoning the change set of %s failed", s.id)

    # -- the approval gate's question -----------------------------------------------------------

    def coverage(self, spec: CoverSpec) -> Cover:
        """Whether undo covers ``spec`` now, from the project's index in memory. Never blocks on
        the project: an index not built yet is built on a worker meanwhile, and the answer is
        no ("not known yet")."""
        if not self.recording:
            return Cover("undo is off (undo.enabled)")
        project, why = self._project(spec.cwd)
        if project is None:
            return Cover(f"changes are not recorded here: {why}")
        snap = self._snapshot(project)
        if snap is None:
            self.warm(spec.cwd)
            return Cover("the project's undo index is not built yet (it is being built now)")
        why = self._busy(spec, spec.cwd, None) or self._covers(
            project, snap, spec, self._writable(spec.cwd)
        )
        return Cover(why or "")

    def into_git(self, cwd: str, paths: Sequence[str]) -> str | None:
        """Why a write to one of ``paths`` (as the pause list names them, from ``cwd``) lands
        in a ``.git`` through a symlink of the project, as the file system resolves it now
        (``coverage.into_git``; None: none does)."""
        if not self.recording or not paths:
            return None
        project, _why = self._project(cwd)
        if project is None:
            return None
        from run_bash.changes.coverage import into_git

        base = os.path.realpath(cwd)
        for p in paths:
            if p.startswith("~"):
                continue  # `~` through a symlink of the project: named by the project's path
            via = into_git(project, os.path.join(base, p))
            if via is not None:
                return (
                    f"writes into git's own data (`{p}`, through the symlink {via}), which undo "
                    "does not take back"
                )
        return None

    def _busy(self, spec: CoverSpec, cwd: str, sid: str | None) -> str | None:
        """Why ``spec`` is not covered while another run that can write its project still runs
        (None: no other run). What that run writes after undo looked is in no snapshot: a file
        it makes or rewrites then, deleted or overwritten by this effect, is gone for good
        (undo gives back what was there when undo looked). An effect that follows symlinks
        (``spec.follow``) also goes where a symlink that run makes leads."""
        if self.others is None:
            return None
        project, _why = self._project(cwd)
        other = self.others(project, sid) if project is not None else None
        if other is None:
            return None
        if spec.follow:
            return (
                f"session {other} still runs in this project: a symlink it makes under what "
                "this effect follows would lead it out of undo's reach"
            )
        return (
            f"session {other} still runs in this project: what it writes after undo looked is "
            "not kept, and this effect could delete or overwrite it"
        )

    def indexed(self, cwd: str) -> bool:
        """Whether the index of ``cwd``'s project is in memory (never builds it)."""
        project, _why = self._project(cwd)
        return project is not None and self._snapshot(project) is not None

    def _snapshot(self, project: str) -> Snapshot | None:
        store = self.store
        proj = store._projects.get(store._key(project))
        return proj.snapshot if proj is not None else None

    def _find_project(self, cwd: str) -> tuple[str | None, str | None]:
        """``store.project_for`` without making the store."""
        from run_bash.changes.project import find_project, home_of

        return find_project(cwd, home_of(self.home))

    def _project(self, cwd: str) -> tuple[str | None, str | None]:
        """``store.project_for``, remembered for a few seconds (the gate asks on the loop)."""
        now = time.monotonic()
        got = self._projects.get(cwd)
        if got is None or now - got[0] > PROJECT_CACHE_S:
            found = self._find_project(cwd)
            got = (now, *found)
            if len(self._projects) > 256:
                self._projects.clear()
            self._projects[cwd] = got
        return got[1], got[2]

    def _covers(
        self, project: str, snap: Snapshot, spec: CoverSpec, writable: list[str] | None
    ) -> str | None:
        from run_bash.changes.coverage import covers

        paths = list(spec.paths)
        if spec.git:  # the worktrees git's reasons name (checked too: ``git -C lnk``) and all
            paths = [project, *paths]
        if spec.everything:
            if writable is None:
                return "its effect is only known at run time, and the run has no sandbox"
            caches = set()
            if self.grants is not None:
                caches = {os.path.realpath(c) for c in self.grants(spec.cwd)[1]}
            paths += [w for w in writable if w not in caches]
        git = spec.git and not spec.everything
        untracked = (
            partial(_untracked, project, sources=spec.sources) if git and spec.git_only else None
        )
        why = covers(
            snap,
            project,
            paths,
            git=git,
            inplace=spec.inplace,
            follow=frozenset(spec.follow),
            untracked=untracked,
        )
        if why is None and spec.inplace:
            from run_bash.changes.coverage import linked_now

            why = linked_now(snap, project, paths)
        for where in spec.index if why is None else ():
            why = _staged(where)
            if why is not None:
                break
        return why

    def warm(self, cwd: str) -> None:
        """Build the index of ``cwd``'s project on a worker (nothing is recorded; a directory
        that is no project gets nothing, not even the store). Returns at once."""
        if not self.recording or cwd in self._warming:
            return
        self._warming.add(cwd)

        def work() -> None:
            from run_bash.changes import Token

            try:
                # Asked afresh: the gate's few seconds of memory (``_project``) are its own.
                if self._find_project(cwd)[0] is None:
                    return
                got = self.store.begin(f"warm-{os.getpid()}", cwd, writable=self._writable(cwd))
                if isinstance(got, Token):
                    self.store.abandon(got)
            except Exception:
                log.exception("building the undo index of %s failed", cwd)
            finally:
                self._warming.discard(cwd)

        self._pool.submit(work)

    def finish_now(
        self,
        runs: Iterable[Run],
        timeout_s: float = SHUTDOWN_FINISH_S,
        never_started: Iterable[Run] = (),
    ) -> None:
        """Host shutdown (every command already killed): finish the runs still open, waiting at
        most ``timeout_s`` in all; a run not finished by then has no change set. Runs in
        ``never_started`` (snapshotted, not spawned yet) are forgotten: nothing of theirs ran."""
        for s in never_started:
            token, s.change_token = s.change_token, None
            if token is not None:
                self._pool.submit(self.store.abandon, token)
        pending = []
        for s in runs:
            token, s.change_token = s.change_token, None
            if token is not None:
                pending.append((s, self._pool.submit(self._finish, token)))
        deadline = time.monotonic() + timeout_s
        for s, fut in pending:
            try:
                s.changes = describe(fut.result(max(0.0, deadline - time.monotonic())))
            except Exception as err:
                late = isinstance(err, concurrent.futures.TimeoutError)
                why = "the host stopped first" if late else str(err)
                s.changes = {"not_recorded": why}

    def close(self) -> None:
        """Stop the workers without waiting and release the store's inotify instances (the host
        is exiting)."""
        self._closed = True
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._store is not None:
            self._store.release()

    # -- queries (each on a worker) --------------------------------------------------------------

    def _resolve(self, run_id: str | None, cwd: str | None) -> str:
        """``run_id``, or the latest run with changes in the project of ``cwd`` (else anywhere)."""
        if run_id is not None:
            return run_id
        store = self.store
        project = store.project_for(cwd)[0] if cwd else None
        cs = (store.latest(project) if project else None) or store.latest()
        if cs is None:
            raise UsageError("no run with changes is kept")
        return cs.run_id

    @staticmethod
    def _unknown(run_id: str) -> UsageError:
        return UsageError(
            f"no change set is kept for run {run_id!r} (a run that changed nothing keeps none; "
            "the oldest are pruned: undo.keep, undo.max_store)"
        )

    def _get(self, run_id: str | None, cwd: str | None) -> ChangeSet:
        rid = self._resolve(run_id, cwd)
        cs = self.store.get(rid)
        if cs is None:
            raise self._unknown(rid)
        return cs

    async def changes(self, run_id: str | None, cwd: str | None) -> dict[str, Any]:
        """``{run, project, label, summary, changes: [{path, kind, detail?, skipped?}]}``."""

        def work() -> dict[str, Any]:
            cs = self._get(run_id, cwd)
            return {
                "run": cs.run_id,
                "project": cs.project,
                "label": cs.label,
                "undo_of": cs.undo_of,
                "summary": cs.summary(),
                "changes": cs.to_list(),
            }

        return await self._call(work)

    async def diff(self, run_id: str | None, cwd: str | None) -> dict[str, Any]:
        """``{run, text}``: the change set as a unified diff."""

        def work() -> dict[str, Any]:
            rid = self._resolve(run_id, cwd)
            text = self.store.diff_text(rid)
            if text is None:
                raise self._unknown(rid)
            if len(text) > self.diff_max:
                cut = text.rfind("\n", 0, self.diff_max) + 1
                rest = text[cut:].count("\n")
                text = text[:cut] + f"# … {rest} more lines not shown: the diff is too long\n"
            return {"run": rid, "text": text}

        return await self._call(work)

    async def plan(self, run_id: str | None, cwd: str | None, force: bool) -> dict[str, Any]:
        """What undo would do now: ``{run, project, label, restore, remove, conflicts,
        not_recovered}``."""

        def work() -> dict[str, Any]:
            cs = self._get(run_id, cwd)
            try:
                plan = self.store.plan(cs.run_id, force)
            except KeyError:
                raise self._unknown(cs.run_id) from None
            return {**plan, "label": cs.label, "force": force}

        return await self._call(work)

    async def undo(
        self, run_id: str | None, cwd: str | None, force: bool, new_id: str
    ) -> dict[str, Any]:
        """Undo a run (recorded as run ``new_id``): ``{undo_of, run, restored, removed, conflicts,
        not_recovered, errors, recorded, project}``."""

        def work() -> dict[str, Any]:
            cs = self._get(run_id, cwd)
            try:
                done = self.store.undo(cs.run_id, force, new_id)
            except KeyError:
                raise self._unknown(cs.run_id) from None
            except FileNotFoundError as err:
                raise UsageError(str(err)) from None
            self._kept = self.store.kept_ids()
            return {**done, "undo_of": cs.run_id, "project": cs.project, "force": force}

        return await self._call(work)

    async def runs(self) -> list[dict[str, Any]]:
        """Every kept change set, newest first: ``{run, project, ended, counts, undo_of,
        label}``."""
        return await self._call(self.store.runs)

    async def usage(self) -> dict[str, Any]:
        """``{path, bytes, runs, projects, enabled, keep, max_store, idle_days}`` for health."""
        from run_bash.changes.store import PROJECT_IDLE_S

        def work() -> dict[str, Any]:
            return {
                **self.store.usage(),
                "enabled": self.config.enabled,
                "keep": self.config.keep,
                "max_store": self.config.max_store,
                "idle_days": PROJECT_IDLE_S // 86400,
            }

        return await self._call(work)
