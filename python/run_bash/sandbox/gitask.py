"""Asking git: the one place run_bash learns what git makes of a repository's files.

run_bash never reads git's formats itself (config files, their includes, gitfiles, ``commondir``
links): a reader of ours that differs from git's by one rule is a file that run_bash calls inert
and git runs. Every answer here comes from ``git`` run with a timeout, no pager, stdin from
``/dev/null`` and no fsmonitor, in one of two environments:

* ``git_env``: the user's own configuration (their hooks path and includes decide what the host's
  git reads), for the layout of repositories the user already trusts.
* ``clean_env``: no system or global configuration (``GIT_CONFIG_NOSYSTEM=1``,
  ``GIT_CONFIG_GLOBAL=/dev/null``, ``HOME`` an empty directory), run from that directory with the
  discovery stopped there, for judging a file a sandboxed run left behind on its own.

A new repository's configuration is judged by the keys git lists for it
(``git config --file F --list --null``): only keys in ``INERT_CONFIG_KEYS``, which name no
program, file, hook, filter or other repository, keep it; anything else (``include.path`` itself,
``core.fsmonitor``, ``alias.*``, …) quarantines it, and the notice names the key. A file with an
include is listed again with ``--includes`` to name what the include sets too (an include is
never inert, so what it leads to never changes the verdict, and a FIFO there costs a timeout, not
the verdict).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import selectors
import shutil
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence

from run_bash.errors import SpawnError

GIT_TIMEOUT_S = 5.0
# Largest config file a run may leave in a repository and still have judged (git reads it whole).
MAX_CONFIG_BYTES = 4 * 1024 * 1024
# Most output read from git about one file; more is an answer too large to be inert.
MAX_GIT_OUTPUT = 4 * 1024 * 1024
# Config files followed through their includes for one repository (git itself stops at depth 10).
MAX_CONFIG_FILES = 64

# Options for every git call: no fsmonitor, no pager, any owner (root reading a user's tree).
GIT_OPTS = ("--no-pager", "-c", "core.fsmonitor=false", "-c", "safe.directory=*")

# Config keys a repository created inside the sandbox may carry and still be inert: none of them
# names a program, a file to include, a hook, a filter or another repository. ``*`` is any
# subsection (``remote.origin.url`` is ``remote.*.url``). Keys are as git lists them: section and
# name lower-case, the subsection as written.
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

# Keys whose values name more configuration to read (includes) or the hooks directory, as
# ``git config --get-regexp`` matches them (against the canonical, lower-case key).
REFS_REGEXP = r"^(include\.path|includeif\..*\.path|core\.hookspath)$"


class HostReadError(SpawnError):
    """The host-read set could not be determined: the run does not start."""


def git_env(env: Mapping[str, str]) -> dict[str, str]:
    """The environment git is asked in about the user's repositories: the user's own config files
    (``HOME``, ``XDG_CONFIG_HOME``, ``GIT_CONFIG_GLOBAL``/``SYSTEM``/``NOSYSTEM``: they decide the
    hooks path and includes), nothing else of the caller's environment (no GIT_DIR, pager,
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
    # The user's own choice of config files decides what their git reads.
    for name in ("HOME", "XDG_CONFIG_HOME", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM"):
        if env.get(name):
            out[name] = env[name]
    if env.get("GIT_CONFIG_NOSYSTEM"):
        out["GIT_CONFIG_NOSYSTEM"] = env["GIT_CONFIG_NOSYSTEM"]
    return out


_EMPTY: list[str] = []
_EMPTY_LOCK = threading.Lock()


def empty_home() -> str:
    """An empty directory of this process (mode 0500): the ``HOME`` and working directory of git
    in the clean environment. Made again if something removed it. In a host it lies in the
    host's output directory (``RUN_BASH_STATE_DIR``), which the keeper removes however the host
    ends (the host leaves with ``os._exit``: no ``atexit``); elsewhere in the temp dir."""
    with _EMPTY_LOCK:
        if _EMPTY and os.path.isdir(_EMPTY[0]):
            return _EMPTY[0]
        state = os.environ.get("RUN_BASH_STATE_DIR")
        where = state if state and os.path.isdir(state) else None
        path = tempfile.mkdtemp(prefix="run_bash-git-home-", dir=where)
        os.chmod(path, 0o500)
        if not _EMPTY:
            atexit.register(lambda: shutil.rmtree(_EMPTY[0], ignore_errors=True))
        _EMPTY[:] = [path]
        return path


def clean_env() -> dict[str, str]:
    """The environment a file left by a sandboxed run is judged in: git with no system or global
    configuration, an empty ``HOME``, and no repository found from its working directory."""
    home = empty_home()
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C",
        "LC_ALL": "C",
        "HOME": home,
        "XDG_CONFIG_HOME": os.path.join(home, ".config"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_SYSTEM": "/dev/null",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_CEILING_DIRECTORIES": os.path.dirname(home),
        "GIT_OPTIONAL_LOCKS": "0",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_PAGER": "cat",
        "PAGER": "cat",
        "GIT_ASKPASS": "",
        "SSH_ASKPASS": "",
    }


def run_git(
    args: Sequence[str],
    cwd: str,
    env: Mapping[str, str],
    *,
    clean: bool = False,
    limit: int = MAX_GIT_OUTPUT,
    extra_env: Mapping[str, str] | None = None,
    stdin: int | None = None,
) -> tuple[int, str, str]:
    """Run ``git`` with a timeout; (returncode, stdout, stderr). ``clean`` runs it in the clean
    environment from the empty directory (``cwd`` is then ignored). ``extra_env`` is added to
    that environment (``GIT_INDEX_FILE``); ``stdin`` is a descriptor to read from (else
    ``/dev/null``). A git that does not answer in ``GIT_TIMEOUT_S`` (a FIFO or a leased file in
    its way), or says more than ``limit`` bytes, raises HostReadError."""
    if clean:
        genv = clean_env()
        cwd = genv["HOME"]
    else:
        genv = git_env(env)
    genv.update(extra_env or {})
    try:
        proc = subprocess.Popen(
            ["git", *GIT_OPTS, *args],
            cwd=cwd,
            env=genv,
            stdin=subprocess.DEVNULL if stdin is None else stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            close_fds=True,
            start_new_session=True,
        )
    except OSError as e:
        raise HostReadError(f"cannot run git to read the repository layout: {e}") from None
    with proc:
        out, err, why = _collect(proc, limit)
        if why:
            proc.kill()
            proc.wait()
            if why == "timeout":
                raise HostReadError(
                    f"git did not answer within {GIT_TIMEOUT_S:g} s in {cwd} (a file of the "
                    "repository blocks it: a FIFO, or a lease held by a running command); "
                    "nothing was started"
                )
            raise HostReadError(f"git said more than {limit} bytes about {cwd}")
        rc = proc.wait()
    return rc, out.decode(errors="surrogateescape"), err.decode(errors="replace")


def run_git_fed(
    args: Sequence[str],
    data: bytes,
    *,
    limit: int = MAX_GIT_OUTPUT,
    extra_env: Mapping[str, str] | None = None,
) -> tuple[int, str, str]:
    """``run_git`` in the clean environment with ``data`` on its standard input, given from a
    private scratch file (a pipe would need writing while git's output is read). Raises
    HostReadError as ``run_git`` does, and when the scratch file cannot be made."""
    scratch = ""
    try:
        scratch = tempfile.mkdtemp(prefix="run_bash-git-in-")
        given = os.path.join(scratch, "in")
        with open(given, "wb") as f:
            f.write(data)
        with open(given, "rb") as f:
            return run_git(
                args, "/", {}, clean=True, limit=limit, extra_env=extra_env, stdin=f.fileno()
            )
    except OSError as e:
        raise HostReadError(f"cannot give git its input ({e.strerror})") from None
    finally:
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)


def _collect(proc: subprocess.Popen[bytes], limit: int) -> tuple[bytes, bytes, str]:
    """Everything git writes, until it closes both pipes; ("timeout" | "limit") when it takes
    longer than ``GIT_TIMEOUT_S`` or says more than ``limit`` bytes."""
    assert proc.stdout is not None and proc.stderr is not None
    bufs: dict[int, list[bytes]] = {proc.stdout.fileno(): [], proc.stderr.fileno(): []}
    sizes = dict.fromkeys(bufs, 0)
    deadline = time.monotonic() + GIT_TIMEOUT_S
    with selectors.DefaultSelector() as sel:
        for fd in bufs:
            sel.register(fd, selectors.EVENT_READ)
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                return b"", b"", "timeout"
            for key, _ in sel.select(left):
                data = os.read(key.fd, 65536)
                if not data:
                    sel.unregister(key.fd)
                    continue
                bufs[key.fd].append(data)
                sizes[key.fd] += len(data)
                if sizes[key.fd] > limit:
                    return b"", b"", "limit"
    out, err = (b"".join(b) for b in bufs.values())
    return out, err, ""


def _last_line(text: str) -> str:
    lines = [x for x in text.strip().splitlines() if x.strip()]
    return lines[-1][:300] if lines else ""


# -------------------------------------------------------------------------------------------------
# Judging a config file a run left behind


def key_pattern(key: str) -> str:
    """A key as ``INERT_CONFIG_KEYS`` spells it: ``section.name``, or ``section.*.name`` when it
    has a subsection (section and name hold no dot; the subsection may)."""
    section, _, rest = key.partition(".")
    if "." not in rest:
        return key
    return f"{section}.*.{rest.rpartition('.')[2]}"


def is_inert_key(key: str) -> bool:
    """Whether a key git listed is one a new repository may carry."""
    return key_pattern(key) in INERT_CONFIG_KEYS


def config_keys(path: str, includes: bool = True) -> list[str]:
    """Every key git reads from the config file ``path``, its includes followed, in the clean
    environment (``git config --file F --list --null --includes``). Raises HostReadError when
    git cannot read it (a syntax git rejects, an include loop, a FIFO in the way)."""
    rc, out, err = run_git(
        [
            "config",
            "--file",
            path,
            "--list",
            "--null",
            "--includes" if includes else "--no-includes",
            "--name-only",
        ],
        "/",
        {},
        clean=True,
    )
    if rc != 0:
        raise HostReadError(f"git cannot read it ({_last_line(err) or f'exit {rc}'})")
    return [k for k in out.split("\0") if k]


def judge_config(path: str) -> str | None:
    """None when the config file ``path`` (of a repository a run created) is absent or holds
    only inert keys as git reads it; otherwise why not, naming the keys."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        return f"cannot be examined ({e.strerror})"
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link (git would read whatever it points to)"
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    if st.st_size > MAX_CONFIG_BYTES:
        return f"is larger than {MAX_CONFIG_BYTES >> 20} MiB"
    try:
        # The file's own keys decide: an include key is never inert, so a file with none has
        # nothing more to read, and one with an include is not inert whatever it includes.
        keys = config_keys(path, includes=False)
    except HostReadError as e:
        text = str(e)
        if "did not answer" in text:
            return (
                f"cannot be read by git within {GIT_TIMEOUT_S:g} s (a FIFO or a lease in its way)"
            )
        if "said more than" in text:
            return "lists more keys than git is asked to read"
        return text
    bad = list(dict.fromkeys(k for k in keys if not is_inert_key(k)))
    if any(k == "include.path" or k.startswith("includeif.") for k in bad):
        # Read again through its includes, as git does, only to name what they set.
        with contextlib.suppress(HostReadError):
            bad = list(dict.fromkeys(k for k in config_keys(path) if not is_inert_key(k)))
    if bad:
        more = f" (and {len(bad) - 5} more)" if len(bad) > 5 else ""
        return f"sets {', '.join(bad[:5])}{more}"
    return None


# -------------------------------------------------------------------------------------------------
# The layout of a repository, as git reads it


def resolve_git_dir(entry: str) -> str | None:
    """The repository a ``.git`` file (a gitfile) leads to, as git resolves it
    (``git rev-parse --resolve-git-dir``); None when git takes it for no repository."""
    rc, out, _err = run_git(["rev-parse", "--resolve-git-dir", entry], "/", {}, clean=True)
    line = out.strip("\n")
    if rc != 0 or not line or "\n" in line:
        return None
    return os.path.normpath(os.path.join(os.path.dirname(entry), line))


def common_dir(git_dir: str) -> str | None:
    """The common directory git uses for the git directory ``git_dir`` (itself unless a
    ``commondir`` link says otherwise), asked in the clean environment; None when git takes it
    for no repository."""
    try:
        rc, out, _err = run_git(
            [f"--git-dir={git_dir}", "rev-parse", "--path-format=absolute", "--git-common-dir"],
            "/",
            {},
            clean=True,
        )
    except HostReadError:
        return None
    line = out.strip("\n")
    if rc != 0 or not line or "\n" in line:
        return None
    return os.path.normpath(line)


def _refs(
    pre: Sequence[str], args: Sequence[str], cwd: str, env: Mapping[str, str]
) -> list[tuple[str, str, str]]:
    """(origin file, key, value) of every include and hooks-path key git lists (``pre`` are git's
    own options, ``args`` those of ``git config``); values as paths: ``~`` and ``%(prefix)``
    expanded by git, relative ones left relative."""
    rc, out, err = run_git(
        [
            *pre,
            "config",
            *args,
            "--show-origin",
            "--null",
            "--type=path",
            "--get-regexp",
            REFS_REGEXP,
        ],
        cwd,
        env,
    )
    if rc == 1 and not out:
        return []  # no such key
    if rc != 0:
        raise HostReadError(
            f"git cannot read the configuration ({_last_line(err) or f'exit {rc}'})"
        )
    out_refs: list[tuple[str, str, str]] = []
    records = out.split("\0")
    for origin, entry in zip(records[::2], records[1::2], strict=False):
        if not origin.startswith("file:"):
            continue  # the command line (our own -c)
        key, _, value = entry.partition("\n")
        out_refs.append((origin[5:], key, value))
    return out_refs


def config_refs(git_dir: str, env: Mapping[str, str]) -> tuple[list[str], list[tuple[str, str]]]:
    """Every config file git may read for the repository at ``git_dir`` through an include
    (whatever the include's condition: one that does not hold today may hold after a checkout),
    and every ``core.hooksPath`` value set in any of them, with the file that sets it.

    The includes of the files git reads (system, global, the repository's own) are listed by git
    (``--get-regexp``, values expanded by ``--type=path``); each included file is then asked the
    same of on its own (``--file``), so a file behind an include whose condition does not hold
    today is followed too. A relative include is relative to the file that holds it (git's rule,
    applied to git's own expansion)."""
    files: dict[str, None] = {}
    hooks: list[tuple[str, str]] = []
    todo = [
        (_abs(git_dir, o), k, v) for o, k, v in _refs([f"--git-dir={git_dir}"], [], git_dir, env)
    ]
    while todo and len(files) < MAX_CONFIG_FILES:
        origin, key, value = todo.pop(0)
        if not value:
            continue
        if key == "core.hookspath":
            hooks.append((origin, value))
            continue
        target = os.path.normpath(os.path.join(os.path.dirname(origin), value))
        if target in files:
            continue
        files[target] = None
        with contextlib.suppress(OSError):
            if stat.S_ISREG(os.stat(target).st_mode):
                more = _refs([f"--git-dir={git_dir}"], ["--file", target], git_dir, env)
                todo += [(_abs(git_dir, o), k, v) for o, k, v in more]
    return list(files), hooks


def _abs(base: str, origin: str) -> str:
    return os.path.normpath(os.path.join(base, origin))


def hooks_dir(where: str, env: Mapping[str, str], git_dir: str | None = None) -> tuple[str, str]:
    """(git dir, hooks directory) as the user's git names them in the work tree ``where`` (the
    ``.git`` entry there found as git finds it), or for the git directory ``git_dir`` run from
    itself (a bare repository, a worktree or submodule git dir): ``git rev-parse --git-path
    hooks`` in the user's own environment, so a relative ``core.hooksPath`` from their global or
    system config, or from the repository's, is resolved as their git resolves it. Ask only about
    a repository whose own config was judged inert (or is trusted): git reads it. Raises
    HostReadError when git cannot tell (an error, a timeout)."""
    pre = [f"--git-dir={git_dir}"] if git_dir else []
    args = [
        *pre,
        "rev-parse",
        "--path-format=absolute",
        "--absolute-git-dir",
        "--git-path",
        "hooks",
    ]
    try:
        rc, out, err = run_git(args, git_dir or where, env)
    except HostReadError as e:
        if "did not answer" not in str(e):
            raise
        raise HostReadError(
            f"git did not say within {GIT_TIMEOUT_S:g} s which hooks directory it uses there "
            "(a FIFO or a lease in its way)"
        ) from None
    lines = out.splitlines()
    if rc != 0 or len(lines) != 2:
        raise HostReadError(
            f"git cannot tell which hooks directory it uses there "
            f"({_last_line(err) or f'exit {rc}'})"
        )
    return os.path.normpath(lines[0]), os.path.normpath(lines[1])
