"""The host-read set: what a sandboxed command could write that the host later loads, runs or reads.

One module finds all of it, on the host, for one working directory and the writable grants of its
policy:

* **Git.** Every repository git on the host could reach from the project: the one ``git
  rev-parse`` finds from the working directory (its git dir, common dir, effective hooks directory
  and work tree), the linked worktrees and submodule git dirs under its common dir, every ``.git``
  entry (directory, gitfile or symlink) and bare repository in the project's tree, and a parent
  repository above the project (a ``$HOME`` dotfiles repository). For each one inside a writable
  grant: its config files (with every file they include), ``config.worktree``, hooks directory,
  ``commondir`` and ``gitdir`` links, ``info/attributes``, ``objects/info/alternates``, the
  ``.git`` entry itself and ``.gitmodules``. Git is asked with a clean environment and a timeout,
  and only for layout (``rev-parse``, ``config --list``): nothing it is asked runs hooks or
  filters, and a file that blocks it (a FIFO, a lease) makes the discovery fail, never hang.
* **Grants everyday git needs.** The git dir (and common dir of a linked worktree) of the
  project's repository when it lies outside the working directory, so ``git commit`` works from a
  subdirectory or a linked worktree. Never the git dir of a repository whose work tree is ``$HOME``,
  one of its parents, or ``/``.
* **PATH.** Entries of the user's ``PATH`` that lie inside a writable grant: a new executable there
  that shadows a command found later on ``PATH`` would run instead of it for the user.
* **Agent rules files.** CodeCompanion's configured rules files (``setup`` passes them) and the
  common names other agents use, in the project: the next chat reads them and the files their
  ``@`` lines include.
* **Neovim and shell hooks.** ``.nvim.lua``, ``.nvimrc``, ``.exrc``, ``.envrc``, ``.lazy.lua`` and
  CodeCompanion's ``per_project_config`` files (it runs them with ``dofile``) in the project.

``Discovery`` caches what git said per working directory and asks again only when a file git read
for it changed (a stat signature), and caches the tree walk per directory (one ``lstat`` per
directory when nothing changed). The rules that judge a change (``inert_config``,
``shadowing``, ``include_targets``) are pure functions here; ``guard.py`` applies them.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import subprocess
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from run_bash.errors import SpawnError
from run_bash.paths import expand, is_under

GIT_TIMEOUT_S = 5.0
# A gitfile, commondir or gitdir link is one short line; anything longer is not read.
MAX_LINK_BYTES = 4096
# Nested submodule git dirs (modules/a/modules/b/...) and worktree admin dirs looked at per repo.
MAX_GIT_DIRS = 512
# Directories of the project walked to find repositories (one lstat each when unchanged).
MAX_SCAN_DIRS = 100_000

# Files of a git directory that git reads as configuration or as a pointer to another place.
GIT_DIR_MEMBERS = (
    "config",
    "config.worktree",
    "commondir",
    "gitdir",
    "info/attributes",
    "objects/info/alternates",
)
# Files at the top of a work tree that are host-read: git reads .gitmodules for submodule URLs and
# paths; Neovim runs .nvim.lua/.nvimrc/.exrc (exrc), direnv runs .envrc, lazy.nvim runs .lazy.lua.
WORK_TREE_MEMBERS = (".gitmodules", ".nvim.lua", ".nvimrc", ".exrc", ".envrc", ".lazy.lua")

# Rules files read by agents (CodeCompanion's default group, Claude Code, Cursor, Cline, Windsurf,
# Goose, Copilot, Gemini). CodeCompanion's own configuration adds to these (``setup``).
RULES_NAMES = (
    "AGENTS.md",
    "AGENT.md",
    "CLAUDE.md",
    "CLAUDE.local.md",
    "GEMINI.md",
    ".rules",
    ".cursorrules",
    ".cursor/rules",
    ".clinerules",
    ".windsurfrules",
    ".goosehints",
    ".github/copilot-instructions.md",
)

# Config keys a repository created inside the sandbox may carry and still be inert: none of them
# names a program, a file to include, a hook, a filter or another repository. ``*`` is any
# subsection. A repository with any other key is quarantined (``guard.py``).
INERT_CONFIG_KEYS = frozenset(
    {
        "core.repositoryformatversion",
        "core.filemode",
        "core.bare",
        "core.logallrefupdates",
        "core.ignorecase",
        "core.precomposeunicode",
        "core.symlinks",
        "core.autocrlf",
        "core.eol",
        "core.safecrlf",
        "core.sparsecheckout",
        "core.sparsecheckoutcone",
        "core.checkstat",
        "core.trustctime",
        "core.quotepath",
        "core.compression",
        "core.abbrev",
        "extensions.objectformat",
        "extensions.worktreeconfig",
        "extensions.preciousobjects",
        "extensions.noop",
        "remote.*.url",
        "remote.*.pushurl",
        "remote.*.fetch",
        "remote.*.push",
        "remote.*.tagopt",
        "remote.*.mirror",
        "remote.*.prune",
        "branch.*.remote",
        "branch.*.merge",
        "branch.*.rebase",
        "branch.*.pushremote",
        "branch.*.description",
        "user.name",
        "user.email",
        "init.defaultbranch",
        "submodule.*.url",
        "submodule.*.active",
        "submodule.*.branch",
        "gc.auto",
        "gc.autodetach",
        "pull.rebase",
        "pull.ff",
        "fetch.prune",
        "push.default",
        "push.autosetupremote",
        "index.version",
    }
)

_STAT = tuple[int, int, int, int, int]


def _sig(path: str) -> _STAT | None:
    """What identifies the current content of ``path`` without reading it."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def read_nonblocking(path: str, limit: int) -> bytes | None:
    """The bytes of a regular file, read without ever blocking: ``O_NONBLOCK | O_NOFOLLOW`` (a
    FIFO opens at once, a lease answers EWOULDBLOCK, a symlink fails). None when it is not a
    regular file, cannot be read, or is longer than ``limit``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            data = os.read(fd, min(65536, limit + 1 - size))
            if not data:
                break
            chunks.append(data)
            size += len(data)
        return b"".join(chunks) if size <= limit else None
    except OSError:
        return None
    finally:
        os.close(fd)


# -------------------------------------------------------------------------------------------------
# The set


@dataclass(frozen=True)
class Repo:
    """One repository git on the host could reach from the project."""

    git_dir: str  # absolute, symlinks resolved
    common_dir: str  # == git_dir unless a linked worktree (or a commondir link)
    work_tree: str | None  # None: bare, or not known
    entry: str | None  # the `.git` entry leading to it (directory, gitfile or symlink)
    hooks: str  # the hooks directory git runs from (core.hooksPath or <common>/hooks)


@dataclass(frozen=True)
class PathDir:
    """A ``PATH`` entry inside a writable grant, and the entries after it."""

    path: str
    later: tuple[str, ...]


@dataclass(frozen=True)
class RulesName:
    """A rules file an agent reads; ``parser`` is CodeCompanion's parser name when configured."""

    path: str
    parser: str | None = None


@dataclass(frozen=True)
class HostRead:
    """The host-read set of one working directory (see the module docstring).

    ``members`` must not change from inside (existing or not); ``git_dirs`` are the git
    directories inside writable grants (bound onto themselves; their identity is checked);
    ``grant`` are git directories outside the working directory that everyday git needs writable.
    ``scan`` are the trees searched for new repositories after each run.
    """

    cwd: str
    roots: tuple[str, ...]
    writable: tuple[str, ...]
    denied: tuple[str, ...]
    home: str
    repos: tuple[Repo, ...] = ()
    members: tuple[str, ...] = ()
    git_dirs: tuple[str, ...] = ()
    grant: tuple[str, ...] = ()
    path_dirs: tuple[PathDir, ...] = ()
    rules: tuple[RulesName, ...] = ()
    scan: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)
    warnings: tuple[str, ...] = ()

    def is_writable(self, path: str) -> bool:
        """Whether a command of this policy can write ``path`` (lexically or once resolved)."""
        return path in Places(self.writable)

    def is_project(self, path: str) -> bool:
        """Whether ``path`` lies in the project: the working directory or the work tree of its
        repository."""
        return path in Places(self.roots)


class Places:
    """A set of directories, matched as written and with symlinks resolved (both are computed
    once)."""

    def __init__(self, paths: Iterable[str]) -> None:
        self.paths = tuple(dict.fromkeys(os.path.normpath(p) for p in paths))
        self.real = tuple(dict.fromkeys(os.path.realpath(p) for p in self.paths))

    def __contains__(self, path: str) -> bool:
        if any(is_under(path, p) for p in self.paths):
            return True
        real = os.path.realpath(path)
        return any(is_under(real, p) for p in self.real)


# -------------------------------------------------------------------------------------------------
# Asking git


class HostReadError(SpawnError):
    """The host-read set could not be determined: the run does not start."""


def git_env(env: Mapping[str, str]) -> dict[str, str]:
    """The environment git is asked in: the user's own config files (they decide the hooks path
    and includes), nothing else of the caller's environment (no GIT_DIR, GIT_CONFIG_*, pager,
    editor or askpass), discovery across file systems so a parent repository is always found."""
    out = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C",
        "LC_ALL": "C",
        "GIT_DISCOVERY_ACROSS_FILESYSTEM": "1",
        "GIT_OPTIONAL_LOCKS": "0",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_PAGER": "cat",
        "PAGER": "cat",
        "GIT_ASKPASS": "",
        "SSH_ASKPASS": "",
    }
    for name in ("HOME", "XDG_CONFIG_HOME"):
        if env.get(name):
            out[name] = env[name]
    return out


# Options for every git call: no fsmonitor, no pager, any owner (root reading a user's tree).
GIT_OPTS = ("--no-pager", "-c", "core.fsmonitor=false", "-c", "safe.directory=*")


def run_git(args: Sequence[str], cwd: str, env: Mapping[str, str]) -> tuple[int, str, str]:
    """Run ``git`` with a timeout; (returncode, stdout, stderr). A git that does not answer in
    ``GIT_TIMEOUT_S`` (a FIFO or a leased file in its way) raises HostReadError."""
    try:
        proc = subprocess.run(
            ["git", *GIT_OPTS, *args],
            cwd=cwd,
            env=git_env(env),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=GIT_TIMEOUT_S,
            close_fds=True,
            start_new_session=True,
        )
    except subprocess.TimeoutExpired:
        raise HostReadError(
            f"git did not answer within {GIT_TIMEOUT_S:g} s in {cwd} (a file of the repository "
            "blocks it: a FIFO, or a lease held by a running command); nothing was started"
        ) from None
    except OSError as e:
        raise HostReadError(f"cannot run git to read the repository layout: {e}") from None
    return (
        proc.returncode,
        proc.stdout.decode(errors="surrogateescape"),
        proc.stderr.decode(errors="replace"),
    )


@dataclass(frozen=True)
class GitAnswer:
    """What git says about one repository."""

    git_dir: str
    common_dir: str
    hooks: str
    work_tree: str | None
    config_files: tuple[str, ...]


def ask_git(cwd: str, env: Mapping[str, str], git_dir: str | None = None) -> GitAnswer | None:
    """Ask git about the repository of ``cwd`` (or the one at ``git_dir``, run from ``cwd``);
    None when there is none."""
    pre = [f"--git-dir={git_dir}"] if git_dir else []
    rc, out, err = run_git(
        [
            *pre,
            "rev-parse",
            "--path-format=absolute",
            "--absolute-git-dir",
            "--git-common-dir",
            "--git-path",
            "hooks",
            "--show-toplevel",
        ],
        cwd,
        env,
    )
    lines = out.splitlines()
    if len(lines) < 3:
        if git_dir is None:
            return None  # not a repository
        if "not a git repository" in err:
            # A `.git` directory git does not (yet) take for a repository: what would make it
            # one (a config, hooks) is watched at the usual places.
            hooks = os.path.join(git_dir, "hooks")
            return GitAnswer(git_dir, git_dir, hooks, None, ())
        raise HostReadError(f"git cannot read the repository at {git_dir}: {err.strip()[-300:]}")
    gd, common, hooks = (os.path.normpath(x) for x in lines[:3])
    # With --git-dir git takes the current directory for the work tree: the caller knows better.
    top = os.path.normpath(lines[3]) if len(lines) > 3 and rc == 0 and not git_dir else None
    # With an absolute --git-dir every origin git prints is absolute.
    rc, out, err = run_git([f"--git-dir={gd}", "config", "--list", "--show-origin", "-z"], gd, env)
    if rc != 0:
        raise HostReadError(
            f"git cannot read the configuration of {gd}: {err.strip()[-300:] or f'exit {rc}'}"
        )
    files: list[str] = []
    records = out.split("\0")
    for origin, entry in zip(records[::2], records[1::2], strict=False):
        if not origin.startswith("file:"):
            continue
        origin = os.path.normpath(os.path.join(gd, origin[5:]))
        files.append(origin)
        key, _, value = entry.partition("\n")
        key = key.lower()
        if key == "include.path" or (key.startswith("includeif.") and key.endswith(".path")):
            # An included file is read even when it holds no key yet (then git lists nothing of
            # it): every include is a config file, whatever its condition.
            if value.startswith("~/"):
                value = os.path.join(env.get("HOME") or "~", value[2:])
            files.append(os.path.normpath(os.path.join(os.path.dirname(origin), value)))
    return GitAnswer(gd, common, hooks, top, tuple(dict.fromkeys(files)))


# -------------------------------------------------------------------------------------------------
# Finding repositories in a tree (the way git discovers them: a `.git` entry, or a directory that
# is itself a git dir)


@dataclass(frozen=True)
class _DirInfo:
    ident: tuple[int, int, int]  # (inode, ctime_ns, mtime_ns): any entry added/removed changes it
    dotgit: bool
    bare: bool
    subdirs: tuple[str, ...]


def looks_like_git_dir(names: Iterable[str] | str) -> bool:
    """Git's own test for a repository directory: HEAD, objects and refs."""
    if isinstance(names, str):
        try:
            names = os.listdir(names)
        except OSError:
            return False
    have = set(names)
    return {"HEAD", "objects", "refs"} <= have


class TreeScan:
    """Finds every ``.git`` entry and bare repository under a tree. A directory whose (inode,
    ctime, mtime) is unchanged since the last walk is not listed again (ctime cannot be set back
    from user space), so a walk of an unchanged tree costs one lstat per directory."""

    def __init__(self) -> None:
        self._dirs: dict[str, _DirInfo] = {}
        self._lock = threading.Lock()

    def find(self, root: str) -> tuple[list[tuple[str, str]], bool]:
        """``(path, kind)`` for every ``.git`` entry (kind "dotgit", the entry's path) and bare
        repository directory (kind "bare") under ``root``; symlinked directories are not entered.
        The flag says the walk stopped at ``MAX_SCAN_DIRS`` directories."""
        found: list[tuple[str, str]] = []
        seen: dict[str, _DirInfo] = {}
        with self._lock:
            cache = dict(self._dirs)
        lstat, isdir, listing = os.lstat, stat.S_ISDIR, self._list
        stack = [root]
        truncated = False
        while stack:
            if len(seen) >= MAX_SCAN_DIRS:
                truncated = True
                break
            d = stack.pop()
            try:
                st = lstat(d)
            except OSError:
                continue
            if not isdir(st.st_mode):
                continue
            ident = (st.st_ino, st.st_ctime_ns, st.st_mtime_ns)
            info = cache.get(d)
            if info is None or info.ident != ident:
                info = listing(d, ident)
            seen[d] = info
            if info.dotgit:
                found.append((d + "/.git", "dotgit"))
            if info.bare:
                found.append((d, "bare"))  # the root too: git takes a bare-shaped cwd for a repo
                stack += [d + "/" + n for n in info.subdirs if n not in ("objects", "refs")]
            else:
                stack += [d + "/" + n for n in info.subdirs]
        with self._lock:
            # Keep what this walk saw; forget directories of this tree that are gone.
            if not truncated:
                prefix = root.rstrip("/") + "/"
                for path in [p for p in self._dirs if p.startswith(prefix) and p not in seen]:
                    del self._dirs[path]
            self._dirs.update(seen)
        return found, truncated

    @staticmethod
    def _list(d: str, ident: tuple[int, int, int]) -> _DirInfo:
        names: list[str] = []
        subdirs: list[str] = []
        dotgit = False
        _make_listable(d)
        try:
            with os.scandir(d) as it:
                for entry in it:
                    names.append(entry.name)
                    if entry.name == ".git":
                        dotgit = True
                        continue  # a git dir's inside is covered by its own members
                    with contextlib.suppress(OSError):
                        if entry.is_dir(follow_symlinks=False):
                            subdirs.append(entry.name)
        except OSError:
            pass
        return _DirInfo(ident, dotgit, looks_like_git_dir(names), tuple(subdirs))


def _make_listable(d: str) -> None:
    """A directory of ours that a run made unreadable would hide what is in it: give the owner
    read and search permission back."""
    try:
        st = os.lstat(d)
    except OSError:
        return
    if st.st_uid == os.geteuid() and st.st_mode & 0o500 != 0o500:
        with contextlib.suppress(OSError):
            os.chmod(d, stat.S_IMODE(st.st_mode) | 0o500)


def read_gitfile(path: str) -> str | None:
    """The git dir a gitfile (``gitdir: <path>``) or ``commondir``/``gitdir`` link points to,
    absolute (relative links are relative to the file's directory); None if unreadable."""
    data = read_nonblocking(path, MAX_LINK_BYTES)
    if data is None:
        return None
    text = data.decode(errors="surrogateescape").strip()
    if text.startswith("gitdir:"):
        text = text[7:].strip()
    if not text or "\n" in text:
        return None
    return os.path.normpath(os.path.join(os.path.dirname(path), text))


def resolve_entry(entry: str) -> str | None:
    """The git dir a ``.git`` entry leads to: itself (a directory), the target of a symlink, or
    the target of a gitfile. None when it leads nowhere readable."""
    try:
        st = os.lstat(entry)
    except OSError:
        return None
    if stat.S_ISDIR(st.st_mode):
        return entry
    if stat.S_ISLNK(st.st_mode):
        target = os.path.realpath(entry)
        if os.path.isdir(target):
            return target
        return read_gitfile(target) if os.path.isfile(target) else None
    if stat.S_ISREG(st.st_mode):
        return read_gitfile(entry)
    return None


def nested_git_dirs(common: str) -> list[str]:
    """Linked worktree admin dirs (``worktrees/*``) and submodule git dirs (``modules/**``,
    nested ones too) under a common dir."""
    out: list[str] = []
    stack = [common]
    while stack and len(out) < MAX_GIT_DIRS:
        g = stack.pop()
        base = os.path.join(g, "worktrees")
        if os.path.isdir(base) and not os.path.islink(base):
            with contextlib.suppress(OSError), os.scandir(base) as it:
                out += [e.path for e in it if e.is_dir(follow_symlinks=False)]
        base = os.path.join(g, "modules")
        if os.path.islink(base) or not os.path.isdir(base):
            continue
        for root, dirs, files in os.walk(base):
            if looks_like_git_dir([*dirs, *files]):
                out.append(root)
                stack.append(root)
                dirs[:] = []  # its own modules/ is walked from the stack
            if len(out) >= MAX_GIT_DIRS:
                break
    return out[:MAX_GIT_DIRS]


# -------------------------------------------------------------------------------------------------
# Discovery


def dangerous_parent(top: str, home: str) -> bool:
    """A work tree no run may be granted the git dir of: ``/``, ``$HOME`` or a parent of it."""
    top = os.path.realpath(top)
    return top == "/" or (bool(home) and is_under(os.path.realpath(home), top))


class Discovery:
    """Computes ``HostRead`` sets; caches git's answers per working directory (see the module
    docstring). Thread-safe: the host computes policies off its event loop."""

    def __init__(self) -> None:
        self.trees = TreeScan()
        self._answers: dict[
            tuple[str, str | None], tuple[tuple[object, ...], GitAnswer | None]
        ] = {}
        self._lock = threading.Lock()

    def _ask(
        self, cwd: str, env: Mapping[str, str], git_dir: str | None = None
    ) -> GitAnswer | None:
        key = (cwd, git_dir)
        with self._lock:
            hit = self._answers.get(key)
        if hit is not None and hit[0] == self._signature(cwd, env, hit[1]):
            return hit[1]
        answer = ask_git(cwd, env, git_dir)
        sig = self._signature(cwd, env, answer)
        with self._lock:
            if len(self._answers) > 256:
                self._answers.clear()
            self._answers[key] = (sig, answer)
        return answer

    @staticmethod
    def _signature(
        cwd: str, env: Mapping[str, str], answer: GitAnswer | None
    ) -> tuple[object, ...]:
        """Everything git's answer depends on: the `.git` entries from cwd up to /, the user's
        config files, and for a repository its config files, links and hooks setting."""
        paths: list[str] = []
        d = cwd
        while True:
            paths.append(os.path.join(d, ".git"))
            parent = os.path.dirname(d)
            if parent == d:
                break
            d = parent
        home = env.get("HOME") or ""
        xdg = env.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
        paths += [os.path.join(home, ".gitconfig"), os.path.join(xdg, "git/config")]
        paths.append("/etc/gitconfig")
        if answer is not None:
            for g in dict.fromkeys((answer.git_dir, answer.common_dir)):
                paths += [os.path.join(g, m) for m in ("config", "config.worktree", "commondir")]
            paths += list(answer.config_files)
        return (*(_sig(p) for p in paths), env.get("HOME"), env.get("XDG_CONFIG_HOME"))

    def discover(
        self,
        cwd: str,
        *,
        writable: Sequence[str],
        denied: Sequence[str] = (),
        env: Mapping[str, str],
        home: str,
        rules: Sequence[RulesName] = (),
        project_files: Sequence[str] = (),
    ) -> HostRead:
        """The host-read set of ``cwd`` for a policy with these writable grants. Raises
        HostReadError when git cannot tell (the run must not start)."""
        cwd = os.path.normpath(cwd)
        writable = [os.path.normpath(w) for w in writable]
        in_writable = Places(writable)
        answer = self._ask(cwd, env)
        grant: list[str] = []
        roots = [cwd]
        granted = list(writable)
        if answer is not None and answer.work_tree is not None:
            top = answer.work_tree
            under = is_under(os.path.realpath(cwd), os.path.realpath(top))
            if under and not dangerous_parent(top, home):
                roots.append(top)
                # Everyday git from a subdirectory or a linked worktree writes the git dir.
                if cwd in in_writable:
                    for g in dict.fromkeys((answer.git_dir, answer.common_dir)):
                        if g not in in_writable:
                            grant.append(g)
        granted += grant
        in_granted = Places(granted)
        roots = list(dict.fromkeys(roots))

        # Every git dir to look at: git's answer, the trees' `.git` entries and bare repos,
        # the nested ones under each common dir.
        scan = [r for r in (cwd,) if r in in_writable]
        entries: dict[str, str] = {}  # git dir -> the `.git` entry leading to it
        repo_dirs: list[str] = []
        loose_entries: list[str] = []
        if answer is not None:
            repo_dirs += [answer.git_dir, answer.common_dir]
            if answer.work_tree is not None:
                entries[answer.git_dir] = os.path.join(answer.work_tree, ".git")
        warnings: list[str] = []
        for root in scan:
            found, truncated = self.trees.find(root)
            if truncated:
                warnings.append(
                    f"{root} has more than {MAX_SCAN_DIRS} directories: repositories created "
                    "deeper in it are not checked after a run"
                )
            for path, kind in found:
                if kind == "bare":
                    repo_dirs.append(path)
                    continue
                target = resolve_entry(path)
                if target is None:
                    loose_entries.append(path)
                    continue
                target = os.path.realpath(target)
                entries.setdefault(target, path)
                repo_dirs.append(target)
        seen: dict[str, None] = {}
        queue = [os.path.realpath(g) for g in repo_dirs]
        while queue and len(seen) < MAX_GIT_DIRS:
            g = queue.pop(0)
            if g in seen or not os.path.isdir(g):
                continue
            seen[g] = None
            common = read_gitfile(os.path.join(g, "commondir"))
            if common is not None:
                queue.append(os.path.realpath(common))
            queue += [os.path.realpath(x) for x in nested_git_dirs(g)]

        repos: list[Repo] = []
        members: list[str] = []
        git_dirs: list[str] = []

        def add(path: str) -> None:
            if path in in_granted:
                members.append(os.path.normpath(path))

        for g in seen:
            info: GitAnswer | None
            if answer is not None and g == os.path.realpath(answer.git_dir):
                info = answer
            elif g in in_granted:
                entry = entries.get(g)
                info = self._ask(g, env, g)
            else:
                continue  # not writable: nothing of it needs keeping
            assert info is not None
            entry = entries.get(g)
            work = info.work_tree if info is answer else None
            if entry is not None and work is None:
                work = os.path.dirname(entry)
            repo = Repo(
                git_dir=g,
                common_dir=os.path.realpath(info.common_dir),
                work_tree=work,
                entry=entry,
                hooks=info.hooks,
            )
            repos.append(repo)
            if g in in_granted:
                git_dirs.append(g)
            for d in dict.fromkeys((g, repo.common_dir)):
                for name in GIT_DIR_MEMBERS:
                    add(os.path.join(d, name))
            add(repo.hooks)
            for f in info.config_files:
                add(f)
            if entry is not None and (os.path.islink(entry) or not os.path.isdir(entry)):
                add(entry)  # a gitfile or symlink: where it points must not change
            if repo.work_tree is not None:
                add(os.path.join(repo.work_tree, ".gitmodules"))
        for e in loose_entries:
            add(e)  # a `.git` that leads nowhere (yet): it must not start leading somewhere
        for r in roots:
            for name in (*WORK_TREE_MEMBERS, *project_files):
                if not os.path.isabs(name):
                    add(os.path.join(r, name))
        return HostRead(
            cwd=cwd,
            roots=tuple(roots),
            writable=tuple(granted),
            denied=tuple(denied),
            home=home,
            repos=tuple(repos),
            members=tuple(dict.fromkeys(members)),
            git_dirs=tuple(dict.fromkeys(git_dirs)),
            grant=tuple(grant),
            path_dirs=tuple(path_dirs(env.get("PATH", ""), granted, roots)),
            rules=tuple(rules_names(roots, rules, granted, env, home)),
            scan=tuple(scan),
            env=dict(env),
            warnings=tuple(warnings),
        )


def path_dirs(path_var: str, writable: Sequence[str], roots: Sequence[str] = ()) -> list[PathDir]:
    """``PATH`` entries inside a writable grant, each with the entries after it. A relative entry
    (``.``, ``bin``, or an empty one, which means the current directory) is taken relative to
    each project root: a program started there finds what a run put there."""
    entries: list[tuple[str, list[str]]] = []  # (as written, what it means)
    for e in path_var.split(os.pathsep):
        if os.path.isabs(e):
            entries.append((e, [os.path.normpath(e)]))
        else:
            entries.append((e, [os.path.normpath(os.path.join(r, e or ".")) for r in roots]))
    places = Places(writable)
    out: list[PathDir] = []
    for i, (_raw, meanings) in enumerate(entries):
        later = tuple(m for _r, ms in entries[i + 1 :] for m in ms)
        for e in meanings:
            if e in places and not any(p.path == e for p in out):
                out.append(PathDir(e, later))
    return out


def rules_names(
    roots: Sequence[str],
    configured: Sequence[RulesName],
    writable: Sequence[str],
    env: Mapping[str, str],
    home: str,
) -> list[RulesName]:
    """The rules files to check: the common names in each project root, and the configured ones
    (relative ones in each root; absolute ones and globs where they land) inside a writable grant."""
    import glob

    out: dict[str, RulesName] = {}
    for r in roots:
        for name in RULES_NAMES:
            common = os.path.join(r, name)
            out.setdefault(common, RulesName(common))
    for spec in configured:
        raw = spec.path
        bases = [None] if raw.startswith(("/", "~", "$")) else list(roots)
        for base in bases:
            p = expand(raw, env=env, home=home, base=base)
            if p is None:
                continue
            paths = sorted(glob.glob(p))[:256] if any(c in p for c in "*?[") else [p]
            for q in paths:
                q = os.path.normpath(q)
                out[q] = RulesName(q, spec.parser or (out[q].parser if q in out else None))
    places = Places(writable)
    return [r for r in out.values() if r.path in places]


# -------------------------------------------------------------------------------------------------
# The rules that judge what a run left behind


_SECTION_RE = re.compile(r'^\[\s*([A-Za-z0-9.-]+)(?:\s+"((?:[^"\\]|\\.)*)")?\s*\]\s*(.*)$')
_KEY_RE = re.compile(r"^([A-Za-z][A-Za-z0-9-]*)\s*(=.*)?$")


def config_keys(text: str) -> list[str] | None:
    """The ``section[.*].key`` names of a git config file (subsections as ``*``), or None when the
    file cannot be parsed with certainty (then it is not inert)."""
    keys: list[str] = []
    section: str | None = None
    sub = False
    continued = False
    for raw in text.split("\n"):
        line = raw.strip()
        if continued:
            continued = line.endswith("\\")
            continue
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            m = _SECTION_RE.match(line)
            if m is None:
                return None
            name = m.group(1).lower()
            section, sub = name, m.group(2) is not None
            if "." in name:  # [section.subsection], the old spelling
                section, sub = name.split(".", 1)[0], True
            line = m.group(3).strip()
            if not line or line[0] in "#;":
                continue
        if section is None:
            return None
        m = _KEY_RE.match(line)
        if m is None:
            return None
        keys.append(f"{section}.{'*.' if sub else ''}{m.group(1).lower()}")
        continued = line.endswith("\\")
    return keys


def inert_config(data: bytes | None) -> str | None:
    """None when a new repository's config holds only inert keys (``INERT_CONFIG_KEYS``);
    otherwise why not."""
    if data is None:
        return "its config is not a readable regular file"
    keys = config_keys(data.decode(errors="replace"))
    if keys is None:
        return "its config cannot be parsed"
    bad = sorted({k for k in keys if k not in INERT_CONFIG_KEYS})
    return f"its config sets {', '.join(bad[:5])}" if bad else None


def active_hooks(hooks_dir: str, limit: int = 4096) -> list[str]:
    """Entries of a hooks directory git would run (anything but ``*.sample``)."""
    try:
        with os.scandir(hooks_dir) as it:
            out = []
            for i, entry in enumerate(it):
                if i >= limit:
                    out.append("…")
                    break
                if not entry.name.endswith(".sample"):
                    out.append(entry.name)
            return out
    except NotADirectoryError:
        return [os.path.basename(hooks_dir)]
    except OSError:
        return []


def shadowed(path_dir: PathDir, name: str) -> str | None:
    """The command ``name`` in ``path_dir`` would shadow: the first executable of that name in a
    later ``PATH`` entry, unless it is the very same file. None when nothing is shadowed or the
    entry cannot be run."""
    mine = os.path.join(path_dir.path, name)
    try:
        st = os.stat(mine)
    except OSError:
        return None
    if stat.S_ISDIR(st.st_mode) or not st.st_mode & 0o111:
        return None
    for later in path_dir.later:
        cand = os.path.join(later, name)
        try:
            cst = os.stat(cand)
        except OSError:
            continue
        if stat.S_ISDIR(cst.st_mode) or not cst.st_mode & 0o111:
            continue
        if (cst.st_dev, cst.st_ino) == (st.st_dev, st.st_ino):
            return None  # a link to the very program PATH would find anyway
        return cand
    return None


_INCLUDE_RE = re.compile(r"^\s*@(\S+)")


def include_refs(text: str) -> list[str]:
    """Every ``@path`` reference at the start of a line (CodeCompanion's ``claude`` and
    ``codecompanion`` parsers), code blocks included: a reference there is judged too."""
    out = []
    for line in text.splitlines():
        m = _INCLUDE_RE.match(line)
        if m:
            out.append(m.group(1))
    return out


def include_targets(
    ref: str, rules_file: str, cwd: str, env: Mapping[str, str], home: str
) -> list[str] | None:
    """The paths CodeCompanion may read for ``@ref`` in ``rules_file``: relative to the rules
    file's directory, then to Neovim's working directory, ``~`` and ``$VAR`` expanded, ``..``
    collapsed. None when it cannot be resolved (an unset variable): then it is not allowed."""
    if ref.startswith(("/", "~", "$")):
        p = expand(ref, env=env, home=home, base=cwd)
        return None if p is None else [p]
    a = expand(ref, env=env, home=home, base=os.path.dirname(rules_file))
    b = expand(ref, env=env, home=home, base=cwd)
    if a is None or b is None:
        return None
    return list(dict.fromkeys((a, b)))
