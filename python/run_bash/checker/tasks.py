"""Task files a command line writes and then runs: Makefiles, justfiles, Taskfiles and
``package.json`` scripts. Pure.

A task runner reads a file; when this command line wrote that file, the shell code in it is
analysed like any other code (a recipe, a ``$(shell …)``, a task's ``cmds``, an npm script and its
``pre``/``post`` and install lifecycle scripts). A file written with content only known at run time
pauses. Files the line does not write are not followed.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Callable

from run_bash.checker.languages import JAVASCRIPT, PHP, PYTHON, RUBY, judge
from run_bash.checker.model import NO_INPUT, STDIN_FILES, Ctx, Walker
from run_bash.checker.options import opts, read
from run_bash.checker.runners import chdir, dynamic_options
from run_bash.checker.words import Arg, normalize_path, wordlist

_MAKE = opts(
    "-fCEIoW: -jlO:: -bBdeiknpqrRsStvw --file= --makefile= --eval= --directory= "
    "--include-dir= --old-file= --assume-old= --what-if= --new-file= --assume-new= "
    "--jobserver-style= --jobs[=] --load-average[=] --output-sync[=] --debug[=] --always-make "
    "--environment-overrides --ignore-errors --keep-going --just-print --dry-run --recon "
    "--print-data-base --question --no-builtin-rules --no-builtin-variables --silent --quiet "
    "--no-keep-going --stop --touch --trace --version --print-directory --no-print-directory "
    "--warn-undefined-variables --check-symlink-times --no-silent"
)


def _in(directory: str, path: str) -> str:
    return path if path.startswith(("/", "~")) or directory == "." else f"{directory}/{path}"


def _file_text(ana: Walker, word: Arg, ctx: Ctx, what: str, directory: str = ".") -> str | None:
    """The text of a file a runner reads, when this line wrote it; "" when it did not.

    None after recording an unknown (content or name only known at run time).
    """
    if word.proc:
        body = ana.printed_source(word.text[2:-1])
        if body is None or body is NO_INPUT:
            ana.unknown(f"runs {what} from a process substitution", ctx.text)
            return None
        return body
    if word.value in STDIN_FILES:
        body = ana.input_of(ctx)
        if body is None or body is NO_INPUT:
            ana.unknown(f"runs {what} read from its input, only known at run time", ctx.text)
            return None
        return body
    if word.value is None:
        ana.unknown(f"runs {what} only known at run time (`{word.text}`)", ctx.text)
        return None
    path = _in(directory, word.value)
    content = ana.written_file(path, follow=True)
    if content is None:
        ana.unknown(f"runs `{path}`, which this command writes at run time", ctx.text)
        return None
    return content if isinstance(content, str) else ""


def _default_file(ana: Walker, ctx: Ctx, names: tuple[str, ...], directory: str) -> str | None:
    """The first of ``names`` in ``directory`` this line writes: its text, "" or None."""
    for name in names:
        path = _in(directory, name)
        content = ana.written_file(path if "/" in path else "./" + path, follow=True)
        if content is None:
            ana.unknown(f"runs `{path}`, which this command writes at run time", ctx.text)
            return None
        if isinstance(content, str):
            return content
    return ""


def _run_all(ana: Walker, codes: list[str], ctx: Ctx, directory: str) -> None:
    sub = ctx.sub(ctx.text)
    chdir(sub, Arg.lit(directory) if directory != "." else None)
    for code in codes:
        ana.source(code, ctx.depth + 1, ctx.scope, ctx=sub)


# -- make -----------------------------------------------------------------------------------------


def make(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``make [-C DIR] [-f FILE] [--eval TEXT]``: the recipes of a makefile this line writes."""
    got = read(args, _MAKE)
    if got.unknown is not None and not (
        len(got.unknown.prefix) > 1 and got.unknown.prefix[1] in "jlO"
    ):
        dynamic_options(ana, "make", ctx)
        return None
    for word in got.operands:
        # `make SHELL=PROGRAM` runs every recipe with PROGRAM, whatever the makefile says.
        name = (word.value or word.prefix).partition("=")[0].rstrip(":+?!")
        if name == "SHELL" and "=" in (word.value or word.prefix):
            if word.value is None:
                ana.unknown(
                    f"runs recipes with a shell only known at run time (`{word.text}`)", ctx.text
                )
            else:
                ana.source(word.value.partition("=")[2], ctx.depth + 1, ctx.scope, ctx=ctx)
    directory = "."
    for word in got.values("C", "directory"):
        if word.value is None:
            ana.unknown(
                f"runs make in a directory only known at run time (`{word.text}`)", ctx.text
            )
            return None
        directory = normalize_path(_in(directory, word.value))
    texts: list[str] = []
    for word in got.values("E", "eval"):
        if word.value is None:
            ana.unknown("evaluates makefile text only known at run time", ctx.text)
            return None
        texts.append(word.value)
    files = got.values("f", "file", "makefile")
    for word in files:
        text = _file_text(ana, word, ctx, "a makefile", directory)
        if text is None:
            return None
        texts.append(text)
    if not files:
        text = _default_file(ana, ctx, ("GNUmakefile", "makefile", "Makefile"), directory)
        if text is None:
            return None
        texts.append(text)
    _run_all(ana, [code for text in texts for code in makefile_code(text)], ctx, directory)
    return None


_MAKE_INLINE = re.compile(r"^[^\t#=:;]+::?(?!=)[^=;]*;(.*)$")
_MAKE_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_.-]*)\s*(?:::=|:=|\?=|\+=|=|!=)\s*(.*)$")
_MAKE_REF = re.compile(r"\$[({]([A-Za-z_][A-Za-z0-9_.-]*)[)}]")
_MAKE_AUTO = re.compile(r"\$(?:[@<^?*+|%]|[({][@<^?*+%][DF]?[)}])")
_MAKE_SHELL = re.compile(r"\$[({]shell\s")


def makefile_code(text: str) -> list[str]:
    """The shell code in a makefile: recipe lines, ``$(shell …)`` and ``!=`` assignments."""
    variables = {"RM": "rm -f", "MAKE": "make", "SHELL": "/bin/sh"}
    out: list[str] = []
    recipe: list[str] = []

    def flush() -> None:
        if recipe:
            out.append(_make_expand("\n".join(recipe), variables))
            recipe.clear()

    for raw in text.replace("\\\n", "\n\0").split("\n"):
        continued = raw.startswith("\0")
        line = raw.lstrip("\0")
        if raw.startswith("\t") or (continued and recipe):
            body = line[1:] if line.startswith("\t") else line
            if continued and recipe:
                recipe[-1] += " " + body
            else:
                recipe.append(body.lstrip("@-+ \t"))
            continue
        flush()
        inline = _MAKE_INLINE.match(line)
        if inline:
            out.append(_make_expand(inline.group(1), variables))
        m = _MAKE_ASSIGN.match(line)
        if m:
            variables.setdefault(m.group(1), m.group(2))
            if line.split("=", 1)[0].rstrip().endswith("!"):
                out.append(_make_expand(m.group(2), variables))
        for sm in _MAKE_SHELL.finditer(line):
            out.append(_make_expand(_balanced(line, sm.end()), variables))
    flush()
    return out


def _balanced(line: str, k: int) -> str:
    depth, start = 1, k
    while k < len(line) and depth:
        depth += 1 if line[k] in "({" else -1 if line[k] in ")}" else 0
        k += 1
    return line[start : k - 1]


def _make_expand(code: str, variables: dict[str, str]) -> str:
    for _ in range(4):
        code = _MAKE_REF.sub(lambda m: variables.get(m.group(1), m.group(0)), code)
    return _MAKE_AUTO.sub("target", code).replace("$$", "$")


# -- just, task -----------------------------------------------------------------------------------

_JUST = opts(
    "-fdg: --justfile= --working-directory= --set= --shell= --shell-arg= --dotenv-filename= "
    "--dotenv-path= --color= --dump-format= --chooser= --command= -c: -E: -l -n -q -v --list "
    "--dry-run --quiet --verbose --evaluate --summary --dump --choose --show= -s:"
)
_JUST_RECIPE = re.compile(r"^@?[A-Za-z_][\w-]*(?:\s+[^:=]*)?:(?!=)")


def just(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``just [RECIPE…]``: every recipe and backtick of a justfile this line writes."""
    got = read(args, _JUST)
    if got.unknown is not None:
        dynamic_options(ana, "just", ctx)
        return None
    if got.has("l", "list", "n", "dry-run", "summary", "dump", "evaluate", "show", "s"):
        return None
    directory = "."
    for word in got.values("d", "working-directory"):
        directory = word.value or "."
    for word in got.values("c", "command"):
        ana.code(word, ctx, "shell code")
    files = got.values("f", "justfile")
    text = (
        _file_text(ana, files[-1], ctx, "a justfile")
        if files
        else _default_file(ana, ctx, ("justfile", "Justfile", ".justfile"), directory)
    )
    if not text:
        return None
    codes: list[str] = []
    for line in text.splitlines():
        body = line.strip()
        if line[:1] in " \t" and body and not body.startswith("#"):
            codes.append(body.lstrip("@-"))
        elif not _JUST_RECIPE.match(line):
            codes.extend(re.findall(r"`([^`]*)`", line))
    _run_all(ana, [re.sub(r"\{\{[^}]*\}\}", "x", c) for c in codes], ctx, directory)
    return None


_TASK = opts("-dtCo: -fsvxlpaiyn --dir= --taskfile= --concurrency= --output= --list --list-all")


def task(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``task [TASK…]`` (go-task): the ``cmds`` of a Taskfile this line writes."""
    got = read(args, _TASK)
    if got.unknown is not None:
        dynamic_options(ana, "task", ctx)
        return None
    if got.has("l", "a", "list", "list-all", "n", "dry", "i", "init"):
        return None
    directory = "."
    for word in got.values("d", "dir"):
        directory = word.value or "."
    files = got.values("t", "taskfile")
    names = ("Taskfile.yml", "taskfile.yml", "Taskfile.yaml", "taskfile.yaml", "Taskfile.dist.yml")
    text = (
        _file_text(ana, files[-1], ctx, "a Taskfile")
        if files
        else _default_file(ana, ctx, names, directory)
    )
    if text:
        _run_all(ana, yaml_commands(text), ctx, directory)
    return None


_YAML_CMD = re.compile(r"^(\s*)(?:-\s+)?(?:cmd|cmds|sh)?\s*:?\s*(.*)$")


def yaml_commands(text: str) -> list[str]:
    """The shell commands of a Taskfile: items under ``cmds:``, ``cmd:`` and ``sh:`` values.

    A light reading of YAML: block scalars (``|``, ``>``) are taken whole; a command it cannot
    place is analysed anyway (finding code that would not run is the safe mistake).
    """
    out: list[str] = []
    lines = text.splitlines()
    in_cmds = -1
    k = 0
    while k < len(lines):
        line = lines[k]
        k += 1
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if not stripped or stripped.startswith("#"):
            continue
        if in_cmds >= 0 and indent <= in_cmds and not stripped.startswith("-"):
            in_cmds = -1
        key, sep, value = stripped.lstrip("- ").partition(":")
        if sep and key.strip() in ("cmds", "deps") and not value.strip():
            in_cmds = indent if key.strip() == "cmds" else -1
            continue
        if sep and key.strip() in ("cmd", "sh"):
            command = value.strip()
        elif in_cmds >= 0 and stripped.startswith("- ") and not (sep and key.strip() == "task"):
            command = stripped[2:].strip()
        else:
            continue
        if command in ("|", ">", "|-", ">-"):
            block: list[str] = []
            while k < len(lines) and (not lines[k].strip() or _indent(lines[k]) > indent):
                block.append(lines[k].strip())
                k += 1
            command = "\n".join(block)
        out.append(_unquote(command))
    return [re.sub(r"\{\{[^}]*\}\}", "x", c) for c in out]


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1].replace("''", "'") if text[0] == "'" else json.loads(text)
    return text


# -- package.json ---------------------------------------------------------------------------------

# npm runs these scripts around `install` (and `ci`, `pack`, `publish`) of the package itself.
_LIFECYCLE = {
    "install": (
        "preinstall",
        "install",
        "postinstall",
        "prepublish",
        "preprepare",
        "prepare",
        "postprepare",
    ),
    "pack": ("prepack", "prepare", "postpack"),
    "publish": ("prepublishOnly", "prepack", "prepare", "postpack", "publish", "postpublish"),
}
_LIFECYCLE["ci"] = _LIFECYCLE["i"] = _LIFECYCLE["add"] = _LIFECYCLE["install"]
_SCRIPT_ALIASES = {"t": "test", "tst": "test", "run-script": "run", "rum": "run", "urn": "run"}
_IMPLICIT = ("test", "start", "stop", "restart")


def package_scripts(tool: str, sub: str) -> Callable[[Walker, list[Arg], Ctx], list[Arg] | None]:
    """``npm|pnpm|yarn|bun run NAME`` (also ``test``, ``start``, ``install``…): the scripts of a
    ``package.json`` this line writes. The runner gets the words after the subcommand."""
    sub = _SCRIPT_ALIASES.get(sub, sub)

    def runner(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
        content = ana.written_file("./package.json", follow=True)
        if content is None:
            ana.unknown("runs scripts of `package.json`, which this command writes", ctx.text)
            return None
        if not isinstance(content, str):
            return None
        try:
            scripts = json.loads(content).get("scripts") or {}
        except (ValueError, AttributeError):
            ana.unknown("runs scripts of a `package.json` it cannot read", ctx.text)
            return None
        if not isinstance(scripts, dict):
            return None
        if sub == "run":
            names = [a for a in args if (a.value or "-")[0] != "-"]
            if not names:
                return None
            if names[0].value is None:
                ana.unknown(f"runs a script only known at run time (`{names[0].text}`)", ctx.text)
                return None
            wanted: tuple[str, ...] = (names[0].value,)
        elif sub in _IMPLICIT:
            wanted = (sub,)
        else:
            wanted = _LIFECYCLE.get(sub, ())
        for name in wanted:
            for key in (f"pre{name}", name, f"post{name}"):
                code = scripts.get(key)
                if isinstance(code, str):
                    ana.source(code, ctx.depth + 1, ctx.scope, ctx=ctx)
        return None

    return runner


# -- project files --------------------------------------------------------------------------------

# Commands that execute files of the project they run in (sources, configuration, task and build
# files, start-up files), and the names of those files. A file this line writes under such a name
# is judged as code when it is a language the checker reads (its content known), and otherwise
# makes the command's behaviour unknown, unless the command's own runner read it (a Makefile, a
# package.json). A line that writes files the checker cannot name makes all of them unknown.
_JS = "*.js *.mjs *.cjs *.jsx *.ts *.mts *.cts *.tsx"
_PY_TOOLS = "*.py pyproject.toml setup.cfg"
_PROJECT_FILES = {
    "python pypy ipython ipython3": "*.py",
    "pytest py.test nox tox invoke inv": f"{_PY_TOOLS} pytest.ini tox.ini",
    "pip pip3 uv poetry hatch pdm flit pipx pixi poe": f"{_PY_TOOLS} pixi.toml poe_tasks.*",
    "node nodejs tsx ts-node deno bun npx bunx": f"{_JS} deno.json deno.jsonc package.json",
    "npm pnpm yarn corepack lerna nx turbo": f"{_JS} package.json .npmrc .yarnrc .yarnrc.yml",
    "rush rushx": f"{_JS} package.json rush.json .npmrc common/config/rush/* "
    "common/autoinstallers/* common/scripts/*",
    "jest vitest mocha vite webpack rollup parcel esbuild next nuxt astro eslint tsc": _JS,
    "playwright cypress karma ava": _JS,
    "make gmake bmake remake": "Makefile makefile GNUmakefile BSDmakefile *.mk *.mak *.sh",
    "just": "justfile Justfile .justfile *.just *.sh",
    "task": "Taskfile* *.sh",
    "cargo": "build.rs Cargo.toml",
    "mise": "mise.toml .mise.toml mise.*.toml .mise.*.toml .tool-versions *.sh "
    ".mise/* mise/* mise-tasks/* .config/mise/*",
    "rake rails bundle": "Rakefile rakefile *.rake *.rb Gemfile *.gemspec",
    "doit": "dodo.py *.py",
    "fab": "fabfile.py fabfile/* *.py",
    "gulp grunt jake": f"{_JS} gulpfile.* Gruntfile.* Jakefile*",
    "gradle gradlew mvn mvnw": "*.gradle *.gradle.kts gradle.properties pom.xml .mvn/*",
    "composer": "composer.json *.php",
    "zsh": ".zshenv .zshrc .zprofile .zlogin .zlogout",
}
PROJECT_FILES = {name: tuple(v.split()) for k, v in _PROJECT_FILES.items() for name in k.split()}
# Task files: code written against the task runner's own API (`sh "…"` in a Rakefile,
# `session.run(…)` in a noxfile, `c.run(…)` in tasks.py), which the checker does not read.
_TASK_FILES = tuple(
    wordlist(
        "Rakefile rakefile *.rake noxfile.py tasks.py fabfile.py dodo.py gulpfile.* Gruntfile.* "
        "Jakefile*"
    )
)
_KINDS = (
    (("*.py",), PYTHON),
    (tuple(_JS.split()), JAVASCRIPT),
    (("*.rb",), RUBY),
    (("*.php",), PHP),
    (("*.sh", ".zshenv", ".zshrc", ".zprofile", ".zlogin", ".zlogout"), None),  # shell code
)


def _matches(path: str, patterns: tuple[str, ...]) -> bool:
    base = path.rsplit("/", 1)[-1]
    return any(
        fnmatch.fnmatchcase(path, p) or fnmatch.fnmatchcase(path, "*/" + p)
        if "/" in p
        else fnmatch.fnmatchcase(base, p)
        for p in patterns
    )


def project_files(ana: Walker, names: tuple[str, ...], unbounded: list[str], ctx: Ctx) -> None:
    """A command that executes project files (``names``: its name and the names it falls back
    to): the files among them this line writes are judged, or make it unknown; so does any
    write before it to files the checker cannot name (``unbounded``)."""
    patterns = next((PROJECT_FILES[n] for n in names if n in PROJECT_FILES), None)
    if patterns is None:
        return
    name = names[0]
    if unbounded:
        ana.unknown(
            f"runs `{name}`, which may execute a file this line writes ({unbounded[0]})",
            ctx.text,
        )
        return
    for path in list(ana.written):
        if path in ana.followed or not _matches(path, patterns):
            continue
        task = _matches(path, _TASK_FILES)
        kinds = [] if task else [lang for pats, lang in _KINDS if _matches(path, pats)]
        content = ana.written_file(path) if kinds else None
        if not isinstance(content, str):
            ana.unknown(
                f"runs `{name}`, which may execute `{path}`, a file this line writes", ctx.text
            )
            continue
        ana.followed.add(path)
        lang = kinds[0]
        if lang is None:
            ana.source(content, ctx.depth + 1, ctx=ctx)
        else:
            judge(ana, content, lang, ctx)
