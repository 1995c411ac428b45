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

An index git accepts can still hold what no run may write in the work tree: a file the sandbox
keeps (``rust-toolchain.toml``, ``.envrc``, a hook manager's config) or a symbolic link out of the
work tree (``CLAUDE.md`` -> ``~/.ssh/id_rsa``), staged with ``git update-index --cacheinfo``
without ever being a file there. The user's next ``git restore .`` or ``git checkout -- .``, the
usual way to throw away what a run changed, would write it. So the entries that differ from
``HEAD`` are judged (``smuggled``: a kept file when it differs from the work tree too, a link out
whatever the work tree has), and one of those the run put there is taken back: to what the index staged there before the run
(``put_back``, from what git lists of the index held from before it, ``indexbefore``), or, when
that cannot be known, to what ``HEAD`` has (``take_back``: ``git reset -- PATH``, which removes an
entry ``HEAD`` does not have).
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple

from run_bash.sandbox import gitask
from run_bash.sandbox.gitask import HostReadError

# Most bytes git may list for one index (about 100 bytes an entry).
MAX_LISTING = 256 * 1024 * 1024

Sig = tuple[int, int, int, int, int]
State = dict[str, Sig | None]


class Found(NamedTuple):
    """An index entry no run may leave (``smuggled``), as ``ls-files --stage`` lists it."""

    path: str
    mode: str
    oid: str
    stage: str
    why: str


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


def _paths(out: str) -> list[str]:
    return [p for p in out.split("\0") if p]


def _staged_links(out: str) -> set[str]:
    """The paths ``diff --cached --raw -z`` says the index has as a symbolic link (mode
    120000) where ``HEAD`` has something else."""
    fields = out.split("\0")
    found: set[str] = set()
    for head, path in zip(fields[::2], fields[1::2], strict=False):
        modes = head.lstrip(":").split()
        if len(modes) >= 2 and modes[1] == "120000" and path:
            found.add(path)
    return found


def smuggled(git_dir: str, index: str, work_tree: str, kept: Callable[[str], bool]) -> list[Found]:
    """Each entry of ``index`` that would make the next ``git restore`` write
    what no run may write in ``work_tree``: a path ``kept`` (absolute) says the sandbox keeps, or
    a symbolic link whose text leads out of the work tree (absolute, or climbing out with
    ``..``). Only entries that differ from ``HEAD`` count, as git says (``diff --cached``); a
    kept file only when it differs from the work tree too (``diff``): one committed, or staged as
    the work tree has it, is the user's (no run can write it there). A link out counts whatever
    the work tree has: a run that leaves the same link there loses it to the check of the links
    it left, and the index would write it back. Asked of git in the clean environment; raises
    HostReadError when git does not answer."""
    top = ["--git-dir", git_dir, "--work-tree", work_tree]
    env = {"GIT_INDEX_FILE": index, "GIT_OPTIONAL_LOCKS": "0"}
    diff = ["diff", "--no-renames", "--no-ext-diff", "--no-textconv", "-z"]
    listed: list[str] = []
    for extra in (["--cached", "--raw", "--no-abbrev"], ["--name-only"]):
        rc, out, err = gitask.run_git([*top, *diff, *extra], "/", {}, clean=True, extra_env=env)
        if rc != 0:
            raise HostReadError(f"git cannot compare its index ({gitask._last_line(err)})")
        listed.append(out)
        if not out:
            break
    if not listed[0]:
        return []
    fields = listed[0].split("\0")
    cached = {p for p in fields[1::2] if p}
    only = cached & set(_paths(listed[1]))
    links_in = _staged_links(listed[0])
    wanted = only | links_in
    if not wanted:
        return []
    spec = [f":(top,literal){p}" for p in sorted(wanted)]
    rc, out, err = gitask.run_git(
        [*top, "ls-files", "--stage", "-z", "--", *spec], "/", {}, clean=True, extra_env=env
    )
    if rc != 0:
        raise HostReadError(f"git cannot list its index ({gitask._last_line(err)})")
    found: list[Found] = []
    links: list[Found] = []
    for line in _paths(out):
        head, _, path = line.partition("\t")
        mode, oid, number = [*head.split(), "", "", ""][:3]
        if path in only and kept(os.path.join(work_tree, path)):
            found.append(Found(path, mode, oid, number, "a file the sandbox keeps"))
        elif mode == "120000" and path in wanted:
            links.append(Found(path, mode, oid, number, ""))
    for link, text in zip(links, _blobs(git_dir, [f.oid for f in links]), strict=True):
        target = os.path.normpath(os.path.join(os.path.dirname(link.path), text))
        if text.startswith("/") or target == ".." or target.startswith("../"):
            why = f"a symbolic link to {text}, which leads out of the work tree"
            found.append(link._replace(why=why))
    return found


def _blobs(git_dir: str, oids: list[str]) -> list[str]:
    """The content of each blob (a symbolic link's text), as git gives it."""
    if not oids:
        return []
    rc, out, err = gitask.run_git_fed(
        ["--git-dir", git_dir, "cat-file", "--batch"], "".join(f"{o}\n" for o in oids).encode()
    )
    if rc != 0:
        raise HostReadError(f"git cannot read a link's text ({gitask._last_line(err)})")
    texts: list[str] = []
    rest = out.encode(errors="surrogateescape")  # sizes count bytes
    for _ in oids:
        header, _, rest = rest.partition(b"\n")
        parts = header.split()
        if len(parts) != 3 or not parts[2].isdigit():
            raise HostReadError(f"git gave no link text ({header[:100]!r})")
        size = int(parts[2])
        texts.append(rest[:size].decode(errors="surrogateescape"))
        rest = rest[size + 1 :]
    return texts


def take_back(git_dir: str, index: str, work_tree: str, paths: Iterable[str]) -> str | None:
    """Make the entries of ``paths`` in ``index`` what ``HEAD`` has (none, when it has none), as
    ``git reset -- PATH`` does; None when done, else why not."""
    spec = [f":(top,literal){p}" for p in paths]
    try:
        rc, _out, err = gitask.run_git(
            ["--git-dir", git_dir, "--work-tree", work_tree, "reset", "-q", "--", *spec],
            "/",
            {},
            clean=True,
            extra_env={"GIT_INDEX_FILE": index},
        )
    except HostReadError as e:
        return str(e)
    return None if rc == 0 else (gitask._last_line(err) or f"git reset: exit {rc}")


def put_back(
    git_dir: str,
    index: str,
    work_tree: str,
    before: Mapping[str, Iterable[tuple[str, str, str]]],
    found: Iterable[Found],
) -> str | None:
    """Make the entries at the paths of ``found`` in ``index`` what they were before the run:
    each path's entries are removed (a mode 0 line) and those ``before`` lists for it, ``(mode,
    oid, stage)``, given back to git (``update-index -z --index-info``); a path ``before`` does
    not list is left out of the index, as it was. None when done, else why not."""
    top = ["--git-dir", git_dir, "--work-tree", work_tree]
    lines: list[str] = []
    for p, oid in {f.path: f.oid for f in found}.items():
        was = before.get(p, ())
        lines += [f"0 {'0' * len(oid)}\t{p}", *(f"{m} {o} {n}\t{p}" for m, o, n in was)]
    data = "".join(f"{x}\0" for x in lines).encode(errors="surrogateescape")
    try:
        rc, _out, err = gitask.run_git_fed(
            [*top, "update-index", "-z", "--index-info"], data, extra_env={"GIT_INDEX_FILE": index}
        )
    except HostReadError as e:
        return str(e)
    return None if rc == 0 else (gitask._last_line(err) or f"git update-index: exit {rc}")
