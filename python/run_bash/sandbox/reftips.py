"""Commits a run leaves on a ref: none may hold what no run may write in the work tree.

The refs (``refs/``, ``packed-refs``, ``HEAD``, the stash) stay writable inside the sandbox:
``git commit``, ``git stash`` and a branch are ordinary agent work. But a commit holds a tree
git checks out later as the user: a run that stages ``.envrc`` through the index only (``git
update-index --cacheinfo``, see ``gitindex.smuggled``) and commits it, makes a branch of it with
``git commit-tree`` and ``git update-ref``, or stashes it, leaves what the user's next ``git reset
--hard``, ``git checkout feature``, ``git stash pop``, ``git merge`` or ``git rebase`` writes (a
file the sandbox keeps: direnv runs it; or a symbolic link out of the work tree).

Per run, before it starts and after it ends, only a **signature** of each git directory's ref
storage is taken: the identity, size and times of ``HEAD`` and the other pseudo-refs, of
``packed-refs``, of the stash's reflog, of ``reftable/`` and its ``tables.list``, and of every
directory and file under ``refs/`` (git writes a loose ref through a lock file renamed over it,
which changes its directory; a run that writes one in place changes the file; a change time
cannot be set back; one younger than ``fsdeps.SETTLED_NS`` makes the signature equal to no other).
It is a change detector only: nothing of git's formats is read here.

The tips git reported (``ask``: ``for-each-ref``, the pseudo-refs through ``cat-file
--batch-check``, the stash's entries through ``log -g``) are kept per git directory and asked
again only when the signature changed. After a run that changed it, the commits no known tip
reaches (``rev-list``, at most ``MAX_COMMITS``) are compared each with its first parent
(``diff-tree``), and every entry they add or change is judged as ``gitindex.smuggled`` judges an
index entry (``judge``). What git gives is compared as bytes; git is asked, in the clean
environment, with replace refs off (``GIT_NO_REPLACE_OBJECTS``): a run's ``refs/replace/`` is a
ref like any other, judged, not followed.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from run_bash.fsdeps import SETTLED_NS
from run_bash.sandbox import gitask
from run_bash.sandbox.gitask import HostReadError
from run_bash.sandbox.gitindex import _blobs

# The pseudo-refs a user's command reads (`git reset --hard ORIG_HEAD`, `git merge FETCH_HEAD`).
PSEUDO = (
    "HEAD",
    "ORIG_HEAD",
    "FETCH_HEAD",
    "MERGE_HEAD",
    "CHERRY_PICK_HEAD",
    "REVERT_HEAD",
    "REBASE_HEAD",
    "BISECT_HEAD",
    "AUTO_MERGE",
)
STASH = "refs/stash"
# Beyond these many new commits (or ref files) a run's refs are not judged: every ref it moved is
# put back (fail closed).
MAX_COMMITS = 5000
MAX_REF_FILES = 50_000
# The most bytes git may say about the new commits' changes.
MAX_DIFF = 64 * 1024 * 1024
ENV = {"GIT_NO_REPLACE_OBJECTS": "1", "GIT_OPTIONAL_LOCKS": "0"}

Sig = tuple[object, ...]


def _lstat(path: str) -> tuple[int, int, int, int, int] | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _walk(top: str, out: list[object]) -> bool:
    """Every directory and file under ``top`` (not through a link): False past
    ``MAX_REF_FILES``."""
    stack = [top]
    while stack:
        d = stack.pop()
        try:
            it = os.scandir(d)
        except OSError:
            continue
        with it:
            for e in it:
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                out.append(
                    (e.path, st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
                )
                if stat.S_ISDIR(st.st_mode):
                    stack.append(e.path)
        if len(out) > MAX_REF_FILES:
            return False
    return True


# What is looked at in a git directory: its own pseudo-refs, and where it keeps refs.
_TOP = frozenset((*PSEUDO, "refs", "packed-refs", "reftable"))


def settled(sig: Sig) -> Sig:
    """``sig`` without what makes a young one unequal to any other (``signature``): what a
    look at a background run compares, leaving the doubt to the run's end."""
    return tuple(x for x in sig if type(x) is not object)


def has_refs(sig: Sig) -> bool:
    """Whether a signature saw any ref: a file under ``refs/`` or ``reftable/``, or a
    ``packed-refs`` that is not empty (a repository ``git init`` just made has none; git
    listing none where some are is a failure, never "no refs")."""
    for x in sig:
        if not (isinstance(x, tuple) and len(x) == 6 and isinstance(x[0], str)):
            continue
        path, _ino, mode, size = x[0], x[1], x[2], x[3]
        if isinstance(mode, int) and stat.S_ISREG(mode):
            if os.path.basename(path) == "packed-refs" and not size:
                continue
            return True
    return False


def signature(git_dir: str, common_dir: str) -> Sig:
    """The ref storage of ``git_dir`` (its own pseudo-refs and per-work-tree refs, and what it
    shares in ``common_dir``) as it is now. Taken with ``lstat`` only (a listing says which
    names are there); two equal signatures mean git would list the same refs. Past
    ``MAX_REF_FILES`` it is never equal to another."""
    out: list[object] = []
    for d in dict.fromkeys((git_dir, common_dir)):
        try:
            names = sorted(_TOP.intersection(os.listdir(d)))
        except OSError:
            names = []
        out.append((d, *names))
        out += [_lstat(os.path.join(d, n)) for n in names]
        if "packed-refs" in names:
            packed = _lstat(os.path.join(d, "packed-refs"))
            if packed is not None:
                out.append((os.path.join(d, "packed-refs"), *packed))
        out.append(_lstat(os.path.join(d, "logs/refs/stash")))
        if "reftable" in names:
            out.append(_lstat(os.path.join(d, "reftable/tables.list")))
        whole = all(_walk(os.path.join(d, n), out) for n in ("refs", "reftable") if n in names)
        if not whole:
            out.append(object())  # too many to compare: always a change
            break
    # Two writes within one timestamp tick, of the same size, look like one: a signature that
    # saw a change time younger than ``SETTLED_NS`` is never equal to another.
    young = time.time_ns() - SETTLED_NS
    if any(isinstance(x, tuple) and isinstance(x[-1], int) and x[-1] > young for x in out):
        out.append(object())
    return tuple(out)


@dataclass(frozen=True)
class Tip:
    """Where one ref pointed when git listed it."""

    oid: str  # what the ref names
    commit: str | None  # the commit it leads to (a tag peeled once); None: not a commit


@dataclass
class Tips:
    """The refs of one git directory as git listed them, and the signature taken just before."""

    sig: Sig
    refs: dict[str, Tip] = field(default_factory=dict)  # refs/… and the pseudo-refs
    head: str | None = None  # the branch HEAD names (None: detached, or not a listed branch)
    stash: tuple[str, ...] = ()  # the stash's entries, newest first

    def commits(self) -> set[str]:
        return {t.commit for t in self.refs.values() if t.commit} | set(self.stash)


def _git(git_dir: str, args: list[str], stdin: str | None = None, limit: int = 0) -> str:
    """What git says (stdout); HostReadError when it fails or does not answer."""
    try:
        return _git_once(git_dir, args, stdin, limit)
    except OSError as e:
        raise HostReadError(f"git {args[0]} could not be asked ({e.strerror})") from None


def _git_once(git_dir: str, args: list[str], stdin: str | None, limit: int) -> str:
    extra = {"limit": limit} if limit else {}
    if stdin is None:
        rc, out, err = gitask.run_git(
            ["--git-dir", git_dir, *args], "/", {}, clean=True, extra_env=ENV, **extra
        )
    else:
        rc, out, err = gitask.run_git_fed(
            ["--git-dir", git_dir, *args],
            stdin.encode(errors="surrogateescape"),
            extra_env=ENV,
            **extra,
        )
    if rc != 0:
        raise HostReadError(f"git {args[0]}: {gitask._last_line(err) or f'exit {rc}'}")
    return out


def ask(git_dir: str, sig: Sig) -> Tips:
    """The refs of ``git_dir`` now, as git lists them (``sig``: the signature taken before)."""
    tips = Tips(sig)
    fmt = "%(objectname)/%(objecttype)/%(*objectname)/%(*objecttype)/%(HEAD)/%(refname)"
    for line in _git(git_dir, ["for-each-ref", f"--format={fmt}"]).splitlines():
        parts = line.split("/", 5)
        if len(parts) != 6:
            raise HostReadError(f"git listed a ref as {line[:100]!r}")
        oid, kind, peeled, peeled_kind, head, name = parts
        commit = oid if kind == "commit" else peeled if peeled_kind == "commit" else None
        tips.refs[name] = Tip(oid, commit)
        if head == "*":
            tips.head = name
    pseudo = _git(
        git_dir,
        ["cat-file", "--batch-check=%(objectname) %(objecttype)"],
        "".join(f"{n}\n" for n in PSEUDO),
    ).splitlines()
    if len(pseudo) != len(PSEUDO):
        raise HostReadError("git did not answer for every pseudo-ref")
    for name, line in zip(PSEUDO, pseudo, strict=True):
        oid, _, kind = line.partition(" ")
        if kind in ("missing", "ambiguous") or not kind:
            continue
        tips.refs[name] = Tip(oid, oid if kind == "commit" else None)
    if STASH in tips.refs:
        entries = _git(
            git_dir,
            ["-c", "log.showSignature=false", "log", "-g", "--format=%H", STASH, "--"],
        )
        tips.stash = tuple(entries.split())
    return tips


@dataclass(frozen=True)
class Found:
    """A commit no run may leave: ``path`` in it is ``why``."""

    commit: str
    path: str
    why: str


@dataclass
class Verdict:
    """What ``judge`` says of a run's refs: the commits that hold what no run may write, and the
    refs (or stash entries, by their place in the list) that lead to one."""

    found: list[Found] = field(default_factory=list)
    refs: dict[str, Found] = field(default_factory=dict)
    stash: dict[int, Found] = field(default_factory=dict)
    why_all: str | None = None  # not judged (too many commits): every changed ref goes back


def _moved(known: Tips, now: Tips) -> tuple[dict[str, Tip], dict[int, str]]:
    """The refs whose tip is new or changed, and the stash entries that are new."""
    refs = {n: t for n, t in now.refs.items() if n != STASH and known.refs.get(n) != t}
    old = set(known.stash)
    stash = {i: o for i, o in enumerate(now.stash) if o not in old}
    return refs, stash


def judge(
    git_dir: str,
    known: Tips,
    now: Tips,
    work_tree: str | None,
    kept: Callable[[str], bool],
) -> Verdict:
    """Judge the commits the refs ``now`` lead to that none of ``known`` did: an entry one adds
    or changes against its first parent that is a path ``kept`` (absolute, in ``work_tree``) says
    the sandbox keeps, or a symbolic link that leads out of the work tree, unless the work tree
    has it so now (``_in_work_tree``). Raises HostReadError when git does not answer."""
    verdict = Verdict()
    refs, stash = _moved(known, now)
    tips = {t.commit for t in refs.values() if t.commit} | set(stash.values())
    if not refs and not stash:
        return verdict
    not_commits = [n for n, t in refs.items() if t.commit is None]
    for n in not_commits:
        verdict.refs[n] = Found(refs[n].oid, "", "not a commit")
    if not tips:
        return verdict
    lines = [*sorted(tips), *(f"^{c}" for c in sorted(known.commits()))]
    out = _git(
        git_dir,
        # A known tip gone since (a branch deleted and pruned) is none to stop at.
        ["rev-list", "--parents", "--ignore-missing", f"--max-count={MAX_COMMITS + 1}", "--stdin"],
        "".join(f"{x}\n" for x in lines),
    )
    graph = {ws[0]: ws[1:] for ws in (line.split() for line in out.splitlines()) if ws}
    if len(graph) > MAX_COMMITS:
        verdict.why_all = f"it made or fetched more than {MAX_COMMITS} commits, too many to judge"
        return verdict
    if not graph:
        return verdict
    pairs = "".join(f"{c} {ps[0]}\n" if ps else f"{c}\n" for c, ps in graph.items())
    out = _git(
        git_dir,
        ["diff-tree", "-r", "--root", "--no-renames", "--no-ext-diff", "-z", "--stdin"],
        pairs,
        limit=MAX_DIFF,
    )
    candidates: list[tuple[str, str, str, str]] = []  # commit, path, mode, oid
    commit = ""
    tokens = out.split("\0")
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        if not tok:
            continue
        if not tok.startswith(":"):
            commit = tok.strip()
            continue
        path = tokens[i] if i < len(tokens) else ""
        i += 1
        meta = tok[1:].split()
        if len(meta) != 5:
            raise HostReadError(f"git gave a change as {tok[:100]!r}")
        _m1, mode, _o1, oid, status = meta
        if status[:1] not in ("A", "M", "T") or mode in ("160000", "000000"):
            continue
        candidates.append((commit, path, mode, oid))
    found = _judge_entries(git_dir, candidates, work_tree, kept)
    verdict.found = found
    bad = {f.commit: f for f in found}
    if not bad:
        return verdict
    memo: dict[str, Found | None] = {}

    def reaches(c: str) -> Found | None:
        """The first bad commit ``c`` leads to among the new ones."""
        stack, seen = [c], set()
        while stack:
            x = stack.pop()
            if x in seen or x not in graph:
                continue
            seen.add(x)
            if x in memo and memo[x] is not None:
                return memo[x]
            if x in bad:
                memo[c] = bad[x]
                return bad[x]
            stack += graph[x]
        memo[c] = None
        return None

    for n, t in refs.items():
        hit = reaches(t.commit) if t.commit else None
        if hit is not None:
            verdict.refs[n] = hit
    for i_, o in stash.items():
        hit = reaches(o)
        if hit is not None:
            verdict.stash[i_] = hit
    return verdict


def _judge_entries(
    git_dir: str,
    candidates: list[tuple[str, str, str, str]],
    work_tree: str | None,
    kept: Callable[[str], bool],
) -> list[Found]:
    found: list[tuple[str, str, str, str, str]] = []  # commit, path, mode, oid, why
    links: list[tuple[str, str, str, str]] = []
    for commit, path, mode, oid in candidates:
        if work_tree is not None and kept(os.path.join(work_tree, path)):
            found.append((commit, path, mode, oid, "a file the sandbox keeps"))
        elif mode == "120000":
            links.append((commit, path, mode, oid))
    texts = dict(zip((o for *_, o in links), _blobs(git_dir, [o for *_, o in links]), strict=True))
    for commit, path, mode, oid in links:
        text = texts[oid]
        target = os.path.normpath(os.path.join(os.path.dirname(path), text))
        if text.startswith("/") or target == ".." or target.startswith("../"):
            found.append(
                (
                    commit,
                    path,
                    mode,
                    oid,
                    f"a symbolic link to {text}, which leads out of the work tree",
                )
            )
    if work_tree is not None:
        same = _in_work_tree(git_dir, work_tree, [(p, m, o) for _c, p, m, o, _w in found])
        found = [f for f in found if (f[1], f[2], f[3]) not in same]
    return [Found(c, p, w) for c, p, _m, _o, w in found]


def _in_work_tree(
    git_dir: str, work_tree: str, entries: Iterable[tuple[str, str, str]]
) -> set[tuple[str, str, str]]:
    """The entries ``(path, mode, oid)`` the work tree has as they are now: a regular file of the
    same executable bit whose content git hashes to the same object (``hash-object
    --no-filters``), or a symbolic link of the same text. What a run cannot write (a kept file)
    and the work tree has is the user's own (``git commit -am`` over their edited ``.envrc``)."""
    same: set[tuple[str, str, str]] = set()
    files: list[tuple[str, str, str]] = []
    links: list[tuple[str, str, str]] = []
    for path, mode, oid in dict.fromkeys(entries):
        full = os.path.join(work_tree, path)
        try:
            st = os.lstat(full)
        except OSError:
            continue
        if mode == "120000" and stat.S_ISLNK(st.st_mode):
            links.append((path, mode, oid))
        elif (
            mode in ("100644", "100755")
            and stat.S_ISREG(st.st_mode)
            and bool(st.st_mode & stat.S_IXUSR) == (mode == "100755")
        ):
            files.append((path, mode, oid))
    if files:
        out = _git(
            git_dir,
            ["hash-object", "--no-filters", "--stdin-paths"],
            "".join(os.path.join(work_tree, p) + "\n" for p, _m, _o in files),
        ).split()
        if len(out) != len(files):
            raise HostReadError("git did not hash every file of the work tree")
        same |= {f for f, h in zip(files, out, strict=True) if h == f[2]}
    texts = _blobs(git_dir, [o for _p, _m, o in links])
    for (path, mode, oid), text in zip(links, texts, strict=True):
        with contextlib.suppress(OSError):
            if os.readlink(os.path.join(work_tree, path)) == text:
                same.add((path, mode, oid))
    return same


def take_back(
    git_dir: str, work_tree: str | None, known: Tips, now: Tips, verdict: Verdict
) -> tuple[list[str], list[str]]:
    """Put back what the run moved to a commit ``verdict`` found (every ref it moved, when it
    judged none): each ref to its tip before the run (``update-ref REF OLD NEW``; a ref the run
    made is deleted, ``update-ref -d REF NEW``), a stash entry dropped (``git stash drop``), and
    ``HEAD`` to the branch it named when the run made it name a branch that goes. Each step
    checks the value it replaces, so a ref moved since is left alone and said so. Git keeps the
    commits; nothing is deleted from the object store. (what was done, what failed), each a
    sentence for the notice."""
    done: list[str] = []
    failed: list[str] = []
    if verdict.why_all is not None:
        refs, stash = _moved(known, now)
        targets: dict[str, Tip | None] = dict.fromkeys(refs)
        stash_idx = sorted(stash, reverse=True)
    else:
        targets = dict.fromkeys(verdict.refs)
        stash_idx = sorted(verdict.stash, reverse=True)
    head_back = False  # HEAD is put back as it was, not moved as a ref
    if "HEAD" in targets:
        del targets["HEAD"]
        head_back = now.head is None  # detached: HEAD itself moved; else its branch did
    deleted: set[str] = set()
    for name in sorted(targets):
        tip = now.refs[name]
        old = known.refs.get(name)
        args = (
            ["update-ref", "--no-deref", "-m", "run_bash: put back", name, old.oid, tip.oid]
            if old is not None
            else ["update-ref", "--no-deref", "-d", name, tip.oid]
        )
        try:
            _git(git_dir, args)
        except HostReadError as e:
            failed.append(f"{name} could not be put back ({e})")
            continue
        if old is not None:
            done.append(
                f"{name} was moved back to {old.oid[:12]} (`git update-ref {name} {tip.oid}` "
                "moves it there again)"
            )
        else:
            deleted.add(name)
            done.append(
                f"{name}, which the run made, was deleted (`git update-ref {name} {tip.oid}` "
                "makes it again)"
            )
    # HEAD left naming a branch that went, or detached at a commit found: as it was.
    if head_back or (now.head is not None and now.head in deleted and now.head != known.head):
        old_head = known.refs.get("HEAD")
        try:
            if known.head is not None:
                _git(git_dir, ["symbolic-ref", "HEAD", known.head])
                done.append(f"HEAD names {known.head} again")
            elif old_head is not None:
                cur = now.refs["HEAD"].oid if head_back else ""
                _git(
                    git_dir, ["update-ref", "--no-deref", "HEAD", old_head.oid, *[cur][: bool(cur)]]
                )
                done.append(f"HEAD is at {old_head.oid[:12]} again (it was at {cur[:12] or '?'})")
            else:
                failed.append("HEAD could not be put back (git had listed none before the run)")
        except HostReadError as e:
            failed.append(f"HEAD could not be put back ({e})")
    for i in stash_idx:
        oid = now.stash[i]
        try:
            if work_tree is None:
                raise HostReadError("no work tree to drop it in")
            rc, _out, err = gitask.run_git(
                [
                    "--git-dir",
                    git_dir,
                    "--work-tree",
                    work_tree,
                    "stash",
                    "drop",
                    "-q",
                    f"stash@{{{i}}}",
                ],
                "/",
                {},
                clean=True,
                extra_env=ENV,
            )
            if rc != 0:
                raise HostReadError(gitask._last_line(err) or f"exit {rc}")
        except HostReadError as e:
            failed.append(f"stash@{{{i}}} could not be dropped ({e})")
            continue
        done.append(f"stash@{{{i}}} was dropped (`git stash store {oid}` puts it back)")
    return done, failed
