"""Writes into git's own data by commands other than git: ``: > .git/HEAD``, ``rm -f
.git/refs/heads/main``, ``mv .git/refs /tmp``, ``cp /dev/null .git/index``.

Undo never writes into a ``.git`` directory (git's refs, index and objects are git's to change),
so what another command does there cannot be taken back: it asks, as irreversible. A path counts
when one of its components is ``.git`` (a repository's directory, or the file that names one in a
work tree or submodule), as the command names it after the ``cd`` the line makes. Reading there
(``cat .git/HEAD``, ``cp .git/config backup``) does not count, and git itself is judged by its
own rows.
"""

from __future__ import annotations

from collections.abc import Iterable

from run_bash.checker.model import IRREVERSIBLE, Hit, in_dir
from run_bash.checker.words import Arg

# Commands whose every operand is changed (removed, cut, written in place, re-owned).
_ALL_OPERANDS = frozenset(
    {
        *("rm", "unlink", "rmdir", "truncate", "shred", "sponge", "chmod", "chown", "chgrp"),
        *("tee", "touch"),
    }
)
# Commands whose last operand is written (the others are read), and ``mv``, whose sources go.
_LAST_OPERAND = frozenset({"cp", "ln", "install", "rsync", "scp"})
REASON = "writes into git's own data ({path}), which undo does not take back"


def in_git_dir(path: str) -> bool:
    """Whether ``path`` names ``.git`` or something under it."""
    return ".git" in path.split("/")


def _operands(name: str, argv: list[Arg]) -> list[Arg]:
    """The operands of ``name`` that it changes (redirections are the line's ``written``)."""
    args = argv[1:]
    ops: list[Arg] = []
    ended = False
    for a in args:
        if not ended and a.value == "--":
            ended = True
        elif ended or a.value is None or not a.value.startswith("-") or a.value == "-":
            ops.append(a)
    if name == "mv" or name in _ALL_OPERANDS:
        return ops
    if name in _LAST_OPERAND:
        return ops[-1:]
    if name == "dd":
        return [Arg.lit(a.value[3:]) for a in args if a.value and a.value.startswith("of=")]
    if name in ("tar", "bsdtar", "unzip", "7z", "cpio"):
        return _unpacked_into(name, args)
    if name in ("sed", "perl"):  # in place (`-i`, `-i.bak`, `-Ei`, `-pi`): the files after the code
        flags = [a.value for a in args if a.value and a.value[:1] == "-" and a.value[:2] != "--"]
        inplace = any("i" in f[1:] for f in flags) or any(
            (a.value or "").startswith("--in-place") for a in args
        )
        return ops[1:] if inplace else []
    return []


def _unpacked_into(name: str, args: list[Arg]) -> list[Arg]:
    """Where an archiver unpacks (``tar -x -C DIR``, ``unzip -d DIR``, ``7z x -oDIR``; the
    directory it runs in when none is named); [] when it does not unpack."""
    values = [a.value or "" for a in args]
    named: tuple[str, ...]
    if name in ("tar", "bsdtar"):
        first = values[0] if values else ""
        unpacks = any(
            v in ("--extract", "--get") or (v[:1] == "-" and v[1:2] != "-" and "x" in v[1:])
            for v in values
        ) or (first[:1] not in ("-", "") and "x" in first)
        named = ("-C", "--directory")
    elif name == "unzip":
        listing = ("-l", "-t", "-v", "-z", "-Z", "-p", "-c")  # list, test, comment, to stdout
        unpacks, named = not any(v in listing for v in values), ("-d",)
    elif name == "7z":
        unpacks, named = bool(values) and values[0] in ("x", "e"), ()
    else:  # cpio
        unpacks, named = any(v in ("-i", "--extract") or v.startswith("-i") for v in values), ()
    if not unpacks:
        return []
    out: list[Arg] = []
    for k, a in enumerate(args):
        v = a.value or ""
        if v in named and k + 1 < len(args):
            out.append(args[k + 1])
        elif v.startswith("--directory="):
            out.append(Arg.lit(v.split("=", 1)[1]))
        elif name == "7z" and v.startswith("-o") and len(v) > 2:
            out.append(Arg.lit(v[2:]))
    return out or [Arg.lit(".")]


def command_hit(name: str, argv: list[Arg], cwd: str | None) -> Hit | None:
    """The reason a command other than git writes into a ``.git`` (None: it does not)."""
    for a in _operands(name, argv):
        if a.value is None:
            continue
        path = in_dir(cwd, a.value) or a.value
        if in_git_dir(path):
            return Hit(REASON.format(path=f"`{path}`"), IRREVERSIBLE)
    return None


def written_paths(name: str, argv: list[Arg], cwd: str | None) -> list[str]:
    """The paths ``name`` changes that the line names (as from where it starts), for the gate
    to ask the project's state whether one leads into a ``.git`` through a symlink."""
    out = []
    for a in _operands(name, argv):
        if a.value is not None and (path := in_dir(cwd, a.value)):
            out.append(path)
    return out


def written_hit(paths: Iterable[str], dirs: Iterable[str | None]) -> Hit | None:
    """The reason a redirection or a writing tool of the line writes into a ``.git``: a path
    there, or any path once the line went into one (``dirs``: where its ``cd`` went)."""
    paths = list(paths)
    for p in paths:
        if in_git_dir(p):
            return Hit(REASON.format(path=f"`{p}`"), IRREVERSIBLE)
    inside = next((d for d in dirs if d is not None and in_git_dir(d)), None)
    if inside is not None and paths:
        return Hit(REASON.format(path=f"`{inside}/{paths[0]}`"), IRREVERSIBLE)
    return None
