"""The effective sandbox policy: filesystem, network, environment and limits.

``build_policy(config, cwd)`` turns the ``sandbox.*`` options into one backend-neutral ``Policy``;
the confining backends (sandlock, bubblewrap) translate it into their own terms, and
``python -m run_bash policy`` prints it (``Policy.to_json()``). ``build_env`` builds a command's
environment from an allowlist.

Pure apart from reading the file system (existence of paths, the git layout of the project, the
listening sockets in ``/proc/net``) and the environment mapping it is given.
"""

from __future__ import annotations

import fnmatch
import glob
import os
import re
import stat
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from types import MappingProxyType
from typing import Any

from run_bash.config import Config, LimitsConfig, SandboxConfig
from run_bash.paths import Tops, expand, expand_rules, is_under, lmode
from run_bash.sandbox import loopback
from run_bash.sandbox.hostread import Discovery, HostRead, RulesName
from run_bash.sandbox.proc import SESSION_TAG

# Names passed from the user's environment by default.
ENV_ALLOW = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "SHELL")
ENV_ALLOW_GLOBS = ("LC_*",)

# Set for every command: nothing waits for a terminal, an editor, a pager or a password.
ANTI_HANG_ENV = {
    "TERM": "dumb",
    "PAGER": "cat",
    "GIT_PAGER": "cat",
    "GH_PAGER": "cat",
    "MANPAGER": "cat",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_EDITOR": "true",
    "GIT_SEQUENCE_EDITOR": "true",
    "EDITOR": "true",
    "VISUAL": "true",
    "NO_COLOR": "1",
    "DEBIAN_FRONTEND": "noninteractive",
    "SSH_ASKPASS_REQUIRE": "never",
}

# Names that look like secrets or like handles to outside services; never passed, even when asked.
SECRET_NAME_RE = re.compile(
    r"(TOKEN|SECRET|PASSW(OR)?D|PASSPHRASE|CREDENTIAL|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|AUTH|"
    r"SESSION_?KEY|COOKIE|_PAT$|^PAT$|^AWS_|^AZURE_|^GCP_|^GOOGLE_APPLICATION|^OPENAI|^ANTHROPIC|"
    r"^GEMINI|^GH_|^GITHUB_|^GITLAB_|^NPM_|^PYPI_|^HF_|^HUGGING)",
    re.IGNORECASE,
)
SOCKET_NAMES = {
    "NVIM",
    "NVIM_LISTEN_ADDRESS",
    "SSH_AUTH_SOCK",
    "SSH_AGENT_PID",
    "GPG_AGENT_INFO",
    "DBUS_SESSION_BUS_ADDRESS",
    "DBUS_SYSTEM_BUS_ADDRESS",
    "TMUX",
    "TMUX_PANE",
    "STY",
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "XAUTHORITY",
    "XDG_RUNTIME_DIR",
    "DOCKER_HOST",
    "KITTY_LISTEN_ON",
    "WEZTERM_UNIX_SOCKET",
    "ALACRITTY_SOCKET",
}


def is_blocked_name(name: str) -> bool:
    """True for names that look like secrets or sockets to outside services."""
    return name in SOCKET_NAMES or bool(SECRET_NAME_RE.search(name))


# -------------------------------------------------------------------------------------------------
# Filesystem defaults (design section 7). Readable and writable entries that do not exist are
# skipped, denied ones are kept.

# Read-only system trees. /proc is needed by ps, pgrep, python's os module and many build tools; the
# kernel (Landlock's ptrace scoping, a private pid namespace for bubblewrap) keeps other processes'
# /proc entries out of reach.
SYSTEM_READABLE = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/opt",
    "/nix",
    "/snap",
    "/var/lib/alternatives",
    "/proc",
    "/sys/devices/system/cpu",
    "/sys/fs/cgroup",
    "/dev/zero",
    "/dev/random",
    "/dev/urandom",
)

# Device nodes a command may write: discarding output and the "disk full" test device.
SYSTEM_WRITABLE = ("/dev/null", "/dev/full")

# Shared tool caches are used by every project. A run may write only the ones whose entries are
# checked against a hash each time they are used (a poisoned entry is refused, never run). None
# of the usual ones qualifies. npm's `_cacache` stores its content under a sha512 integrity, but
# finds an entry by its request URL through an index that is not verified: a run that writes an
# index entry for `https://registry.npmjs.org/<name>` (with its own `cache-control` among the
# stored response headers) and the packument and tarball it names has the host's next `npm install
# <name>` or `npx <name>` take them from the cache, without asking the registry, and run the
# package's scripts. So it is readable like the rest of `~/.npm`.
VERIFIED_CACHES: tuple[str, ...] = ()
# Tools that stop when their cache cannot be written get one in the run's own temp dir (gone
# with the run, never read by the host), unless the user's environment settings name one: npm
# fails every install with EROFS on a read-only `~/.npm`.
RUN_CACHES = {"npm_config_cache": "npm-cache"}
# The others hand out what is in them without checking it: pip's and uv's built wheels and HTTP
# responses, cargo's `.crate` files and unpacked sources (a cached `.crate` is not hashed again
# and an unpacked `registry/src` or `git/checkouts` tree, `build.rs` included, is used as is), Go's
# module tree and build cache, pre-commit's hook repositories (run at your next commit), ccache/
# sccache objects, Maven/Gradle artifacts. A run reads them (offline installs and builds work)
# but cannot change them.
UNVERIFIED_CACHES = (
    "$XDG_CACHE_HOME/pip",
    "$XDG_CACHE_HOME/uv",
    "$XDG_CACHE_HOME/pypoetry",
    "$XDG_CACHE_HOME/pdm",
    "$XDG_CACHE_HOME/go-build",
    "$XDG_CACHE_HOME/yarn",
    "$XDG_CACHE_HOME/pnpm",
    "$XDG_CACHE_HOME/node-gyp",
    "$XDG_CACHE_HOME/deno",
    "$XDG_CACHE_HOME/ccache",
    "$XDG_CACHE_HOME/sccache",
    "$XDG_CACHE_HOME/pre-commit",
    "$XDG_CACHE_HOME/bazel",
    "$XDG_CACHE_HOME/zig",
    "$XDG_CACHE_HOME/composer",
    "~/.npm",
    "~/.ccache",
    "~/.cargo/registry",
    "~/.cargo/git",
    "~/go/pkg/mod",
    "~/.m2/repository",
    "~/.gradle/caches",
    "~/.bun/install/cache",
)

# Read-only grants in HOME: git's configuration, the usual places tools are installed, and the
# shared caches whose entries are not verified on use.
HOME_READABLE = (
    "~/.gitconfig",
    "$XDG_CONFIG_HOME/git",
    "~/.gitignore_global",
    "~/.local/bin",
    "~/.local/lib",
    "$XDG_DATA_HOME/uv",
    "$XDG_DATA_HOME/mise",
    "$XDG_DATA_HOME/fnm",
    "$XDG_DATA_HOME/pnpm",
    "$XDG_DATA_HOME/pipx",
    "~/.cargo/bin",
    "~/.cargo/config.toml",
    "~/.cargo/config",
    "~/.rustup",
    "~/go",
    "~/.nvm",
    "~/.fnm",
    "~/.volta",
    "~/.bun",
    "~/.deno",
    "~/.pyenv",
    "~/.rbenv",
    "~/.asdf",
    "~/.sdkman",
    "~/.nix-profile",
    "~/.ghcup",
    "~/.elan",
    "~/.opam",
    "~/.juliaup",
    "~/.dotnet",
    *UNVERIFIED_CACHES,
)

# Writable: the project and the verified caches (never the whole of ~/.cache: Neovim's own cache
# lives there and is executed on the next start).
DEFAULT_WRITABLE = (".", *VERIFIED_CACHES)

# Denied: secrets and keyrings in HOME, and the system's password and key files.
DEFAULT_DENIED = (
    "~/.ssh",
    "~/.gnupg",
    "~/.aws",
    "~/.azure",
    "$XDG_CONFIG_HOME/gcloud",
    "$XDG_CONFIG_HOME/gh",
    "$XDG_CONFIG_HOME/hub",
    "$XDG_CONFIG_HOME/op",
    "$XDG_CONFIG_HOME/rclone",
    "~/.netrc",
    "~/.git-credentials",
    "$XDG_CONFIG_HOME/git/credentials",
    "~/.docker/config.json",
    "~/.kube",
    "~/.password-store",
    "~/.pypirc",
    "~/.npmrc",
    "~/.vault-token",
    "~/.terraform.d/credentials.tfrc.json",
    "~/.cargo/credentials",
    "~/.cargo/credentials.toml",
    "~/.config/sops",
    "$XDG_DATA_HOME/keyrings",
    "$XDG_DATA_HOME/kwalletd",
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssh/*key*",
    "/etc/ssl/private",
)

# Never writable, whatever the rules say (a writable parent is narrowed to read-only here): Neovim's
# config, data and cache are executed by the next Neovim start.
NEVER_WRITABLE = (
    "$XDG_CONFIG_HOME/nvim",
    "$XDG_DATA_HOME/nvim",
    "$XDG_CACHE_HOME/nvim",
    "$XDG_STATE_HOME/nvim",
)

# Shared directories full of other programs' Unix sockets (Neovim's RPC socket, tmux, ssh-agent,
# D-Bus): never granted by default; a user rule that grants one gets a warning.
SHARED_SOCKET_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run", "$XDG_RUNTIME_DIR", "~")

# The policy's limits are the config's (bytes and counts).
Limits = LimitsConfig


@dataclass
class Policy:
    """The effective, backend-neutral policy for one working directory.

    ``readable``/``writable``/``denied`` are absolute, normalized paths. ``read_only`` are
    paths under a writable grant that must stay read-only (Neovim's directories).
    ``network_allow`` are the user's ``host:port`` endpoints. Without them and without
    ``allow_local_ports`` runs live in their project's network namespace (``netholder.py``);
    with them they share the host's, where sandlock checks each loopback connect
    (``loopback.py``). ``blocked_local_ports`` (ports other local services listen on that are
    neither run_bash's own nor allowed) is informational: ``python -m run_bash policy`` lists it.

    The host-read set (``hostread.py``): what a command could write that the host later loads,
    runs or reads. What every confining backend does with it:

    * ``git_dirs``: git directories inside a writable grant (the project's, its common dir,
      submodule and worktree git dirs, embedded repositories). Each is bound onto itself, so it
      can be written into (objects, refs, index) but not renamed, removed or replaced.
    * ``protected``: members that must not change from inside, files and directories, existing or
      not (git config files, hooks directories, ``commondir``/``gitdir`` links, attributes,
      ``.git`` files, Neovim's exrc files…). Each existing one that is not a symlink is bound
      read-only, after the ``git_dirs`` binds (``protect_binds()`` gives the order). Names that
      do not exist yet, and symlinks, cannot be bound: the guard watches them.
    * ``sealed``: existing directories (and files) kept read-only whole, never copied: the PATH
      units (a PATH directory inside a writable grant, or its venv, and what its links run) and
      the directory that holds a hooks directory in the work tree. Bound read-only with the
      members; a backend without a mount namespace denies them instead.
    * ``host_read``: the whole set, for the guard and the post-run check (``guard.py``);
      backends do not read it.
    """

    cwd: str
    home: str
    readable: list[str]
    writable: list[str]
    denied: list[str]
    read_only: list[str] = field(default_factory=list)
    protected: list[str] = field(default_factory=list)
    sealed: list[str] = field(default_factory=list)
    git_dirs: list[str] = field(default_factory=list)
    network_allow: list[str] = field(default_factory=list)
    allow_local_ports: list[int] = field(default_factory=list)
    own_ports: list[int] = field(default_factory=list)
    blocked_local_ports: list[int] = field(default_factory=list)
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    warnings: list[str] = field(default_factory=list)
    host_read: HostRead | None = None

    def protect_binds(self) -> list[tuple[str, str]]:
        """The binds that keep the host-read set, in mount order: ``("self", git_dir)`` for each
        existing git directory (shallowest first), then ``("ro", path)`` for each existing
        protected or sealed path that is not a symlink (shallowest first). Pure apart from
        lstat()."""
        out: list[tuple[str, str]] = []
        for g in sorted(dict.fromkeys(self.git_dirs), key=_depth):
            if stat.S_ISDIR(lmode(g)):  # a directory, not a symlink to one
                out.append(("self", g))
        for p in sorted(dict.fromkeys([*self.sealed, *self.protected]), key=_depth):
            mode = lmode(p)
            if mode and not stat.S_ISLNK(mode):
                out.append(("ro", p))
        return out

    def to_json(self) -> dict[str, Any]:
        """Plain data for ``python -m run_bash policy`` and the ``policy`` RPC."""
        data = asdict(replace(self, host_read=None))
        hr = self.host_read
        return {
            "cwd": self.cwd,
            "paths": {
                "readable": data["readable"],
                "writable": data["writable"],
                "denied": data["denied"],
                "read_only": data["read_only"],
                "protected": data["protected"],
                "sealed": data["sealed"],
                "git_dirs": data["git_dirs"],
                "private_tmp": True,
            },
            "host_read": {
                "repositories": [r.git_dir for r in hr.repos] if hr else [],
                "path_dirs": [
                    {"path": p.path, "kept": p.unit, "read_only": p.sealed}
                    for p in (hr.path_dirs if hr else ())
                ],
                "rules_files": [r.path for r in hr.rules] if hr else [],
                "checked_for_new_repositories": list(hr.scan) if hr else [],
            },
            "network": {
                "allow": data["network_allow"],
                "loopback": (
                    "the host's: only run_bash's own servers and allowed ports (sandlock checks "
                    "each connect; bubblewrap shares everything once network.allow is set)"
                    if self.network_allow or self.allow_local_ports
                    else "the project's own network namespace: only the servers of its runs"
                ),
                "allow_local_ports": data["allow_local_ports"],
                "own_ports": data["own_ports"],
                "blocked_local_ports": data["blocked_local_ports"],
            },
            "limits": data["limits"],
            "warnings": data["warnings"],
        }


def _depth(path: str) -> int:
    return path.rstrip("/").count("/")


def _tool_root(path: str) -> str | None:
    """The tool tree a PATH entry belongs to: the first hidden directory on its path
    (``~/.pyenv/shims`` → ``~/.pyenv``, ``~/.nvm/versions/node/v20/bin`` → ``~/.nvm``), except the
    shared ``.local``, ``.config`` and ``.cache`` (there the entry itself is enough)."""
    parts = path.split("/")
    for i, part in enumerate(parts):
        if part.startswith(".") and part not in (".", ".."):
            if part in (".local", ".config", ".cache"):
                return None
            return "/".join(parts[: i + 1]) or None
    return None


_TREE_CACHE: dict[tuple[str, str, tuple[str, ...]], tuple[tuple[float, ...], list[str]]] = {}


def _mtimes(path_var: str) -> tuple[float, ...]:
    out = []
    for entry in path_var.split(os.pathsep):
        try:
            st = os.stat(entry)
            out.append(st.st_mtime)
            out.append(st.st_ctime)
        except OSError:
            out.append(-1.0)
    return tuple(out)


def path_entries_tree(path_var: str, home: str, untrusted: Iterable[str] = ()) -> list[str]:
    """``_path_entries_tree``, cached until a PATH directory changes."""
    key = (path_var, home, tuple(sorted(untrusted)))
    stamp = _mtimes(path_var)
    hit = _TREE_CACHE.get(key)
    if hit is not None and hit[0] == stamp:
        return list(hit[1])
    tree = _path_entries_tree(path_var, home, key[2])
    if len(_TREE_CACHE) > 16:
        _TREE_CACHE.clear()
    _TREE_CACHE[key] = (stamp, tree)
    return list(tree)


def trusted_realpath(
    path: str, untrusted: Iterable[str], places: list[str] | None = None
) -> str | None:
    """``path`` with its symlinks resolved, or None when one of them sits in a place a sandboxed
    command can write (``untrusted``): a link planted there must never decide what is granted.
    ``places``: ``untrusted`` resolved already (a caller resolving many paths passes it)."""
    if places is None:
        places = [os.path.realpath(u) for u in untrusted]
    resolved = "/"
    parts = [p for p in os.path.normpath(path).split("/") if p]
    hops = 0
    while parts:
        part = parts.pop(0)
        candidate = os.path.join(resolved, part)
        if not os.path.islink(candidate):
            resolved = candidate
            continue
        if any(is_under(resolved, u) for u in places):
            return None
        hops += 1
        if hops > 40:
            return None
        target = os.readlink(candidate)
        base = "/" if os.path.isabs(target) else resolved
        parts = [p for p in os.path.normpath(os.path.join(base, target)).split("/") if p] + parts
        resolved = "/"
    return os.path.normpath(resolved)


def _path_entries_tree(path_var: str, home: str, untrusted: tuple[str, ...] = ()) -> list[str]:
    """Directories to grant read+exec for the user's PATH.

    The entries, what they resolve to, the tool tree they belong to (``~/.pyenv/shims`` →
    ``~/.pyenv``), and for entries in HOME the trees their symlinks point into
    (``~/.local/bin/nvim`` → ``~/.local/share/nvim-linux``). A symlink that sits where a
    sandboxed command can write (``untrusted``: the writable grants) is never followed."""
    out: list[str] = []
    places = [os.path.realpath(u) for u in untrusted]
    for entry in path_var.split(os.pathsep):
        if not entry or not os.path.isabs(entry) or not os.path.isdir(entry):
            continue
        entry = os.path.normpath(entry)
        real = trusted_realpath(entry, untrusted, places)
        for p in dict.fromkeys(x for x in (entry, real) if x):
            out.append(p)
            root = _tool_root(p)
            if root and root not in ("/", home) and os.path.isdir(root):
                out.append(root)
        if real is None or any(is_under(real, u) for u in places):
            continue
        if home and home != "/" and is_under(real, home):
            try:
                names = os.listdir(real)[:500]
            except OSError:
                names = []
            for name in names:
                link = os.path.join(real, name)
                if not os.path.islink(link):
                    continue
                target = trusted_realpath(link, untrusted, places)
                if target is None:
                    continue
                tree = os.path.dirname(target)
                if os.path.basename(tree) == "bin":
                    tree = os.path.dirname(tree)
                if tree not in ("/", home) and os.path.isdir(tree):
                    out.append(tree)
    return out


def own_listen_ports(listeners: dict[int, set[int]] | None = None) -> list[int]:
    """Ports listened on by descendants of this process (run_bash's own sessions: the host is their
    subreaper, so even daemonized servers stay descendants)."""
    from run_bash.sandbox.proc import descendants

    if listeners is None:
        listeners = loopback.listeners()
    if not listeners:
        return []
    mine = loopback.socket_inodes(descendants(os.getpid()))
    return sorted(p for p, inodes in listeners.items() if inodes & mine)


def blocked_local_ports(
    own: Iterable[int], allowed: Iterable[int], listeners: dict[int, set[int]] | None = None
) -> list[int]:
    """Ports that other local services listen on now (not run_bash's, not allowed by config)."""
    keep = set(own) | set(allowed)
    if listeners is None:
        listeners = loopback.listeners()
    return sorted(p for p in listeners if p not in keep)


def _expand_globs(paths: Iterable[str]) -> list[str]:
    """Expand shell patterns in denied paths; a pattern that matches nothing denies nothing."""
    out: list[str] = []
    for p in paths:
        if any(c in p for c in "*?["):
            out.extend(sorted(glob.glob(p)))
        else:
            out.append(p)
    return out


def default_rules() -> dict[str, list[str]]:
    """The built-in ``sandbox.rules`` lists, unexpanded, as a ``function(defaults)`` rule receives
    them (``.`` is the command's working directory; ``~`` and ``$VAR`` are expanded per run)."""
    return {
        "fs_readable": list(HOME_READABLE),
        "fs_writable": list(DEFAULT_WRITABLE),
        "fs_denied": list(DEFAULT_DENIED),
        "path_writable": [],
    }


Expand = Callable[[Iterable[str], bool], list[str]]


def _granted(cfg: SandboxConfig, ex: Expand) -> list[str]:
    """The writable grants of the rules (the user's ``fs_writable``, else the defaults)."""
    user = cfg.rules.fs_writable
    return ex(DEFAULT_WRITABLE if user is None else user, True)


def _denied(cfg: SandboxConfig, ex: Expand, hidden: Iterable[str]) -> list[str]:
    user = cfg.rules.fs_denied
    denied = _expand_globs(ex(DEFAULT_DENIED if user is None else user, False))
    if user is not None:
        # The system's own secrets stay denied whatever the rules say.
        denied += [p for p in _expand_globs(ex(DEFAULT_DENIED, False)) if p.startswith("/etc/")]
    denied += [os.path.normpath(os.path.abspath(p)) for p in hidden]
    return list(dict.fromkeys(denied))


def writable_grants(
    config: Config | None,
    cwd: str,
    *,
    env: Mapping[str, str] | None = None,
    home: str | None = None,
    hidden: Iterable[str] = (),
) -> tuple[list[str], list[str]]:
    """(grants, caches): the directories a run in ``cwd`` may write by the rules, and those of
    them that are verified shared caches (``VERIFIED_CACHES``: every entry checked against its
    hash when used, so nothing written there is trusted later). Device files, the run's private
    temp directory and the repository's git directories (which the host-read set adds) are not
    in it. What ``build_policy`` grants starts from the same lists; nothing is read but the
    paths' existence."""
    env = os.environ if env is None else env
    cfg = (config or Config()).sandbox
    cwd = os.path.normpath(os.path.abspath(cwd))
    home_dir = os.path.normpath(home or env.get("HOME") or os.path.expanduser("~"))

    def ex(paths: Iterable[str], must_exist: bool) -> list[str]:
        return expand_rules(paths, must_exist=must_exist, env=env, home=home_dir, base=cwd)

    denied = _denied(cfg, ex, hidden)
    no = Tops(denied)
    grants = [p for p in dict.fromkeys(_granted(cfg, ex)) if p not in no]
    caches = set(ex(VERIFIED_CACHES, True))
    return grants, [g for g in grants if g in caches]


def build_policy(
    config: Config | None,
    cwd: str,
    *,
    own_ports: Iterable[int] | None = None,
    env: Mapping[str, str] | None = None,
    home: str | None = None,
    scan_ports: bool = True,
    hidden: Iterable[str] = (),
    discovery: Discovery | None = None,
    agent_rules: Sequence[RulesName] = (),
    project_files: Sequence[str] = (),
    untrusted: Iterable[str] = (),
    on_stage: Callable[[str], None] | None = None,
) -> Policy:
    """The effective policy for commands run in ``cwd``.

    ``hidden``: paths of run_bash's own that are denied whatever the rules grant (the undo store).

    ``own_ports``: loopback ports run_bash's own sessions listen on (reachable from later runs);
    None computes them from this process's descendants. ``scan_ports=False`` skips reading
    ``/proc/net`` (pure tests). ``discovery`` computes the host-read set (the host keeps one, so
    git is asked again only when the repository changed); ``agent_rules`` are the rules files
    CodeCompanion is configured with, ``project_files`` the files in the project it runs
    (``per_project_config``); ``untrusted`` are places earlier runs could write (links
    there are never followed when granting PATH trees). ``on_stage("hostread")`` is called once
    the host-read set is known (``make bench`` times it). Raises HostReadError when the git layout
    cannot be read.
    """
    env = os.environ if env is None else env
    cfg = (config or Config()).sandbox
    rules = cfg.rules
    cwd = os.path.normpath(os.path.abspath(cwd))
    home_dir = home or env.get("HOME") or os.path.expanduser("~")
    home_dir = os.path.normpath(home_dir)
    warnings: list[str] = []

    def ex(paths: Iterable[str], must_exist: bool) -> list[str]:
        return expand_rules(paths, must_exist=must_exist, env=env, home=home_dir, base=cwd)

    # -- writable ---------------------------------------------------------------------------------
    user_writable = rules.fs_writable
    writable = ex(SYSTEM_WRITABLE, True) + _granted(cfg, ex)
    if user_writable is not None:
        for raw in SHARED_SOCKET_DIRS:
            shared = expand(raw, env=env, home=home_dir, base=cwd)
            for w in writable:
                if w == "/" or (shared is not None and is_under(shared, w)):
                    warnings.append(
                        f"fs_writable grants {w}: Unix sockets under it (Neovim, tmux, ssh-agent) "
                        "are reachable from the sandbox"
                    )
                    break

    # -- denied -----------------------------------------------------------------------------------
    denied = _denied(cfg, ex, hidden)
    in_denied = Tops(denied)
    writable = [p for p in dict.fromkeys(writable) if p not in in_denied]

    # -- the host-read set: what the host later loads from the writable places ---------------------
    host_read = (discovery or Discovery()).discover(
        cwd,
        writable=writable,
        denied=denied,
        env=env,
        home=home_dir,
        rules=agent_rules,
        project_files=project_files,
        path_writable=rules.path_writable,
    )
    if on_stage is not None:
        on_stage("hostread")
    # Everyday git from a subdirectory or a linked worktree writes the repository's git dir.
    writable += [g for g in host_read.grant if g not in writable]
    warnings += host_read.warnings

    # -- readable ---------------------------------------------------------------------------------
    user_readable = rules.fs_readable
    if user_readable is None:
        readable = ex(SYSTEM_READABLE, True) + ex(HOME_READABLE, True)
        resolv = os.path.realpath("/etc/resolv.conf")
        if os.path.exists(resolv):
            readable.append(resolv)
    else:
        readable = ex(SYSTEM_READABLE, True) + ex(user_readable, True)
    tree = path_entries_tree(env.get("PATH", ""), home_dir, [*writable, *untrusted])
    readable += [p for p in tree if os.path.exists(p)]
    # From a subdirectory git reads the whole work tree, and finds the repository by walking up
    # through it, which must stay one filesystem (a mount point on the way stops it): the
    # project's top level is readable, as it is on the host.
    readable += [r for r in host_read.roots if r != cwd and is_under(cwd, r) and os.path.isdir(r)]
    readable = [p for p in dict.fromkeys(readable) if p not in in_denied]
    # Under a writable grant a path is writable already (a read-only bind of it would narrow it).
    in_writable = Tops(writable)
    readable = [p for p in readable if p not in in_writable]
    # A path under another readable one is granted with it.
    in_readable = Tops(readable)
    readable = [p for p in readable if p == "/" or os.path.dirname(p) not in in_readable]

    # -- read-only carve-outs ---------------------------------------------------------------------
    read_only = [p for p in ex(NEVER_WRITABLE, False) if p in in_writable and p not in in_denied]
    protected = list(host_read.members)
    sealed = list(host_read.sealed)
    git_dirs = list(host_read.git_dirs)

    # -- network ----------------------------------------------------------------------------------
    allow = list(cfg.network.allow)
    local_ok = sorted(set(cfg.network.allow_local_ports))
    listeners = loopback.listeners() if scan_ports else {}
    if own_ports is None:
        own = own_listen_ports(listeners) if scan_ports else []
    else:
        own = sorted({int(p) for p in own_ports})
    blocked = blocked_local_ports(own, local_ok, listeners) if scan_ports else []

    limits = Limits(
        max_processes=cfg.limits.max_processes,
        max_memory=cfg.limits.max_memory,
        max_file_size=cfg.limits.max_file_size,
        max_temp_size=cfg.limits.max_temp_size,
    )
    return Policy(
        cwd=cwd,
        home=home_dir,
        readable=readable,
        writable=writable,
        denied=denied,
        read_only=read_only,
        protected=protected,
        sealed=sealed,
        git_dirs=git_dirs,
        network_allow=allow,
        allow_local_ports=local_ok,
        own_ports=own,
        blocked_local_ports=blocked,
        limits=limits,
        warnings=warnings,
        host_read=host_read,
    )


def point_temp(env: dict[str, str], tmpdir: str) -> dict[str, str]:
    """``env`` (``build_env``'s) with the run's temp dir where the command sees it: ``TMPDIR``,
    and the run's own tool caches (``RUN_CACHES``) in it; a cache the user named stays."""
    old = env.get("TMPDIR")
    for name, sub in RUN_CACHES.items():
        if old is not None and env.get(name) == os.path.join(old, sub):
            env[name] = os.path.join(tmpdir, sub)
    env["TMPDIR"] = tmpdir
    return env


@dataclass(frozen=True)
class EnvBase:
    """What a command's environment takes from the options and the host's environment, the same
    for every run under them (``env_base``); ``build_env`` adds the run's own entries."""

    env: Mapping[str, str]
    caches: tuple[str, ...]  # the ``RUN_CACHES`` the run's temp dir holds (the user named none)
    dropped: tuple[str, ...]  # asked for, but they look secret: not passed


def env_base(config: Config, base_env: Mapping[str, str]) -> EnvBase:
    """``build_env``'s work that does not depend on the run."""
    env_cfg = config.sandbox.env
    env: dict[str, str] = {}
    for name, value in base_env.items():
        if name in ENV_ALLOW or any(fnmatch.fnmatchcase(name, g) for g in ENV_ALLOW_GLOBS):
            env[name] = value
    dropped: list[str] = []
    for pattern in env_cfg.passthrough:
        for name, value in base_env.items():
            if fnmatch.fnmatchcase(name, pattern):
                if is_blocked_name(name):
                    dropped.append(name)
                else:
                    env[name] = value
    env.update(ANTI_HANG_ENV)
    # Values in `set` are written by the user in their config, not inherited: they are kept.
    env.update(env_cfg.set)
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    # npm reads its variables in any case
    caches = tuple(n for n in RUN_CACHES if not any(k.lower() == n for k in env))
    return EnvBase(MappingProxyType(env), caches, tuple(sorted(set(dropped))))


class RunEnv:
    """``build_env`` for the runs of one host (its environment ``environ``): ``env_base``'s
    answer is kept while the options and the host's environment are the same. Shared by the
    host's threads (two that find it stale both compute it; either answer is right)."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.environ = environ
        self.kept: tuple[Config, dict[str, str], EnvBase] | None = None

    def __call__(
        self, config: Config, tmpdir: str, session_id: str
    ) -> tuple[dict[str, str], list[str]]:
        kept = self.kept
        if kept is None or kept[0] is not config or kept[1] != self.environ:
            kept = self.kept = (config, dict(self.environ), env_base(config, self.environ))
        return build_env(
            config, tmpdir=tmpdir, session_id=session_id, base_env=self.environ, base=kept[2]
        )


def build_env(
    config: Config,
    *,
    tmpdir: str,
    session_id: str,
    base_env: Mapping[str, str],
    base: EnvBase | None = None,
) -> tuple[dict[str, str], list[str]]:
    """Return the command's environment and the names dropped although the user asked for them.
    ``base``: ``env_base(config, base_env)``, when the caller kept it."""
    if base is None:
        base = env_base(config, base_env)
    env = dict(base.env)
    for name in base.caches:
        env[name] = os.path.join(tmpdir, RUN_CACHES[name])
    env["TMPDIR"] = tmpdir
    env[SESSION_TAG] = session_id
    return env, list(base.dropped)
