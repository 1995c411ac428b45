"""Pause-list rules: built-in defaults, user rules (declarative tables) and their validation. Pure.

A rule receives the arguments of one command (after its name) and returns a :class:`Hit` when the
command should pause. ``Hit.unknown`` marks a fail-closed hit: the words that decide are only known
at run time.

User rule values (the ``pauselist`` option), by command name:

* ``true``: always pause that command; ``false``: never (turns a default rule off);
* ``"<lua-function>"``: a Lua function rule, evaluated by the Lua shim on the parsed commands;
* a table ``{ subcommands = …, flags = …, args = …, reason = … }``: see :func:`declarative`.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from run_bash.checker.options import NONE, OPTIONAL, REQUIRED, Scan, scan
from run_bash.checker.words import Arg, normalize_path

LUA_FUNCTION = "<lua-function>"
RULE_KEYS = ("subcommands", "flags", "args", "reason")


@dataclass(frozen=True)
class Hit:
    """Why a command pauses: ``reason`` completes the sentence "`<command>` …"."""

    reason: str
    unknown: bool = False


Rule = Callable[[Sequence[Arg]], "Hit | None"]


def _unknown(what: str, word: Arg) -> Hit:
    return Hit(f"may {what}: `{word.text}` is only known at run time", unknown=True)


# -- rm -------------------------------------------------------------------------------------------

_RM_LONGS = {
    "force": NONE,
    "interactive": OPTIONAL,
    "one-file-system": NONE,
    "no-preserve-root": NONE,
    "preserve-root": OPTIONAL,
    "recursive": NONE,
    "dir": NONE,
    "verbose": NONE,
    "help": NONE,
    "version": NONE,
}


def rule_rm(args: Sequence[Arg]) -> Hit | None:
    """Recursive deletes: ``-r``, ``-R``, ``--recursive`` (and its abbreviations)."""
    s = scan(args, "", _RM_LONGS)
    if s.has("r", "R", "recursive"):
        return Hit("deletes files and directories recursively")
    if s.unknown is not None:
        return _unknown("delete recursively", s.unknown)
    return None


# -- always-pause commands ------------------------------------------------------------------------


def _always(reason: str) -> Rule:
    def rule(args: Sequence[Arg]) -> Hit | None:
        return Hit(reason)

    rule.__doc__ = f"Always pause: {reason}."
    return rule


# -- git ------------------------------------------------------------------------------------------

_GIT_GLOBAL_VALUE = {
    "-C",
    "-c",
    "--git-dir",
    "--work-tree",
    "--namespace",
    "--super-prefix",
    "--config-env",
    "--attr-source",
}


def git_split(args: Sequence[Arg]) -> tuple[list[tuple[str, Arg | None]], int] | Arg:
    """Split git's global options from the subcommand.

    Returns ([(option, value word)], index of the subcommand) or the word that makes it unknowable.
    git's global options take no abbreviations; ``-C``/``-c`` and a few long ones take a value.
    """
    opts: list[tuple[str, Arg | None]] = []
    i, n = 0, len(args)
    while i < n:
        a = args[i]
        v = a.value
        if v is None:
            return a if a.may_be_option or a.split else (opts, i)
        if not v.startswith("-") or v == "-":
            return opts, i
        if v == "--":
            return opts, i + 1
        name, eq, _ = v.partition("=")
        if name in _GIT_GLOBAL_VALUE and not eq:
            opts.append((name, args[i + 1] if i + 1 < n else None))
            i += 2
            continue
        if name in ("-C", "-c") or v.startswith(("-C", "-c")):
            opts.append((v[:2], Arg.lit(v[2:])))
        else:
            opts.append((name, Arg.lit(v[len(name) + 1 :]) if eq else None))
        i += 1
    return opts, n


def _negatable(names: Mapping[str, int]) -> dict[str, int]:
    out = dict(names)
    for name in names:
        if not name.startswith("no-"):
            out.setdefault("no-" + name, NONE)
    return out


_PUSH_LONGS = _negatable(
    {
        "all": NONE,
        "branches": NONE,
        "mirror": NONE,
        "delete": NONE,
        "tags": NONE,
        "dry-run": NONE,
        "porcelain": NONE,
        "force": NONE,
        "force-with-lease": OPTIONAL,
        "force-if-includes": NONE,
        "repo": REQUIRED,
        "set-upstream": NONE,
        "thin": NONE,
        "receive-pack": REQUIRED,
        "exec": REQUIRED,
        "prune": NONE,
        "verify": NONE,
        "follow-tags": NONE,
        "signed": OPTIONAL,
        "atomic": NONE,
        "push-option": REQUIRED,
        "ipv4": NONE,
        "ipv6": NONE,
        "recurse-submodules": REQUIRED,
        "quiet": NONE,
        "verbose": NONE,
        "progress": NONE,
    }
)
_RESET_LONGS = _negatable(
    {
        "hard": NONE,
        "soft": NONE,
        "mixed": NONE,
        "merge": NONE,
        "keep": NONE,
        "quiet": NONE,
        "patch": NONE,
        "intent-to-add": NONE,
        "pathspec-from-file": REQUIRED,
        "pathspec-file-nul": NONE,
        "recurse-submodules": OPTIONAL,
        "refresh": NONE,
    }
)
_CLEAN_LONGS = _negatable(
    {"force": NONE, "dry-run": NONE, "quiet": NONE, "interactive": NONE, "exclude": REQUIRED}
)
_CHECKOUT_LONGS = _negatable(
    {
        "quiet": NONE,
        "progress": NONE,
        "force": NONE,
        "ours": NONE,
        "theirs": NONE,
        "track": OPTIONAL,
        "guess": NONE,
        "detach": NONE,
        "orphan": REQUIRED,
        "ignore-skip-worktree-bits": NONE,
        "merge": NONE,
        "conflict": REQUIRED,
        "patch": NONE,
        "ignore-other-worktrees": NONE,
        "overwrite-ignore": NONE,
        "recurse-submodules": OPTIONAL,
        "overlay": NONE,
        "pathspec-from-file": REQUIRED,
        "pathspec-file-nul": NONE,
    }
)


def _git_push(args: Sequence[Arg]) -> Hit | None:
    s = scan(args, "o", _PUSH_LONGS)
    if s.has("n", "dry-run") and not s.has("no-dry-run"):
        return None
    force = lease = False
    for opt, _ in s.opts:
        names = opt.split("|")
        if opt in ("f", "force") or "force" in names:
            force = True
        elif opt == "no-force":
            force = False
        elif opt == "force-with-lease":
            lease = True
        elif opt == "no-force-with-lease":
            lease = False
    if s.has("mirror"):
        return Hit("overwrites and deletes remote refs to mirror the local repository")
    if s.has("d", "delete"):
        return Hit("deletes a remote branch")
    if force:
        # `-f` wins over `--force-with-lease` given with it (git forces).
        return Hit("rewrites the remote branch's history")
    refspecs = s.operands[1:]
    for ref in refspecs:
        v = ref.value if ref.value is not None else ref.prefix
        if v.startswith("+") and not lease:
            return Hit("force-pushes (`+` refspec) and can rewrite the remote branch's history")
        if v.startswith(":") and len(v) > 1:
            return Hit("deletes a remote branch (empty source refspec)")
    if s.has("prune"):
        return Hit("deletes remote branches that have no local counterpart")
    if s.unknown is not None:
        return _unknown("force-push", s.unknown)
    for ref in refspecs:
        if ref.value is None and ref.split and not ref.prefix:
            return _unknown("force-push", ref)
    return None


def _git_reset(args: Sequence[Arg]) -> Hit | None:
    s = scan(args, "", _RESET_LONGS)
    if s.has("hard"):
        return Hit("discards uncommitted changes in the working tree")
    if s.unknown is not None:
        return _unknown("discard uncommitted changes", s.unknown)
    return None


def _git_clean(args: Sequence[Arg], config: Mapping[str, str]) -> Hit | None:
    s = scan(args, "e", _CLEAN_LONGS)
    if s.has("n", "dry-run"):
        return None
    force = s.has("f", "force") or config.get("clean.requireforce", "").lower() in _FALSE
    if force:
        if s.has("d"):
            return Hit("deletes untracked files and directories")
        return Hit("deletes untracked files")
    if s.unknown is not None:
        return _unknown("delete untracked files", s.unknown)
    return None


def _git_checkout(args: Sequence[Arg]) -> Hit | None:
    s = scan(args, "bB", _CHECKOUT_LONGS)
    if s.has("f", "force"):
        return Hit("discards uncommitted changes (`-f`)")
    values = [a.value for a in args]
    if "--" in values and values.index("--") < len(values) - 1:
        return Hit("overwrites uncommitted changes to the named files")
    if s.has("pathspec-from-file"):
        return Hit("overwrites uncommitted changes to the listed files")
    for op in s.operands:
        if op.value is not None and normalize_path(op.value) == ".":
            return Hit("discards every uncommitted change under the current directory")
    if len(s.operands) >= 2 and not s.has("b", "B", "orphan"):
        return Hit("overwrites the named files with their content from another commit")
    if s.unknown is not None:
        return _unknown("discard uncommitted changes", s.unknown)
    return None


_SWITCH_LONGS = _negatable(
    {
        "create": REQUIRED,
        "force-create": REQUIRED,
        "detach": NONE,
        "guess": NONE,
        "discard-changes": NONE,
        "force": NONE,
        "merge": NONE,
        "conflict": REQUIRED,
        "quiet": NONE,
        "progress": NONE,
        "track": OPTIONAL,
        "orphan": REQUIRED,
        "ignore-other-worktrees": NONE,
        "recurse-submodules": OPTIONAL,
    }
)


def _git_switch(args: Sequence[Arg]) -> Hit | None:
    s = scan(args, "cC", _SWITCH_LONGS)
    if s.has("f", "force", "discard-changes"):
        return Hit("discards uncommitted changes")
    if s.unknown is not None:
        return _unknown("discard uncommitted changes", s.unknown)
    return None


_RESTORE_LONGS = _negatable(
    {
        "source": REQUIRED,
        "staged": NONE,
        "worktree": NONE,
        "patch": NONE,
        "ours": NONE,
        "theirs": NONE,
        "merge": NONE,
        "conflict": REQUIRED,
        "ignore-unmerged": NONE,
        "ignore-skip-worktree-bits": NONE,
        "recurse-submodules": OPTIONAL,
        "overlay": NONE,
        "quiet": NONE,
        "progress": NONE,
        "pathspec-from-file": REQUIRED,
        "pathspec-file-nul": NONE,
    }
)


def _git_restore(args: Sequence[Arg]) -> Hit | None:
    s = scan(args, "s", _RESTORE_LONGS)
    if s.has("S", "staged") and not s.has("W", "worktree"):
        return None  # only the index changes; the files stay as they are
    if s.operands or s.has("pathspec-from-file"):
        return Hit("discards uncommitted changes to the named files")
    if s.unknown is not None:
        return _unknown("discard uncommitted changes", s.unknown)
    return None


def _git_stash(args: Sequence[Arg]) -> Hit | None:
    s = scan(args, "", {}, stop_after=1)
    if not s.operands:
        # `git stash $OP`: the subcommand may be `drop` or `clear`.
        return _unknown("delete stashed changes", s.unknown) if s.unknown is not None else None
    sub = s.operands[0]
    if sub.value in ("drop", "clear"):
        return Hit("deletes stashed changes")
    if sub.value is None and (sub.split or sub.opaque or not sub.prefix):
        return _unknown("delete stashed changes", sub)
    return None


_BRANCH_LONGS = _negatable(
    {
        "delete": NONE,
        "force": NONE,
        "move": NONE,
        "copy": NONE,
        "list": NONE,
        "remotes": NONE,
        "all": NONE,
        "verbose": NONE,
        "quiet": NONE,
        "track": OPTIONAL,
        "set-upstream-to": REQUIRED,
        "unset-upstream": NONE,
        "contains": OPTIONAL,
        "merged": OPTIONAL,
        "points-at": REQUIRED,
        "format": REQUIRED,
        "sort": REQUIRED,
        "color": OPTIONAL,
        "column": OPTIONAL,
        "abbrev": OPTIONAL,
        "edit-description": NONE,
        "show-current": NONE,
        "create-reflog": NONE,
        "recurse-submodules": NONE,
        "ignore-case": NONE,
        "omit-empty": NONE,
    }
)


def _git_branch(args: Sequence[Arg]) -> Hit | None:
    s = scan(args, "u", _BRANCH_LONGS)
    delete = s.has("d", "D", "delete")
    if s.has("D") or (delete and s.has("f", "force")):
        return Hit("force-deletes a branch, even one with unmerged commits")
    if delete and s.unknown is not None:
        return _unknown("force-delete a branch", s.unknown)
    return None


def _git_reflog(args: Sequence[Arg]) -> Hit | None:
    s = scan(args, "", {}, stop_after=1)
    sub = s.operands[0] if s.operands else None
    if sub is not None and sub.value in ("expire", "delete", "drop"):
        return Hit("deletes reflog entries, the way back to lost commits")
    if sub is not None and sub.value is None:
        return _unknown("delete reflog entries", sub)
    return None


def _git_gc(args: Sequence[Arg]) -> Hit | None:
    s = scan(
        args,
        "",
        {
            "prune": OPTIONAL,
            "aggressive": NONE,
            "auto": NONE,
            "quiet": NONE,
            "force": NONE,
            "keep-largest-pack": NONE,
            "no-prune": NONE,
            "cruft": NONE,
            "no-cruft": NONE,
            "max-cruft-size": REQUIRED,
        },
    )
    for opt, value in s.opts:
        if opt == "prune" and value is not None and value.lower() in ("now", "all"):
            return Hit("deletes unreachable commits now instead of keeping them for two weeks")
    return None


def _git_prune(args: Sequence[Arg]) -> Hit | None:
    s = scan(args, "", {"dry-run": NONE, "verbose": NONE, "progress": NONE, "expire": REQUIRED})
    if s.has("n", "dry-run"):
        return None
    return Hit("deletes unreachable commits")


def _git_update_ref(args: Sequence[Arg]) -> Hit | None:
    s = scan(args, "m", {"stdin": NONE, "no-deref": NONE, "create-reflog": NONE, "z": NONE})
    if s.has("d"):
        return Hit("deletes a ref, which can lose the commits only it points to")
    if s.has("stdin"):
        return Hit("changes refs read from its input, possibly deleting them")
    if s.unknown is not None:
        return _unknown("delete a ref", s.unknown)
    return None


def _git_rm(args: Sequence[Arg]) -> Hit | None:
    s = scan(
        args,
        "",
        {
            "force": NONE,
            "cached": NONE,
            "dry-run": NONE,
            "quiet": NONE,
            "ignore-unmatch": NONE,
            "sparse": NONE,
            "pathspec-from-file": REQUIRED,
            "pathspec-file-nul": NONE,
        },
    )
    if s.has("cached", "n", "dry-run"):
        return None
    if s.has("f", "force"):
        return Hit("deletes files even with uncommitted changes")
    return None


def _git_worktree(args: Sequence[Arg]) -> Hit | None:
    s = scan(args, "", {"force": NONE}, stop_after=1)
    sub = s.operands[0] if s.operands else None
    if (
        sub is not None
        and sub.value == "remove"
        and (s.has("f", "force") or any(a.value in ("-f", "--force") for a in args))
    ):
        return Hit("deletes a worktree even with uncommitted changes")
    return None


_FALSE = frozenset({"false", "no", "off", "0"})
_GIT_SUBRULES: dict[str, Rule] = {
    "rm": _git_rm,
    "worktree": _git_worktree,
    "push": _git_push,
    "reset": _git_reset,
    "checkout": _git_checkout,
    "switch": _git_switch,
    "restore": _git_restore,
    "stash": _git_stash,
    "branch": _git_branch,
    "reflog": _git_reflog,
    "gc": _git_gc,
    "prune": _git_prune,
    "update-ref": _git_update_ref,
    "filter-branch": _always("rewrites the repository's history"),
    "filter-repo": _always("rewrites the repository's history"),
}


def _git_config_pairs(opts: Sequence[tuple[str, Arg | None]]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, word in opts:
        if name == "-c" and word is not None and word.value is not None:
            key, eq, value = word.value.partition("=")
            out[key.lower()] = value if eq else "true"
    return out


def rule_git(args: Sequence[Arg]) -> Hit | None:
    """git subcommands that lose work or rewrite history (listed in :help run_bash-pauselist)."""
    split = git_split(args)
    if isinstance(split, Arg):
        return _unknown("run a destructive git subcommand", split)
    _, k = split
    if k >= len(args):
        return None
    sub = args[k]
    if sub.value is None:
        return _unknown("run a destructive git subcommand", sub)
    if sub.value == "clean":
        return _git_clean(args[k + 1 :], _git_config_pairs(split[0]))
    rule = _GIT_SUBRULES.get(sub.value)
    return rule(args[k + 1 :]) if rule else None


# -- chmod / chown --------------------------------------------------------------------------------

SYSTEM_DIRS = (
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/opt",
    "/proc",
    "/root",
    "/sbin",
    "/sys",
    "/usr",
    "/var",
)


def system_path(path: str) -> str | None:
    """The normalized path when it is ``/``, a system directory or inside one."""
    if not path.startswith("/"):
        return None
    norm = normalize_path(path)
    if norm == "/":
        return norm
    for d in SYSTEM_DIRS:
        if norm == d or norm.startswith(d + "/"):
            return norm
    return None


_FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
_FIND_ONE_ARG = frozenset(
    [
        "-amin",
        "-anewer",
        "-atime",
        "-cmin",
        "-cnewer",
        "-ctime",
        "-fstype",
        "-gid",
        "-group",
        "-ilname",
        "-iname",
        "-inum",
        "-ipath",
        "-iregex",
        "-iwholename",
        "-links",
        "-lname",
        "-mmin",
        "-mtime",
        "-name",
        "-newer",
        "-path",
        "-perm",
        "-regex",
        "-samefile",
        "-size",
        "-type",
        "-uid",
        "-used",
        "-user",
        "-wholename",
        "-xtype",
        "-context",
        "-maxdepth",
        "-mindepth",
        "-regextype",
        "-files0-from",
        "-fprint",
        "-fprint0",
        "-fls",
        "-printf",
        "-fstype",
    ]
)
_FIND_LEADING = frozenset({"-H", "-L", "-P"})


def rule_find(args: Sequence[Arg]) -> Hit | None:
    """`find … -delete`: deletes whatever matches, like `rm -r`. A word only known at run time
    where find reads its expression may be `-delete` or `-exec`. (Commands run by `-exec`/`-ok`
    are checked as commands of their own.)"""
    i, n = 0, len(args)
    while i < n and (args[i].value in _FIND_LEADING or (args[i].value or "")[:2] in ("-D", "-O")):
        lead = args[i].value or ""
        i += 2 if lead in ("-D", "-O") else 1
    # Starting points: up to the first word that starts the expression. A variable there may
    # be the expression itself (`find . "$A"` with A=-delete); only the first one is trusted.
    first = i
    while i < n:
        a = args[i]
        if a.value is None:
            if a.may_be_option or i > first:
                return _unknown("delete files or run commands", a)
            i += 1
            continue
        if a.value.startswith("-") or a.value in ("(", "!", ")", ","):
            break
        i += 1
    while i < n:
        a = args[i]
        v = a.value
        i += 1
        if v is None:
            return _unknown("delete files or run commands", a)
        if v in _FIND_EXEC:
            while i < n and args[i].value not in (";", "+"):
                i += 1
            i += 1
        elif v == "-delete":
            return Hit("deletes every file and directory it matches")
        elif v in _FIND_ONE_ARG or v.startswith("-newer"):
            if i < n and args[i].value is None and args[i].split:
                return _unknown("delete files or run commands", args[i])
            i += 1
        elif v == "-fprintf":
            i += 2
    return None


def _owner_rule(what: str) -> Rule:
    def rule(args: Sequence[Arg]) -> Hit | None:
        after_dashdash = False
        recursive = reference = False
        operands: list[Arg] = []
        for a in args:
            if a.value == "--" and not after_dashdash:
                after_dashdash = True
                continue
            if a.value is not None:
                if a.value.startswith("-") and not after_dashdash:
                    long = a.value.startswith("--")
                    recursive |= a.value == "--recursive" or (not long and "R" in a.value)
                    reference |= a.value.startswith("--reference")
                    continue
                hit = system_path(a.value)
            else:
                head = a.prefix.rsplit("/", 1)[0] if "/" in a.prefix else ""
                hit = system_path(head) if head else None
            if hit:
                return Hit(f"changes {what} of a system path (`{hit}`)")
            operands.append(a)
        # The first operand is the mode or owner (unless --reference gives it). A recursive change
        # of a path only known at run time may be a system directory: ask.
        if recursive:
            for a in operands[0 if reference else 1 :]:
                if a.value is None and "/" not in a.prefix:
                    return _unknown(f"change {what} of a system directory recursively", a)
        return None

    rule.__doc__ = f"Changing {what} of `/` or a system directory."
    return rule


# -- subcommand-based rules -----------------------------------------------------------------------

# Options that take a value before the subcommand, for finding a command's subcommand.
SUBCOMMAND_VALUE_OPTIONS: dict[str, tuple[str, dict[str, int]]] = {
    "systemctl": (
        "tpsHMnoP",
        {
            k: REQUIRED
            for k in (
                "type",
                "property",
                "signal",
                "host",
                "machine",
                "lines",
                "output",
                "state",
                "kill-whom",
                "kill-value",
                "root",
                "image",
                "job-mode",
                "what",
                "timestamp",
                "message",
                "boot-loader-menu",
                "boot-loader-entry",
                "reboot-argument",
                "preset-mode",
                "check-inhibitors",
                "drop-in",
                "when",
                "image-policy",
                "root-shift",
            )
        },
    ),
    "npm": (
        "wC",
        {
            k: REQUIRED
            for k in (
                "prefix",
                "registry",
                "userconfig",
                "globalconfig",
                "cache",
                "loglevel",
                "workspace",
                "tag",
                "otp",
                "access",
                "scope",
                "location",
                "auth-type",
                "omit",
                "include",
                "install-strategy",
                "before",
            )
        },
    ),
    "pip": (
        "",
        {
            k: REQUIRED
            for k in (
                "python",
                "log",
                "proxy",
                "retries",
                "timeout",
                "exists-action",
                "trusted-host",
                "cert",
                "client-cert",
                "cache-dir",
                "keyring-provider",
                "use-feature",
                "use-deprecated",
                "resume-retries",
            )
        },
    ),
    "cargo": ("CZ", {"color": REQUIRED, "config": REQUIRED}),
    "docker": (
        "cHl",
        {
            k: REQUIRED
            for k in ("config", "context", "host", "log-level", "tlscacert", "tlscert", "tlskey")
        },
    ),
    "podman": ("c", {k: REQUIRED for k in ("connection", "url", "root", "runroot", "log-level")}),
    "kubectl": (
        "nsc",
        {
            k: REQUIRED
            for k in (
                "namespace",
                "context",
                "cluster",
                "server",
                "kubeconfig",
                "user",
                "token",
                "as",
                "as-group",
                "cache-dir",
                "request-timeout",
                "v",
            )
        },
    ),
    "gh": ("R", {"repo": REQUIRED, "hostname": REQUIRED}),
    "yarn": ("", {"cwd": REQUIRED}),
    "pnpm": ("Cw", {"dir": REQUIRED, "filter": REQUIRED, "workspace": REQUIRED}),
}
SUBCOMMAND_VALUE_OPTIONS.update(
    {
        "helm": (
            "n",
            {
                k: REQUIRED
                for k in (
                    "namespace",
                    "kube-context",
                    "kubeconfig",
                    "registry-config",
                    "repository-cache",
                    "repository-config",
                    "burst-limit",
                    "kube-apiserver",
                    "kube-as-group",
                    "kube-as-user",
                    "kube-ca-file",
                    "kube-token",
                    "kube-tls-server-name",
                )
            },
        ),
        "uv": (
            "",
            {
                k: REQUIRED
                for k in ("directory", "project", "cache-dir", "config-file", "color", "python")
            },
        ),
        "loginctl": (
            "HMpsno",
            {
                k: REQUIRED
                for k in ("host", "machine", "property", "signal", "kill-whom", "lines", "output")
            },
        ),
        "gem": ("", {}),
        "twine": ("", {}),
    }
)
SUBCOMMAND_VALUE_OPTIONS["pip3"] = SUBCOMMAND_VALUE_OPTIONS["pip"]
SUBCOMMAND_VALUE_OPTIONS["podman"][1].update(SUBCOMMAND_VALUE_OPTIONS["docker"][1])


def subcommand_scan(name: str, args: Sequence[Arg]) -> Scan:
    """Scan ``args`` up to and including the first operand (the subcommand)."""
    short_arg, longs = SUBCOMMAND_VALUE_OPTIONS.get(name, ("", {}))
    args = list(args)
    if name == "cargo" and args and (args[0].value or "").startswith("+"):
        args = args[1:]  # rustup toolchain selector: `cargo +nightly publish`
    return scan(args, short_arg, longs, stop_after=1, abbrev=False)


_NPM_COMMAND_TEXT = (
    "access adduser audit bugs cache ci completion config dedupe deprecate diff dist-tag docs "
    "doctor edit exec explain explore find-dupes fund get help help-search hook init install "
    "install-ci-test install-test link ll login logout ls org outdated owner pack ping pkg "
    "prefix profile prune publish query rebuild repo restart root run run-script sbom search "
    "set shrinkwrap star stars start stop team test token undeprecate uninstall unpublish "
    "unstar update version view whoami"
)
_NPM_COMMANDS = tuple(_NPM_COMMAND_TEXT.split())


def is_dry_run(args: Sequence[Arg]) -> bool:
    """``--dry-run`` is in effect: the last of ``--dry-run``, ``--dry-run=false``,
    ``--dry-run false``, ``--no-dry-run`` wins."""
    state = False
    for k, a in enumerate(args):
        v = a.value
        if v is None:
            continue
        if v in ("--dry-run", "--dryrun"):
            nxt = args[k + 1].value if k + 1 < len(args) else None
            state = nxt is None or nxt.lower() not in _FALSE | {"none"}
        elif v.startswith("--dry-run="):
            state = v.split("=", 1)[1].lower() not in _FALSE | {"none"}
        elif v == "--no-dry-run":
            state = False
    return state


def _subcommand_rule(
    name: str,
    reasons: Mapping[str, Any],
    aliases: Mapping[str, str] | None = None,
    *,
    dry_run: bool = False,
) -> Rule:
    aliases = aliases or {}
    what = f"run a paused `{name}` subcommand"

    def rule(args: Sequence[Arg]) -> Hit | None:
        scanned = args
        if dry_run:
            # `--dry-run false` takes the boolean as its value, not as the subcommand.
            scanned = [
                a
                for k, a in enumerate(args)
                if not (k and args[k - 1].value == "--dry-run" and a.value in ("true", "false"))
            ]
        s = subcommand_scan(name, scanned)
        if not s.operands:
            return _unknown(what, s.unknown) if s.unknown is not None else None
        sub = s.operands[0]
        if sub.value is None:
            return _unknown(what, sub)
        key = aliases.get(sub.value, sub.value)
        reason = reasons.get(key)
        if isinstance(reason, Mapping):
            rest = scanned[list(scanned).index(sub) + 1 :]
            inner = scan(rest, "", {}, stop_after=1, abbrev=False)
            second = inner.operands[0] if inner.operands else None
            if second is None:
                return _unknown(what, inner.unknown) if inner.unknown is not None else None
            if second.value is None:
                return _unknown(what, second)
            reason = reason.get(second.value)
        if isinstance(reason, str):
            if dry_run and is_dry_run(args):
                return None
            return Hit(reason)
        if s.unknown is not None:
            return _unknown(what, s.unknown)
        return None

    rule.__doc__ = f"`{name}` with a subcommand among: {', '.join(reasons)}."
    return rule


def _npm_aliases() -> dict[str, str]:
    aliases = {"un": "uninstall", "r": "uninstall", "rm": "uninstall", "remove": "uninstall"}
    aliases["unlink"] = "uninstall"
    # npm accepts unique prefixes of its command names (`npm publ`).
    for target in ("publish", "unpublish", "uninstall"):
        for k in range(2, len(target)):
            prefix = target[:k]
            if [c for c in _NPM_COMMANDS if c.startswith(prefix)] == [target]:
                aliases.setdefault(prefix, target)
    return aliases


_SYSTEMCTL = {
    "stop": "stops a system service",
    "restart": "restarts a system service",
    "try-restart": "restarts a system service",
    "reload-or-restart": "restarts a system service",
    "try-reload-or-restart": "restarts a system service",
    "condrestart": "restarts a system service",
    "force-reload": "restarts a system service",
    "disable": "disables a system service",
    "mask": "masks a system service",
    "kill": "kills a system service",
    "isolate": "switches the system to another target, stopping services",
    "reboot": "reboots the machine",
    "soft-reboot": "reboots the machine",
    "kexec": "reboots the machine",
    "poweroff": "powers the machine off",
    "halt": "halts the machine",
    "rescue": "switches the machine to rescue mode",
    "emergency": "switches the machine to emergency mode",
}
_UNINSTALL = "removes installed packages"

_PUBLISH = "publishes a package to the registry"
_DISK = "erases or rewrites a disk's partitions or filesystem signatures"
_FIREWALL = "changes firewall rules"
_SIGNAL = "sends a signal to processes"


def rule_rsync(args: Sequence[Arg]) -> Hit | None:
    """`rsync --delete…` (and `--del`, `--remove-source-files`), not with `-n`/`--dry-run`."""
    dry = False
    hit: Hit | None = None
    for a in args:
        v = a.value
        if v is None:
            if a.may_be_option and hit is None:
                hit = _unknown("delete files at the destination", a)
            continue
        if v == "--":
            break
        if v == "--dry-run" or (v.startswith("-") and not v.startswith("--") and "n" in v[1:]):
            dry = True
        elif v in ("--del", "--delete") or v.startswith("--delete-"):
            hit = Hit("deletes files at the destination that the source does not have")
        elif v == "--remove-source-files":
            hit = Hit("deletes the source files after copying them")
    return None if dry else hit


_DESTROY = frozenset({"-destroy", "--destroy", "-destroy=true", "--destroy=true"})


def rule_terraform(args: Sequence[Arg]) -> Hit | None:
    """`terraform destroy` and `terraform apply -destroy`."""
    sub: Arg | None = None
    for a in args:
        if a.value is None:
            if sub is None:
                return _unknown("destroy infrastructure", a)
            continue
        if sub is None and not a.value.startswith("-"):
            sub = a
        elif sub is not None and sub.value == "apply" and a.value in _DESTROY:
            return Hit("destroys the infrastructure Terraform manages")
    if sub is not None and sub.value == "destroy":
        return Hit("destroys the infrastructure Terraform manages")
    return None


def rule_fuser(args: Sequence[Arg]) -> Hit | None:
    """`fuser -k`: kills the processes using a file or port."""
    for a in args:
        v = a.value
        if v is None:
            if a.may_be_option:
                return _unknown("kill processes", a)
            continue
        if v == "--kill" or (v.startswith("-") and not v.startswith("--") and "k" in v[1:]):
            return Hit("kills the processes using the named files or ports")
    return None


_RUNLEVELS = {
    "0": "powers the machine off",
    "6": "reboots the machine",
    **dict.fromkeys("12345sS", "switches the machine's runlevel, stopping services"),
}


def rule_init(args: Sequence[Arg]) -> Hit | None:
    """`init N` / `telinit N`: runlevel changes (0 powers off, 6 reboots)."""
    for a in args:
        if a.value is None:
            return _unknown("change the runlevel", a)
        if a.value in _RUNLEVELS:
            return Hit(_RUNLEVELS[a.value])
    return None


_COMPOSE_DOWN = "deletes the project's volumes and their data"


def rule_compose(args: Sequence[Arg]) -> Hit | None:
    """`docker-compose down -v|--volumes`."""
    ops = [a for a in args if a.value is not None and not a.value.startswith("-")]
    if ops and ops[0].value == "down" and _has_volumes(args):
        return Hit(_COMPOSE_DOWN)
    return None


def _has_volumes(args: Sequence[Arg]) -> bool:
    for a in args:
        v = a.value or ""
        if v == "--volumes" or (v.startswith("-") and not v.startswith("--") and "v" in v[1:]):
            return True
    return False


def _with_compose(name: str, reasons: Mapping[str, Any]) -> Rule:
    """A container CLI's rule plus `NAME compose down -v` (deletes the project's volumes)."""
    base = _subcommand_rule(name, reasons)

    def rule(args: Sequence[Arg]) -> Hit | None:
        s = subcommand_scan(name, args)
        if s.operands and s.operands[0].value == "compose":
            rest = args[list(args).index(s.operands[0]) + 1 :]
            return rule_compose(rest)
        return base(args)

    rule.__doc__ = base.__doc__
    return rule


def rule_pacman(args: Sequence[Arg]) -> Hit | None:
    """`pacman -R…` (remove)."""
    for a in args:
        v = a.value or ""
        if v == "--remove" or (v.startswith("-") and not v.startswith("--") and "R" in v[1:]):
            return Hit(_UNINSTALL)
    return None


def rule_cloud_delete(name: str) -> Rule:
    """A cloud CLI command whose verb is `delete` (`gcloud compute instances delete x`)."""

    def rule(args: Sequence[Arg]) -> Hit | None:
        for a in args:
            v = a.value
            if v is None:
                if a.may_be_option or not a.prefix:
                    return _unknown(f"delete {name} resources", a)
                continue
            if v.startswith("-"):
                continue
            if v == "delete" or v.endswith("-delete"):
                return Hit("deletes cloud resources")
        return None

    rule.__doc__ = f"`{name} … delete`."
    return rule


def rule_crontab(args: Sequence[Arg]) -> Hit | None:
    """`crontab` that replaces or removes the user's scheduled jobs (not `-l`)."""
    values = [a.value for a in args]
    if "-l" in values:
        return None
    if "-r" in values or any(v and v.startswith("-") and "r" in v[1:] for v in values):
        return Hit("removes the user's scheduled jobs")
    return Hit("replaces the user's scheduled jobs, which run outside the sandbox")


_SERVICE_VERBS = frozenset({"stop", "restart", "force-reload", "condrestart", "try-restart"})


def rule_service(args: Sequence[Arg]) -> Hit | None:
    """`service NAME stop|restart…` (SysV init scripts)."""
    ops = [a for a in args if a.value is None or not a.value.startswith("-")]
    if len(ops) >= 2:
        if ops[1].value is None:
            return _unknown("stop a system service", ops[1])
        if ops[1].value in _SERVICE_VERBS:
            return Hit("stops or restarts a system service")
    return None


DEFAULT_RULES: dict[str, Rule] = {
    "rm": rule_rm,
    "git": rule_git,
    "dd": _always("writes raw data to files or devices"),
    "mkfs": _always("creates a filesystem, erasing the device"),
    "mke2fs": _always("creates a filesystem, erasing the device"),
    "mkswap": _always("formats a device as swap, erasing it"),
    "wipefs": _always(_DISK),
    "sgdisk": _always(_DISK),
    "sfdisk": _always("edits disk partitions"),
    "gdisk": _always("edits disk partitions"),
    "blkdiscard": _always("discards every block of a device, erasing it"),
    "shutdown": _always("shuts the machine down"),
    "reboot": _always("reboots the machine"),
    "poweroff": _always("powers the machine off"),
    "halt": _always("halts the machine"),
    "init": rule_init,
    "telinit": rule_init,
    "mount": _always("changes mounted filesystems"),
    "umount": _always("changes mounted filesystems"),
    "fdisk": _always("edits disk partitions"),
    "parted": _always("edits disk partitions"),
    "iptables": _always(_FIREWALL),
    "ip6tables": _always(_FIREWALL),
    "nft": _always(_FIREWALL),
    "ufw": _always(_FIREWALL),
    "firewall-cmd": _always(_FIREWALL),
    "kill": _always(_SIGNAL),
    "killall": _always("sends a signal to processes by name"),
    "pkill": _always("sends a signal to processes by name"),
    "killall5": _always("sends a signal to every process"),
    "fuser": rule_fuser,
    "truncate": _always("cuts files to a new size, discarding their data"),
    "shred": _always("overwrites files to destroy their data"),
    "rimraf": _always("deletes files and directories recursively"),
    "rsync": rule_rsync,
    "find": rule_find,
    "chmod": _owner_rule("permissions"),
    "chown": _owner_rule("ownership"),
    "chgrp": _owner_rule("the group"),
    "systemctl": _subcommand_rule("systemctl", _SYSTEMCTL),
    "loginctl": _subcommand_rule(
        "loginctl",
        {
            "poweroff": "powers the machine off",
            "reboot": "reboots the machine",
            "halt": "halts the machine",
            "kexec": "reboots the machine",
            "suspend": "suspends the machine",
            "hibernate": "hibernates the machine",
            "terminate-session": "ends a login session, killing its processes",
            "terminate-user": "ends a user's sessions, killing their processes",
            "kill-session": "sends a signal to a login session's processes",
            "kill-user": "sends a signal to a user's processes",
        },
    ),
    "npm": _subcommand_rule(
        "npm",
        {
            "publish": _PUBLISH,
            "unpublish": "removes a published package from the registry",
            "uninstall": _UNINSTALL,
        },
        _npm_aliases(),
        dry_run=True,
    ),
    "pnpm": _subcommand_rule("pnpm", {"publish": _PUBLISH}, dry_run=True),
    "yarn": _subcommand_rule(
        "yarn", {"publish": _PUBLISH, "npm": {"publish": _PUBLISH}}, dry_run=True
    ),
    "pip": _subcommand_rule("pip", {"uninstall": _UNINSTALL}),
    "pip3": _subcommand_rule("pip3", {"uninstall": _UNINSTALL}),
    "uv": _subcommand_rule(
        "uv",
        {
            "pip": {"uninstall": _UNINSTALL},
            "tool": {"uninstall": _UNINSTALL},
            "publish": "publishes packages to PyPI",
        },
        dry_run=True,
    ),
    "poetry": _subcommand_rule("poetry", {"publish": "publishes a package to PyPI"}, dry_run=True),
    "hatch": _subcommand_rule("hatch", {"publish": "publishes packages to PyPI"}),
    "flit": _subcommand_rule("flit", {"publish": "publishes a package to PyPI"}),
    "pdm": _subcommand_rule("pdm", {"publish": "publishes a package to PyPI"}),
    "lerna": _subcommand_rule("lerna", {"publish": "publishes packages to the registry"}),
    "pipx": _subcommand_rule("pipx", {"uninstall": _UNINSTALL, "uninstall-all": _UNINSTALL}),
    "apt": _subcommand_rule("apt", dict.fromkeys(("remove", "purge", "autoremove"), _UNINSTALL)),
    "apt-get": _subcommand_rule(
        "apt-get", dict.fromkeys(("remove", "purge", "autoremove"), _UNINSTALL)
    ),
    "dnf": _subcommand_rule("dnf", dict.fromkeys(("remove", "erase", "autoremove"), _UNINSTALL)),
    "yum": _subcommand_rule("yum", dict.fromkeys(("remove", "erase", "autoremove"), _UNINSTALL)),
    "brew": _subcommand_rule("brew", dict.fromkeys(("uninstall", "remove", "rm"), _UNINSTALL)),
    "snap": _subcommand_rule("snap", {"remove": _UNINSTALL}),
    "conda": _subcommand_rule("conda", dict.fromkeys(("remove", "uninstall"), _UNINSTALL)),
    "pacman": rule_pacman,
    "docker-compose": rule_compose,
    "aws": _subcommand_rule(
        "aws",
        {
            "s3": {
                "rm": "deletes objects from S3",
                "rb": "deletes an S3 bucket",
            }
        },
        dry_run=True,
    ),
    "gsutil": _subcommand_rule(
        "gsutil",
        {
            "rm": "deletes objects from Cloud Storage",
            "rb": "deletes a Cloud Storage bucket",
        },
    ),
    "gcloud": rule_cloud_delete("gcloud"),
    "az": rule_cloud_delete("az"),
    "crontab": rule_crontab,
    "service": rule_service,
    "twine": _subcommand_rule("twine", {"upload": "uploads packages to PyPI"}),
    "gem": _subcommand_rule(
        "gem",
        {
            "push": "publishes a gem to RubyGems",
            "yank": "removes a published gem version from RubyGems",
        },
    ),
    "cargo": _subcommand_rule(
        "cargo",
        {
            "publish": "publishes a crate to crates.io",
            "yank": "withdraws a published crate version from crates.io",
            "uninstall": _UNINSTALL,
        },
        dry_run=True,
    ),
    "gh": _subcommand_rule(
        "gh",
        {
            "release": {"delete": "deletes a GitHub release"},
            "repo": {"delete": "deletes a GitHub repository"},
        },
    ),
    "docker": _with_compose(
        "docker",
        {
            "system": {"prune": "deletes unused containers, images, networks and build cache"},
            "volume": {
                "rm": "deletes volumes and their data",
                "remove": "deletes volumes and their data",
                "prune": "deletes unused volumes and their data",
            },
        },
    ),
    "podman": _with_compose(
        "podman",
        {
            "system": {
                "prune": "deletes unused containers, images, networks and build cache",
                "reset": "deletes every container, image and volume",
            },
            "volume": {
                "rm": "deletes volumes and their data",
                "remove": "deletes volumes and their data",
                "prune": "deletes unused volumes and their data",
            },
        },
    ),
    "kubectl": _subcommand_rule(
        "kubectl", {"delete": "deletes Kubernetes resources"}, dry_run=True
    ),
    "terraform": rule_terraform,
    "tofu": rule_terraform,
    "helm": _subcommand_rule(
        "helm",
        dict.fromkeys(("uninstall", "delete", "del", "un"), "uninstalls a Helm release"),
        dry_run=True,
    ),
}


_PIP = re.compile(r"(pip)(\d?)(?:\.\d+)?")


def lookup_names(name: str) -> list[str]:
    """Rule names to try for a command name, most specific first (``mkfs.ext4`` → ``mkfs``)."""
    names = [name]
    if name.startswith("mkfs."):
        names.append("mkfs")
    if not name.startswith("pip"):
        return names
    m = _PIP.fullmatch(name)
    if m and name not in ("pip", "pip3"):
        if m.group(2):
            names.append("pip" + m.group(2))
        names.append("pip")
    return names


# -- declarative user rules -----------------------------------------------------------------------


def _as_list(value: Any) -> list[Any]:
    if isinstance(value, list):
        return value
    if isinstance(value, Mapping):
        return list(value.values())
    return [value]


def _subcommand_table(value: Any) -> dict[str, Any]:
    """Normalize ``subcommands``: a list of names or a table name -> true | false | rule table."""
    if isinstance(value, list):
        return dict.fromkeys(value, True)
    out: dict[str, Any] = {}
    for key, sub in value.items():
        if isinstance(key, int) or (isinstance(key, str) and key.isdigit()):
            out[sub] = True  # list part of a mixed Lua table: { "publish", push = {...} }
        else:
            out[key] = sub
    return out


def _flag_hit(word: str, flags: Sequence[str]) -> str | None:
    if word.startswith("--"):
        name = word.split("=", 1)[0]
        for f in flags:
            if f == name or (f.startswith("--") and len(name) >= 4 and f.startswith(name)):
                return f
        return None
    if word.startswith("-") and len(word) > 1:
        if word in flags:
            return word
        letters = word[1:]
        if letters.isalnum():
            for f in flags:
                if len(f) == 2 and f[0] == "-" and f[1] in letters:
                    return f
    return None


def declarative(name: str, table: Mapping[str, Any]) -> Rule:
    """Build a rule from a user table.

    The rule matches when ANY listed condition holds:

    * ``subcommands``: the first operand (first word that is not an option, ``--`` ends options) is
      one of the names. As a table, ``{ push = { flags = { "--force" } } }``, a name maps to
      ``true`` or to a nested rule applied to the words after that subcommand.
    * ``flags``: an option word matches: ``--force`` matches ``--force``, ``--force=x`` and
      GNU-style abbreviations (``--forc``); a one-letter flag ``-f`` also matches inside a
      cluster (``-rf``).
    * ``args``: an operand matches a glob pattern (``"/"``, ``"/etc/*"``), literally or after
      path normalization.

    A word only known at run time counts as a match for ``flags`` when it could be an option, and
    for ``subcommands`` when it is in the subcommand position. ``reason`` replaces the message.
    """
    subs = _subcommand_table(table.get("subcommands") or {})
    sub_rules = {
        k: (declarative(f"{name} {k}", v) if isinstance(v, Mapping) else v) for k, v in subs.items()
    }
    flags = [str(f) for f in _as_list(table.get("flags") or [])]
    patterns = [str(p) for p in _as_list(table.get("args") or [])]
    custom = table.get("reason")

    def said(default: str) -> str:
        return str(custom) if custom else default

    def rule(args: Sequence[Arg]) -> Hit | None:
        short_arg, longs = SUBCOMMAND_VALUE_OPTIONS.get(name.split(" ")[0], ("", {}))
        if sub_rules:
            s = scan(args, short_arg, longs, stop_after=1, abbrev=False)
            if s.operands:
                first = s.operands[0]
                if first.value is None:
                    return Hit(
                        said(
                            f"may run a paused `{name}` subcommand: `{first.text}` is only known "
                            "at run time"
                        ),
                        unknown=True,
                    )
                sub = sub_rules.get(first.value)
                if sub is True:
                    return Hit(said(f"runs `{name} {first.value}`, which is on the pause list"))
                if callable(sub):
                    k = list(args).index(first)
                    hit = sub(args[k + 1 :])
                    if hit:
                        return Hit(said(hit.reason), hit.unknown)
            elif s.unknown is not None:
                return Hit(said(f"may run a paused `{name}` subcommand"), unknown=True)
        if flags or patterns:
            after = False
            for a in args:
                v = a.value
                if v == "--" and not after:
                    after = True
                    continue
                if v is None:
                    if flags and not after and a.may_be_option:
                        return Hit(
                            said(
                                f"may pass a paused `{name}` flag: `{a.text}` is only known at "
                                "run time"
                            ),
                            unknown=True,
                        )
                    continue
                if flags and not after:
                    f = _flag_hit(v, flags)
                    if f:
                        return Hit(said(f"uses `{f}`, which is on the pause list for `{name}`"))
                if patterns and (after or not v.startswith("-") or v == "-"):
                    norm = normalize_path(v) if "/" in v or v in (".", "..") else v
                    for p in patterns:
                        if fnmatch.fnmatchcase(v, p) or fnmatch.fnmatchcase(norm, p):
                            return Hit(
                                said(f"names `{v}`, which is on the pause list for `{name}`")
                            )
        return None

    return rule


def effective_rules(user: Mapping[str, Any] | None) -> dict[str, Any]:
    """Merge user rules over the defaults: name -> Rule | True | False | LUA_FUNCTION."""
    rules: dict[str, Any] = dict(DEFAULT_RULES)
    for name, value in (user or {}).items():
        if isinstance(value, Mapping):
            rules[name] = declarative(name, value)
        elif isinstance(value, bool) or value == LUA_FUNCTION or callable(value):
            rules[name] = value
    return rules


# -- validation -----------------------------------------------------------------------------------


def _is_str_list(value: Any) -> bool:
    items = _as_list(value) if isinstance(value, (list, Mapping)) else None
    return items is not None and all(isinstance(v, str) and v for v in items)


def _validate_table(key: str, table: Mapping[str, Any], problems: list[str]) -> None:
    if not any(table.get(k) for k in ("subcommands", "flags", "args")):
        problems.append(
            f"`{key}` should list subcommands, flags or args (use true to always pause)"
        )
    for k, v in table.items():
        dotted = f"{key}.{k}"
        if k not in RULE_KEYS:
            problems.append(
                f"unknown option `{dotted}` (expected subcommands, flags, args, reason)"
            )
        elif k == "reason":
            if not isinstance(v, str):
                problems.append(f"`{dotted}` should be string")
        elif k == "subcommands":
            if isinstance(v, list):
                if not _is_str_list(v):
                    problems.append(f"`{dotted}` should be list of strings or table")
                continue
            if not isinstance(v, Mapping):
                problems.append(f"`{dotted}` should be list of strings or table")
                continue
            for name, sub in v.items():
                if isinstance(name, int) or (isinstance(name, str) and name.isdigit()):
                    if not isinstance(sub, str) or not sub:
                        problems.append(f"`{dotted}` should be list of strings or table")
                elif isinstance(sub, bool):
                    continue
                elif isinstance(sub, Mapping):
                    _validate_table(f"{dotted}.{name}", sub, problems)
                else:
                    problems.append(f"`{dotted}.{name}` should be boolean or table")
        elif not _is_str_list(v):
            problems.append(f"`{dotted}` should be list of strings")


def validate_rules(rules: Mapping[str, Any]) -> list[str]:
    """Return one problem string per invalid ``pauselist`` entry (empty when all are valid)."""
    problems: list[str] = []
    for name, value in rules.items():
        key = f"pauselist.{name}"
        if not isinstance(name, str) or not name or any(c.isspace() for c in name):
            problems.append(f"`{key}` should be a command name")
            continue
        if "/" in name:
            problems.append(f"`{key}` should be a command name, not a path (rules match basenames)")
            continue
        if isinstance(value, bool) or value == LUA_FUNCTION:
            continue
        if isinstance(value, Mapping):
            _validate_table(key, value, problems)
            continue
        problems.append(f"`{key}` should be boolean, function or table")
    return problems
