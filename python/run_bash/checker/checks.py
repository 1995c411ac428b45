"""Pause rules that need more than the table's conditions: each reads one :class:`Level`. Pure.

Every check gets the command's reading and the level its row is on (its options and operands,
read once) and returns a :class:`Hit` with its effect class, or None.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import replace

from run_bash.checker.model import REVERSIBLE, Hit, unknown_hit
from run_bash.checker.options import Read
from run_bash.checker.reading import Check, Level, Reading, is_dry_run, operand_paths, worktree
from run_bash.checker.words import Arg, clean_path, join_path, normalize_path, wordlist

TRUE_WORDS = frozenset({"true", "yes", "on", "1", ""})


# -- git ------------------------------------------------------------------------------------------


def _config(reading: Reading, key: str) -> str | None:
    """A git configuration value the command line sets (``-c``, ``git config`` earlier)."""
    return reading.config.get(key)


def git_push(reading: Reading, level: Level) -> Hit | None:
    """Force, delete, mirror and prune pushes (also through configuration the line sets)."""
    r = level.read
    if r.has("n", "dry-run") and not r.has("no-dry-run"):
        return None
    force = lease = False
    for opt, _ in r.opts:
        if opt in ("f", "force") or "force" in opt.split("|"):
            force = True
        elif opt == "no-force":
            force = False
        elif opt == "force-with-lease":
            lease = True
        elif opt == "no-force-with-lease":
            lease = False
    if r.has("mirror"):
        return Hit("overwrites and deletes remote refs to mirror the local repository")
    if r.has("d", "delete"):
        return Hit("deletes a remote branch")
    if force:
        # `-f` wins over `--force-with-lease` given with it (git forces).
        return Hit("rewrites the remote branch's history")
    refspecs = r.operands[1:]
    for ref in refspecs:
        v = ref.value if ref.value is not None else ref.prefix
        if v.startswith("+") and not lease:
            return Hit("force-pushes (`+` refspec) and can rewrite the remote branch's history")
        if v.startswith(":") and (len(v) > 1 or ref.value is None):
            return Hit("deletes a remote branch (empty source refspec)")
    if r.has("prune"):
        return Hit("deletes remote branches that have no local counterpart")
    remote = r.operands[0].value if r.operands else None
    for key, value in reading.config.items():
        parts = key.split(".")
        if len(parts) < 3 or parts[0] != "remote" or remote not in (None, ".".join(parts[1:-1])):
            continue
        if parts[-1] == "mirror" and value.lower() in TRUE_WORDS:
            return Hit(f"mirrors the remote (`{key}` is set), deleting refs it lacks")
        if parts[-1] == "push" and value.startswith("+") and not refspecs and not lease:
            return Hit(f"force-pushes through `{key}={value}`")
    if r.unknown is not None:
        return unknown_hit("force-push", r.unknown)
    for ref in refspecs:
        if ref.value is None and ref.split and not ref.prefix:
            return unknown_hit("force-push", ref)
    return None


def git_read_tree(reading: Reading, level: Level) -> Hit | None:
    """``read-tree --reset -u``: the working tree takes the tree, uncommitted changes lost."""
    r = level.read
    if r.has("reset") and r.has("u") and not r.has("n", "dry-run"):
        return Hit("overwrites the working tree, discarding uncommitted changes")
    return None


def git_reset(reading: Reading, level: Level) -> Hit | None:
    """``reset --hard``: reversible onto HEAD, irreversible when it moves the branch."""
    r = level.read
    if r.has("hard"):
        revs = [a.value for a in r.operands if a.value != "--"]
        if r.unknown is not None:  # `git reset --hard $REV`: a revision, so the branch moves
            return unknown_hit("move the branch to another commit", r.unknown)
        if all(v in ("HEAD", "@") for v in revs):
            return Hit(
                "discards uncommitted changes in the working tree",
                REVERSIBLE,
                worktree(reading),
                index=True,
            )
        return Hit("discards uncommitted changes and moves the branch to another commit")
    if r.unknown is not None:
        return unknown_hit("discard uncommitted changes", r.unknown)
    return None


def git_clean(reading: Reading, level: Level) -> Hit | None:
    """``clean -f`` (or ``clean.requireForce`` off); ``-x``/``-X`` reach ignored files, and so
    does an ``-e`` pattern that negates (``-e '!*.log'`` takes ``*.log`` out of the ignored
    ones: git deletes them as untracked)."""
    r = level.read
    if r.has("n", "dry-run"):
        return None
    require = (_config(reading, "clean.requireforce") or "true").lower()
    if r.has("f", "force") or require in ("false", "no", "off", "0"):
        what = "untracked files and directories" if r.has("d") else "untracked files"
        if r.has("x", "X"):
            return Hit(f"deletes {what}, ignored ones too")
        if r.unknown is not None:  # `git clean -fd $OPTS` may be `-x`
            return unknown_hit("delete ignored files too", r.unknown)
        for e in r.values("e", "exclude"):
            if e.value is None or e.value.startswith("!"):
                return Hit(
                    f"deletes {what}, and the ignored ones the pattern `{e.text}` re-includes"
                )
        return Hit(f"deletes {what}", REVERSIBLE, worktree(reading))
    if r.unknown is not None:
        return unknown_hit("delete untracked files", r.unknown)
    return None


def _revisions(args: list[Arg]) -> tuple[str, ...] | None:
    """The words that name a commit to take files from, as written (None: one is only known at
    run time, or may be an option)."""
    out: list[str] = []
    for a in args:
        if a.value is None or a.value.startswith("-"):
            return None
        out.append(a.value)
    return tuple(out)


def git_checkout(reading: Reading, level: Level) -> Hit | None:
    """``checkout -f``; checking out paths (``.``, ``-- PATHS``, ``TREE PATHS``) over changes.
    The commit the files come from is the operand before ``--`` or, without ``--``, the first of
    two or more (git takes it as one when it names one)."""
    r = level.read
    if r.has("f", "force"):
        return Hit("discards uncommitted changes (`-f`)")
    if r.unknown is not None:  # `git checkout $OPTS -- .` may be `-f`
        return unknown_hit("discard uncommitted changes", r.unknown)
    tree = worktree(reading)
    values = [a.value for a in level.args]
    operands = [a for a in r.operands if a.value != "--"]
    if "--" in values:
        cut = values.index("--")
        at = {id(a): i for i, a in enumerate(level.args)}
        sources = _revisions([a for a in operands if at.get(id(a), -1) < cut])
    else:
        sources = _revisions(operands[:1]) if len(operands) >= 2 else ()
    if r.unknown is not None:
        sources = None  # a word only known at run time may name a commit
    index = sources != ()  # files from a commit go into the index too; from the index, not
    if "--" in values and values.index("--") < len(values) - 1:
        return Hit(
            "overwrites uncommitted changes to the named files",
            REVERSIBLE,
            tree,
            sources=sources,
            index=index,
        )
    if r.has("pathspec-from-file"):
        return Hit(
            "overwrites uncommitted changes to the listed files",
            REVERSIBLE,
            tree,
            sources=sources,
            index=index,
        )
    for op in r.operands:
        if op.value is not None and normalize_path(op.value) == ".":
            return Hit(
                "discards every uncommitted change under the current directory",
                REVERSIBLE,
                tree,
                sources=sources,
                index=index,
            )
    if len(r.operands) >= 2 and not r.has("b", "B", "orphan"):
        return Hit(
            "overwrites the named files with their content from another commit",
            REVERSIBLE,
            tree,
            sources=sources,
        )
    if r.unknown is not None:
        return unknown_hit("discard uncommitted changes", r.unknown)
    return None


def git_restore(reading: Reading, level: Level) -> Hit | None:
    """``restore`` of working-tree paths (not ``--staged`` alone), from ``--source`` if given."""
    r = level.read
    if r.has("S", "staged") and not r.has("W", "worktree"):
        return None  # only the index changes; the files stay as they are
    if r.operands or r.has("pathspec-from-file"):
        sources = None if r.unknown is not None else _revisions(r.values("s", "source"))
        return Hit(
            "discards uncommitted changes to the named files",
            REVERSIBLE,
            worktree(reading),
            sources=sources,
            index=r.has("S", "staged") or r.unknown is not None,  # `$OPT` may be `--staged`
        )
    if r.unknown is not None:
        return unknown_hit("discard uncommitted changes", r.unknown)
    return None


# A branch name git takes as written (``@{-1}``, ``@`` and a leading ``-`` it reads otherwise).
_BRANCH_NAME = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_./-]*")


# Options before git's subcommand that change neither which repository, refs and configuration it
# reads nor what it does to them: its pager, its locks, its advice, how pathspecs read, replace refs
# (``-P`` is ``--no-pager``, ``-p`` ``--paginate``).
HARMLESS_GLOBAL = frozenset(
    {
        "P",
        "p",
        "no-pager",
        "paginate",
        "no-optional-locks",
        "no-advice",
        "no-replace-objects",
        "literal-pathspecs",
        "glob-pathspecs",
        "noglob-pathspecs",
        "icase-pathspecs",
    }
)


def _repository(reading: Reading) -> str | None:
    """Where the command's git looks for its repository and its refs: ``.`` or the ``-C``
    directories joined. None when another option before the subcommand (``--git-dir``,
    ``--namespace``, ``-c``; not one of ``HARMLESS_GLOBAL``) or a variable may say otherwise, or
    a value is only known at run time."""
    from run_bash.checker.gitcode import GIT_DIR_KEY, WORK_TREE_KEY

    top = reading.levels[0].read
    if top.unknown is not None or any(
        name != "C" and name not in HARMLESS_GLOBAL for name, _ in top.opts
    ):
        return None
    if GIT_DIR_KEY in reading.config or WORK_TREE_KEY in reading.config:
        return None
    path = "."
    for word in top.values("C"):
        if word.value is None:
            return None
        path = join_path(path, word.value)
    return path


def _over_branch(reading: Reading, r: Read, copy: bool) -> Hit | None:
    """A forced rename or copy: it replaces a branch of the new name, reflog and all. The hit
    names the branches (``Hit.overwrites``) so that the gate can ask git whether there is
    such a branch to lose; nothing is lost when the new name is the branch renamed."""
    verb = "copies" if copy else "renames"
    hit = Hit(
        f"{verb} a branch over any existing branch of the new name, which loses that branch "
        "and its reflog"
    )
    ops = [a for a in r.operands if a.value != "--"]
    if r.unknown is not None or not 1 <= len(ops) <= 2 or any(a.value is None for a in ops):
        return hit
    names = [a.value or "" for a in ops]
    if len(names) == 2 and names[0] == names[1]:
        return None  # onto itself: git keeps the branch and its reflog
    repo = _repository(reading)
    if repo is None or not all(_BRANCH_NAME.fullmatch(n) and ".." not in n for n in names):
        return hit
    renamed = f"refs/heads/{names[0]}" if len(names) == 2 else ""
    return replace(hit, overwrites=(repo, f"refs/heads/{names[-1]}", renamed))


def git_branch(reading: Reading, level: Level) -> Hit | None:
    """``branch -D`` and ``branch --delete --force``; a forced rename or copy (``-M``, ``-C``,
    ``-m``/``-c`` with ``-f``), which deletes the branch it replaces with its reflog."""
    r = level.read
    delete = r.has("d", "D", "delete")
    if r.has("D") or (delete and r.has("f", "force")):
        return Hit("force-deletes a branch, even one with unmerged commits")
    if delete and r.unknown is not None:
        return unknown_hit("force-delete a branch", r.unknown)
    move = r.has("m", "M", "move")
    copy = r.has("c", "C", "copy") and not move
    if r.has("M", "C") or ((move or copy) and r.has("f", "force")):
        return _over_branch(reading, r, copy)
    if (move or copy) and r.unknown is not None:
        return unknown_hit("rename a branch over another one", r.unknown)
    return None


def git_tag(reading: Reading, level: Level) -> Hit | None:
    """``tag -d`` and ``tag -f``: tags keep no reflog, so the old target is not kept."""
    r = level.read
    if r.has("d", "delete"):
        return Hit("deletes a tag, which keeps no reflog to restore it from")
    if r.has("f", "force"):
        return Hit("moves an existing tag, which keeps no reflog of where it was")
    if r.unknown is not None:
        return unknown_hit("delete or move a tag", r.unknown)
    return None


# The refs git keeps a reflog for by default (``core.logAllRefUpdates``; ``refs/stash`` always
# has one). Any other ref (a tag, ``refs/*``, a name outside ``refs/``) deleted or moved leaves
# nothing that says where it pointed.
_LOGGED = ("refs/heads/", "refs/remotes/", "refs/notes/")
_ZERO_OID = re.compile(r"0{40}|0{64}")


def _keeps_no_reflog(reading: Reading, ref: str) -> bool:
    """Whether git keeps no reflog for ``ref`` (as written): neither by default nor through
    ``core.logAllRefUpdates=always`` the line sets."""
    if (_config(reading, "core.logallrefupdates") or "").lower() == "always":
        return False
    return not (ref in ("HEAD", "refs/stash") or ref.startswith(_LOGGED))


def _refs(ref: str) -> str:
    """The refs ``ref`` (a refspec's destination) names, in a reason."""
    if ref.startswith("refs/tags/"):
        return "local tags"
    return f"`{ref}` (tags or other refs without a reflog)"


def git_update_ref(reading: Reading, level: Level) -> Hit | None:
    """``update-ref REF NEW`` of a ref git keeps no reflog for (a tag): where it pointed is
    lost. Not with ``--create-reflog`` (the reflog keeps it) nor an old value of zeros (the ref
    must not exist yet); ``-d`` and ``--stdin`` have rules of their own."""
    r = level.read
    if r.has("d", "stdin", "create-reflog"):
        return None
    if r.unknown is not None:
        return unknown_hit("move a ref that keeps no reflog", r.unknown)
    ops = [a for a in r.operands if a.value != "--"]
    if not ops:
        return None
    ref = ops[0]
    if ref.value is None:
        return unknown_hit("move a ref that keeps no reflog", ref)
    if len(ops) > 2 and ops[2].value is not None and _ZERO_OID.fullmatch(ops[2].value or "0" * 40):
        return None
    if not _keeps_no_reflog(reading, ref.value):
        return None
    if ref.value.startswith("refs/tags/"):
        return Hit(f"moves a tag (`{ref.value}`), which keeps no reflog of where it was")
    return Hit(f"moves `{ref.value}`, a ref that keeps no reflog of where it was")


def git_symbolic_ref(reading: Reading, level: Level) -> Hit | None:
    """``symbolic-ref NAME REF`` over a ref git keeps no reflog for (a tag becomes a link)."""
    r = level.read
    ops = [a for a in r.operands if a.value != "--"]
    if r.has("d", "delete") or len(ops) < 2:
        return None
    if ops[0].value is None:
        return unknown_hit("replace a ref that keeps no reflog", ops[0])
    if _keeps_no_reflog(reading, ops[0].value):
        return Hit(f"replaces `{ops[0].value}`, a ref that keeps no reflog of where it was")
    return None


def _last(r: Read, on: str, off: str) -> bool | None:
    """Whether the last of the options ``on`` and ``off`` given is one of ``on`` (None: none
    given; an ambiguous abbreviation counts as ``on``)."""
    state = None
    for opt, _ in r.opts:
        names = opt.split("|")
        if any(n in on.split() for n in names):
            state = True
        elif any(n in off.split() for n in names):
            state = False
    return state


def _fetch_config(reading: Reading, name: str, remote: str | None) -> bool:
    """``fetch.NAME`` or ``remote.REMOTE.NAME`` set true by the line (any remote when it is not
    named)."""
    for key, value in reading.config.items():
        parts = key.split(".")
        ours = key == f"fetch.{name}" or (
            len(parts) >= 3
            and parts[0] == "remote"
            and parts[-1] == name
            and remote in (None, ".".join(parts[1:-1]))
        )
        if ours and value.lower() in TRUE_WORDS:
            return True
    return False


def git_fetch(reading: Reading, level: Level) -> Hit | None:
    """``fetch`` and ``pull`` that delete or overwrite tags, which keep no reflog:
    ``--prune-tags`` (``fetch.pruneTags``) unless ``--no-prune``; ``--force`` with ``--tags``;
    a refspec into refs without a reflog (``refs/tags/*``, ``refs/*``, a name outside
    ``refs/``, which may be a tag) forced (``+``, ``--force``), or a pattern one that pruning
    (``--prune``, or pruning configured: not with ``--no-prune``) deletes from. A plain fetch,
    ``--prune`` of remote-tracking branches and ``--tags`` without force keep every tag."""
    r = level.read
    if r.has("dry-run"):
        return None
    if r.has("stdin"):
        return Hit("fetches refspecs read from its input, which may delete or overwrite tags")
    if r.unknown is not None:
        return unknown_hit("delete or overwrite tags", r.unknown)
    force = bool(_last(r, "f force", "no-force"))
    ops = [a for a in r.operands if a.value != "--"]
    several = r.has("all", "m", "multiple")
    remote = ops[0].value if ops and not several else None
    prune = _last(r, "p prune", "no-prune")
    asked = _last(r, "P prune-tags", "no-prune-tags")
    prune_tags = asked
    if prune_tags is None:
        prune_tags = _fetch_config(reading, "prunetags", remote)
    if prune is None and _fetch_config(reading, "prune", remote):
        prune = True
    configured = "" if prune else " when pruning is configured (`fetch.prune`)"
    if prune_tags and prune is not False:
        return Hit(f"deletes local tags the remote does not have{configured}, which keep no reflog")
    if force and r.has("t", "tags"):
        return Hit(
            "overwrites local tags with the remote's, which keep no reflog of where they pointed"
        )
    specs = [] if several else ops[1:]
    if not specs:  # the remote's refspecs, when the line configures them
        specs = [
            Arg.lit(v)
            for k, v in reading.config.items()
            if k.startswith("remote.") and k.endswith(".fetch")
        ]
    specs = [*r.values("refmap"), *specs]
    for k, word in enumerate(specs):
        if word.value is None:
            split = word.split and not word.prefix  # may be several words
            if split or word.prefix.startswith("+") or ":" in word.prefix:
                return unknown_hit("delete or overwrite tags", word)
            continue
        if word.value == "tag" and k + 1 < len(specs):  # `tag NAME`: refs/tags/NAME into itself
            if force:
                return Hit("overwrites a local tag, which keeps no reflog of where it pointed")
            continue
        _src, colon, dst = word.value.removeprefix("+").partition(":")
        if not colon or not dst or not _keeps_no_reflog(reading, dst):
            continue  # into FETCH_HEAD, or into refs with a reflog
        if force or word.value.startswith("+"):
            return Hit(f"overwrites {_refs(dst)}, which keep no reflog of where they pointed")
        if "*" in dst and prune is not False:
            return Hit(
                f"deletes {_refs(dst)} the remote does not have{configured}, which keep no reflog"
            )
    if asked is None and prune is not False and (several or len(ops) < 2):
        # Refspecs on the line turn tag pruning off (git fetch origin main keeps every tag).
        return _may_prune_tags(reading, None if several or not ops else ops[0], bool(prune))
    return None


# A remote's name as the gate may ask git about it; any other word (a URL, a path, a name with a
# `/`) is a remote the gate asks about as about any (`*`).
_REMOTE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


def _may_prune_tags(reading: Reading, remote: Arg | None, prune: bool) -> Hit:
    """A fetch of ``remote`` (None: git's default one, or several) that prunes tags if the
    repository's configuration turns tag pruning on (``fetch.pruneTags``,
    ``remote.NAME.pruneTags``) and pruning too, unless the line does (``prune``). The hit names
    what the gate asks git about (``Hit.prunes``); it keeps it when the line's git may read
    another configuration than the one asked, or the remote is only known at run time."""
    hit = Hit(
        "may delete local tags the remote does not have, which keep no reflog: the "
        "repository's configuration may prune them (`fetch.pruneTags`)",
        unknown=True,
    )
    repo = _repository(reading)
    if repo is None or (remote is not None and remote.value is None):
        return hit
    name = "*"
    if remote is not None and remote.value and _REMOTE_NAME.fullmatch(remote.value):
        name = remote.value
    return replace(hit, prunes=(repo, name, "prune" if prune else ""))


def git_remote_update(reading: Reading, level: Level) -> Hit | None:
    """``remote update``: a fetch of its remotes or groups (every remote when none is named),
    which prunes tags when the configuration says so (``-p`` prunes, the configuration may
    prune tags)."""
    r = level.read
    if r.unknown is not None:
        return unknown_hit("delete local tags", r.unknown)
    return _may_prune_tags(reading, None, r.has("p", "prune"))


def git_remote_add(reading: Reading, level: Level) -> Hit | None:
    """``remote add -f NAME URL``: a fetch of the new remote, which prunes local tags it lacks
    when the configuration says so (``fetch.prune`` with ``fetch.pruneTags``)."""
    r = level.read
    if not r.has("f", "fetch"):
        return None
    if r.unknown is not None:
        return unknown_hit("delete local tags", r.unknown)
    ops = [a for a in r.operands if a.value != "--"]
    return _may_prune_tags(reading, ops[0] if ops else None, False)


def _sooner(r: Read, name: str, default: str = "never") -> Arg | None:
    """The value word of ``--NAME=WHEN`` when it may be sooner than git's own default: any date
    but ``never`` and git's ``default`` as it writes it (git reads dates its own way; they are
    not read here), or one only known at run time. None when not given, or given without a
    value."""
    for w in r.values(name):
        if w.value is None or (w.value and w.value.lower() not in ("never", default)):
            return w
    return None


def git_gc(reading: Reading, level: Level) -> Hit | None:
    """``gc --prune=WHEN`` with any date but ``never`` and git's own ``2.weeks.ago``: the
    unreachable objects older than it go (``now``, ``all``, ``1.second.ago``)."""
    w = (
        _sooner(level.read, "prune", "2.weeks.ago") or level.read.unknown
    )  # `git gc $OPTS` may be `--prune=now`
    if w is None:
        return None
    if w.value is None:
        return unknown_hit("delete unreachable commits now", w)
    if w.value.lower() in ("now", "all"):
        return Hit("deletes unreachable commits now instead of keeping them for two weeks")
    return Hit(f"deletes unreachable commits older than `{w.value}` (git keeps them two weeks)")


def git_repack(reading: Reading, level: Level) -> Hit | None:
    """``repack -a -d``: unreachable objects of the old packs are dropped (not with ``-A``,
    ``-k`` or ``--cruft``, which keep them); with ``-A`` or ``--cruft``, those older than
    ``--unpack-unreachable`` or ``--cruft-expiration`` are dropped too."""
    r = level.read
    if r.has("d") and r.has("a", "A") and not r.has("k", "keep-unreachable"):
        if r.has("cruft"):
            w = _sooner(r, "cruft-expiration")
        elif r.has("A"):
            w = _sooner(r, "unpack-unreachable")
        else:
            return Hit("deletes unreachable objects that were packed")
        if w is not None and w.value is None:
            return unknown_hit("delete unreachable objects", w)
        if w is not None:
            return Hit(f"deletes unreachable objects older than `{w.value}` that were packed")
    if r.unknown is not None:
        return unknown_hit("delete unreachable objects", r.unknown)
    return None


# -- files ----------------------------------------------------------------------------------------

FIND_LEADING = frozenset({"-H", "-L", "-P"})
FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
_FIND_ONE_ARG = frozenset(
    wordlist(
        "-amin -anewer -atime -cmin -cnewer -ctime -fstype -gid -group -ilname -iname -inum -ipath "
        "-iregex -iwholename -links -lname -mmin -mtime -name -newer -path -perm -regex -samefile "
        "-size -type -uid -used -user -wholename -xtype -context -maxdepth -mindepth -regextype "
        "-files0-from -fprint -fprint0 -fls -printf"
    )
)


def find_delete(reading: Reading, level: Level) -> Hit | None:
    """`find … -delete`: deletes whatever matches, like `rm -r`. A word only known at run time
    where find reads its expression may be `-delete` or `-exec`. (Commands run by `-exec`/`-ok`
    are checked as commands of their own.)"""
    args = level.args
    i, n = 0, len(args)
    follows = False  # -L, -H, -follow: find goes where the symlinks it meets point
    while i < n and (args[i].value in FIND_LEADING or (args[i].value or "")[:2] in ("-D", "-O")):
        follows = follows or args[i].value in ("-L", "-H")
        i += 2 if args[i].value in ("-D", "-O") else 1
    # Starting points: up to the first word that starts the expression. A variable there may
    # be the expression itself (`find . "$A"` with A=-delete); only the first one is trusted.
    first = i
    while i < n:
        a = args[i]
        if a.value is None:
            if a.may_be_option or i > first:
                return unknown_hit("delete files or run commands", a)
        elif a.value.startswith("-") or a.value in ("(", "!", ")", ","):
            break
        i += 1
    starts = operand_paths(args[first:i]) or (None if i > first else (".",))
    while i < n:
        a = args[i]
        v = a.value
        i += 1
        if v is None:
            return unknown_hit("delete files or run commands", a)
        if v in FIND_EXEC:
            while i < n and args[i].value not in (";", "+"):
                i += 1
            i += 1
        elif v == "-follow":
            follows = True
        elif v == "-delete":
            follows = follows or any(a.value == "-follow" for a in args[i:])
            later = next((b for b in args[i:] if b.value is None), None)
            if later is not None:  # the rest of the expression may run commands
                return unknown_hit("delete files or run commands", later)
            return Hit(
                "deletes every file and directory it matches", REVERSIBLE, starts, follows=follows
            )
        elif v in _FIND_ONE_ARG or v.startswith("-newer"):
            if i < n and args[i].value is None and args[i].split:
                return unknown_hit("delete files or run commands", args[i])
            i += 1
        elif v == "-fprintf":
            i += 2
    return None


def operation(reason: str, *patterns: str, at: int = 1, after: str = "") -> Check:
    """A pause when the ``at``-th operand (a tool's operation after its service, ``aws ec2
    terminate-instances``) matches one of the glob patterns; with ``after``, only when the
    operand before it matches that glob (``redis-cli CONFIG SET``)."""

    def check(reading: Reading, level: Level) -> Hit | None:
        ops = level.read.operands
        if len(ops) <= at:
            return None
        if after and not (at and fnmatch.fnmatchcase(ops[at - 1].value or "", after)):
            return None
        word = ops[at]
        if word.value is None:
            return unknown_hit("run a paused operation", word) if not word.prefix else None
        if any(fnmatch.fnmatchcase(word.value, p) for p in patterns):
            return None if is_dry_run(reading.args) else Hit(reason)
        return None

    return check


def option_value(reason: str, names: str, *patterns: str) -> Check:
    """A pause when one of the options ``names`` has a value matching a glob of ``patterns`` (any
    case); a value only known at run time counts as a match."""

    def check(reading: Reading, level: Level) -> Hit | None:
        for word in level.read.values(*names.split()):
            if word.value is None:
                return unknown_hit("run a paused option", word)
            if any(fnmatch.fnmatchcase(word.value.lower(), p) for p in patterns):
                return Hit(reason)
        return None

    return check


def field(reason: str, may: str, names: str, key: str, *values: str) -> Check:
    """A pause when one of the options ``names`` sends the field ``key`` (``-F KEY=VALUE``,
    any case) with a value among ``values``; a value only known at run time counts (``may``
    says what it may do), and so does a field whose name is only known at run time."""

    def check(reading: Reading, level: Level) -> Hit | None:
        for word in level.read.values(*names.split()):
            text = word.value if word.value is not None else word.prefix
            name, eq, value = text.partition("=")
            if not eq:
                if word.value is None and key.startswith(name.lower()):
                    return unknown_hit(may, word)
                continue
            if name.lower() != key:
                continue
            if word.value is None:
                return unknown_hit(may, word)
            if value.lower() in values:
                return Hit(reason)
        return None

    return check


def signal(reason: str, lists: str) -> Check:
    """``kill``, ``pkill``, ``killall``: a signal is sent unless the first word only lists or
    prints (``lists``: ``kill -l``, ``--help``, ``--version``) or the signal is 0, which only
    tests that the processes exist (``kill -0 PID``, ``kill -s 0``, ``pkill -0``)."""

    def check(reading: Reading, level: Level) -> Hit | None:
        args = level.args
        first = args[0].value if args else None
        if first in lists.split():
            return None
        if first in ("-0", "-s0", "-n0", "--signal=0", "-SIG0", "-s", "-n", "--signal"):
            value = args[1].value if first in ("-s", "-n", "--signal") and len(args) > 1 else "0"
            if value in ("0", "SIG0"):
                return None
        return Hit(reason)

    return check


def unread_code(lang: str, options: str, *, prefixes: str = "") -> Check:
    """An interpreter whose language the checker does not read, given code as text: any of the
    exact ``options`` (any case, also as ``--opt=CODE`` or ``-opt:CODE``) or an option starting
    with one of ``prefixes`` (PowerShell's ``-Comm`` for ``-Command``)."""
    exact = {o.lower() for o in options.split()}
    starts = tuple(p.lower() for p in prefixes.split())

    def check(reading: Reading, level: Level) -> Hit | None:
        for a in level.args:
            v = (a.value if a.value is not None else a.prefix).lower()
            if v == "--":
                break
            head = re.split(r"[=:]", v, maxsplit=1)[0] if v.startswith("-") else v
            if head in exact or (starts and v.startswith(starts)):
                return Hit(f"runs {lang} code the checker cannot read")
        return None

    return check


def unless_only_reads(
    reason: str,
    short: str = "",
    longs: str = "",
    values: str = "",
    *,
    verbs: str | None = None,
    operands: bool = False,
) -> Check:
    """A tool that changes the system unless every word only lists or shows: options among the
    ``short`` letters (also clustered) and ``longs`` (a name ending in ``*`` is a prefix),
    ``values`` taking the next word, then (with ``verbs``) a first operand among them and
    (with ``operands``) any further operands (``iptables -L INPUT``, ``mount``, ``nft list
    ruleset``). A word only known at run time may change it."""
    long_names = longs.split()
    valued = values.split()
    allowed = set(verbs.split()) if verbs is not None else None

    def long_ok(name: str) -> bool:
        return any(name == n or (n.endswith("*") and name.startswith(n[:-1])) for n in long_names)

    def check(reading: Reading, level: Level) -> Hit | None:
        args = level.args
        seen_operand = False
        k = 0
        while k < len(args):
            a = args[k]
            k += 1
            v = a.value
            if v is None:
                return Hit(reason)
            if v in valued:
                k += 1
            elif v.startswith("--"):
                if not long_ok(v.split("=", 1)[0]):
                    return Hit(reason)
            elif v.startswith("-") and len(v) > 1:
                if not all(c in short for c in v[1:]):
                    return Hit(reason)
            elif not seen_operand and allowed is not None:
                if v not in allowed:
                    return Hit(reason)
                seen_operand = True
            elif not operands:
                return Hit(reason)
        return None

    return check


HTTP_DELETE = "sends an HTTP DELETE request, deleting what the URL names on the server"


def http_method(short: str, long: str, *, operand: bool = False) -> Check:
    """An HTTP DELETE request: the method given by the option ``-SHORT V`` (also in a cluster,
    ``-sX DELETE``, or attached, ``-XDELETE``) or ``--LONG V``/``--LONG=V``; with ``operand``, a
    method as the first operand (``http DELETE URL``, ``xh delete URL``). A method only known at
    run time may be DELETE."""

    def check(reading: Reading, level: Level) -> Hit | None:
        args = level.args
        methods: list[Arg] = []
        for k, a in enumerate(args):
            v = a.value
            if v is None:
                continue
            if v == "--":
                break
            nxt = args[k + 1] if k + 1 < len(args) else None
            if long and v == f"--{long}" and nxt is not None:
                methods.append(nxt)
            elif long and v.startswith(f"--{long}="):
                methods.append(Arg.lit(v.split("=", 1)[1]))
            elif short and v[:1] == "-" and v[1:2] != "-" and short in v[1:]:
                rest = v[v.index(short, 1) + 1 :]
                if rest:
                    methods.append(Arg.lit(rest))
                elif nxt is not None:
                    methods.append(nxt)
        if level.read.unknown is not None and not operand:
            methods.append(level.read.unknown)  # `curl $OPTS URL` may hold `-X DELETE`
        if operand:  # the method comes before the URL; an option's value may come first
            ops = level.read.operands
            if ops and ops[0].value is None:
                methods.append(ops[0])
            elif level.read.unknown is not None:
                methods.append(level.read.unknown)
            methods.extend(a for a in ops if (a.value or "").upper() == "DELETE")
        for word in methods:
            if word.value is None:
                return unknown_hit("send an HTTP DELETE request", word)
            if word.value.upper() == "DELETE":
                return Hit(HTTP_DELETE)
        return None

    return check


def operation_not(reason: str, harmless: str, *, at: int = 1) -> Check:
    """A pause when the ``at``-th operand is not one of the globs ``harmless`` (a tool whose
    every other verb changes something: ``systemctl start``), nor a subcommand with rules of
    its own; with no such operand, nothing runs."""

    def check(reading: Reading, level: Level) -> Hit | None:
        ops = level.read.operands
        if len(ops) <= at:
            return None
        word = ops[at]
        if word.value is None:
            return None  # a subcommand only known at run time is judged as one
        if word.value in level.row.subs:
            return None
        if any(fnmatch.fnmatchcase(word.value, p) for p in harmless.split()):
            return None
        return Hit(reason)

    return check


def overwrite(reason: str) -> Check:
    """``truncate``/``shred``: reversible for files, irreversible for a device."""

    def check(reading: Reading, level: Level) -> Hit | None:
        paths = operand_paths(level.read.operands)
        if paths == () and level.read.unknown is None and not level.read.dynamic:
            return None  # no file at all (`truncate --help`): nothing is cut
        if paths is not None and any(p.startswith("/dev/") for p in paths):
            return Hit(f"{reason} on a device")
        return Hit(reason, REVERSIBLE, paths)

    return check


SYSTEM_DIRS = tuple(
    wordlist(
        "/bin /boot /dev /etc /lib /lib32 /lib64 /libx32 /opt /proc /root /sbin /sys /usr /var"
    )
)


def system_path(path: str) -> str | None:
    """The normalized path when it is ``/``, a system directory or inside one."""
    if not path.startswith("/"):
        return None
    norm = normalize_path(path)
    if norm == "/" or any(norm == d or norm.startswith(d + "/") for d in SYSTEM_DIRS):
        return norm
    return None


def raw_copy(reading: Reading, level: Level) -> Hit | None:
    """``dd``: reversible when it writes a file (``of=FILE``), irreversible for a device or a file
    only known at run time; without ``of=`` it writes to its output and changes nothing."""
    reason = "writes raw data to files or devices"
    if level.read.unknown is not None or level.read.dynamic:
        return Hit(reason)  # `dd $ARGS`: `of=` may be anything
    outs: list[Arg] = []
    for a in level.read.operands:
        if a.value is None and not a.prefix.startswith(("if=", "bs=", "count=", "skip=")):
            return Hit(reason)  # `dd "$OUT"`: `of=` may be anything
        if a.value is not None and a.value.startswith("of="):
            outs.append(a)
    targets: list[str] = []
    for out in outs:
        path = (out.value or "")[3:]
        if path.startswith("/dev/") and kernel_path(path) is None:
            continue  # `of=/dev/null`, `of=/dev/stdout`
        if not path or kernel_path(path) is not None:
            return Hit(f"{reason} (`{out.show()}`)")
        targets.append(clean_path(path))
    return Hit(reason, REVERSIBLE, tuple(targets)) if targets else None


# What a write under /dev, /proc or /sys may touch without changing the machine: the standard
# streams, the terminal, the sinks and sources, shared memory, a process's descriptors, bash's
# connections (`/dev/tcp/HOST/PORT`: the network is the sandbox's to close).
_HARMLESS_DEVICES = re.compile(
    r"/dev/(null|zero|full|random|urandom|stdin|stdout|stderr|tty|ptmx|(fd|pts|shm|tcp|udp)/.+)"
    r"|/proc/(self|thread-self|[0-9]+)/fd/.+"
)


def kernel_path(path: str) -> str | None:
    """The normalized path when writing it changes a device or the kernel's settings
    (``/dev/sda``, ``/proc/sys/…``, ``/proc/sysrq-trigger``, ``/sys/…``)."""
    if not path.startswith("/"):
        return None
    norm = normalize_path(path)
    if not norm.startswith(("/dev/", "/proc/", "/sys/")) or _HARMLESS_DEVICES.fullmatch(norm):
        return None
    return norm


# The directory of home directories, or one of them (`/home`, `/home/me`; not a project deeper in
# one): a recursive change there is one of a home directory, as `~` is.
_HOMES = re.compile(r"/(home|Users)(/[^/]+)?")


def owner(what: str) -> Check:
    """Changing ``what`` of ``/``, a system directory or (recursively) the home directory."""

    def check(reading: Reading, level: Level) -> Hit | None:
        r = level.read
        recursive = r.has("R", "recursive")
        operands: list[Arg] = []
        # In order, words only known at run time included: the first is the mode or owner.
        words = [a for a in level.args if a in r.operands or a is r.unknown or a.value is None]
        for a in words:
            if a.value is not None:
                hit = system_path(a.value)
            else:
                head = a.prefix.rsplit("/", 1)[0] if "/" in a.prefix else ""
                hit = system_path(head) if head else None
            if hit:
                return Hit(f"changes {what} of a system path (`{hit}`)")
            operands.append(a)
        # The first operand is the mode or owner (unless --reference gives it). A recursive
        # change of the home directory, or of a path only known at run time, is asked about.
        for a in operands[0 if r.has("reference") else 1 :] if recursive else ():
            if (a.value if a.value is not None else a.prefix).startswith("~"):
                return Hit(f"changes {what} of a path in the home directory (`{a.show()}`)")
            if a.value is not None and _HOMES.fullmatch(normalize_path(a.value)):
                return Hit(f"changes {what} of home directories (`{a.show()}`)")
            if a.value is None and "/" not in a.prefix:
                return unknown_hit(f"change {what} of a system directory recursively", a)
        return None

    return check
