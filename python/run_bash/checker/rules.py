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
    if force and not lease:
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


def _git_clean(args: Sequence[Arg]) -> Hit | None:
    s = scan(args, "e", _CLEAN_LONGS)
    if s.has("n", "dry-run"):
        return None
    if s.has("f", "force") and s.has("d"):
        return Hit("deletes untracked files and directories")
    if s.unknown is not None:
        return _unknown("delete untracked files", s.unknown)
    return None


def _git_checkout(args: Sequence[Arg]) -> Hit | None:
    s = scan(args, "bBt", _CHECKOUT_LONGS)
    if s.dashdash:
        return Hit("overwrites uncommitted changes to the named files")
    for op in s.operands:
        if op.value is not None and normalize_path(op.value) == ".":
            return Hit("discards every uncommitted change under the current directory")
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
    if sub.value is None and (sub.split or not sub.prefix):
        return _unknown("delete stashed changes", sub)
    return None


_GIT_SUBRULES: dict[str, Rule] = {
    "push": _git_push,
    "reset": _git_reset,
    "clean": _git_clean,
    "checkout": _git_checkout,
    "stash": _git_stash,
}


def rule_git(args: Sequence[Arg]) -> Hit | None:
    """git reset --hard, clean -fd, push --force/--delete/+ref, checkout ./--, stash drop."""
    split = git_split(args)
    if isinstance(split, Arg):
        return _unknown("run a destructive git subcommand", split)
    _, k = split
    if k >= len(args):
        return None
    sub = args[k]
    if sub.value is None:
        return _unknown("run a destructive git subcommand", sub)
    rule = _GIT_SUBRULES.get(sub.value)
    return rule(args[k + 1 :]) if rule else None


# -- always-pause commands ------------------------------------------------------------------------


def _always(reason: str) -> Rule:
    def rule(args: Sequence[Arg]) -> Hit | None:
        return Hit(reason)

    rule.__doc__ = f"Always pause: {reason}."
    return rule


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


def rule_find(args: Sequence[Arg]) -> Hit | None:
    """`find … -delete`: deletes whatever matches, like `rm -r` (its -exec commands are checked
    as commands of their own)."""
    inner = False  # inside `-exec … ;`: the inner command's words, not find's expression
    for a in args:
        if inner:
            inner = a.value not in (";", "+")
        elif a.value in ("-exec", "-execdir", "-ok", "-okdir"):
            inner = True
        elif a.value == "-delete":
            return Hit("deletes every file and directory it matches")
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


def _subcommand_rule(
    name: str,
    reasons: Mapping[str, str],
    aliases: Mapping[str, str] | None = None,
    *,
    dry_run: bool = False,
) -> Rule:
    aliases = aliases or {}
    what = f"run a paused `{name}` subcommand"

    def rule(args: Sequence[Arg]) -> Hit | None:
        s = subcommand_scan(name, args)
        if not s.operands:
            return _unknown(what, s.unknown) if s.unknown is not None else None
        sub = s.operands[0]
        if sub.value is None:
            return _unknown(what, sub)
        key = aliases.get(sub.value, sub.value)
        if key in reasons:
            if dry_run and any(a.value in ("--dry-run", "--dry-run=true") for a in args):
                return None
            return Hit(reasons[key])
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

DEFAULT_RULES: dict[str, Rule] = {
    "rm": rule_rm,
    "git": rule_git,
    "dd": _always("writes raw data to files or devices"),
    "mkfs": _always("creates a filesystem, erasing the device"),
    "shutdown": _always("shuts the machine down"),
    "reboot": _always("reboots the machine"),
    "poweroff": _always("powers the machine off"),
    "halt": _always("halts the machine"),
    "mount": _always("changes mounted filesystems"),
    "umount": _always("changes mounted filesystems"),
    "fdisk": _always("edits disk partitions"),
    "parted": _always("edits disk partitions"),
    "iptables": _always("changes firewall rules"),
    "ip6tables": _always("changes firewall rules"),
    "kill": _always("sends a signal to processes"),
    "killall": _always("sends a signal to processes by name"),
    "pkill": _always("sends a signal to processes by name"),
    "find": rule_find,
    "chmod": _owner_rule("permissions"),
    "chown": _owner_rule("ownership"),
    "systemctl": _subcommand_rule("systemctl", _SYSTEMCTL),
    "npm": _subcommand_rule(
        "npm",
        {
            "publish": "publishes a package to the registry",
            "unpublish": "removes a published package from the registry",
            "uninstall": _UNINSTALL,
        },
        _npm_aliases(),
        dry_run=True,
    ),
    "pip": _subcommand_rule("pip", {"uninstall": _UNINSTALL}),
    "pip3": _subcommand_rule("pip3", {"uninstall": _UNINSTALL}),
    "cargo": _subcommand_rule("cargo", {"publish": "publishes a crate to crates.io"}, dry_run=True),
}

# Reference text for each default rule (help file and tests).
DEFAULT_SUMMARY: dict[str, str] = {
    "rm": "with -r, -R or --recursive",
    "git": "reset --hard; clean -f -d; push -f/--force, --delete/-d, --mirror, --prune, "
    "+refspec or :ref (not with --force-with-lease); checkout . or --; stash drop/clear",
    "systemctl": "stop, restart, disable, mask, kill, isolate, reboot, poweroff, halt and variants",
    "npm": "publish, unpublish, uninstall (un, r, rm, remove, unlink)",
    "pip": "uninstall (also python -m pip)",
    "pip3": "uninstall",
    "cargo": "publish",
    "chmod": "on /, a system directory or a path inside one",
    "chown": "on /, a system directory or a path inside one",
}


def lookup_names(name: str) -> list[str]:
    """Rule names to try for a command name, most specific first (``mkfs.ext4`` → ``mkfs``)."""
    names = [name]
    if name.startswith("mkfs."):
        names.append("mkfs")
    m = re.fullmatch(r"(pip)(\d?)(?:\.\d+)?", name)
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
