"""Code in other languages that a command line runs: interpreter one-liners, Vim commands, sed. Pure.

One table of languages (:data:`LANGUAGES`) says, for each interpreter, how its strings are written
and which of its calls start programs, delete files, send signals or evaluate code. One engine
reads the code's calls and their arguments:

* a call that starts a program is judged by the command it starts when that is literal (a shell
  string, or a program and literal arguments); otherwise it pauses;
* a call that deletes files or trees is a reversible hit (like ``rm``), its literal paths as
  targets;
* a call that sends a signal is an irreversible hit;
* code evaluated from a literal string is read again; from anything else it pauses;
* a name that starts programs used in a way the engine cannot read (assigned, passed around,
  reached by a computed attribute) pauses.

Code comes from the interpreter's options (``python -c``, ``node -e``, ``ruby -e``, ``perl -e``,
``php -r``, …), from its input when that is static, or from a script file this line wrote.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from itertools import pairwise

from run_bash.checker.model import REVERSIBLE, SHELLS, Ctx, Hit, Walker
from run_bash.checker.words import Arg, command_name, wordlist

MAX_CODE_DEPTH = 4
MAX_CODE_CHARS = 200_000  # beyond this, code in another language pauses unread
MAX_CALLS = 256  # calls that matter judged in one piece of code
MAX_SPAN = 4000  # tokens of one call's arguments read

# Call kinds.
SHELL = "shell"  # the first argument is a shell command line
ARGV = "argv"  # a program and its arguments (a list, or several strings); one string: a command
DELETE = "delete"  # deletes the path in its first argument (or the receiver's)
SIGNAL = "signal"  # sends a signal
EVAL = "eval"  # runs code of the same language given as a string
OPAQUE = "opaque"  # starts programs in a way the engine does not read: always pauses
PIPE = "pipe"  # opens a file, or a command when the literal name starts with `|`


@dataclass(frozen=True)
class Lang:
    """How one language writes strings and which of its calls matter.

    ``calls`` maps a call to its kind. A key ``mod.name`` matches ``name`` called on the module
    ``mod`` (or an alias of it, or bare after importing it from there); ``.name`` is a method of
    any object; a bare ``name`` is a builtin. ``interpolate`` is a regular expression that makes
    a double-quoted string dynamic. ``imports`` rewrites an expression that yields a module
    (``require('fs')``) to the module's name.
    """

    name: str
    calls: dict[str, str]
    comment: str = "#"
    interpolate: str = ""
    backticks: bool = False  # `cmd` is a shell command
    triple: bool = False  # '''…''' strings
    percent: bool = False  # Ruby %x(…) / %w(…) and Perl q{…} literals
    imports: tuple[tuple[str, str], ...] = ()
    paren_free: bool = False  # `system "ls"`: a call without parentheses
    aliases: tuple[str, ...] = ()  # patterns whose groups are (alias, module) or (alias, name)
    member: str = "."  # what reaches a module's or object's member (`os.system`)
    core: tuple[str, ...] = ()  # namespaces of the builtins (`builtins.exec`, `CORE::system`)
    nocase: bool = False  # function names are case-insensitive (PHP)
    modules: tuple[str, ...] = ()  # more modules that start programs or delete (`posix`)
    same: tuple[tuple[str, str], ...] = ()  # (module, the module whose calls it has)
    raw_single: bool = False  # '…' decodes only \\ and \' (Ruby, Perl, PHP)

    @cached_property
    def cores(self) -> list[str]:
        """``core``, the longest first."""
        return sorted(self.core, key=len, reverse=True)

    @cached_property
    def same_as(self) -> dict[str, str]:
        """``same`` as a mapping."""
        return dict(self.same)

    @cached_property
    def risky(self) -> frozenset[str]:
        """The modules (and builtin namespaces) whose members start programs, delete or signal."""
        heads = {*self.modules, *self.core}
        for key in self.calls:
            parts = re.split(r"\.|::", key)
            heads.update(".".join(parts[:n]) for n in range(1, len(parts)) if parts[0])
        return frozenset(heads)


def _calls(kind: str, names: str) -> dict[str, str]:
    return dict.fromkeys(wordlist(names), kind)


PYTHON = Lang(
    "Python",
    {
        **_calls(
            SHELL,
            "os.system os.popen subprocess.getoutput subprocess.getstatusoutput "
            "commands.getoutput asyncio.create_subprocess_shell",
        ),
        **_calls(
            ARGV,
            "subprocess.run subprocess.call subprocess.check_call "
            "subprocess.check_output subprocess.Popen asyncio.create_subprocess_exec "
            "pty.spawn os.execl os.execle os.execlp os.execlpe os.execv os.execve os.execvp "
            "os.execvpe os.spawnl os.spawnle os.spawnlp os.spawnlpe os.spawnv os.spawnve "
            "os.spawnvp os.spawnvpe os.posix_spawn os.posix_spawnp os.startfile",
        ),
        **_calls(
            DELETE,
            "shutil.rmtree os.remove os.unlink os.rmdir os.removedirs .unlink "
            ".rmdir .rmtree send2trash.send2trash os.truncate",
        ),
        # a process object's methods (`psutil.Process(pid).kill()`, `Popen.send_signal`)
        **_calls(SIGNAL, "os.kill os.killpg signal.pthread_kill .kill .terminate .send_signal"),
        **_calls(EVAL, "exec eval compile"),
        **_calls(OPAQUE, "getattr __import__ importlib.import_module vars setattr"),
    },
    triple=True,
    core=("builtins", "__builtins__"),
    modules=("posix", "nt", "builtins", "__builtins__", "importlib", "sys.modules"),
    same=(("posix", "os"), ("nt", "os")),
    imports=(
        (r"__import__\(\s*(['\"])(\w+)\1\s*\)", r"\2"),
        (r"importlib\.import_module\(\s*(['\"])(\w+)\1\s*\)", r"\2"),
        (r"getattr\(\s*(\w+)\s*,\s*(['\"])(\w+)\2\s*\)", r"\1.\3"),
    ),
    aliases=(
        r"import\s+([\w.]+)\s+as\s+(\w+)",
        r"from\s+([\w.]+)\s+import\s+\(?([\w\s,]+)\)?",
        r"import\s+[\w.]+(?:\s*,\s*[\w.]+)*",
    ),
)
JAVASCRIPT = Lang(
    "JavaScript",
    {
        **_calls(
            SHELL,
            "child_process.exec child_process.execSync execaCommand execaCommandSync "
            "shelljs.exec $ Bun.$",
        ),
        **_calls(ARGV, "execa execaSync execa.execa execa.execaSync"),
        **_calls(
            ARGV,
            "child_process.spawn child_process.spawnSync child_process.execFile "
            "child_process.execFileSync child_process.fork Bun.spawn Bun.spawnSync "
            "Deno.Command Deno.run",
        ),
        **_calls(
            DELETE,
            "fs.rmSync fs.rm fs.unlinkSync fs.unlink fs.rmdirSync fs.rmdir "
            "fs.promises.rm fs.promises.unlink fs.promises.rmdir fsPromises.rm "
            "fsPromises.unlink fsPromises.rmdir fse.remove fse.removeSync fse.emptyDir "
            "fse.emptyDirSync Deno.remove Deno.removeSync rimraf rimraf.sync shelljs.rm",
        ),
        **_calls(SIGNAL, "process.kill Deno.kill"),
        **_calls(EVAL, "eval Function vm.runInNewContext vm.runInThisContext"),
    },
    comment="//",
    core=("globalThis", "global", "window", "self"),
    interpolate=r"\$\{",
    backticks=False,
    imports=(
        (r"require\(\s*(['\"`])(?:node:)?(child_process|fs|vm|shelljs|execa)\1\s*\)", r"\2"),
        (r"require\(\s*(['\"`])(?:node:)?fs/promises\1\s*\)", "fsPromises"),
        (r"require\(\s*(['\"`])fs-extra\1\s*\)", "fse"),
        (r"await\s+import\(\s*(['\"])(?:node:)?(child_process|fs)\1\s*\)", r"\2"),
    ),
    aliases=(
        r"(?:const|let|var)\s+(\w+)\s*=\s*(child_process|fs|fse|fsPromises|vm|shelljs|execa)\b",
        r"(?:const|let|var)\s*\{([^}]*)\}\s*=\s*(child_process|fs|fsPromises|vm|shelljs|execa)\b",
        r"import\s*\*\s*as\s+(\w+)\s+from\s*['\"](?:node:)?(child_process|fs|vm|shelljs)['\"]",
        r"import\s*\{([^}]*)\}\s*from\s*['\"](?:node:)?(child_process|fs|vm|execa|zx|bun)['\"]",
        r"import\s+(\w+)\s+from\s*['\"](?:node:)?(child_process|fs|shelljs|execa)['\"]",
    ),
)
RUBY = Lang(
    "Ruby",
    {
        **_calls(
            ARGV,
            "system exec spawn Kernel.system Kernel.exec Kernel.spawn Process.spawn "
            "IO.popen Open3.capture2 Open3.capture2e Open3.capture3 Open3.popen2 "
            "Open3.popen2e Open3.popen3 Open3.pipeline PTY.spawn",
        ),
        **_calls(
            DELETE,
            "FileUtils.rm_rf FileUtils.rm_r FileUtils.rm FileUtils.rm_f "
            "FileUtils.remove_dir FileUtils.remove_entry FileUtils.remove_entry_secure "
            "FileUtils.rmdir FileUtils.rmtree FileUtils.remove FileUtils.remove_file "
            "File.delete File.unlink Dir.rmdir Dir.delete Dir.unlink .rmtree rm_rf rm_r",
        ),
        **_calls(SIGNAL, "Process.kill"),
        **_calls(PIPE, "open Kernel.open IO.read IO.readlines IO.foreach IO.write URI.open"),
        **_calls(OPAQUE, "syscall Kernel.syscall"),
        **_calls(EVAL, "eval instance_eval class_eval"),
        **_calls(
            OPAQUE,
            ".send .public_send .__send__ send public_send __send__ method .method "
            ".instance_method",
        ),
    },
    interpolate=r"#\{",
    backticks=True,
    percent=True,
    paren_free=True,
    raw_single=True,
)
PERL = Lang(
    "Perl",
    {
        **_calls(ARGV, "system exec"),
        **_calls(SHELL, "qx readpipe"),
        **_calls(
            DELETE, "unlink rmdir rmtree remove_tree File::Path::rmtree File::Path::remove_tree"
        ),
        **_calls(SIGNAL, "kill"),
        **_calls(EVAL, "eval"),
        **_calls(OPAQUE, "open syscall"),
    },
    member="->",
    core=("CORE", "CORE::GLOBAL"),
    interpolate=r"[$@][\w{:]",
    backticks=True,
    percent=True,
    paren_free=True,
    raw_single=True,
)
PHP = Lang(
    "PHP",
    {
        **_calls(SHELL, "system exec shell_exec passthru popen proc_open"),
        **_calls(ARGV, "pcntl_exec"),
        **_calls(DELETE, "unlink rmdir"),
        **_calls(SIGNAL, "posix_kill proc_terminate"),
        **_calls(EVAL, "eval assert create_function"),
        **_calls(OPAQUE, "call_user_func call_user_func_array array_map array_walk"),
    },
    comment="//",
    interpolate=r"\$[\w{]",
    backticks=True,
    member="->",
    nocase=True,
    raw_single=True,
)
LUA = Lang(
    "Lua",
    {
        **_calls(SHELL, "os.execute io.popen"),
        **_calls(DELETE, "os.remove lfs.rmdir"),
        **_calls(EVAL, "load loadstring dofile"),
    },
    comment="--",
)
AWK = Lang("awk", _calls(SHELL, "system"))
R_LANG = Lang(
    "R",
    {
        **_calls(SHELL, "system shell"),
        **_calls(ARGV, "system2 processx.run sys.exec_wait sys.exec_background sys.exec_internal"),
        **_calls(DELETE, "unlink file.remove"),
        **_calls(SIGNAL, "tools.pskill pskill"),
        **_calls(EVAL, "eval parse source sys.source"),
        # A function reached by its name (`do.call("system", …)`, `match.fun(f)`).
        **_calls(OPAQUE, "do.call get get0 mget match.fun getFunction"),
    },
    core=("base",),  # `base::system`, `base:::system`
)
GO = Lang(
    "Go",
    {
        **_calls(ARGV, "exec.Command exec.CommandContext"),
        **_calls(DELETE, "os.Remove os.RemoveAll"),
        **_calls(SIGNAL, "syscall.Kill .Kill .Signal"),
    },
    comment="//",
)
JULIA = Lang(
    "Julia",
    {
        **_calls(DELETE, "rm Base.rm Filesystem.rm"),
        **_calls(SIGNAL, "kill"),
        **_calls(EVAL, "eval include_string"),
    },
    interpolate=r"\$[\w(]",
    backticks=True,
)
LANGUAGES = {
    "python": PYTHON,
    "node": JAVASCRIPT,
    "ruby": RUBY,
    "perl": PERL,
    "php": PHP,
    "lua": LUA,
    "awk": AWK,
    "go": GO,
    "julia": JULIA,
    "r": R_LANG,
}


# -- reading code ---------------------------------------------------------------------------------


@dataclass
class Tok:
    """A token of code: a string (``value`` None when it interpolates), a name, or a symbol."""

    kind: str  # "str", "name", "op", "cmd" (a backtick command)
    text: str
    value: str | None = None
    unread: bool = False  # a string with an escape sequence the checker does not decode


_NAME = re.compile(r"[A-Za-z_$][\w$]*(?:(?:\.|::|->)[A-Za-z_$][\w$]*)*")
_PERCENT = re.compile(r"%([xwWqQiI]?)([(\[{<|!/])")
_PERL_QUOTE = re.compile(r"\b(qx|qw|qq|q)\s*([(\[{<|!/#])")
_CLOSERS = {"(": ")", "[": "]", "{": "}", "<": ">"}
_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", "'": "'", '"': '"', "0": "\0", "r": "\r"}


def unescape(body: str) -> str:
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), "\\" + m.group(1)), body)


# An escape sequence other than the few :func:`unescape` decodes: `\x2d`, `\u0072`, `\162`,
# `\N{…}`, a line continuation. The checker does not decode them: a string holding one is
# read as unknown.
_OPAQUE_ESCAPE = re.compile(r"\\(?:[^ntr\\'\"0]|0[0-7])", re.S)


def _str(text: str, body: str, quote: str, lang: Lang) -> Tok:
    """A string token; its value None when it interpolates or holds an escape it does not read."""
    value = _literal(body, quote, lang)
    escapes = quote != "'" or not lang.raw_single
    if value is not None and escapes and _OPAQUE_ESCAPE.search(body):
        return Tok("str", text, None, unread=True)
    return Tok("str", text, value)


def tokens(code: str, lang: Lang, judge_later: list[str] | None = None) -> list[Tok]:
    """The tokens of ``code``: strings decoded where literal, names, symbols; comments dropped.

    Regular expression literals are one token; the code in a Perl ``s///e`` replacement is added
    to ``judge_later``.
    """
    judge_later = [] if judge_later is None else judge_later
    out: list[Tok] = []
    i, n = 0, len(code)
    while i < n:
        c = code[i]
        if c.isspace() or code.startswith(("\\\n", "\\\r\n"), i):
            i += 1 if c.isspace() else 2
            continue
        if code.startswith(lang.comment, i) or (lang.comment != "#" and code.startswith("/*", i)):
            end = code.find("*/", i) + 2 if code.startswith("/*", i) else code.find("\n", i)
            i = n if end < 2 or end < 0 else end
            continue
        if lang.triple and code.startswith(("'''", '"""'), i):
            end = code.find(code[i : i + 3], i + 3)
            end = n if end < 0 else end
            out.append(_str(code[i : end + 3], code[i + 3 : end], code[i], lang))
            i = end + 3
            continue
        if c in "'\"" or (c == "`" and not lang.backticks):
            j = i + 1
            while j < n and code[j] != c:
                j += 2 if code[j] == "\\" else 1
            prefix = out[-1].text if out and out[-1].kind == "name" and _touching(code, i) else ""
            tok = _str(code[i : j + 1], code[i + 1 : j], c, lang)
            if "f" in prefix.lower() and lang is PYTHON and tok.value is not None:
                tok.value = None if "{" in tok.value else tok.value
            if prefix.lower() in ("r", "rb", "br", "f", "fr", "rf", "b", "u") and lang is PYTHON:
                out.pop()
                if "r" in prefix.lower() and "f" not in prefix.lower():
                    tok = Tok("str", tok.text, code[i + 1 : j])  # a raw string: no escapes
            out.append(tok)
            i = j + 1
            continue
        if c == "`":
            j = code.find("`", i + 1)
            j = n if j < 0 else j
            cmd = _str(code[i : j + 1], code[i + 1 : j], '"', lang)
            out.append(Tok("cmd", cmd.text, cmd.value, cmd.unread))
            i = j + 1
            continue
        regex = _regex(code, i, lang, out[-1] if out else None)
        if regex is not None:
            end, replacement = regex
            if replacement is not None:
                judge_later.append(replacement)  # `s/…/CODE/e`: Perl code
            out.append(Tok("re", code[i:end]))
            i = end
            continue
        quote = _quote_literal(code, i, lang)
        if quote is not None:
            kind, body, end = quote
            if kind in ("x", "qx"):
                cmd = _str(code[i:end], body, '"', lang)
                out.append(Tok("cmd", cmd.text, cmd.value, cmd.unread))
            elif kind in ("w", "W", "qw"):
                out.append(Tok("op", "["))
                for word in body.split():
                    out.extend((Tok("str", word, word), Tok("op", ",")))
                out.append(Tok("op", "]"))
            else:
                out.append(_str(code[i:end], body, "'" if kind in "q" else '"', lang))
            i = end
            continue
        m = _NAME.match(code, i)
        if m:
            dot = len(out) >= 2 and out[-1].kind == "op" and out[-1].text == "."
            if dot and lang.member == "." and out[-2].kind == "name":  # `os . system`: one name
                out.pop()
                out.append(Tok("name", f"{out.pop().text}.{m.group()}"))
                i = m.end()
                continue
            out.append(Tok("name", m.group()))
            i = m.end()
            continue
        out.append(Tok("op", c))
        i += 1
    return out


_REGEX_LANGS = ("awk", "JavaScript", "Ruby", "Perl")
_REGEX_AFTER = frozenset(wordlist("if unless and or not return when split grep map while until"))
_PERL_REGEX = re.compile(r"(s|tr|y|m|qr)\s*([^\w\s=,;)])")


def _regex(code: str, i: int, lang: Lang, prev: Tok | None) -> tuple[int, str | None] | None:
    """A regular expression literal at ``i``: (end, the code of an ``s///e`` replacement)."""
    if lang.name not in _REGEX_LANGS:
        return None
    if lang is PERL and (i == 0 or not (code[i - 1].isalnum() or code[i - 1] in "_$@%&")):
        m = _PERL_REGEX.match(code, i)
        if m:
            parts = 2 if m.group(1) in ("s", "tr", "y") else 1
            opener = m.group(2)
            closer = _CLOSERS.get(opener, opener)
            j, bodies = m.end(), []
            for n in range(parts):
                start = j
                while j < len(code) and code[j] != closer:
                    j += 2 if code[j] == "\\" else 1
                bodies.append(code[start:j])
                j += 1
                if n + 1 < parts and opener != closer:  # s{a}{b}: the second part has its own
                    while j < len(code) and code[j].isspace():
                        j += 1
                    j += 1
            flags = re.match(r"[a-z]*", code[j:])
            end = j + (flags.end() if flags else 0)
            code_part = bodies[1] if parts == 2 and flags and "e" in flags.group() else None
            return end, code_part
    if code[i] != "/":
        return None
    if prev is not None and not (
        (prev.kind == "op" and prev.text not in ")]}") or prev.text in _REGEX_AFTER
    ):
        return None
    j = i + 1
    while j < len(code) and code[j] not in "/\n":
        j += 2 if code[j] == "\\" else 1
    if j >= len(code) or code[j] != "/":
        return None
    flags = re.match(r"[a-z]*", code[j + 1 :])
    return j + 1 + (flags.end() if flags else 0), None


def _touching(code: str, i: int) -> bool:
    return i > 0 and (code[i - 1].isalnum() or code[i - 1] == "_")


def _literal(body: str, quote: str, lang: Lang) -> str | None:
    """A string literal's value, or None when it interpolates run-time values."""
    if quote == "'" and lang.raw_single:
        return body.replace("\\\\", "\\").replace("\\'", "'")
    if lang.interpolate and re.search(lang.interpolate, body):
        return None
    return unescape(body)


def _quote_literal(code: str, i: int, lang: Lang) -> tuple[str, str, int] | None:
    """Ruby ``%x(…)``/``%w(…)`` and Perl ``qx{…}``/``qw(…)``: (kind, body, end)."""
    if not lang.percent:
        return None
    m = _PERCENT.match(code, i) if lang is RUBY else _PERL_QUOTE.match(code, i)
    if m is None or (lang is PERL and i > 0 and (code[i - 1].isalnum() or code[i - 1] in "$@%")):
        return None
    opener = m.group(2)
    closer = _CLOSERS.get(opener, opener)
    depth, j = 0, m.end()
    while j < len(code):
        ch = code[j]
        if ch == "\\":
            j += 2
            continue
        if ch == opener and opener != closer:
            depth += 1
        elif ch == closer:
            if depth == 0:
                return (m.group(1) or "Q"), code[m.end() : j], j + 1
            depth -= 1
        j += 1
    return (m.group(1) or "Q"), code[m.end() :], len(code)  # unterminated: to the end


# -- judging calls --------------------------------------------------------------------------------


@dataclass
class Code:
    """One piece of code being judged, and the module names it binds."""

    lang: Lang
    toks: list[Tok]
    modules: dict[str, str] = field(default_factory=dict)  # alias -> module
    names: dict[str, str] = field(default_factory=dict)  # bare name -> "module.name"


def _bindings(code: str, lang: Lang) -> tuple[str, dict[str, str], dict[str, str]]:
    """The code without its import statements, and the module aliases and names they bind."""
    modules: dict[str, str] = {}
    names: dict[str, str] = {}
    for pattern in lang.aliases:
        for m in re.finditer(pattern, code):
            if m.lastindex is None:
                continue
            a, b = m.group(1), m.group(2)
            if lang is PYTHON and pattern.startswith("import"):
                modules[b] = a
            elif lang is PYTHON:
                for part in b.replace("\n", " ").split(","):
                    name, _, alias = part.strip().partition(" as ")
                    if name:
                        names[(alias or name).strip()] = f"{a}.{name.strip()}"
            elif "{" in pattern:
                for part in a.split(","):
                    name, _, alias = part.replace(" as ", ":").partition(":")
                    if name.strip():
                        names[(alias or name).strip()] = f"{b}.{name.strip()}"
            else:
                modules[a] = b
        code = re.sub(pattern, ";", code)
    return code, modules, names


def _kind(name: str, code: Code) -> tuple[str, str] | None:
    """The kind and table key of a called name, or None when it does not matter."""
    calls = code.lang.calls
    name = name.lower() if code.lang.nocase else name
    name = name.replace(":::", "::")  # R's internal members: `tools:::pskill`
    for core in code.lang.cores:
        for sep in (".", "::"):
            if name.startswith(core + sep):  # `builtins.exec`, `CORE::system`
                name = name[len(core) + len(sep) :]
    if name in calls and "." not in name and "::" not in name:
        return calls[name], name
    if name in code.names and code.names[name] in calls:
        return calls[code.names[name]], code.names[name]
    head, sep, last = max((name.rpartition(s) for s in (".", "::", "->")), key=lambda p: len(p[0]))
    if not sep:
        return None
    module = code.modules.get(head, head)
    module = code.lang.same_as.get(module, module)
    key = f"{module}.{last}"
    if key in calls:
        return calls[key], key
    if f".{last}" in calls:
        return calls[f".{last}"], f".{last}"
    return None


# Calls that write, copy or move files (the checker does not follow where): a line whose code
# makes them may have written any file a later command executes.
_FILE_WRITES = re.compile(
    r"""\bf?open\s*\([^)]*?,\s*(?:mode\s*=\s*)?['"][rbt]*[wax+][rbt+]*['"]"""
    r"""|\.open\s*\(\s*(?:mode\s*=\s*)?['"][rbt]*[wax+][rbt+]*['"]"""
    r"""|\bopen\s*\(?[^;]*?['"]\s*\+?>"""
    r"|write_text|write_bytes|writeFile|appendFile|createWriteStream|copyFile|\bcpSync"
    r"|\brename(?:Sync)?\s*\(|\.replace\s*\(\s*['\"]?[\w./-]*['\"]?\s*\)|symlink|\blink\s*\("
    r"|\bshutil\.(?:copy|move)|\bos\.(?:replace|rename|open)|File\.(?:write|open|rename|new)"
    r"|IO\.write|FileUtils\.(?:cp|mv|install|ln|touch)|file_put_contents|\bcopy\s*\("
    r"|\bio\.(?:open|output)|writeLines|\bsink\s*\(|file\.(?:copy|rename|create)|Deno\.write"
    r"|Bun\.write|\bprint\s*>|\.to_csv|\.save\s*\(|\.extract(?:all)?\s*\(|unpack_archive"
)


def judge(ana: Walker, text: str, lang: Lang, ctx: Ctx, depth: int = 0) -> None:
    """Analyse code in ``lang``: the programs it starts, the files it deletes, its signals."""
    if depth == 0 and _FILE_WRITES.search(text):
        ana.unbounded.append(f"{lang.name} code that writes files")
    if depth > MAX_CODE_DEPTH:
        ana.unknown(f"runs {lang.name} code nested too deeply to analyse", ctx.text)
        return
    if len(text) > MAX_CODE_CHARS:
        ana.unknown(f"runs more {lang.name} code than the checker reads", ctx.text)
        return
    for pattern, repl in lang.imports:
        text = re.sub(pattern, repl, text)
    raw = text
    text, modules, names = _bindings(text, lang)
    later: list[str] = []
    code = Code(lang, tokens(text, lang, later), modules, names)
    for replacement in later:
        judge(ana, replacement, lang, ctx, depth + 1)
    unread = _unreadable(code, raw)
    if unread:
        ana.unknown(f"runs {lang.name} code the checker cannot read ({unread})", ctx.text)
    toks = code.toks
    close = _closers(toks)
    calls = 0
    k = 0
    while k < len(toks):
        tok = toks[k]
        k += 1
        if tok.kind == "cmd":
            shell(ana, tok.value, tok.text, lang, ctx)
        elif tok.kind == "op" and tok.text == "|" and lang is AWK:
            _awk_pipe(ana, toks, k - 1, ctx)
        elif tok.kind == "name":
            method = k >= 2 and toks[k - 2].text == "." and lang.member == "."
            found = _kind(("." if method else "") + tok.text, code)
            if found is None:
                if method and tok.text in _RISKY and toks[k - 3].text in (")", "]"):
                    ana.unknown(
                        f"calls `{tok.text}` on an object built at run time ({lang.name})", ctx.text
                    )
                continue
            at = k - 1
            calls += 1
            if calls > MAX_CALLS:
                ana.unknown(
                    f"makes more calls that matter than the checker reads ({lang.name})", ctx.text
                )
                return
            if k < len(toks) and toks[k].kind == "str" and toks[k].text.startswith("`"):
                shell(ana, toks[k].value, toks[k].text, lang, ctx)  # zx: $`cmd`
                k += 1
                continue
            args, end = _arguments(toks, k, lang, close)
            if args is None and found[0] == PIPE:
                continue
            if args is None and found[0] in (DELETE, SIGNAL):
                args, end = [], k  # its effect is known without reading its arguments
            if args is None:
                what = f"uses `{tok.text}` in a way that cannot be read ({lang.name})"
                ana.unknown(what, ctx.text)
                continue
            if found[0] == EVAL and args and args[0] and args[0][0].text == "{":
                continue  # `eval { … }`: a block, read as code where it stands
            k = end
            _call(ana, found, tok.text, args, _receiver(toks, at), code, ctx, depth)


_DYNAMIC_IMPORT = re.compile(
    r"(['\"`])(?:node:)?(?:child_process|fs|fs/promises|fs-extra|vm|worker_threads|cluster|"
    r"shelljs|execa|zx|rimraf)\1"
)
# Third-party modules whose calls start programs by name or on other machines (`sh.rm(…)`,
# `plumbum.local["rm"]`, `pexpect.spawn(…)`): the checker does not follow them.
_PY_RUNNERS = frozenset(
    wordlist("sh plumbum sarge delegator envoy pexpect ptyprocess fabric invoke paramiko")
)
# Lua modules that start programs, delete or send signals (luaposix, luaposix's old name,
# LuaFileSystem's C side is `lfs`, read as calls).
_LUA_RUNNERS = frozenset(wordlist("posix posix_c"))
_PY_IMPORT = re.compile(r"(?m)(?:^|(?<=;))\s*(?:from\s+([\w.]+)\s+)?import\b([^;\n]*)")


def _unreadable(code: Code, raw: str) -> str | None:
    """What in ``code`` the checker cannot read, in a way that could start programs or delete:
    a risky module reached by a computed name or passed around, an import that renames its
    members or takes them all, a function called through a variable (PHP, Perl)."""
    lang, toks = code.lang, code.toks
    risky = lang.risky
    if lang is PYTHON:
        for m in _PY_IMPORT.finditer(raw):
            mods = [m.group(1)] if m.group(1) else re.findall(r"[\w.]+", m.group(2))
            single = re.fullmatch(r"\s+[\w.]+\s+as\s+\w+\s*", m.group(2)) and not m.group(1)
            renames = re.search(r"\*|\bas\b|\(", m.group(2)) and not single
            if renames and any(x in risky for x in mods):
                return f"`{m.group().strip()[:60]}`, an import it does not follow"
            if any(x.split(".")[0] in _PY_RUNNERS for x in mods):
                return f"`{m.group().strip()[:60]}`, a module that starts programs"
    for j, tok in enumerate(toks):
        nxt = toks[j + 1] if j + 1 < len(toks) else None
        if tok.kind != "name":
            if lang is PERL and tok.text == "&" and nxt is not None and nxt.text[:1] in "${":
                return "a function called through a reference"
            continue
        head = tok.text.split(".")[0]
        module = code.modules.get(tok.text, tok.text)
        called = tok.text in lang.calls or tok.text in code.names  # judged as a call
        if lang in (PYTHON, JAVASCRIPT, LUA) and module in risky and not called:
            return f"`{tok.text}` used as a value or reached by a computed name"
        call = nxt is not None and nxt.text == "("
        if lang is R_LANG and not call and _kind(tok.text, code) is not None:
            return f"`{tok.text}` used as a value (`sapply(x, system)`, `f <- system`)"
        if lang is LUA and tok.text == "require":
            named = toks[j + 2] if call and j + 2 < len(toks) else nxt
            if named is None or named.value is None or named.value.split(".")[0] in _LUA_RUNNERS:
                return "`require` of a module that starts programs, deletes or signals"
        dunder = re.search(r"\.__(?:dict|getattribute|getattr|builtins|loader|spec)__\b", tok.text)
        if lang is PYTHON and dunder and code.modules.get(head, head) in risky:
            return f"`{tok.text}`"
        if lang is JAVASCRIPT and call and tok.text in ("require", "import"):
            arg = toks[j + 2 : j + 5]
            literal = len(arg) >= 2 and arg[0].value is not None and arg[1].text == ")"
            used = len(arg) == 3 and arg[2].text != ";"  # `import("fs").then(…)`
            if not literal or (
                tok.text == "import" and used and _DYNAMIC_IMPORT.fullmatch(arg[0].text)
            ):
                return f"`{tok.text}` of a module it does not follow"
        arrow = lang is PERL and [t.text for t in toks[j + 1 : j + 4]] == ["-", ">", "("]
        if lang in (PHP, PERL) and re.fullmatch(r"\$\w+", tok.text) and (call or arrow):
            return f"a function called through `{tok.text}`"
    return None


def _unread_arg(arg: Arg_) -> bool:
    """An argument holding a string the checker does not decode, or strings joined."""
    return any(t.unread for t in arg) or any(t.kind == u.kind == "str" for t, u in pairwise(arg))


# Names that start programs whatever object they are called on, when it is computed.
_RISKY = frozenset(
    wordlist(
        "system popen spawn spawnSync exec execSync execFile execFileSync "
        "rmtree rm_rf rmSync check_output Popen"
    )
)

Arg_ = list[Tok]


def _closers(toks: list[Tok]) -> list[int]:
    """For each opening bracket, the index of the bracket that closes it (-1: none)."""
    close = [-1] * len(toks)
    stack: list[int] = []
    for j, t in enumerate(toks):
        if t.kind == "op" and t.text in "([{":
            stack.append(j)
        elif t.kind == "op" and t.text in ")]}" and stack:
            close[stack.pop()] = j
    return close


def _arguments(
    toks: list[Tok], k: int, lang: Lang, close: list[int]
) -> tuple[list[Arg_] | None, int]:
    """The arguments of a call at ``k`` (after the name): ``(…)`` or, paren-free, a string.

    None when they cannot be read (unbalanced, or longer than the checker reads).
    """
    if k < len(toks) and toks[k].text == "(" and toks[k].kind == "op":
        end = close[k]
        if end < 0 or end - k > MAX_SPAN:
            return None, k
        args: list[Arg_] = []
        current: list[Tok] = []
        j = k + 1
        while j < end:
            t = toks[j]
            if t.kind == "op" and t.text == ",":  # nested brackets are skipped whole below
                args.append(current)
                current = []
            else:
                current.append(t)
            if t.kind == "op" and t.text in "([{" and close[j] > 0:
                current.extend(toks[j + 1 : close[j] + 1])
                j = close[j]
            j += 1
        return ([*args, current] if current or args else args), end + 1
    if lang.paren_free and k < len(toks) and (toks[k].kind == "str" or toks[k].text in "[{"):
        args, current, j = [], [], k
        while j < min(len(toks), k + MAX_SPAN) and not (
            toks[j].kind == "op" and toks[j].text in ";}"
        ):
            if toks[j].kind == "op" and toks[j].text == ",":
                args.append(current)
                current = []
            elif toks[j].kind == "name" and toks[j].text in ("or", "and", "if", "unless", "do"):
                break
            else:
                current.append(toks[j])
            j += 1
        return [*args, current] if current else args, j
    return None, k


# Calls that build a list of their arguments (R's `c("push", "-f")`).
_LIST_CALLS = frozenset({"c", "list"})


def _strings(arg: Arg_) -> list[str] | None:
    """An argument's literal strings: one string, or a list ``[…]``/``(…)``/``c(…)`` of them."""
    if len(arg) > 2 and arg[0].kind == "name" and arg[0].text in _LIST_CALLS and arg[1].text == "(":
        arg = arg[1:]
    inner = [t for t in arg if not (t.kind == "op" and t.text in "[](),")]
    if any(t.kind == u.kind == "str" for t, u in pairwise(arg)):
        return None  # `"git push " "-f"`: strings joined
    if inner and all(t.kind == "str" and t.value is not None for t in inner):
        return [t.value or "" for t in inner]
    return None


def _word(arg: Arg_) -> bool:
    """True for an argument that is part of the command, not a keyword argument, an options
    object or a callback (``shell=True``, ``{cwd: 'x'}``, ``(err) => …``)."""
    if len(arg) >= 2 and arg[0].kind == "name" and arg[1].text in "=:" and arg[0].text != "$":
        return False
    return not (
        arg
        and (
            arg[0].text in ("{", "function", "proc", "lambda")
            or any(t.text == "=" and u.text == ">" for t, u in pairwise(arg))
        )
    )


def _call(
    ana: Walker,
    found: tuple[str, str],
    name: str,
    args: list[Arg_],
    receiver: list[str] | None,
    code: Code,
    ctx: Ctx,
    depth: int,
) -> None:
    kind, key = found
    lang = code.lang
    shown = f"`{name}`"
    words = [a for a in args if _word(a)]
    if kind == ARGV and any(
        t.kind == "name" and t.text in ("args", "argv", "cmd") and u.text == ":"
        for a in args
        if not _word(a)
        for t, u in pairwise(a)
    ):
        what = f"`{name}` with its arguments in an options object"
        ana.unknown(f"runs {lang.name} code the checker cannot read ({what})", ctx.text)
        return
    if key.startswith("os.spawn") and words and words[0][0].kind == "name":
        words = words[1:]  # the mode, os.P_WAIT
    if key == "exec.CommandContext" and words:
        words = words[1:]  # the context
    if kind == SIGNAL:
        ctx.hits.append(Hit(f"sends a signal to processes ({shown}, {lang.name})"))
    elif kind == DELETE:
        literal = [_strings(w) for w in words]
        if not words:
            paths = receiver
        elif any(s is None for s in literal):
            paths = None
        else:
            paths = [p for group in literal for p in group or () if not p.startswith("-")]
        what = f"deletes files or directories ({shown}, {lang.name})"
        ctx.hits.append(Hit(what, REVERSIBLE, tuple(paths) if paths else None))
    elif kind == PIPE:
        first = _strings(words[0]) if words else None
        if first and first[0].lstrip().startswith("|"):
            shell(ana, first[0].lstrip()[1:], name, lang, ctx)
    elif kind == OPAQUE:
        if lang is PERL and name == "open":
            _perl_open(ana, words, ctx)
            return
        named = {t.text.strip(":'\"") for a in args for t in a}
        attr = [t.kind == "str" and t.value is not None for a in args[1:2] for t in a]
        by_name = [t.kind == "str" and t.value is not None for a in args[:1] for t in a]
        if key in _ALWAYS_UNREAD:
            ana.unknown(
                f"makes {_ALWAYS_UNREAD[key]} ({lang.name}), which cannot be read", ctx.text
            )
        elif (key in ("getattr", "setattr") and attr != [True]) or (
            key in _BY_NAME and by_name != [True]
        ):
            ana.unknown(
                f"runs {lang.name} code the checker cannot read (`{name}` of a computed name)",
                ctx.text,
            )
        elif key in ("__import__", "importlib.import_module"):
            ana.unknown(
                f"runs {lang.name} code the checker cannot read (`{name}` of a computed module)",
                ctx.text,
            )
        elif named & {k.rsplit(".", 1)[-1] for k, v in lang.calls.items() if v != OPAQUE}:
            ana.unknown(
                f"starts programs through {shown} ({lang.name}), which cannot be read", ctx.text
            )
    else:
        _run(ana, kind, key, name, words, code, ctx, depth)


# Calls whose effect is never read: a raw system call may kill, delete or start anything.
_ALWAYS_UNREAD = {"syscall": "a raw system call (`syscall`)", "Kernel.syscall": "a raw system call"}
# Calls that reach a function by the name in their first argument (R): read only when it is a
# literal, which is then judged like a call of that name.
_BY_NAME = frozenset(wordlist("do.call get get0 mget match.fun getFunction"))


def _run(
    ana: Walker,
    kind: str,
    key: str,
    name: str,
    words: list[Arg_],
    code: Code,
    ctx: Ctx,
    depth: int,
) -> None:
    lang = code.lang
    literal: list[list[str]] = []
    for arg in words[: 1 if kind == SHELL else len(words)]:
        strings = _strings(arg)
        if strings is None:
            if literal and kind == ARGV:
                break  # a trailing argument that is not part of the command
            what = " ".join(t.text for t in arg)[:60]
            if _unread_arg(arg):
                ana.unknown(
                    f"runs {lang.name} code the checker cannot read (`{name}` of `{what}`, "
                    "a string it does not decode)",
                    ctx.text,
                )
                return
            verb = "runs code" if kind == EVAL else "starts a program"
            ana.unknown(
                f"{verb} only known at run time through `{name}` (`{what}`, {lang.name})", ctx.text
            )
            return
        literal.append(strings)
    flat = [s for group in literal for s in group]
    if kind == EVAL:
        judge(ana, "\n".join(flat), lang, ctx, depth + 1)
    elif not flat:
        ana.unknown(
            f"starts a program only known at run time through `{name}` ({lang.name})", ctx.text
        )
    elif len(literal) == 1 and len(literal[0]) == 1 and words[0][0].kind == "str":
        shell(ana, flat[0], name, lang, ctx)  # one string: a command line
    else:
        if key.startswith(("os.exec", "os.spawn", "os.posix_spawn")) and len(flat) > 1:
            program, rest = flat[0], flat[1:]
            flat = [
                program,
                *(rest[1:] if command_name(rest[0]) == command_name(program) else rest),
            ]
        sub = ctx.sub(" ".join(flat))
        sub.fed = True
        ana.chain([Arg.lit(w) for w in flat], sub)


def shell(ana: Walker, command: str | None, text: str, lang: Lang, ctx: Ctx) -> None:
    if command is None and _OPAQUE_ESCAPE.search(text):
        ana.unknown(
            f"runs {lang.name} code the checker cannot read (`{text[:60]}`, a string it does "
            "not decode)",
            ctx.text,
        )
    elif command is None:
        ana.unknown(
            f"runs a shell command only known at run time (`{text[:60]}`, {lang.name})", ctx.text
        )
    else:
        sub = ctx.sub(command)
        sub.fed = True
        ana.source(command, ctx.depth + 1, ctx=sub)


def _receiver(toks: list[Tok], k: int) -> list[str] | None:
    """``Path('x').unlink()``: the literal path the method at ``k`` is called on."""
    if k >= 4 and toks[k - 1].text == "." and toks[k - 2].text == ")":
        arg = toks[k - 3]
        if arg.kind == "str" and arg.value is not None and toks[k - 4].text == "(":
            return [arg.value]
    return None


def _awk_pipe(ana: Walker, toks: list[Tok], k: int, ctx: Ctx) -> None:
    """awk's ``print … | "cmd"`` and ``"cmd" | getline``; ``||`` is logical or."""
    before = toks[k - 1] if k else None
    after = toks[k + 1] if k + 1 < len(toks) else None
    if (after is not None and after.text == "|") or (before is not None and before.text == "|"):
        return
    if after is not None and after.kind == "name" and after.text == "getline":
        command = before if before is not None and before.kind == "str" else None
    elif after is not None and after.text == "&":
        return
    else:
        command = after if after is not None and after.kind == "str" else None
    if command is None:
        ana.unknown("pipes to a command only known at run time (awk)", ctx.text)
    else:
        first = (command.value or "").split()[:1]
        if first and command_name(first[0]) in SHELLS:
            ana.unknown("feeds what it prints to a shell as code (awk)", ctx.text)
        else:
            shell(ana, command.value, command.text, AWK, ctx)


def _perl_open(ana: Walker, words: list[Arg_], ctx: Ctx) -> None:
    """``open(F, "cmd |")``, ``open(F, "-|", "cmd")``: a piped open runs a command."""
    strings = [_strings(w) for w in words[1:]]
    if any(s is None for s in strings):
        if len(words) > 2 or any(t.kind == "str" and t.value is None for w in words for t in w):
            ana.unknown("opens a pipe to a command only known at run time (Perl)", ctx.text)
        return
    flat = [s for group in strings for s in group or ()]
    # `|cmd` and `|-` write to the command's input: what it reads is the program's output.
    if len(flat) == 1 and (flat[0].rstrip().endswith("|") or flat[0].lstrip().startswith("|")):
        sub = ctx.sub(flat[0])
        sub.fed = flat[0].lstrip().startswith("|")
        ana.source(flat[0].strip().strip("|"), ctx.depth + 1, ctx=sub)
    elif len(flat) >= 2 and flat[0] in ("-|", "|-"):
        sub = ctx.sub(" ".join(flat[1:]))
        sub.fed = flat[0] == "|-"
        if len(flat) == 2:
            ana.source(flat[1], ctx.depth + 1, ctx=sub)
        else:
            ana.chain([Arg.lit(w) for w in flat[1:]], sub)
