"""A small bash parser for the pause list: finds every simple command a script would run. Pure.

It is not a full bash grammar. It tokenizes like bash (quotes, escapes, ``$'…'``, ``$(…)``,
backticks, ``<(…)``, ``${…}``, ``$((…))``, heredocs, comments, line continuations) and tracks just
enough structure to know which words are in command position: lists and pipelines, subshells and
groups, ``if``/``while``/``until``/``for``/``select``/``case`` bodies, function definitions,
``[[ … ]]`` and ``(( … ))``, assignments and arrays. Words are resolved from the source text
(never from another library's idea of them), and every command found inside a substitution is
reported too, since it runs. Text the parser cannot close (an unterminated quote or substitution)
becomes a :class:`Problem`, so the caller can fail closed.
"""

from __future__ import annotations

import re

from run_bash.checker.words import DYN, LIT, PROC, RAW, SPLIT, Part, decode_ansi_c

_BLANK = re.compile(r"(?:[ \t\r\f\v]|\\\n)+")
_PLAIN = re.compile(r"[^\s;&|()<>'\"\\$`]+")
_DQ_PLAIN = re.compile(r'[^"\\$`]+')
_HD_PLAIN = re.compile(r"[^\\$`]+")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\+?=")
_FD = re.compile(r"\d+(?=[<>])")
_FUNC_PARENS = re.compile(r"[ \t]*\([ \t]*\)")
_TIME_P = re.compile(r"[ \t]+-p(?=[\s;&|]|$)")
_FD_TARGET = re.compile(r"[ \t]*(?:\d+-?|-)(?=[\s;&|()<>]|$)")
_OPS = (
    ";;&",
    "&>>",
    "<<<",
    "<<-",
    ";;",
    ";&",
    "&&",
    "&>",
    "||",
    "|&",
    "<<",
    "<>",
    "<&",
    ">>",
    ">&",
    ">|",
    ";",
    "&",
    "|",
    "(",
    ")",
    "<",
    ">",
)
_REDIRS = frozenset({"&>>", "<<<", "<<-", "&>", "<<", "<>", "<&", ">>", ">&", ">|", "<", ">"})
# Reserved words after which the next word is again in command position.
_START_WORDS = frozenset(
    {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "{", "}", "coproc"}
)
MAX_NESTING = 64

# Modes of the command-position parser.
_NORMAL, _CASE_HEAD, _CASE_PAT, _FOR_HEAD = range(4)

Token = tuple[str, object, int, int]  # kind ("w", "op", "redir", "nl", "eof"), value, start, end


class Unparsable(Exception):
    """The source cannot be parsed the way bash would run it (e.g. an unterminated quote)."""

    def __init__(self, reason: str, at: int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.at = at


class Word:
    """One shell word: its source text and its parts (see :mod:`run_bash.checker.words`)."""

    __slots__ = ("end", "parts", "start", "text")

    def __init__(self, text: str, parts: list[Part], start: int, end: int) -> None:
        self.text = text
        self.parts = parts
        self.start = start
        self.end = end

    def reserved(self) -> str | None:
        """The word's text when it could be a reserved word (one unquoted literal part)."""
        if len(self.parts) == 1 and self.parts[0][1] == RAW:
            return self.parts[0][0]
        return None

    def is_assignment(self) -> bool:
        """True for ``NAME=…``, ``NAME+=…`` and ``NAME[i]=…`` (unquoted name)."""
        if not self.parts or self.parts[0][1] != RAW:
            return False
        return _ASSIGN.match(self.parts[0][0]) is not None


class Cmd:
    """A simple command: its words and what its standard input is."""

    __slots__ = (
        "end",
        "heredoc",
        "herestring",
        "pipe_from",
        "src",
        "start",
        "stdin_file",
        "words",
    )

    def __init__(self, src: str, start: int, pipe_from: Cmd | bool | None) -> None:
        self.src = src
        self.start = start
        self.end = start
        self.words: list[Word] = []
        self.heredoc: str | None = None
        self.herestring: Word | None = None
        self.stdin_file = False
        # The command writing into this one's stdin through `|`; True when that is not a simple
        # command (a group, a loop), None when stdin is not a pipe.
        self.pipe_from = pipe_from

    @property
    def text(self) -> str:
        """The command's source text."""
        return self.src[self.start : self.end]


class Problem:
    """Something the parser could not resolve; the checker pauses for it."""

    __slots__ = ("reason", "text")

    def __init__(self, reason: str, text: str) -> None:
        self.reason = reason
        self.text = text


Item = Cmd | Problem


def parse(src: str) -> list[Item]:
    """Parse a script; return its simple commands (including nested ones) and any problems."""
    out: list[Item] = []
    parser = _Parser(src, out, None, 0, 0)
    try:
        parser.run()
    except Unparsable as err:
        snippet = src[max(0, err.at - 40) : err.at + 40].strip()
        out.append(Problem(err.reason, snippet or src.strip()))
    except RecursionError:
        out.append(Problem("nests too deeply to analyse", src.strip()))
    return out


def words_of(text: str) -> list[Word] | None:
    """Split ``text`` into shell words (for ``env -S``); None when it is not plain words."""
    out: list[Item] = []
    parser = _Parser(text, out, None, 0, 0)
    words: list[Word] = []
    try:
        while True:
            kind, value, _, _ = parser.token()
            if kind == "eof":
                break
            if kind != "w":
                return None
            assert isinstance(value, Word)
            words.append(value)
    except Unparsable:
        return None
    return None if out else words


class _Parser:
    def __init__(
        self, src: str, out: list[Item], closer: str | None, start: int, level: int
    ) -> None:
        self.src = src
        self.n = len(src)
        self.i = start
        self.out = out
        self.closer = closer
        self.level = level
        self.pending: list[tuple[str, bool, bool, Cmd]] = []
        if level > MAX_NESTING:
            raise Unparsable("nests substitutions too deeply to analyse", start)

    # -- tokens -----------------------------------------------------------------------------------

    def token(self) -> Token:
        src, n = self.src, self.n
        while True:
            m = _BLANK.match(src, self.i)
            if m:
                self.i = m.end()
            i = self.i
            if i >= n:
                return ("eof", None, i, i)
            c = src[i]
            if c == "#":
                j = src.find("\n", i)
                self.i = n if j < 0 else j
                continue
            if c == "\n":
                self.i = i + 1
                if self.pending:
                    self._read_heredocs()
                return ("nl", "\n", i, i + 1)
            if c in "<>" and i + 1 < n and src[i + 1] == "(":
                return ("w", self._word(), i, self.i)
            if c in ";&|()<>":
                return self._op(i)
            if "0" <= c <= "9":
                m = _FD.match(src, i)
                if m:
                    kind, op, _, end = self._op(m.end())
                    return (kind, op, i, end)
            w = self._word()
            return ("w", w, i, self.i)

    def _op(self, i: int) -> Token:
        src = self.src
        for op in _OPS:
            if src.startswith(op, i):
                self.i = i + len(op)
                return ("redir" if op in _REDIRS else "op", op, i, self.i)
        raise AssertionError("unreachable")  # pragma: no cover

    # -- words ------------------------------------------------------------------------------------

    def _word(self) -> Word:
        src, n = self.src, self.n
        start = i = self.i
        parts: list[Part] = []
        while i < n:
            c = src[i]
            if c in " \t\n\r\f\v;&|":
                break
            if c in "<>":
                if i == start and i + 1 < n and src[i + 1] == "(":
                    end = self._subst(i + 2, "process substitution")
                    parts.append((src[i:end], PROC))
                    i = end
                    continue
                break
            if c == "(":
                if (
                    parts
                    and all(k == RAW for _, k in parts)
                    and _ASSIGN.fullmatch("".join(t for t, _ in parts))
                ):
                    i = self._array(i + 1)
                    parts.append((src[start:i], DYN))
                    continue
                if i > start and src[i - 1] in "?*+@!":
                    end = self._balanced(i)
                    parts.append((src[i:end], RAW))
                    i = end
                    continue
                break
            if c == ")":
                break
            if c == "'":
                j = src.find("'", i + 1)
                if j < 0:
                    raise Unparsable("has an unterminated single quote", i)
                parts.append((src[i + 1 : j], LIT))
                i = j + 1
            elif c == '"':
                i = self._dquote(i + 1, parts)
            elif c == "\\":
                if i + 1 < n:
                    if src[i + 1] != "\n":
                        parts.append((src[i + 1], LIT))
                    i += 2
                else:
                    parts.append(("\\", LIT))
                    i += 1
            elif c == "$":
                i = self._dollar(i, parts, False)
            elif c == "`":
                i = self._backtick(i, parts, False)
            else:
                m = _PLAIN.match(src, i)
                assert m is not None
                parts.append((m.group(), RAW))
                i = m.end()
        self.i = i
        return Word(src[start:i], parts, start, i)

    def _dquote(self, k: int, parts: list[Part]) -> int:
        src, n = self.src, self.n
        while k < n:
            ch = src[k]
            if ch == '"':
                return k + 1
            if ch == "\\":
                nxt = src[k + 1] if k + 1 < n else ""
                if nxt in ('"', "\\", "$", "`"):
                    parts.append((nxt, LIT))
                    k += 2
                elif nxt == "\n":
                    k += 2
                else:
                    parts.append(("\\", LIT))
                    k += 1
            elif ch == "$":
                k = self._dollar(k, parts, True)
            elif ch == "`":
                k = self._backtick(k, parts, True)
            else:
                m = _DQ_PLAIN.match(src, k)
                assert m is not None
                parts.append((m.group(), LIT))
                k = m.end()
        raise Unparsable("has an unterminated double quote", k)

    def _dollar(self, i: int, parts: list[Part], quoted: bool) -> int:
        src, n = self.src, self.n
        j = i + 1
        c = src[j] if j < n else ""
        dyn = DYN if quoted else SPLIT
        if c == "'" and not quoted:
            k = j + 1
            while k < n and src[k] != "'":
                k += 2 if src[k] == "\\" else 1
            if k >= n:
                raise Unparsable("has an unterminated $'…' quote", i)
            parts.append((decode_ansi_c(src[j + 1 : k]), LIT))
            return k + 1
        if c == '"' and not quoted:
            return self._dquote(j + 1, parts)
        if c == "(":
            if src.startswith("((", j):
                end = self._arith(j + 2, dry=True)
                if end >= 0:
                    self._arith(j + 2, dry=False)
                    parts.append((src[i:end], DYN))
                    return end
            end = self._subst(j + 1, "command substitution")
            parts.append((src[i:end], dyn))
            return end
        if c == "[":
            k = src.find("]", j)
            if k < 0:
                raise Unparsable("has an unterminated $[…]", i)
            parts.append((src[i : k + 1], DYN))
            return k + 1
        if c == "{":
            end = self._param(j + 1)
            body = src[j + 1 : end - 1]
            if quoted and (body[:1] in ("@", "*") or "[@]" in body or "[*]" in body):
                dyn = SPLIT
            parts.append((src[i:end], dyn))
            return end
        if c and c in "@*":
            parts.append((src[i : j + 1], SPLIT))
            return j + 1
        if c and c in "#?$!-":
            parts.append((src[i : j + 1], DYN))
            return j + 1
        if c and "0" <= c <= "9":
            parts.append((src[i : j + 1], dyn))
            return j + 1
        m = _NAME.match(src, j)
        if m:
            parts.append((src[i : m.end()], dyn))
            return m.end()
        parts.append(("$", LIT if quoted else RAW))
        return j

    def _param(self, k: int) -> int:
        """Skip a ``${…}`` body starting after ``{``; return the index after ``}``."""
        src, n = self.src, self.n
        start = k
        depth = 0
        while k < n:
            ch = src[k]
            if ch == "\\":
                k += 2
                continue
            if ch == "}":
                if depth == 0:
                    return k + 1
                depth -= 1
            elif ch == "{":
                depth += 1
            elif ch == "'":
                j = src.find("'", k + 1)
                if j < 0:
                    break
                k = j
            elif ch == '"':
                k = self._dquote(k + 1, []) - 1
            elif ch == "$":
                if src.startswith("${", k):
                    k = self._param(k + 2)
                    continue
                if src.startswith("$(", k):
                    k = self._dollar(k, [], True)
                    continue
            elif ch == "`":
                k = self._backtick(k, [], True)
                continue
            k += 1
        raise Unparsable("has an unterminated ${…}", start - 2)

    def _subst(self, k: int, what: str) -> int:
        """Parse a ``$(…)``/``<(…)`` body starting at ``k``; return the index after ``)``."""
        sub = _Parser(self.src, self.out, ")", k, self.level + 1)
        sub.run()
        if sub.i > self.n or self.src[sub.i - 1 : sub.i] != ")":
            raise Unparsable(f"has an unterminated {what}", k)
        return sub.i

    def _backtick(self, i: int, parts: list[Part], quoted: bool) -> int:
        src, n = self.src, self.n
        k = i + 1
        buf: list[str] = []
        while k < n:
            ch = src[k]
            if ch == "\\" and k + 1 < n:
                nxt = src[k + 1]
                if nxt in "$`\\" or (quoted and nxt == '"'):
                    buf.append(nxt)
                else:
                    buf.append(ch + nxt)
                k += 2
                continue
            if ch == "`":
                break
            buf.append(ch)
            k += 1
        else:
            raise Unparsable("has an unterminated backtick substitution", i)
        inner = _Parser("".join(buf), self.out, None, 0, self.level + 1)
        inner.run()
        parts.append((src[i : k + 1], DYN if quoted else SPLIT))
        return k + 1

    def _arith(self, k: int, dry: bool) -> int:
        """Scan an arithmetic body after ``((``; return the index after ``))`` or -1."""
        src, n = self.src, self.n
        depth = 0
        while k < n:
            ch = src[k]
            if ch == "(":
                depth += 1
            elif ch == ")":
                if depth == 0:
                    return k + 2 if src.startswith("))", k) else -1
                depth -= 1
            elif ch == "\\":
                k += 1
            elif ch == "$" and not dry and src.startswith("$(", k) and not src.startswith("$((", k):
                k = self._subst(k + 2, "command substitution")
                continue
            elif ch == "`":
                if dry:
                    j = src.find("`", k + 1)
                    if j < 0:
                        return -1
                    k = j + 1
                else:
                    k = self._backtick(k, [], True)
                continue
            k += 1
        return -1

    def _balanced(self, i: int) -> int:
        """Skip a parenthesised extglob group starting at ``(``."""
        src, n = self.src, self.n
        depth = 0
        k = i
        while k < n:
            ch = src[k]
            if ch == "\\":
                k += 2
                continue
            if ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
                if depth == 0:
                    return k + 1
            elif ch in " \t\n":
                break
            k += 1
        raise Unparsable("has an unterminated pattern group", i)

    def _array(self, k: int) -> int:
        """Skip an array literal after ``NAME=(``; return the index after ``)``."""
        self.i = k
        while True:
            kind, value, start, end = self.token()
            if kind == "eof":
                raise Unparsable("has an unterminated array", k)
            if kind == "op" and value == ")":
                return end
            if kind in ("op", "redir"):
                raise Unparsable("has an array it cannot read", start)

    def _read_heredocs(self) -> None:
        src, n = self.src, self.n
        for delim, strip, quoted, cmd in self.pending:
            lines: list[str] = []
            while self.i < n:
                j = src.find("\n", self.i)
                end = n if j < 0 else j
                line = src[self.i : end]
                self.i = n if j < 0 else j + 1
                if strip:
                    line = line.lstrip("\t")
                if line == delim:
                    break
                lines.append(line)
            body = "\n".join(lines) + ("\n" if lines else "")
            if not quoted and ("$" in body or "`" in body):
                _Parser(body, self.out, None, 0, self.level + 1).heredoc_expansions()
            cmd.heredoc = body
        self.pending = []

    def heredoc_expansions(self) -> None:
        """Parse the expansions in an unquoted heredoc body (their commands run)."""
        src, n = self.src, self.n
        k = 0
        while k < n:
            ch = src[k]
            if ch == "\\":
                k += 2
            elif ch == "$":
                k = self._dollar(k, [], True)
            elif ch == "`":
                k = self._backtick(k, [], True)
            else:
                m = _HD_PLAIN.match(src, k)
                k = m.end() if m else k + 1

    # -- structure --------------------------------------------------------------------------------

    def run(self) -> None:
        """Parse until end of input (or the closing ``)`` of a substitution)."""
        src = self.src
        out = self.out
        cmd: Cmd | None = None
        pipe: Cmd | bool | None = None
        stack: list[str] = []
        mode = _NORMAL
        case_pat_start = True

        def finish() -> None:
            if cmd is not None and cmd.words:
                out.append(cmd)

        while True:
            kind, value, start, end = self.token()
            if mode != _NORMAL:
                if kind == "eof":
                    if self.closer:
                        raise Unparsable("is missing a closing `)`", start)
                    return
                word = value.reserved() if isinstance(value, Word) else None
                if mode == _CASE_HEAD:
                    if word == "in":
                        mode = _CASE_PAT
                        case_pat_start = True
                    continue
                if mode == _FOR_HEAD:
                    if (kind == "op" and value in (";", "&")) or kind == "nl" or word == "do":
                        mode = _NORMAL
                    continue
                # _CASE_PAT
                if word == "esac" and case_pat_start:
                    if stack and stack[-1] == "case":
                        stack.pop()
                    mode = _NORMAL
                elif kind == "op" and value == ")":
                    mode = _NORMAL
                elif kind == "w":
                    case_pat_start = False
                continue

            if kind == "w":
                assert isinstance(value, Word)
                if cmd is None:
                    word = value.reserved()
                    if word is not None:
                        if word in _START_WORDS:
                            continue
                        if word == "time":
                            m = _TIME_P.match(src, self.i)
                            if m:
                                self.i = m.end()
                            continue
                        if word == "esac":
                            if stack and stack[-1] == "case":
                                stack.pop()
                            continue
                        if word == "case":
                            stack.append("case")
                            mode = _CASE_HEAD
                            continue
                        if word in ("for", "select"):
                            mode = _FOR_HEAD
                            m = _BLANK.match(src, self.i)
                            j = m.end() if m else self.i
                            if src.startswith("((", j):
                                arith_end = self._arith(j + 2, dry=False)
                                if arith_end < 0:
                                    raise Unparsable("has an unterminated `for ((`", j)
                                self.i = arith_end
                            continue
                        if word == "function":
                            self.token()
                            m = _FUNC_PARENS.match(src, self.i)
                            if m:
                                self.i = m.end()
                            continue
                        if word == "[[":
                            self._cond(start)
                            continue
                    if value.is_assignment():
                        cmd = Cmd(src, start, pipe)
                        cmd.end = end
                        pipe = None
                        continue
                    m = _FUNC_PARENS.match(src, self.i)
                    if m and value.reserved() is not None:
                        self.i = m.end()
                        continue
                    cmd = Cmd(src, start, pipe)
                    pipe = None
                    cmd.words.append(value)
                    cmd.end = end
                    continue
                if not cmd.words and value.is_assignment():
                    cmd.end = end
                    continue
                cmd.words.append(value)
                cmd.end = end
                continue

            if kind == "redir":
                if cmd is None:
                    cmd = Cmd(src, start, pipe)
                    pipe = None
                self._redirect(str(value), cmd, start)
                continue

            if kind == "eof":
                finish()
                if self.closer:
                    raise Unparsable("is missing a closing `)`", start)
                return

            if kind == "nl":
                finish()
                cmd = None
                continue

            # operators
            if value in (";", "&", "&&", "||"):
                finish()
                cmd = None
                pipe = None
            elif value in ("|", "|&"):
                finish()
                pipe = cmd if cmd is not None and cmd.words else True
                cmd = None
            elif value in (";;", ";&", ";;&"):
                finish()
                cmd = None
                if stack and stack[-1] == "case":
                    mode = _CASE_PAT
                    case_pat_start = True
            elif value == "(":
                if (cmd is None or not cmd.words) and src.startswith("(", end):
                    arith_end = self._arith(end + 1, dry=True)
                    if arith_end >= 0:
                        self._arith(end + 1, dry=False)
                        self.i = arith_end
                        continue
                finish()
                cmd = None
                stack.append("(")
            elif value == ")":
                finish()
                cmd = None
                if stack and stack[-1] == "(":
                    stack.pop()
                elif self.closer == ")":
                    return
                else:
                    raise Unparsable("has an unexpected `)`", start)

    def _redirect(self, op: str, cmd: Cmd, at: int) -> None:
        if op in (">&", "<&"):
            m = _FD_TARGET.match(self.src, self.i)
            if m:
                self.i = cmd.end = m.end()
                return
        kind, target, _, end = self.token()
        if kind != "w":
            raise Unparsable(f"has a redirection `{op}` without a target", at)
        assert isinstance(target, Word)
        cmd.end = end
        if op in ("<<", "<<-"):
            delim = "".join(t for t, _ in target.parts)
            quoted = any(ch in target.text for ch in "'\"\\")
            self.pending.append((delim, op == "<<-", quoted, cmd))
        elif op == "<<<":
            cmd.herestring = target
        elif op == "<":
            cmd.stdin_file = True

    def _cond(self, at: int) -> None:
        """Skip a ``[[ … ]]`` expression (its substitutions are still parsed)."""
        while True:
            kind, value, _, _ = self.token()
            if kind == "eof":
                raise Unparsable("has an unterminated `[[`", at)
            if kind == "w" and isinstance(value, Word) and value.reserved() == "]]":
                return
