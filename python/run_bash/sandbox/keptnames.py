"""The names kept at every level of the writable trees (the files tools look up in the
directory they run in, kept in every directory, not only at the project's top) and the ``PATH``
units kept for a host-read set (``keep_path_units``: what ``pathguard.py`` says keeps each ``PATH``
directory, added to the set), with the directories of the other search paths (``searchvars.py``:
``search_dirs``) kept by the same units. Used by ``hostread.py``; one list of names, each with the tool that
reads it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from run_bash.paths import Tops, expand
from run_bash.sandbox import searchvars
from run_bash.sandbox.pathguard import (
    OPTION,
    Kept,
    PathDir,
    link_targets,
    modules_above,
    outside_dirs,
    path_dirs,
    unit_links,
)
from run_bash.sandbox.pathlinks import hard_links
from run_bash.sandbox.pathnotices import reason
from run_bash.sandbox.places import Places

# Names a tool looks up in the directory it runs in (most of them in every directory above it too,
# the nearest one winning), so such a file is read wherever it lies in the project: `cd web`
# before `cargo`, an editor opening `web/`, a git hook run in a nested repository's work tree.
# Each is kept at every level of the writable trees, not only at the top: the tree walk reports
# the entries of their first components (``treescan.TreeScan.find_named``), an existing one is a
# member like one at the top (read-only inside the run), and one a run makes anywhere stops it
# and goes to the quarantine (``appeared``, ``guard.py``). Only names: no reader of ours judges
# what such a file says. What reads each:
EVERY_LEVEL_MEMBERS = (
    # Neovim runs the exrc files of the directory it is started in ('exrc'); lazy.nvim's
    # `local_spec` runs the nearest `.lazy.lua` from there upward. (Both ask trust for a new or
    # changed file: `:trust`.)
    ".nvim.lua",
    ".nvimrc",
    ".exrc",
    ".lazy.lua",
    # Vim with 'exrc' reads these in the directory it is started in (also as $EDITOR for `git
    # commit`), without asking trust; gVim the gvimrc ones too.
    ".vimrc",
    "_vimrc",
    "_exrc",
    ".gvimrc",
    "_gvimrc",
    # direnv runs the nearest `.envrc` upward from your shell's directory (once allowed).
    ".envrc",
    # rustup's proxies (cargo, rustc, rust-analyzer) run the toolchain the nearest rust-toolchain
    # file upward names, and its `path` (or the legacy file's absolute path) may name any
    # directory: `cargo --version` there, or the editor starting rust-analyzer, would run
    # `<path>/bin/cargo`.
    "rust-toolchain",
    "rust-toolchain.toml",
    # A `.tool-versions` version `path:<dir>` (asdf's file, which mise reads without asking trust;
    # both look upward) puts `<dir>/bin` first on the PATH of asdf's shims and of a shell mise
    # activates: the next `node` typed there runs `<dir>/bin/node`.
    ".tool-versions",
    # Cargo merges every `.cargo/config.toml` (or the older `.cargo/config`) from the working
    # directory up, and runs the program `build.rustc-wrapper` (or `build.rustc`) names for every
    # question it asks rustc: `cargo metadata`, which rust-analyzer runs as the editor starts it
    # (from the directory of the file it opened too), runs `<wrapper> rustc -vV`.
    ".cargo/config.toml",
    ".cargo/config",
    # Yarn (1 and later, also through corepack) runs the JavaScript file that `yarnPath` of the
    # nearest `.yarnrc.yml` upward (or `yarn-path` of `.yarnrc`) names instead of itself, at every
    # command: `yarn --version` there would run a file a run wrote.
    ".yarnrc.yml",
    ".yarnrc",
    # npm (npx, and pnpm) reads the project's `.npmrc` at every command: its `script-shell`,
    # `onload-script` and `node-options` (`--require`) name code it runs, `npx node --version` too.
    # Bun reads the nearest `bunfig.toml` (its `preload` scripts and `[run] shell`).
    ".npmrc",
    "bunfig.toml",
    ".bunfig.toml",
    # Other version control systems' repository settings, whose hooks and helpers run at their
    # every command (a shell prompt's `hg root` or `jj log` too): Mercurial's `.hg/hgrc`,
    # Jujutsu's `.jj/repo/config.toml`, Sapling's `.sl/config`.
    ".hg/hgrc",
    ".jj/repo/config.toml",
    ".sl/config",
    # Git hook managers: the hook installed in the git dir (kept) reads its manager's config at
    # every commit, in the work tree's top (each nested repository's too), and runs the commands
    # it names. pre-commit reads `.pre-commit-config.yaml`; prek also `.pre-commit-config.yml` and
    # `prek.toml`, and in every subdirectory below the one it starts in (workspaces).
    ".pre-commit-config.yaml",
    ".pre-commit-config.yml",
    "prek.toml",
    # lefthook: its config and the local one merged over it, each in any of five formats, with or
    # without a leading dot, or in `.config/` (its scripts directories: ``EVERY_LEVEL_DIRS``).
    *(
        f"{where}{dot}lefthook{local}.{ext}"
        for where in ("", ".config/")
        for dot in (("",) if where else ("", "."))
        for local in ("", "-local")
        for ext in ("yml", "yaml", "json", "jsonc", "toml")
    ),
    # overcommit's `.overcommit.yml` (its plugins directory: ``EVERY_LEVEL_DIRS``).
    ".overcommit.yml",
    # hk reads the first of these from the working directory upward.
    "hk.local.pkl",
    ".config/hk.local.pkl",
    "hk.pkl",
    ".config/hk.pkl",
    # rusty-hook and CaptainHook read these at every hook.
    ".rusty-hook.toml",
    "rusty-hook.toml",
    "captainhook.json",
)
# Directories of code a tool runs, kept read-only whole at every level the same way (what they
# hold is never copied, so their size does not matter), with why:
EVERY_LEVEL_DIRS = {
    # Where `yarn set version` puts the release `yarnPath` names, and where `yarn plugin import`
    # puts the plugins `.yarnrc.yml` loads.
    ".yarn/releases": "yarn runs the code in .yarn/releases at every command",
    ".yarn/plugins": "yarn runs the code in .yarn/plugins at every command",
    # lefthook's `scripts` (its `source_dir` and `source_dir_local`), run by the git hook.
    ".lefthook": "lefthook runs the scripts in .lefthook at every git hook",
    ".lefthook-local": "lefthook runs the scripts in .lefthook-local at every git hook",
    # overcommit's repository hooks (its `plugin_directory`), Ruby it loads at every git hook.
    ".git-hooks": "overcommit loads the hooks in .git-hooks at every git hook",
}
# Files at the top of a work tree that are host-read: git reads .gitmodules for submodule URLs and
# paths; the names kept at every level; other agents' project settings that run commands as the
# user once the project is trusted, without asking again when they change: Claude Code's MCP
# servers, Cursor's MCP servers and hooks, opencode's MCP servers and plugins. (Their directories:
# ``AGENT_DIRS``.) CodeCompanion's ``per_project_config`` files are added to these.
WORK_TREE_MEMBERS = (
    ".gitmodules",
    *EVERY_LEVEL_MEMBERS,
    ".mcp.json",
    ".cursor/mcp.json",
    ".cursor/hooks.json",
    "opencode.json",
    "opencode.jsonc",
)
# Directories of other agents' project settings, kept read-only whole like a hooks holder (what
# their hooks run usually lies beside them; never copied, so their size does not matter): Claude
# Code runs the hooks and status line of `.claude/settings*.json`, Gemini CLI the MCP servers and
# tool discovery command of `.gemini/settings.json` and loads `.gemini/.env`. CodeCompanion starts
# both in the project over ACP.
AGENT_DIRS = (".claude", ".gemini")
# Directories of code a tool runs at every command, kept read-only whole the same way.
TOOL_DIRS = tuple(EVERY_LEVEL_DIRS)


def _first(name: str) -> str:
    return name.split("/", 1)[0]


# What an entry of each first component keeps in its directory: (the name, kept whole).
_BY_FIRST: dict[str, list[tuple[str, bool]]] = {}
for _n in EVERY_LEVEL_MEMBERS:
    _BY_FIRST.setdefault(_first(_n), []).append((_n, False))
for _n in EVERY_LEVEL_DIRS:
    _BY_FIRST.setdefault(_first(_n), []).append((_n, True))
# The names the tree walk reports (``treescan.TreeScan``), besides the relative PATH entries'.
EVERY_LEVEL_FIRST = frozenset(_BY_FIRST)


def kept_by_name(directory: str, name: str) -> list[tuple[str, bool]]:
    """What an entry ``name`` of ``directory`` makes kept there, as at the project's top:
    ``(path, kept whole)`` for each name of ``EVERY_LEVEL_MEMBERS`` and ``EVERY_LEVEL_DIRS``
    that begins with it (``.cargo`` keeps ``.cargo/config.toml`` and ``.cargo/config``)."""
    return [(os.path.join(directory, n), whole) for n, whole in _BY_FIRST.get(name, ())]


def _taken_below(entry: str) -> str | None:
    """A relative ``PATH`` entry as the name it keeps in every directory (a leading ``../`` taken
    off: from a subdirectory, ``../bin`` is the ``bin`` beside it); None for an absolute, ``~``
    or ``$`` one, and for ``.``, ``..`` and the empty one (every directory: ``:checkhealth`` warns
    of them)."""
    if not entry or os.path.isabs(entry) or entry.startswith(("~", "$")):
        return None
    rel = os.path.normpath(entry)
    while rel.startswith("../"):
        rel = rel[3:]
    return None if rel in (".", "..") else rel


def relative_entries(path_var: str) -> list[str]:
    """The relative entries of ``PATH`` that a shell resolves in whatever directory it is in, as
    names kept at every level (``_taken_below``): ``node_modules/.bin``, ``bin``, ``.venv/bin``."""
    taken = (_taken_below(e) for e in path_var.split(os.pathsep))
    return list(dict.fromkeys(t for t in taken if t is not None))


def below_entries(path_var: str) -> str:
    """``path_var`` with each entry that has a leading ``../`` (``../bin``) followed by the name
    it is from any subdirectory (``bin``): at a project root too (``cd web``, then ``../bin`` is
    the root's ``bin``)."""
    out: list[str] = []
    for e in path_var.split(os.pathsep):
        out.append(e)
        below = _taken_below(e)
        if below is not None and below != os.path.normpath(e):
            out.append(below)
    return os.pathsep.join(out)


def search_relative(env: Mapping[str, str]) -> list[str]:
    """The relative entries of ``PATH`` and of the other search paths (``searchvars.py``: their
    directories and files), as names kept at every level (``_taken_below``)."""
    names = relative_entries(env.get("PATH", ""))
    for _var, value in searchvars.dir_values(env):
        names += relative_entries(value)
    for e in searchvars.file_entries(env):
        below = _taken_below(e.path)
        if below is not None:
            names.append(below)
    return list(dict.fromkeys(names))


def _as_search(pd: PathDir, var: searchvars.Var) -> PathDir:
    # Nothing is found "later" by name: only what the variable's tool loads counts.
    return replace(pd, later=(), var=var.name, reads=var.reads)


def search_dirs(
    env: Mapping[str, str],
    writable: Sequence[str],
    roots: Sequence[str],
    exempt: Sequence[str],
    realpath: Callable[[str], str] = os.path.realpath,
) -> tuple[list[PathDir], list[tuple[searchvars.Var, str]]]:
    """The directories of the other search paths (``searchvars.dir_values``) inside a writable
    grant, each made by ``pathguard.path_dirs`` as a ``PATH`` entry is (its unit kept read-only by
    ``keep_path_units``), and the entries that hold a project root (an empty one, ``.``, the
    project or a directory above it), which cannot be kept: each with its variable."""
    pds: list[PathDir] = []
    holding: list[tuple[searchvars.Var, str]] = []
    for var, value in searchvars.dir_values(env):
        for pd in path_dirs(below_entries(value), writable, roots, exempt, realpath):
            if pd.sealed:
                pds.append(_as_search(pd, var))
            else:
                holding.append((var, pd.path))
    return pds, holding


def nested_search_dirs(
    env: Mapping[str, str],
    writable: Sequence[str],
    roots: Sequence[str],
    bases: Sequence[str],
    path_free: Sequence[str],
    home: str,
    realpath: Callable[[str], str] = os.path.realpath,
) -> list[PathDir]:
    """``nested_path_dirs`` for ``PATH`` and each other search path: the directories their
    relative entries name in ``bases``."""
    out = nested_path_dirs(
        env.get("PATH", ""), writable, roots, bases, path_free, env, home, realpath
    )
    for var, value in searchvars.dir_values(env):
        pds = nested_path_dirs(value, writable, roots, bases, path_free, env, home, realpath)
        out += [_as_search(pd, var) for pd in pds if pd.sealed]
    return out


def search_files(
    env: Mapping[str, str], bases: Sequence[str], writable: Places, exempt: Sequence[str]
) -> list[tuple[str, str]]:
    """The files the search-path variables name (``PYTHONSTARTUP``, ``LD_PRELOAD``'s paths) that
    lie in a writable grant, each with why it is kept: an absolute one as it is, a relative one in
    each of ``bases`` (the project roots, and the directories below that hold its first
    component)."""
    free = Places(exempt)
    out: list[tuple[str, str]] = []
    for e in searchvars.file_entries(env):
        if os.path.isabs(e.path):
            paths = [os.path.normpath(e.path)]
        else:
            below = _taken_below(e.path)
            names = {os.path.normpath(e.path), *([below] if below is not None else [])}
            paths = [os.path.normpath(os.path.join(b, n)) for b in bases for n in names]
        for p in paths:
            if p in writable and not (exempt and p in free):
                out.append(
                    (
                        p,
                        f"your {e.var.name} names it ({e.var.reads}), so what a run writes there "
                        f"would run outside the sandbox; `{OPTION}` lets runs write it",
                    )
                )
    return out


def _exempt(
    path_free: Sequence[str], bases: Sequence[str], env: Mapping[str, str], home: str
) -> list[str]:
    """``sandbox.rules.path_writable`` as paths: relative ones in each of ``bases``."""
    return [
        p
        for raw in path_free
        for base in ([None] if raw.startswith(("/", "~", "$")) else bases)
        if (p := expand(raw, env=env, home=home, base=base)) is not None
    ]


def nested_path_dirs(
    path_var: str,
    writable: Sequence[str],
    roots: Sequence[str],
    bases: Sequence[str],
    path_free: Sequence[str],
    env: Mapping[str, str],
    home: str,
    realpath: Callable[[str], str] = os.path.realpath,
) -> list[PathDir]:
    """The PATH directories the relative entries (``relative_entries``) name in ``bases``,
    directories of the writable trees below the project roots: each made by
    ``pathguard.path_dirs`` as it makes those of the roots (the same units, the same
    ``path_writable`` exemptions, taken in each base)."""
    rel = relative_entries(path_var)
    bases = [b for b in dict.fromkeys(bases) if b not in roots]
    if not rel or not bases:
        return []
    wanted = {os.path.normpath(os.path.join(b, e)) for b in bases for e in rel}
    # The same PATH, its relative entries as they are taken below the top (no `.` or empty
    # entry, which would name every base itself).
    entries: list[str] = []
    for e in path_var.split(os.pathsep):
        below = _taken_below(e)
        if below is not None:
            entries.append(below)
        elif os.path.isabs(e) or e.startswith(("~", "$")):
            entries.append(e)
    every = [*roots, *bases]
    exempt = _exempt(path_free, every, env, home)
    pds = path_dirs(os.pathsep.join(entries), writable, every, exempt, realpath)
    return [pd for pd in pds if pd.path in wanted]


def _take(
    kept: Kept, members: list[str], sealed: list[str], reasons: dict[str, str]
) -> tuple[str, ...]:
    """Add what ``kept`` keeps to the set: its directories and the files outside them kept whole,
    its links and names as members, each with its reason; the programs it runs."""
    in_units = Tops(kept.dirs)
    sealed += [*kept.dirs, *(f for f in kept.files if f not in in_units)]
    members += [*kept.links, *kept.names]
    for p, said, _program in kept.why:
        reasons.setdefault(p, said)
    return kept.files


def keep_path_units(
    pds: Sequence[PathDir],
    cwd: str,
    roots: Sequence[str],
    writable_places: Places,
    real: Callable[[str], str],
    exempt: Sequence[str],
    members: list[str],
    sealed: list[str],
    reasons: dict[str, str],
    path_var: str = "",
) -> list[PathDir]:
    """What keeps each PATH directory: its unit read-only (or, not there yet, a member that may
    not appear), and what the programs its links run load with them (their code units,
    ``link_targets``), what links in those units lead to (``unit_links``), and the other names
    (hard links) in a writable grant of its programs (``hard_links``; with ``path_var``, also of
    those of the PATH directories outside every grant). The directories, each with what is kept
    for its links (``PathDir.kept``)."""
    pds = list(pds)
    ends: list[str] = []  # the programs PATH links run
    units: list[tuple[str, str]] = []  # each kept unit, and the PATH entry it is kept for
    for i, pd in enumerate(pds):
        if not pd.sealed:
            continue
        why = reason(pd, cwd)
        if pd.outside:
            why = f"{pd.path} is on your PATH and a program in it leads there"
        elif os.path.islink(pd.unit):
            members.append(pd.unit)  # the link itself must keep leading where it did
            reasons[pd.unit] = why
        unit = real(pd.unit)
        if os.path.isdir(unit):
            if unit in writable_places and not pd.outside:
                sealed.append(unit)
                reasons[unit] = why
                units.append((unit, pd.path))
                if os.path.basename(unit) == "node_modules":
                    # Its packages require what the node_modules above it hold too.
                    above, absent = modules_above(unit, writable_places)
                    sealed += above
                    members += absent
                    units += [(d, pd.path) for d in above]
                    for p in (*above, *absent):
                        reasons.setdefault(p, why)
            # What its links run, and what that loads with it (its code unit).
            kept = link_targets(pd, writable_places, roots=roots)
            ends += _take(kept, members, sealed, reasons)
            units += [(p, program) for p, _said, program in kept.why if p in kept.dirs]
            if kept.why:
                pds[i] = replace(pd, kept=kept.why)
            for p in (*kept.files, *kept.links):
                reasons.setdefault(p, why)
        else:  # not there yet, or not a directory: it must stay what it is
            members.append(pd.unit)
            reasons[pd.unit] = why
    # What links in the kept units lead to outside them (a workspace package).
    ends += _take(unit_links(units, writable_places, roots, exempt), members, sealed, reasons)
    # Another name (a hard link) in a writable grant of a program on PATH is kept too.
    census = [pd.path for pd in pds if pd.sealed and not pd.outside]
    if path_var:
        census += outside_dirs(path_var, writable_places, exempt)
    kept_tops = Tops(sealed)
    for hl in hard_links(census, ends, writable_places):
        if hl.name not in kept_tops:
            sealed.append(hl.name)
            reasons[hl.name] = (
                f"it is another name (a hard link) of {hl.program}, which is on your PATH: "
                "a write through it changes that program"
            )
    return pds
