"""A git index a run leaves behind: every path in it must be one git itself would accept.

The index (``.git/index``, a linked work tree's ``worktrees/<name>/index``) stays writable inside
the sandbox: ``git add``, ``git status`` and a merge to resolve write it. Git checks every path it
takes from a tree (``read-tree``, ``checkout``, ``merge``: "invalid path '.git/hooks/…'"), but
not the paths of an index it reads back: an entry named ``.git/hooks/post-checkout`` or
``../.bashrc`` in an index a run wrote is written as it is by the host's next ``git checkout-index
-a``, ``git checkout -- :/`` or ``git restore`` (a hook of the project, or a file outside the work
tree). So after a run, an index that changed is listed by git (``ls-files --stage -z``) and that
list is given back to git to build a scratch index from (``update-index -z --index-info``, with
``core.protectNTFS`` and ``core.protectHFS`` on), which applies git's own rules for a path
(``verify_path``) and leaves out every path it refuses; the index is kept only when git lists the
scratch index exactly as the original. run_bash never reads the index format itself.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterable, Mapping

from run_bash.sandbox import gitask
from run_bash.sandbox.gitask import HostReadError

# Most bytes git may list for one index (about 100 bytes an entry).
MAX_LISTING = 256 * 1024 * 1024

Sig = tuple[int, int, int, int, int]
State = dict[str, Sig | None]


def index_path(git_dir: str) -> str:
    return os.path.join(git_dir, "index")


def signature(path: str) -> Sig | None:
    """The index file's identity, size and times now (None: not there)."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def state(git_dirs: Iterable[str]) -> State:
    """The index file of each git directory as it is now (identity, size and times: a run cannot
    set a change time back)."""
    return {index_path(g): signature(index_path(g)) for g in git_dirs}


def changed(
    before: State, git_dirs: Iterable[str], moved: Mapping[str, str] | None = None
) -> list[str]:
    """The index files of ``git_dirs`` that are there and differ from ``before``. A git
    directory the run moved (``moved``: its path before -> where it is now) is looked at where
    it is now."""
    out = []
    for g in git_dirs:
        was = index_path(g)
        p = index_path((moved or {}).get(g, g))
        now = signature(p)
        if now is not None and (was not in before or before[was] != now):
            out.append(p)
    return out


def _listing(git_dir: str, index: str) -> tuple[int, str, str]:
    return gitask.run_git(
        ["--git-dir", git_dir, "ls-files", "--stage", "-z"],
        "/",
        {},
        clean=True,
        limit=MAX_LISTING,
        extra_env={"GIT_INDEX_FILE": index},
    )


def judge(git_dir: str, index: str | None = None) -> str | None:
    """Why the index of ``git_dir`` is one git could write outside the places it means to (a path
    git refuses, an index git cannot read, or one that is not a regular file); None when it is
    fine or there is none. Asked of git in the clean environment (``gitask``)."""
    index = index or index_path(git_dir)
    try:
        st = os.lstat(index)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return "its index is not a regular file"
    try:
        rc, listed, err = _listing(git_dir, index)
        if rc != 0:
            return f"git cannot read its index ({gitask._last_line(err) or f'exit {rc}'})"
        if not listed:
            return None
        scratch = tempfile.mkdtemp(prefix="run_bash-index-")
        try:
            given = os.path.join(scratch, "list")
            with open(given, "wb") as f:
                f.write(listed.encode(errors="surrogateescape"))
            built = os.path.join(scratch, "index")
            with open(given, "rb") as f:
                rc, _out, err = gitask.run_git(
                    [
                        "--git-dir",
                        git_dir,
                        "-c",
                        "core.protectNTFS=true",
                        "-c",
                        "core.protectHFS=true",
                        "update-index",
                        "-z",
                        "--index-info",
                    ],
                    "/",
                    {},
                    clean=True,
                    extra_env={"GIT_INDEX_FILE": built},
                    stdin=f.fileno(),
                )
            if rc != 0:
                return f"git refuses its index ({gitask._last_line(err) or f'exit {rc}'})"
            rc, again, _ = _listing(git_dir, built)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    except HostReadError as e:
        return str(e)
    except OSError as e:
        return f"its index could not be checked ({e.strerror})"
    if rc != 0 or again != listed:
        refused = [x for x in err.splitlines() if x.strip()]
        what = refused[0][:300] if refused else "it is not as git would write it"
        return f"its index names a path git refuses to check out ({what})"
    return None
