"""The host-read set: what a sandboxed command could write that the host later loads, runs or reads.

One module finds all of it, on the host, for one working directory and the writable grants of its
policy:

* **Git.** Every repository git on the host could reach from the project: the one ``git
  rev-parse`` finds from the working directory (its git dir, common dir, effective hooks directory
  and work tree), the linked worktrees and submodule git dirs under its common dir, every ``.git``
  entry (directory, gitfile or symlink) and bare repository in the trees a run can write, and a
  parent repository above the project (a ``$HOME`` dotfiles repository). For each one inside a
  writable grant: its config files (with every file they include, whatever the include's
  condition), ``config.worktree``, hooks directory (and the directory that holds it when that lies
  in the work tree: a hooks wrapper runs the scripts beside it), ``commondir`` and ``gitdir``
  links, ``info/attributes``, ``objects/info/alternates``, the ``.git`` entry itself and
  ``.gitmodules``. What git reads is asked of git (``gitask.py``), never read here.
* **Grants everyday git needs.** The git dir (and common dir of a linked worktree) of the
  project's repository when it lies outside the working directory, so ``git commit`` works from a
  subdirectory or a linked worktree. Never the git dir of a repository whose work tree is ``$HOME``,
  one of its parents, or ``/``.
* **PATH.** Entries of the user's ``PATH`` that lie inside a writable grant (``pathguard.py``):
  read-only inside the run, or compared by state when they hold the project itself; what the
  programs that PATH links run load with them (their code units), and the other names (hard
  links) of PATH programs in the writable grants, read-only. A relative entry
  (``node_modules/.bin``) in the project roots and in every directory of the writable trees that
  holds its first component (``nested_path_dirs``): a shell resolves it where it is. The other
  search paths of the host's environment (``PYTHONPATH``, ``LD_LIBRARY_PATH``, …:
  ``searchvars.py``) the same way (``keptnames.search_dirs``, ``nested_search_dirs``), and the
  files they name (``PYTHONSTARTUP``, ``LD_PRELOAD``'s) read-only as files (``keep_files``); an
  entry that holds a project root is told of (a warning), and for ``PYTHONPATH`` its
  ``sitecustomize`` and ``usercustomize`` are members.
* **Symlinks.** What a member leads to (a member that is a link, the links in a member
  directory or a kept hooks holder), followed all the way (``link_ends``).
* **Agent rules files.** CodeCompanion's configured rules files (``setup`` passes them) and the
  common names other agents use, in the project: the next chat reads them and the files their
  ``@`` references include (``agentrules.py``).
* **Neovim, shell, toolchain and hook-manager files, at every level.** ``.nvim.lua``, ``.nvimrc``,
  ``.exrc``, ``.envrc``, ``.lazy.lua``, rustup's ``rust-toolchain`` and ``rust-toolchain.toml``
  (they choose the program its proxies run), asdf's and mise's ``.tool-versions`` (its ``path:``
  versions put a directory first on PATH), cargo's ``.cargo/config.toml`` and ``.cargo/config`` (a
  rustc wrapper runs at ``cargo metadata``), yarn's ``.yarnrc.yml`` and ``.yarnrc`` (``yarnPath``
  runs instead of yarn) with ``.yarn/releases`` and ``.yarn/plugins`` whole, the configs git hook
  managers read at every commit (pre-commit, prek, lefthook, overcommit, hk, rusty-hook,
  CaptainHook) with lefthook's and overcommit's script directories whole
  (``EVERY_LEVEL_MEMBERS``, ``EVERY_LEVEL_DIRS``): these tools look in the directory they run in
  (and above), so the names are kept in every directory of the writable trees, not only at the
  top; the tree walk reports them (``appeared`` names what a run made).
* **Other agents and CodeCompanion, at the top.** Other agents' settings that run commands
  (``.claude`` and ``.gemini`` whole, ``.mcp.json``, Cursor's MCP and hooks files, opencode's
  config) and CodeCompanion's ``per_project_config`` files (it runs them with ``dofile``) in the
  project roots.

``Discovery`` caches what git said per working directory and asks again only when a file git read
for it changed (a stat signature), caches what each gitfile leads to the same way, and caches the
tree walk per directory (one ``lstat`` per directory when nothing changed, ``treescan.py``).
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from run_bash.paths import Tops, expand, is_under
from run_bash.sandbox import gitask, searchvars
from run_bash.sandbox.gitask import HostReadError, run_git
from run_bash.sandbox.homelinks import home_links
from run_bash.sandbox.keptnames import (
    AGENT_DIRS,
    EVERY_LEVEL_DIRS,
    EVERY_LEVEL_FIRST,
    TOOL_DIRS,
    WORK_TREE_MEMBERS,
    _exempt,
    _first,
    below_entries,
    keep_path_units,
    kept_by_name,
    nested_search_dirs,
    search_dirs,
    search_files,
    search_relative,
)
from run_bash.sandbox.pathguard import (
    PathDir,
    followed,
    path_dirs,
    read_only_dirs,
)
from run_bash.sandbox.pathnotices import reason
from run_bash.sandbox.places import Places, RealPaths
from run_bash.sandbox.treescan import MAX_GIT_DIRS, MAX_SCAN_DIRS, TreeScan, nested_git_dirs

__all__ = ["MAX_SCAN_DIRS", "Discovery", "HostRead", "HostReadError", "Places", "RulesName"]

# Files of a git directory that git reads as configuration or as a pointer to another place.
GIT_DIR_MEMBERS = (
    "config",
    "config.worktree",
    "commondir",
    "gitdir",
    "info/attributes",
    "objects/info/alternates",
)
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
class RulesName:
    """A rules file an agent reads; ``parser`` is CodeCompanion's parser name when configured."""

    path: str
    parser: str | None = None


@dataclass(frozen=True)
class HostRead:
    """The host-read set of one working directory (see the module docstring).

    ``members`` must not change from inside (existing or not); ``sealed`` are existing
    directories and files kept read-only whole inside the run, never copied (PATH units, the
    directories that hold a hooks directory); ``git_dirs`` are the git directories inside
    writable grants (bound onto themselves; their identity is checked); ``grant`` are git
    directories outside the working directory that everyday git needs writable. ``scan`` are the
    trees searched for new repositories after each run: every writable grant. ``named`` are the
    entries found in them whose names are kept at every level (or are the first component of a
    relative PATH entry): what they keep is in ``members``, ``sealed`` and ``path_dirs``; one not
    among them after a run is new (``appeared``). ``path_free`` are the PATH entries runs may
    write (``sandbox.rules.path_writable``). ``reasons`` says why a member or sealed path is
    kept, when the plain "protected file" would not.
    """

    cwd: str
    roots: tuple[str, ...]
    writable: tuple[str, ...]
    denied: tuple[str, ...]
    home: str
    repos: tuple[Repo, ...] = ()
    members: tuple[str, ...] = ()
    sealed: tuple[str, ...] = ()
    git_dirs: tuple[str, ...] = ()
    grant: tuple[str, ...] = ()
    path_dirs: tuple[PathDir, ...] = ()
    rules: tuple[RulesName, ...] = ()
    scan: tuple[str, ...] = ()
    named: tuple[str, ...] = ()
    path_free: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)
    reasons: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)
    warnings: tuple[str, ...] = ()

    def is_writable(self, path: str) -> bool:
        """Whether a command of this policy can write ``path`` (lexically or once resolved)."""
        return path in Places(self.writable)

    def is_project(self, path: str) -> bool:
        """Whether ``path`` lies in the project: the working directory or the work tree of its
        repository."""
        return path in Places(self.roots)


# -------------------------------------------------------------------------------------------------
# Asking git


@dataclass(frozen=True)
class GitAnswer:
    """What git says about one repository: its directories, every config file it may read (the
    user's, its own, and what they include), and every ``core.hooksPath`` value set in them
    (relative ones as written)."""

    git_dir: str
    common_dir: str
    hooks: str
    work_tree: str | None
    config_files: tuple[str, ...]
    hooks_values: tuple[str, ...] = ()


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
    rc, out, err = run_git(
        [f"--git-dir={gd}", "config", "--list", "--show-origin", "--name-only", "-z"], gd, env
    )
    if rc != 0:
        raise HostReadError(
            f"git cannot read the configuration of {gd}: {err.strip()[-300:] or f'exit {rc}'}"
        )
    files = [
        os.path.normpath(os.path.join(gd, origin[5:]))
        for origin in out.split("\0")[::2]
        if origin.startswith("file:")
    ]
    included, hooks_set = gitask.config_refs(gd, env)
    files += included
    # A config file that is a symlink is read through it: where it leads is read too.
    files += [os.path.realpath(f) for f in files if os.path.islink(f)]
    return GitAnswer(
        gd,
        common,
        hooks,
        top,
        tuple(dict.fromkeys(files)),
        tuple(dict.fromkeys(v for _origin, v in hooks_set)),
    )


# -------------------------------------------------------------------------------------------------
# Discovery


def dangerous_parent(top: str, home: str) -> bool:
    """A work tree no run may be granted the git dir of: ``/``, ``$HOME`` or a parent of it."""
    top = os.path.realpath(top)
    return top == "/" or (bool(home) and is_under(os.path.realpath(home), top))


class Discovery:
    """Computes ``HostRead`` sets; caches git's answers per working directory and per gitfile
    (see the module docstring). Thread-safe: the host computes policies off its event loop."""

    def __init__(self) -> None:
        self.trees = TreeScan(EVERY_LEVEL_FIRST)
        self._answers: dict[
            tuple[str, str | None], tuple[tuple[object, ...], GitAnswer | None]
        ] = {}
        self._entries: dict[str, tuple[object, str | None]] = {}
        self._lock = threading.Lock()
        # Told (git dir, common dir) of a repository a run may write, as soon as git named it
        # (the guard lists its refs meanwhile: ``RefsGuard.refs_ahead``).
        self.on_repo: Callable[[str, str], None] | None = None

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

    def resolve_entry(self, entry: str) -> str | None:
        """The git dir a ``.git`` entry leads to: itself (a directory), where a symlink leads
        (the kernel's reading), or what git makes of a gitfile (``git rev-parse
        --resolve-git-dir``, cached until the file changes). None when it leads nowhere git
        accepts."""
        try:
            st = os.lstat(entry)
        except OSError:
            return None
        if stat.S_ISDIR(st.st_mode):
            return entry
        path = entry
        if stat.S_ISLNK(st.st_mode):
            path = os.path.realpath(entry)
            if os.path.isdir(path):
                return path
            if not os.path.isfile(path):
                return None
        elif not stat.S_ISREG(st.st_mode):
            return None
        sig = (_sig(entry), _sig(path))
        with self._lock:
            hit = self._entries.get(entry)
        if hit is not None and hit[0] == sig:
            return hit[1]
        target = gitask.resolve_git_dir(path)
        with self._lock:
            if len(self._entries) > 4096:
                self._entries.clear()
            self._entries[entry] = (sig, target)
        return target

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
        path_writable: Sequence[str] = (),
    ) -> HostRead:
        """The host-read set of ``cwd`` for a policy with these writable grants. Raises
        HostReadError when git cannot tell (the run must not start). ``path_writable`` are PATH
        entries (or venvs) runs may write anyway (``sandbox.rules.path_writable``)."""
        cwd = os.path.normpath(cwd)
        writable = [os.path.normpath(w) for w in writable]
        real = RealPaths()
        in_writable = Places(writable, real)
        answer = self._ask(cwd, env)
        grant: list[str] = []
        roots = [cwd]
        granted = list(writable)
        if answer is not None and answer.work_tree is not None:
            top = answer.work_tree
            under = is_under(real(cwd), real(top))
            if under and not dangerous_parent(top, home):
                roots.append(top)
                # Everyday git from a subdirectory or a linked worktree writes the git dir.
                if cwd in in_writable:
                    for g in dict.fromkeys((answer.git_dir, answer.common_dir)):
                        if g not in in_writable:
                            grant.append(g)
        granted += grant
        in_granted = Places(granted, real)
        roots = list(dict.fromkeys(roots))
        if answer is not None and self.on_repo is not None and answer.git_dir in in_granted:
            self.on_repo(real(answer.git_dir), real(answer.common_dir))

        # PATH: each entry's unit read-only (or absent and kept absent), links' targets too.
        members: list[str] = []
        sealed: list[str] = []
        reasons: dict[str, str] = {}
        exempt = _exempt(path_writable, roots, env, home)
        path_var = env.get("PATH", "")
        # A relative entry with a leading `../` (`../bin`) is, from any subdirectory, the one
        # beside it: at a project root too (`cd web`, then `../bin` is the root's `bin`).
        pds = path_dirs(below_entries(path_var), granted, roots, exempt, real)
        writable_places = Places(granted, real)
        pds += read_only_dirs(path_var, writable_places, [pd.path for pd in pds], exempt)
        pds = keep_path_units(
            pds, cwd, roots, writable_places, real, exempt, members, sealed, reasons, path_var
        )
        # The other search paths (PYTHONPATH, LD_LIBRARY_PATH, …): their directories as PATH's,
        # the files they name read-only as files.
        search, holding = search_dirs(env, granted, roots, exempt, real)
        pds += keep_path_units(
            search, cwd, roots, writable_places, real, exempt, members, sealed, reasons
        )
        warnings: list[str] = []
        for var, d in holding:
            warnings.append(holding_warning(var, d, cwd, roots))
            if var.name == "PYTHONPATH" and d in writable_places:
                for name in searchvars.PYTHON_START:
                    for suffix in searchvars.PYTHON_SUFFIXES:
                        p = os.path.join(d, name + suffix)
                        members.append(p)
                        reasons[p] = holding_reason(var, d, cwd)
        keep_files(search_files(env, roots, writable_places, exempt), members, sealed, reasons)

        # Every git dir to look at: git's answer, the `.git` entries and bare repos in every tree
        # a run can write, the nested ones under each common dir.
        scan = scan_roots(granted)
        entries: dict[str, str] = {}  # git dir -> the `.git` entry leading to it
        repo_dirs: list[str] = []
        loose_entries: list[str] = []
        if answer is not None:
            repo_dirs += [answer.git_dir, answer.common_dir]
            if answer.work_tree is not None:
                entries[answer.git_dir] = os.path.join(answer.work_tree, ".git")
        kept_whole = frozenset(sealed)
        # The walk also reports the entries of the names kept at every level (``kept_by_name``)
        # and of the first component of each relative PATH (or other search path) entry.
        path_first = {_first(e) for e in search_relative(env)}
        self.trees.want(path_first)
        named: list[str] = []
        for root in scan:
            found, named_here, truncated = self.trees.find_named(root, kept_whole)
            named += named_here
            if truncated:
                warnings.append(
                    f"{root} has more than {MAX_SCAN_DIRS} directories: repositories created "
                    "deeper in it are not checked after a run, nor the tool files kept at every "
                    "level (rust-toolchain.toml, .cargo/config.toml, …) kept there"
                )
            for path, kind in found:
                if kind == "bare":
                    repo_dirs.append(path)
                    continue
                target = self.resolve_entry(path)
                if target is None:
                    loose_entries.append(path)
                    continue
                target = real(target)
                entries.setdefault(target, path)
                repo_dirs.append(target)
        infos: dict[str, GitAnswer] = {}
        queue = [real(g) for g in repo_dirs]
        while queue and len(infos) < MAX_GIT_DIRS:
            g = queue.pop(0)
            if g in infos or not os.path.isdir(g):
                continue
            if answer is not None and g == real(answer.git_dir):
                info = answer
            else:
                info = self._ask(g, env, g) or GitAnswer(g, g, os.path.join(g, "hooks"), None, ())
            infos[g] = info
            queue.append(real(info.common_dir))
            queue += [real(x) for x in nested_git_dirs(g)]

        repos: list[Repo] = []
        git_dirs: list[str] = []
        holders: list[str] = []

        def add(path: str) -> None:
            if path in in_granted:
                members.append(os.path.normpath(path))
            if os.path.islink(path):
                # Kept as a link (its text); what it leads to is read through it.
                target = real(path)
                if target != path and target in in_granted:
                    members.append(target)

        for g, info in infos.items():
            if g not in in_granted and info is not answer:
                continue  # not writable: nothing of it needs keeping
            entry = entries.get(g)
            work = info.work_tree if info is answer else None
            if entry is not None and work is None:
                work = os.path.dirname(entry)
            repo = Repo(
                git_dir=g,
                common_dir=real(info.common_dir),
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
            for f in info.config_files:
                add(f)
            for hooks in hooks_dirs(repo, info):
                add(hooks)
                holder = hooks_holder(repo, hooks, infos)
                if holder is not None and holder in in_granted:
                    if os.path.isdir(holder) and not os.path.islink(holder):
                        sealed.append(holder)
                        holders.append(holder)
                    else:
                        add(holder)
                    shown = os.path.relpath(hooks, repo.work_tree)
                    reasons[holder] = (
                        f"it holds the hooks directory {shown}, and a hook runs what lies beside it"
                    )
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
            for name in (*AGENT_DIRS, *TOOL_DIRS):
                d = os.path.join(r, name)
                if d not in in_granted:
                    continue
                if os.path.isdir(d) and not os.path.islink(d):
                    sealed.append(d)
                    holders.append(d)
                    reasons[d] = (
                        f"another agent runs the commands its settings in {name} name"
                        if name in AGENT_DIRS
                        else EVERY_LEVEL_DIRS[name]
                    )
                else:
                    add(d)  # not there yet, or not a directory: it must stay what it is
        # The user's own files in the home directory that lead into a writable place (dotfiles
        # put in place by stow or `ln -s`): their shell, editor and tools read them at the next
        # start.
        config_home = expand("$XDG_CONFIG_HOME", env=env, home=home) or ""
        for link, target in home_links(home, config_home, in_granted):
            if os.path.isdir(target):
                sealed.append(target)
                holders.append(target)
            else:
                add(target)  # a file, or not there yet: it must stay what it is
            reasons[target] = (
                f"your {_shown_home(link, home)} leads to it, read outside the sandbox"
            )
        # The same names in every other directory of the writable trees that holds their first
        # component, and there the PATH directories relative entries name.
        bases: list[str] = []
        for p in named:
            d, name = os.path.split(p)
            if name in path_first:
                bases.append(d)
            for path, whole_dir in kept_by_name(d, name):
                if (
                    whole_dir
                    and path in in_granted
                    and os.path.isdir(path)
                    and not os.path.islink(path)
                ):
                    sealed.append(path)
                    holders.append(path)
                    reasons[path] = EVERY_LEVEL_DIRS[os.path.relpath(path, d)]
                else:
                    add(path)  # a file, or not there yet: it must stay what it is
        nested = nested_search_dirs(env, granted, roots, bases, path_writable, home, real)
        keep_files(
            search_files(env, bases, writable_places, _exempt(path_writable, bases, env, home)),
            members,
            sealed,
            reasons,
        )
        pds += keep_path_units(
            nested,
            cwd,
            roots,
            writable_places,
            real,
            _exempt(path_writable, [*roots, *bases], env, home),
            members,
            sealed,
            reasons,
        )

        # What the members and the kept hooks holders lead to through symlinks is read with them.
        more, whole = link_ends([*members, *holders], in_granted, roots, sealed, reasons)
        members += more
        sealed += whole

        return HostRead(
            cwd=cwd,
            roots=tuple(roots),
            writable=tuple(granted),
            denied=tuple(denied),
            home=home,
            repos=tuple(repos),
            members=tuple(dict.fromkeys(members)),
            sealed=tuple(dict.fromkeys(sealed)),
            git_dirs=tuple(dict.fromkeys(git_dirs)),
            grant=tuple(grant),
            path_dirs=tuple(pds),
            rules=tuple(rules_names(roots, rules, granted, env, home)),
            scan=tuple(scan),
            named=tuple(sorted(set(named))),
            path_free=tuple(path_writable),
            env=dict(env),
            reasons=reasons,
            warnings=tuple(warnings),
        )


def appeared(
    hr: HostRead, named: Iterable[str], exists: Callable[[str], bool] = os.path.lexists
) -> list[tuple[str, str | None]]:
    """What a run made that the names kept at every level keep: for each entry of ``named`` (the
    tree walk's, ``TreeScan.find_named``) that was not there when ``hr`` was computed, each path
    it keeps (``kept_by_name``) and each PATH unit it holds (``nested_path_dirs``) that
    ``exists`` now and is neither a member nor kept whole (those are compared with their state
    as such). ``(path, why)``: why is None for a protected file, else why it is kept."""
    before = set(hr.named)
    kept = {*hr.members, *hr.sealed}
    path_first = {_first(e) for e in search_relative(hr.env)}
    out: list[tuple[str, str | None]] = []
    bases: list[str] = []
    for p in dict.fromkeys(named):
        if p in before:
            continue
        d, name = os.path.split(p)
        if name in path_first:
            bases.append(d)
        out += [(path, None) for path, _whole in kept_by_name(d, name) if path not in kept]
    if bases:
        pds = nested_search_dirs(hr.env, hr.writable, hr.roots, bases, hr.path_free, hr.home)
        out += [
            (pd.unit, reason(pd, hr.cwd))
            for pd in pds
            if pd.sealed and pd.unit not in kept and exists(pd.path)
        ]
        exempt = _exempt(hr.path_free, bases, hr.env, hr.home)
        files = search_files(hr.env, bases, Places(hr.writable), exempt)
        out += [(p, why) for p, why in files if p not in kept]
    out = [(path, why) for path, why in dict.fromkeys(out) if why is not None or exists(path)]
    # One inside another that goes (a new `web/.venv` holding `web/.venv/bin`) goes with it.
    paths = {path for path, _why in out}
    return [
        (path, why) for path, why in out if not any(p != path and is_under(path, p) for p in paths)
    ]


def keep_files(
    files: Iterable[tuple[str, str]], members: list[str], sealed: list[str], reasons: dict[str, str]
) -> None:
    """Keep each file a search-path variable names (``search_files``) as a file: read-only
    whole when it is one (not a link), else a member (a link keeps its text and what it leads
    to is followed, ``link_ends``; one not there yet may not appear)."""
    for p, why in files:
        try:
            st = os.lstat(p)
        except OSError:
            st = None
        if st is not None and stat.S_ISREG(st.st_mode):
            sealed.append(p)
        else:
            members.append(p)
        reasons.setdefault(p, why)


def holding_reason(var: searchvars.Var, d: str, cwd: str) -> str:
    return (
        f"your {var.name} names {_show(d, cwd)} ({var.reads}), and Python imports it from there "
        "at every start"
    )


def holding_warning(var: searchvars.Var, d: str, cwd: str, roots: Sequence[str]) -> str:
    """What to tell of a search-path entry that holds a project root (it cannot be read-only)."""
    # Never a root's path: a warning that names a scanned tree says its walk was cut short.
    what = "the project's top (an empty or `.` entry: the directory a tool starts in)"
    if d not in roots:
        what = _show(d, cwd)
    kept = (
        " (only sitecustomize and usercustomize are kept there)" if var.name == "PYTHONPATH" else ""
    )
    return (
        f"your {var.name} has an entry that means {what}, which holds the project: "
        f"{var.reads}, so what a run leaves there would run outside the sandbox; it cannot be "
        f"kept read-only{kept}. Remove that entry (an empty one, as in `:$PYTHONPATH` with "
        "the variable unset, means the current directory)"
    )


def _show(path: str, cwd: str) -> str:
    return os.path.relpath(path, cwd) if is_under(path, cwd) and path != cwd else path


def kept_path(hr: HostRead, path: str) -> bool:
    """Whether ``hr`` keeps ``path`` (absolute), there or not: a member, inside a directory kept
    whole, or a name kept at every level (``kept_by_name``) wherever it lies."""
    if path in hr.members or any(is_under(path, s) for s in hr.sealed):
        return True
    parts = path.split("/")
    for i in range(1, len(parts)):
        for kept, whole in kept_by_name("/".join(parts[:i]) or "/", parts[i]):
            if path == kept or (whole and is_under(path, kept)):
                return True
    return False


# Entries looked at for symlinks in the member directories and what their links lead to.
MAX_FOLLOWED = 4096
MAX_FOLLOW_DEPTH = 4


def link_ends(
    paths: Sequence[str],
    writable: Places,
    roots: Sequence[str],
    sealed: Sequence[str],
    reasons: dict[str, str],
) -> tuple[list[str], list[str]]:
    """What the members ``paths`` lead to through symlinks inside a writable grant, followed all
    the way: (members, directories to keep read-only whole). A member that is a symlink, or a
    directory (a hooks directory, a hooks holder, a directory a link leads to) with symlinks in
    it (to ``MAX_FOLLOW_DEPTH`` levels): every link on the way is kept as a link, a file (or a
    name that does not exist yet) at the end is a member, a directory at the end is kept whole
    and its own links followed. Raises HostReadError when there are more than ``MAX_FOLLOWED``
    entries to look at, or a link leads to a directory that holds the project (nothing could be
    kept then)."""
    members: list[str] = []
    whole: list[str] = []
    kept = Tops(sealed)
    seen: set[str] = set()
    todo = [(p, p, 0) for p in paths]
    looked = 0
    plain: dict[str, bool] = {}

    def plain_dir(d: str) -> bool:
        """No symbolic link at ``d`` or above it (one that is not there is none): remembered
        per directory, so the members of one directory cost one ``lstat`` each."""
        hit = plain.get(d)
        if hit is None:
            try:
                link = stat.S_ISLNK(os.lstat(d).st_mode)
            except OSError:
                link = False
            hit = plain[d] = not link and (d == "/" or plain_dir(os.path.dirname(d)))
        return hit

    while todo:
        path, origin, depth = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        looked += 1
        if looked > MAX_FOLLOWED:
            raise HostReadError(
                f"more than {MAX_FOLLOWED} entries lead from the files the host reads (through "
                f"{origin}): too many to keep"
            )
        why = reasons.get(origin) or f"the host reads it through {origin}"
        try:
            is_link = stat.S_ISLNK(os.lstat(path).st_mode)
        except OSError:
            is_link = False
        links: list[str] = []
        end: str | None = None  # no link on the way: it leads nowhere else
        if is_link or not plain_dir(os.path.dirname(path)):
            links, end = followed(path, writable)
        for link in links:
            if link != path:
                members.append(link)
                reasons.setdefault(link, why)
        if end is not None and end != path and end not in kept:
            if os.path.isdir(end):
                if any(is_under(r, end) for r in roots):
                    raise HostReadError(
                        f"{path} leads to {end}, which holds the project: it cannot be kept "
                        "read-only"
                    )
                whole.append(end)
            else:
                members.append(end)
            reasons.setdefault(end, why)
            todo.append((end, origin, depth))
        if depth >= MAX_FOLLOW_DEPTH or os.path.islink(path) or not os.path.isdir(path):
            continue
        try:
            with os.scandir(path) as it:
                for i, entry in enumerate(it):
                    if i > MAX_FOLLOWED:
                        break
                    if entry.is_symlink() or entry.is_dir(follow_symlinks=False):
                        todo.append((entry.path, origin, depth + 1))
        except OSError:
            continue
    return members, whole


def _shown_home(path: str, home: str) -> str:
    """``path`` with the home directory written ``~``."""
    return "~" + path[len(home.rstrip("/")) :] if is_under(path, home) else path


def scan_roots(granted: Sequence[str]) -> list[str]:
    """The trees searched for new repositories: every writable grant that is a directory (a
    grant inside another one is walked with it)."""
    dirs = [g for g in dict.fromkeys(granted) if os.path.isdir(g) and not os.path.islink(g)]
    return [d for d in dirs if not any(o != d and is_under(d, o) for o in dirs)]


def hooks_dirs(repo: Repo, info: GitAnswer) -> list[str]:
    """The hooks directories git may run for ``repo``: the one git names now, and every
    ``core.hooksPath`` set in any config file it may read (whatever an include's condition;
    a relative one is relative to the work tree, or to the git dir of a bare repository)."""
    out = [info.hooks]
    base = repo.work_tree or repo.git_dir
    for value in info.hooks_values:
        out.append(os.path.normpath(os.path.join(base, value)))
    return list(dict.fromkeys(out))


def hooks_holder(repo: Repo, hooks: str, infos: Mapping[str, GitAnswer]) -> str | None:
    """The directory that holds a hooks directory in the work tree (``.husky`` for
    ``.husky/_``), kept whole: a hooks wrapper runs the scripts beside it. None when the hooks
    directory is not in the work tree, lies in a git directory, or sits at the top of the work
    tree (the hooks directory itself is kept then)."""
    if repo.work_tree is None or not is_under(hooks, repo.work_tree):
        return None
    dot_git = os.path.join(repo.work_tree, ".git")
    if is_under(hooks, dot_git) or any(is_under(hooks, g) for g in infos):
        return None
    holder = os.path.dirname(hooks)
    if holder == repo.work_tree or not is_under(holder, repo.work_tree):
        return None
    return holder


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


def active_hooks(hooks_dir: str, limit: int = 4096) -> list[str]:
    """Entries of a hooks directory git would run (anything but ``*.sample``). One that cannot
    be listed (a run took away its read bit; git needs only search to run a hook) counts as
    holding hooks: only a directory that is not there holds none."""
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
    except FileNotFoundError:
        return []
    except OSError as e:
        return [f"(a directory that cannot be listed: {e.strerror})"]
