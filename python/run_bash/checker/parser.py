"""A bash parser for the pause list: finds every simple command a script would run. Pure.

It tokenizes like bash (quotes, escapes, ``$'…'``, ``$(…)``, backticks, ``<(…)``, ``${…}``,
``$((…))``, ``$[…]``, heredocs, comments, line continuations; only space and tab separate words,
so other Unicode or control whitespace stays inside a word) and follows bash's grammar: lists,
pipelines, ``time``/``!``, subshells and groups, ``if``/``while``/``until``/``for``/``select``/
``case``, ``((…))``, ``[[…]]``, function definitions, coprocesses, assignments (with subscripts
and array literals) and redirections. Input bash would reject (``ls &&``, ``{ ls``, a stray
``;;``, an unclosed heredoc) is reported as a :class:`Problem` saying it could not be parsed, so
the caller fails closed: bash may already run the lines before the error, and any difference
between this parser and bash's is where a bypass would hide.

The result is a flat list, in source order, of every simple command (:class:`Cmd`, including the
ones inside substitutions, which run too) plus a few facts the analysis needs: places where bash
evaluates variable values as code (:class:`Sink`), ``for`` loop variables (:class:`ForVar`) and
redirections of compound commands (:class:`Compound`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from itertools import count, groupby, pairwise, repeat
from operator import itemgetter
from typing import Literal

from run_bash.checker.words import DYN, LIT, PROC, RAW, SPLIT, Part, decode_ansi_c, wordlist

_BLANK = re.compile(r"(?:[ \t]|\\\n)+")
_PLAIN = re.compile(r"[^ \t\n;&|()<>'\"\\$`]+")
_DQ_PLAIN = re.compile(r'[^"\\$`]+')
_HD_PLAIN = re.compile(r"[^\\$`]+")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NAME_REF = re.compile(r"\$[A-Za-z_][A-Za-z0-9_]*")
_NAME_RUN = re.compile(r"(?:\$[A-Za-z_][A-Za-z0-9_]*)+")
# Runs of characters without meaning inside a construct, skipped in one step.
_SUBSCRIPT_PLAIN = re.compile(r"[^\]\[\\'\"$`]+")
_GROUP_PLAIN = re.compile(r"[^()\\'\"$`\n]+")
_PARAM_PLAIN = re.compile(r"[^{}\\'\"$`]+")
_ARITH_PLAIN = re.compile(r"[^()\\'\"$`]+")
_BRACKET_PLAIN = re.compile(r"[^\]\[\\\"$`]+")
_ESCAPES = re.compile(r"(?:\\[^\n])+")
# Extglob groups without quotes or expansions inside, one after another: `@(a)@(b|c)x*(d)`.
_EXTGLOB_RUN = re.compile(
    r"\([^()\\'\"$`\n]*\)(?:[^ \t\n;&|()<>'\"\\$`?*+@!]*[?*+@!]\([^()\\'\"$`\n]*\))*"
)
_ANSI_C_BODY = re.compile(r"(?:[^'\\]|\\.)*", re.S)
# Array elements that are plain words, read in one step.
_PLAIN_ELEMENTS = re.compile(
    r"(?:[ \t\n]*[^ \t\n;&|()<>'\"\\$`\[#{][^ \t\n;&|()<>'\"\\$`]*(?=[ \t\n)]))+"
)
_SIMPLE_ASSIGN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\+?)=")
_ASSIGN_PREFIX = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\+?=")
_FD = re.compile(r"(?:\d+|\{[A-Za-z_][A-Za-z0-9_]*\})(?=[<>])")
_FUNC_PARENS = re.compile(r"[ \t]*\([ \t]*\)")
_FD_TARGET = re.compile(r"[ \t]*(?:\d+-?|-)(?=[ \t\n;&|()<>]|$)")
_ARITH_NAME = re.compile(r"[A-Za-z_$]")
# A named coprocess: `coproc NAME` followed by a compound command.
_COPROC_BODY = re.compile(
    r"[ \t]*(?:[({]|(?:while|until|if|for|select|case|\[\[)(?=[ \t\n;&|()<>]|$))"
)
_OPS = tuple(wordlist(";;& &>> <<< <<- ;; ;& && &> || |& << <> <& >> >& >| ; & | ( ) < >"))
_REDIRS = frozenset({"&>>", "<<<", "<<-", "&>", "<<", "<>", "<&", ">>", ">&", ">|", "<", ">"})
_CASE_ENDS = frozenset({";;", ";&", ";;&"})
# Reserved words that cannot start a command; at command position they end a list or are an error.
_CLOSERS = frozenset({"then", "else", "elif", "fi", "do", "done", "esac", "}", "in", "]]"})
_COMPOUND_STARTS = frozenset({"{", "if", "while", "until", "for", "select", "case", "[["})
# Arithmetic-comparison operators of `[[ … ]]`: their operands are evaluated as arithmetic.
_COND_ARITH = frozenset({"-eq", "-ne", "-lt", "-le", "-gt", "-ge", "-v"})
# ${!name} (not ${!prefix*}, ${!name[@]}): indirection. ${name@P}: prompt expansion.
# ${name[sub]} and ${name:offset}: the subscript and offset are arithmetic.
_PARAM_SINK = re.compile(
    r"![A-Za-z_0-9][A-Za-z0-9_]*(?![A-Za-z0-9_*@]|\[[@*]\])|[^}]*@P$"
    r"|#?[A-Za-z_][A-Za-z0-9_]*\[(?![@*]\])[^\]]*[A-Za-z_$]"
    r"|[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?:(?![-=?+])[^}]*[A-Za-z_$]"
)
# Builtins whose arguments may be array assignments (`declare a=(1 2)`).
_DECLARE_LIKE = frozenset({"declare", "typeset", "local", "export", "readonly", "alias", "eval"})
MAX_NESTING = 40
_IDS = count(1)  # subshell ids; unique within a process is all that is needed

# Word contexts of the tokenizer.
NORMAL = 0  # an argument
ASSIGN = 1  # where bash reads assignments: `a=1`, `a[i + 1]=2`, `a=(…)`
ARRAY_ARGS = 2  # arguments of declare-like builtins: `a=(…)` is an array
SCALAR_ASSIGN = 3  # after `a=1 > f`, bash still reads `b=2` as an assignment but not `b=(…)`

# A token: (kind, value, start, end); the kind tells the value's type.
WordToken = tuple[Literal["w"], "Word", int, int]
OpToken = tuple[Literal["op"], str, int, int]
RedirToken = tuple[Literal["redir"], tuple[str, str], int, int]  # (operator, fd text)
EndToken = tuple[Literal["nl", "eof"], str | None, int, int]
Token = WordToken | OpToken | RedirToken | EndToken


class Unparsable(Exception):
    """The source cannot be parsed the way bash would run it (e.g. an unterminated quote)."""

    def __init__(self, reason: str, at: int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.at = at


class Word:
    """One shell word: its source text and its parts (see :mod:`run_bash.checker.words`).

    An assignment word (``NAME=v``, ``NAME+=v``, ``NAME[sub]=v``, ``NAME=(…)``) read where bash
    accepts assignments also has ``assign`` = (name, subscript text or None, append), its value
    parts from ``vstart`` on and, for an array literal, its ``elements``.
    """

    __slots__ = (
        "assign",
        "elements",
        "end",
        "parts",
        "plain",
        "plain_elements",
        "start",
        "text",
        "vstart",
    )

    def __init__(self, text: str, parts: list[Part], start: int, end: int) -> None:
        self.text = text
        self.parts = parts
        self.start = start
        self.end = end
        self.assign: tuple[str, str | None, bool] | None = None
        self.vstart = 0
        self.elements: list[Word] | None = None
        self.plain_elements: list[str] = []  # array elements without quotes or expansions
        # The text when it is one unquoted literal part (so it may be a reserved word).
        self.plain = parts[0][0] if len(parts) == 1 and parts[0][1] == RAW else None

    def reserved(self) -> str | None:
        """The word's text when it could be a reserved word (one unquoted literal part)."""
        return self.plain

    def is_assignment(self) -> bool:
        """True for an assignment word read in assignment position."""
        return self.assign is not None


class Span:
    """A compound command's source text (for a pipe or redirection it feeds)."""

    __slots__ = ("end", "src", "start")

    def __init__(self, src: str, start: int, end: int) -> None:
        self.src = src
        self.start = start
        self.end = end

    @property
    def text(self) -> str:
        """The source text."""
        return self.src[self.start : self.end]


class Redir:
    """One redirection: ``op`` (``>``, ``<<``, …), its fd, target word and heredoc body.

    ``dup`` is the descriptor of ``>&3`` (``-`` closes); its target is then None.
    """

    __slots__ = ("body", "dup", "fd", "op", "quoted", "target")

    def __init__(self, op: str, fd: str, target: Word | None, dup: str = "") -> None:
        self.op = op
        self.fd = fd
        self.target = target
        self.dup = dup
        self.body: str | None = None
        self.quoted = False

    @property
    def reads_stdin(self) -> bool:
        """True when this redirection replaces standard input."""
        return self.op in ("<", "<<", "<<-", "<<<", "<>") and self.fd in ("", "0")

    @property
    def writes_file(self) -> bool:
        """True when this redirection writes a file (``>``, ``>>``, ``&>``, ``>|``)."""
        return self.op in (">", ">>", ">|", "&>", "&>>") and self.fd in ("", "1", "2")


Stdin = Redir | None


class Cmd:
    """A simple command: its words, assignments, redirections and where its input comes from."""

    __slots__ = (
        "assigns",
        "end",
        "in_func",
        "looped",
        "nested",
        "pipe_from",
        "piped",
        "redirs",
        "scope",
        "src",
        "start",
        "stdin",
        "words",
    )

    def __init__(self, src: str, start: int, in_func: bool, nested: bool = False) -> None:
        self.src = src
        self.start = start
        self.end = start
        self.words: list[Word] = []
        self.assigns: list[Word] = []
        self.redirs: list[Redir] = []
        self.stdin: Redir | None = None
        # The command writing into this one's stdin through `|` (a Cmd, or a Span for a
        # compound command); None when stdin is not a pipe.
        self.pipe_from: Cmd | Span | None = None
        self.piped = False  # its output goes into a pipe
        self.in_func = in_func  # inside a function body: positional parameters are unknown
        self.nested = nested  # inside a substitution: its output is not the script's
        # The subshells it runs in (one id per subshell, substitution or pipeline part) and
        # whether it is in a loop's body: where a `cd` it makes still holds.
        self.scope: tuple[int, ...] = ()
        self.looped = False

    @property
    def text(self) -> str:
        """The command's source text."""
        return self.src[self.start : self.end]

    @property
    def heredoc(self) -> str | None:
        """The body of the heredoc on its stdin, if any."""
        r = self.stdin
        return r.body if r is not None and r.op in ("<<", "<<-") else None

    @property
    def herestring(self) -> Word | None:
        """The here-string on its stdin, if any."""
        r = self.stdin
        return r.target if r is not None and r.op == "<<<" else None


class Problem:
    """Something the parser could not resolve; the checker pauses for it."""

    __slots__ = ("reason", "text")

    def __init__(self, reason: str, text: str) -> None:
        self.reason = reason
        self.text = text


class Sink:
    """A place where bash evaluates a variable's value as code (arithmetic, ``${!v}``, …)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


class ForVar:
    """``for NAME in WORDS`` / ``select``: NAME takes each word's value (WORDS None: ``"$@"``)."""

    __slots__ = ("in_func", "name", "words")

    def __init__(self, name: str, words: list[Word] | None, in_func: bool) -> None:
        self.name = name
        self.words = words
        self.in_func = in_func


class Words:
    """Words bash expands outside a simple command (``[[ … ]]``, ``case``), for their strings."""

    __slots__ = ("words",)

    def __init__(self, words: list[Word]) -> None:
        self.words = words


class Compound:
    """A compound command with redirections (``{ …; } > file``)."""

    __slots__ = ("redirs", "span")

    def __init__(self, span: Span, redirs: list[Redir]) -> None:
        self.span = span
        self.redirs = redirs


Item = Cmd | Problem | Sink | ForVar | Compound | Words


def _merged(parts: list[Part]) -> list[Part]:
    """Join neighbouring literal parts of the same kind (a run of escapes, extglob groups)."""
    out: list[Part] = []
    for kind, group in groupby(parts, key=itemgetter(1)):
        if kind in (RAW, LIT):
            texts = [text for text, _ in group]
            out.append(("".join(texts), kind))
        else:
            out.extend(group)
    return out


def _reserved(tok: Token) -> str | None:
    """The reserved word a token could be (a word token with one unquoted literal part)."""
    return tok[1].plain if tok[0] == "w" else None


def parse(src: str) -> list[Item]:
    """Parse a script; return its simple commands (including nested ones) and any problems."""
    out: list[Item] = []
    parser = _Parser(src, out, 0, 0)
    try:
        parser.script()
    except Unparsable as err:
        snippet = src[max(0, err.at - 40) : err.at + 40].strip()
        out.append(Problem(err.reason, snippet or src.strip()))
    except RecursionError:
        out.append(Problem("nests too deeply to analyse", src.strip()))
    return out


def words_of(text: str) -> list[Word] | None:
    """Split ``text`` into shell words (``env -S``, aliases); None when it is not plain words."""
    out: list[Item] = []
    parser = _Parser(text, out, 0, 0)
    words: list[Word] = []
    try:
        while True:
            kind, value, _, _ = parser.next()
            if kind == "eof":
                break
            if kind != "w":
                return None
            assert isinstance(value, Word)
            words.append(value)
    except (Unparsable, RecursionError):
        return None
    return None if out else words


def expansions(text: str, out: list[Item], nest: int = 0) -> None:
    """Parse the ``$…``, backtick and ``<(…)``/``>(…)`` expansions found anywhere in ``text``.

    Quotes are not honoured: this is for text that bash evaluates again (an arithmetic string, a
    prompt, an unquoted heredoc), where finding code that would not run is the safe mistake.
    Raises :class:`Unparsable` when an expansion cannot be parsed.
    """
    _Parser(text, out, 0, nest).expansions()


class _Parser:
    def __init__(self, src: str, out: list[Item], start: int, nest: int) -> None:
        self.src = src
        self.n = len(src)
        self.i = start
        self.out = out
        self.nest = nest
        self.pending: list[Redir] = []
        self.peeked: tuple[Token, int, int, int] | None = None
        self.in_func = False
        self.scope: tuple[int, ...] = ()
        self.loops = 0
        self.ids = _IDS
        self.sub = nest > 0  # parsing a substitution (set for the ones created below)
        if nest > MAX_NESTING:
            raise Unparsable("nests too deeply to analyse", start)

    # -- tokens -----------------------------------------------------------------------------------

    def peek(self, assign: int = NORMAL) -> Token:
        """The next token, not consumed; ``assign``: the word context (see ASSIGN, ARRAY_ARGS)."""
        cached = self.peeked
        if cached is not None:
            tok, flag, start, mark = cached
            # Only an assignment word reads differently in another context.
            if flag == assign or tok[0] != "w" or "=" not in tok[1].text:
                return tok
            # Re-read the word in the other context; drop what reading it emitted.
            del self.out[mark:]
            self.i = start
        start, mark = self.i, len(self.out)
        tok = self._token(assign)
        self.peeked = (tok, assign, start, mark)
        self.i = start
        self._after = self._pos
        return tok

    def next(self, assign: int = NORMAL) -> Token:
        """Consume and return the next token."""
        tok = self.peek(assign)
        self.peeked = None
        self.i = self._after
        return tok

    def _token(self, assign: int) -> Token:
        src, n = self.src, self.n
        while True:
            i = self.i
            if i < n and src[i] in " \t\\":
                m = _BLANK.match(src, i)
                if m:
                    self.i = i = m.end()
            if i >= n:
                self._pos = i
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
                self._pos = self.i
                return ("nl", "\n", i, i + 1)
            if c in "<>" and i + 1 < n and src[i + 1] == "(":
                w = self._word(NORMAL)
                self._pos = self.i
                return ("w", w, i, self.i)
            if c in ";&|()<>":
                return self._op(i)
            if ("0" <= c <= "9") or c == "{":
                m = _FD.match(src, i)
                if m:
                    kind, value, _, end = self._op(m.end())
                    if kind == "redir":
                        assert isinstance(value, tuple)
                        return (kind, (value[0], m.group()), i, end)
            m = _PLAIN.match(src, i)
            if m:
                end = m.end()
                if end >= n or src[end] in " \t\n;&|)<>":
                    plain = self._plain_word(m.group(), i, end, assign)
                    if plain is not None:
                        self._pos = self.i = end
                        return ("w", plain, i, end)
            w = self._word(assign)
            self._pos = self.i
            return ("w", w, i, self.i)

    def _plain_word(self, text: str, start: int, end: int, assign: int) -> Word | None:
        """A word of plain characters only (the common case), or None to read it in full."""
        if assign in (ASSIGN, SCALAR_ASSIGN) and "[" in text:
            return None  # maybe a subscript: `a[i + 1]=2`
        word = Word(text, [(text, RAW)], start, end)
        if assign not in (ASSIGN, SCALAR_ASSIGN) or "=" not in text:
            return word
        m = _SIMPLE_ASSIGN.match(text)
        if m is None:
            return word
        head, rest = m.group(), text[m.end() :]
        word = Word(text, [(head, RAW), (rest, RAW)] if rest else [(head, RAW)], start, end)
        word.assign = (m.group(1), None, bool(m.group(2)))
        word.vstart = 1
        return word

    def _op(self, i: int) -> Token:
        src = self.src
        for op in _OPS:
            if src.startswith(op, i):
                end = i + len(op)
                self._pos = end
                if op in _REDIRS:
                    return ("redir", (op, ""), i, end)
                return ("op", op, i, end)
        raise Unparsable(f"has an unexpected `{src[i]}`", i)  # pragma: no cover

    def fail(self, tok: Token) -> Unparsable:
        """The syntax error for an unexpected token."""
        kind, value, start, _ = tok
        if kind == "eof":
            return Unparsable("ends where bash expects more", start)
        if kind == "nl":
            return Unparsable("has an unexpected newline", start)
        if kind == "w":
            assert isinstance(value, Word)
            return Unparsable(f"has an unexpected `{value.text}`", start)
        if kind == "redir":
            assert isinstance(value, tuple)
            return Unparsable(f"has an unexpected `{value[0]}`", start)
        return Unparsable(f"has an unexpected `{value}`", start)

    # -- words ------------------------------------------------------------------------------------

    def _word(self, assign: int) -> Word:
        src, n = self.src, self.n
        start = i = self.i
        parts: list[Part] = []
        assigned: tuple[str, str | None, bool] | None = None
        vstart = 0
        elements: list[Word] | None = None
        plain: list[str] = []
        if assign in (ASSIGN, SCALAR_ASSIGN):
            found = self._assignment_head(i)
            if found is not None:
                i, assigned = found
                parts.append((src[start:i], RAW))
                vstart = 1
                if i < n and src[i] == "(" and assign == ASSIGN:
                    elements, plain = self._array(i + 1)
                    i = self.i
                    parts.append((src[start:i], DYN))
        while i < n:
            c = src[i]
            if c in " \t\n;&|":
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
                    assign == ARRAY_ARGS
                    and elements is None
                    and len(parts) == 1
                    and parts[0][1] == RAW
                    and _ASSIGN_PREFIX.fullmatch(parts[0][0])
                ):
                    elements, plain = self._array(i + 1)
                    i = self.i
                    parts.append((src[start:i], DYN))
                    continue
                if parts and parts[-1][1] == RAW and src[i - 1] in "?*+@!":
                    m = _EXTGLOB_RUN.match(src, i)
                    end = m.end() if m else self._extglob(i)
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
                    m = _ESCAPES.match(src, i)
                    if m:
                        parts.append((m.group()[1::2], LIT))  # `\a\b…`: the escaped characters
                        i = m.end()
                        continue
                    i += 2  # a line continuation
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
        if len(parts) - vstart > 1:
            parts[vstart:] = _merged(parts[vstart:])
        word = Word(src[start:i], parts, start, i)
        word.elements = elements
        word.plain_elements = plain
        if assigned is not None:
            word.assign = assigned
            word.vstart = vstart
        return word

    def _assignment_head(self, i: int) -> tuple[int, tuple[str, str | None, bool]] | None:
        """Read ``NAME=``, ``NAME+=`` or ``NAME[sub]=`` at ``i``; return (end, assignment)."""
        src, n = self.src, self.n
        m = _NAME.match(src, i)
        if not m:
            return None
        j = m.end()
        sub: str | None = None
        if j < n and src[j] == "[":
            mark = len(self.out)
            try:
                k = self._subscript(j + 1)
            except Unparsable:
                k = -1
            if k < 0 or not (src.startswith("=", k) or src.startswith("+=", k)):
                del self.out[mark:]
                return None
            sub = src[j + 1 : k - 1]
            self._sink_if_named(sub, src[i:k])
            j = k
        if src.startswith("+=", j):
            return j + 2, (m.group(), sub, True)
        if j < n and src[j] == "=":
            return j + 1, (m.group(), sub, False)
        return None

    def _subscript(self, k: int) -> int:
        """Skip an array subscript after ``[``; return the index after ``]`` or -1."""
        end = self._balanced(k, _SUBSCRIPT_PLAIN, "[]")
        return end + 1 if end >= 0 else -1

    def _extglob(self, i: int) -> int:
        """Skip an extglob group ``@(…)`` starting at ``(``; its substitutions are parsed."""
        end = self._balanced(i + 1, _GROUP_PLAIN, "()", newline=True)
        if end < 0:
            raise Unparsable("has an unterminated extended glob `@(…)`", i)
        return end + 1

    def _balanced(
        self,
        k: int,
        plain: re.Pattern[str],
        pair: str,
        *,
        quotes: str = "skip",
        newline: bool = False,
    ) -> int:
        """Find the ``pair[1]`` that closes a construct whose body starts at ``k``; -1 if none.

        Nested pairs, escapes, double quotes and expansions inside are skipped (the commands of
        the expansions are parsed: they run). Single quotes are skipped (``quotes="skip"``),
        plain characters (``"none"``) or literal text whose expansions still run
        (``"expand"``, arithmetic). With ``newline``, a newline ends the search.
        """
        src, n = self.src, self.n
        opener, closer = pair[0], pair[1]
        depth = 0
        while k < n:
            m = plain.match(src, k)
            if m:
                k = m.end()
                if k >= n:
                    break
            ch = src[k]
            if ch == closer:
                if depth == 0:
                    return k
                depth -= 1
            elif ch == opener:
                depth += 1
            elif ch == "\\":
                k += 2
                continue
            elif ch == "'" and quotes != "none":
                j = src.find("'", k + 1)
                if j < 0:
                    return -1
                if quotes == "expand":
                    expansions(src[k + 1 : j], self.out, self.nest + 1)
                k = j
            elif ch == '"':
                k = self._dquote(k + 1, [])
                continue
            elif ch == "$":
                k = self._dollar(k, [], True)
                continue
            elif ch == "`":
                k = self._backtick(k, [], True)
                continue
            elif ch == "\n" and newline:
                return -1
            k += 1
        return -1

    def _dquote(self, k: int, parts: list[Part]) -> int:
        src, n = self.src, self.n
        start = k
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
        raise Unparsable("has an unterminated double quote", start - 1)

    def _dollar(self, i: int, parts: list[Part], quoted: bool) -> int:
        src, n = self.src, self.n
        j = i + 1
        c = src[j] if j < n else ""
        dyn = DYN if quoted else SPLIT
        if c == "'" and not quoted:
            quote = _ANSI_C_BODY.match(src, j + 1)
            assert quote is not None  # the pattern matches the empty string too
            k = quote.end()
            if k >= n:
                raise Unparsable("has an unterminated $'…' quote", i)
            parts.append((decode_ansi_c(src[j + 1 : k]), LIT))
            return k + 1
        if c == '"' and not quoted:
            return self._dquote(j + 1, parts)
        if c == "(":
            if src.startswith("((", j):
                mark = len(self.out)
                end = self._arith(j + 2)
                if end >= 0:
                    self._sink_if_named(src[j + 2 : end - 2], src[i:end])
                    parts.append((src[i:end], DYN))
                    return end
                del self.out[mark:]
            end = self._subst(j + 1, "command substitution")
            parts.append((src[i:end], dyn))
            return end
        if c == "[":
            end = self._bracket_arith(j + 1)
            self._sink_if_named(src[j + 1 : end - 1], src[i:end])
            parts.append((src[i:end], DYN))
            return end
        if c == "{":
            end = self._param(j + 1)
            body = src[j + 1 : end - 1]
            if quoted and (body[:1] in ("@", "*") or "[@]" in body or "[*]" in body):
                dyn = SPLIT
            if _PARAM_SINK.match(body):
                self.out.append(Sink(src[i:end]))
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
        m = _NAME_RUN.match(src, i)
        if m:
            # `$a$b$c…`: one part per expansion, read in one go.
            parts.extend(zip(_NAME_REF.findall(m.group()), repeat(dyn)))
            return m.end()
        parts.append(("$", LIT if quoted else RAW))
        return j

    def _sink_if_named(self, body: str, text: str) -> None:
        """Record arithmetic that dereferences variables (their values are evaluated too)."""
        if _ARITH_NAME.search(body):
            self.out.append(Sink(text))

    def _param(self, k: int) -> int:
        """Skip a ``${…}`` body starting after ``{``; return the index after ``}``."""
        end = self._balanced(k, _PARAM_PLAIN, "{}")
        if end < 0:
            raise Unparsable("has an unterminated ${…}", k - 2)
        return end + 1

    def _subst(self, k: int, what: str) -> int:
        """Parse a ``$(…)``/``<(…)`` body starting at ``k``; return the index after ``)``."""
        sub = _Parser(self.src, self.out, k, self.nest + 1)
        sub.in_func = self.in_func
        sub.scope, sub.loops = (*self.scope, next(self.ids)), self.loops
        sub.sub = True
        sub.compound_list(what)
        tok = sub.next()
        if tok[0] != "op" or tok[1] != ")":
            if tok[0] == "eof":
                raise Unparsable(f"has an unterminated {what}", k)
            raise sub.fail(tok)
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
        inner = _Parser("".join(buf), self.out, 0, self.nest + 1)
        inner.in_func = self.in_func
        inner.scope, inner.loops = (*self.scope, next(self.ids)), self.loops
        inner.sub = True
        try:
            inner.script()
        except Unparsable as err:
            raise Unparsable(err.reason, i) from None
        parts.append((src[i : k + 1], DYN if quoted else SPLIT))
        return k + 1

    def _arith(self, k: int) -> int:
        """Parse an arithmetic body after ``((``; return the index after ``))`` or -1."""
        end = self._balanced(k, _ARITH_PLAIN, "()", quotes="expand")
        return end + 2 if end >= 0 and self.src.startswith("))", end) else -1

    def _bracket_arith(self, k: int) -> int:
        """Parse a ``$[…]`` body after ``[``; return the index after ``]``."""
        end = self._balanced(k, _BRACKET_PLAIN, "[]", quotes="none")
        if end < 0:
            raise Unparsable("has an unterminated $[…]", k - 2)
        return end + 1

    def _array(self, k: int) -> tuple[list[Word], list[str]]:
        """Read an array literal after ``NAME=(``; leave ``self.i`` after ``)``.

        Returns its elements: words, and the plain ones as text (cheaper for huge literals).
        """
        src, n = self.src, self.n
        self.i = k
        self.peeked = None
        elements: list[Word] = []
        plain: list[str] = []
        while True:
            self._skip_blanks()
            i = self.i
            m = _PLAIN_ELEMENTS.match(src, i)
            if m:
                plain.extend(m.group().split())
                self.i = m.end()
                continue
            if i < n and src[i] == "[":
                element = self._element(i)
                if element is not None:
                    elements.append(element)
                    continue
            kind, value, start, _end = self.next(ASSIGN)
            if kind == "eof":
                raise Unparsable("has an unterminated array", k - 1)
            if kind == "nl":
                continue
            if kind == "op" and value == ")":
                return elements, plain
            if kind != "w":
                raise Unparsable("has an array it cannot read", start)
            assert isinstance(value, Word)
            elements.append(value)

    def _element(self, i: int) -> Word | None:
        """Read a ``[sub]=value`` array element at ``i``, or None when it is not one."""
        src = self.src
        mark = len(self.out)
        try:
            k = self._subscript(i + 1)
        except Unparsable:
            k = -1
        append = src.startswith("+=", k)
        if k < 0 or not (append or src.startswith("=", k)):
            del self.out[mark:]
            self.i = i
            return None
        sub = src[i + 1 : k - 1]
        self._sink_if_named(sub, src[i:k])
        eq = k + 2 if append else k + 1
        self.i = eq
        value = self._word(NORMAL)
        word = Word(src[i : value.end], [(src[i:eq], RAW), *value.parts], i, value.end)
        word.assign = ("", sub, append)
        word.vstart = 1
        return word

    def _read_heredocs(self) -> None:
        src, n = self.src, self.n
        for redir in self.pending:
            target = redir.target
            assert target is not None
            delim = "".join(t for t, _ in target.parts)
            strip = redir.op == "<<-"
            lines: list[str] = []
            closed = False
            while self.i < n:
                j = src.find("\n", self.i)
                end = n if j < 0 else j
                line = src[self.i : end]
                self.i = n if j < 0 else j + 1
                if strip:
                    line = line.lstrip("\t")
                if line == delim:
                    closed = True
                    break
                lines.append(line)
            if not closed:
                raise Unparsable(f"has a here-document that never ends (no `{delim}` line)", n)
            body = "\n".join(lines) + ("\n" if lines else "")
            if not redir.quoted and ("$" in body or "`" in body):
                _Parser(body, self.out, 0, self.nest + 1).heredoc_expansions()
            redir.body = body
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

    def expansions(self) -> None:
        """Parse every expansion in the text, quotes or not (see :func:`expansions`)."""
        src, n = self.src, self.n
        k = 0
        while k < n:
            ch = src[k]
            if ch == "$":
                k = self._dollar(k, [], True)
            elif ch == "`":
                k = self._backtick(k, [], True)
            elif ch in "<>" and src.startswith("(", k + 1):
                k = self._subst(k + 2, "process substitution")
            else:
                k += 1

    # -- grammar ----------------------------------------------------------------------------------

    def script(self) -> None:
        """Parse a whole script."""
        self.compound_list("script", top=True)
        tok = self.peek()
        if tok[0] != "eof":
            raise self.fail(tok)
        if self.pending:
            self._read_heredocs()

    def _skip_newlines(self) -> None:
        while self.peek(ASSIGN)[0] == "nl":
            self.next(ASSIGN)

    def compound_list(
        self,
        what: str,
        ends: frozenset[str] = frozenset(),
        *,
        case: bool = False,
        top: bool = False,
    ) -> int:
        """Parse commands until ``)``, a reserved word in ``ends``, a case terminator or EOF.

        Returns how many commands were read. The terminator is not consumed.
        """
        count = 0
        while True:
            tok = self.peek(ASSIGN)
            while tok[0] == "nl":
                self.peeked = None
                self.i = self._after
                tok = self.peek(ASSIGN)
            kind, value = tok[0], tok[1]
            if kind == "eof":
                if self.pending:
                    self._read_heredocs()
                return count
            if kind == "op" and (value == ")" or (case and value in _CASE_ENDS)):
                return count
            if tok[0] == "w":
                word = tok[1].plain
                if word in ends:
                    return count
                if word in _CLOSERS:
                    raise self.fail(tok)
            self.and_or()
            count += 1
            tok = self.peek(ASSIGN)
            if tok[0] == "op" and tok[1] in (";", "&"):
                self.peeked = None
                self.i = self._after
                continue
            if tok[0] in ("nl", "eof"):
                continue
            if tok[0] == "op" and (tok[1] == ")" or (case and tok[1] in _CASE_ENDS)):
                return count
            if tok[0] == "w" and not top:
                assert isinstance(tok[1], Word)
                if tok[1].reserved() in ends:
                    return count
            raise self.fail(tok)

    def _body(self, what: str, ends: frozenset[str], *, case: bool = False) -> None:
        if self.compound_list(what, ends, case=case) == 0 and not case:
            raise self.fail(self.peek(ASSIGN))

    def _expect(self, word: str) -> None:
        tok = self.next(ASSIGN)
        if _reserved(tok) != word:
            raise self.fail(tok)

    def and_or(self) -> None:
        """Parse pipelines joined by ``&&`` and ``||``."""
        self.pipeline()
        while True:
            tok = self.peek(ASSIGN)
            if tok[0] == "op" and tok[1] in ("&&", "||"):
                self.next(ASSIGN)
                self._skip_newlines()
                self.pipeline()
                continue
            return

    def pipeline(self) -> None:
        """Parse ``[time [-p] [--]] [!] command | command …``."""
        prefixed = False
        while True:
            # `!(…)` at command position is `!` then a subshell (extglob is off in bash -c).
            cached = self.peeked
            if cached is not None and cached[0][0] == "w" and cached[0][1].text.startswith("!("):
                self._unpeek()
            if self.peeked is None:
                self._skip_blanks()
                if self.src.startswith("!(", self.i):
                    self.i += 1
                    prefixed = True
                    continue
            tok = self.peek(ASSIGN)
            word = tok[1].plain if tok[0] == "w" else None
            if word not in ("!", "time"):
                break
            if word == "!":
                self.next(ASSIGN)
                prefixed = True
                continue
            if word == "time":
                self.next(ASSIGN)
                prefixed = True
                for flag in ("-p", "--"):
                    nxt = self.peek(ASSIGN)
                    if _reserved(nxt) == flag:
                        self.next(ASSIGN)
                continue
        if prefixed:
            tok = self.peek(ASSIGN)
            if tok[0] in ("nl", "eof") or (tok[0] == "op" and tok[1] == ";"):
                return  # `time` or `!` alone
        marks = [len(self.out)]
        previous = self.command(None)
        while True:
            tok = self.peek(ASSIGN)
            if tok[0] == "op" and tok[1] in ("|", "|&"):
                self.next(ASSIGN)
                if isinstance(previous, Cmd):
                    previous.piped = True
                self._skip_newlines()
                marks.append(len(self.out))
                previous = self.command(previous)
                continue
            break
        if len(marks) > 1:
            # Each part of a pipeline runs in a subshell of its own.
            marks.append(len(self.out))
            depth = len(self.scope)
            for a, b in pairwise(marks):
                fresh = next(self.ids)
                for item in self.out[a:b]:
                    if isinstance(item, Cmd):
                        item.scope = (*item.scope[:depth], fresh, *item.scope[depth:])

    def _unpeek(self) -> None:
        """Forget a peeked token (and what reading it emitted)."""
        cached = self.peeked
        if cached is not None:
            _, _, start, mark = cached
            del self.out[mark:]
            self.i = start
            self.peeked = None

    def _skip_blanks(self) -> None:
        if self.peeked is None:
            m = _BLANK.match(self.src, self.i)
            if m:
                self.i = m.end()

    def command(self, pipe_from: Cmd | Span | None) -> Cmd | Span:
        """Parse one command of a pipeline; return it (a :class:`Span` for a compound)."""
        tok = self.peek(ASSIGN)
        kind, value, start, end = tok
        if kind == "op" and value == "(":
            self.next(ASSIGN)
            if self.src.startswith("(", end):
                mark = len(self.out)
                arith_end = self._arith(end + 1)
                if arith_end >= 0:
                    self._sink_if_named(
                        self.src[end + 1 : arith_end - 2], self.src[start:arith_end]
                    )
                    self.i = arith_end
                    return self._compound_end(start, mark, pipe_from)
                del self.out[mark:]
            mark = len(self.out)
            outer = self.scope
            self.scope = (*outer, next(self.ids))
            try:
                self._nested(lambda: self._body("subshell", frozenset()))
            finally:
                self.scope = outer
            tok = self.next(ASSIGN)
            if tok[0] != "op" or tok[1] != ")":
                raise self.fail(tok)
            return self._compound_end(start, mark, pipe_from)
        if kind == "w":
            assert isinstance(value, Word)
            word = value.reserved()
            if word in _COMPOUND_STARTS:
                mark = len(self.out)
                self.next(ASSIGN)
                self._nested(lambda: self._compound(word, start))
                return self._compound_end(start, mark, pipe_from)
            if word == "function":
                self.next(ASSIGN)
                name = self.next()
                if name[0] != "w":
                    raise self.fail(name)
                m = _FUNC_PARENS.match(self.src, self.i)
                if m:
                    self.i = m.end()
                return self._function(start, pipe_from)
            if word == "coproc":
                self.next(ASSIGN)
                self._skip_blanks()
                m = _NAME.match(self.src, self.i)
                if m and _COPROC_BODY.match(self.src, m.end()):
                    self.i = m.end()
                return self.command(pipe_from)
            if word in _CLOSERS or word == "!":
                raise self.fail(tok)
            if not value.is_assignment():
                m = _FUNC_PARENS.match(self.src, end)
                if m:
                    self.next(ASSIGN)
                    self.i = m.end()
                    return self._function(start, pipe_from)
        if kind in ("w", "redir"):
            return self.simple(pipe_from)
        raise self.fail(tok)

    def _nested(self, parse: Callable[[], object]) -> None:
        self.nest += 1
        if self.nest > MAX_NESTING:
            raise Unparsable("nests too deeply to analyse", self.i)
        try:
            parse()
        finally:
            self.nest -= 1

    def _function(self, start: int, pipe_from: Cmd | Span | None) -> Span:
        self._skip_newlines()
        tok = self.peek(ASSIGN)
        word = _reserved(tok)
        if not (word in _COMPOUND_STARTS or (tok[0] == "op" and tok[1] == "(")):
            raise self.fail(tok)
        outer = self.in_func
        self.in_func = True
        try:
            self.command(None)
        finally:
            self.in_func = outer
        return Span(self.src, start, self.i)

    def _compound_end(self, start: int, mark: int, pipe_from: Cmd | Span | None) -> Span:
        """Read a compound command's redirections; give its commands its input."""
        redirs: list[Redir] = []
        while True:
            tok = self.peek()
            if tok[0] != "redir":
                break
            self.next()
            assert isinstance(tok[1], tuple)
            op, fd = tok[1]
            redirs.append(self._redirect(op, fd, tok[2]))
        span = Span(self.src, start, self.i)
        stdin = next((r for r in reversed(redirs) if r.reads_stdin), None)
        if stdin is not None or pipe_from is not None:
            for item in self.out[mark:]:
                if isinstance(item, Cmd) and item.stdin is None and item.pipe_from is None:
                    if stdin is not None:
                        item.stdin = stdin
                    else:
                        item.pipe_from = pipe_from
        if redirs:
            self.out.append(Compound(span, redirs))
        return span

    def _compound(self, word: str, start: int) -> None:
        if word == "{":
            self._body("group", frozenset({"}"}))
            self._expect("}")
        elif word == "if":
            self._body("if", frozenset({"then"}))
            self._expect("then")
            self._body("then", frozenset({"elif", "else", "fi"}))
            while True:
                tok = self.next(ASSIGN)
                w = _reserved(tok)
                if w == "elif":
                    self._body("elif", frozenset({"then"}))
                    self._expect("then")
                    self._body("then", frozenset({"elif", "else", "fi"}))
                elif w == "else":
                    self._body("else", frozenset({"fi"}))
                    self._expect("fi")
                    return
                elif w == "fi":
                    return
                else:
                    raise self.fail(tok)
        elif word in ("while", "until"):
            self.loops += 1
            try:
                self._body(word, frozenset({"do"}))
                self._expect("do")
                self._body("do", frozenset({"done"}))
            finally:
                self.loops -= 1
            self._expect("done")
        elif word in ("for", "select"):
            self._for(word)
        elif word == "case":
            self._case()
        elif word == "[[":
            self._cond(start)

    def _for(self, word: str) -> None:
        src = self.src
        self._skip_blanks()
        if word == "for" and src.startswith("((", self.i):
            k = self.i
            mark = len(self.out)
            end = self._arith(k + 2)
            if end < 0:
                del self.out[mark:]
                raise Unparsable("has an unterminated `for ((`", k)
            self._sink_if_named(src[k + 2 : end - 2], src[k:end])
            self.i = end
            tok = self.peek(ASSIGN)
            if tok[0] == "op" and tok[1] == ";":
                self.next(ASSIGN)
        else:
            tok = self.next()
            if tok[0] != "w" or not isinstance(tok[1], Word) or not _NAME.fullmatch(tok[1].text):
                raise self.fail(tok)
            name = tok[1].text
            self._skip_newlines()
            tok = self.peek(ASSIGN)
            words: list[Word] | None = None
            if _reserved(tok) == "in":
                self.next(ASSIGN)
                words = []
                while True:
                    tok = self.peek()
                    if tok[0] == "w":
                        self.next()
                        assert isinstance(tok[1], Word)
                        words.append(tok[1])
                        continue
                    if (tok[0] == "op" and tok[1] == ";") or tok[0] == "nl":
                        self.next()
                        break
                    raise self.fail(tok)
            elif tok[0] == "op" and tok[1] == ";":
                self.next(ASSIGN)
            self.out.append(ForVar(name, words, self.in_func))
        self._skip_newlines()
        tok = self.next(ASSIGN)
        w = _reserved(tok)
        if w not in ("do", "{"):
            raise self.fail(tok)
        self.loops += 1
        try:
            self._body(w, frozenset({"done" if w == "do" else "}"}))
        finally:
            self.loops -= 1
        self._expect("done" if w == "do" else "}")

    def _case(self) -> None:
        tok = self.next()
        if tok[0] != "w":
            raise self.fail(tok)
        assert isinstance(tok[1], Word)
        self.out.append(Words([tok[1]]))
        self._skip_newlines()
        self._expect("in")
        while True:
            self._skip_newlines()
            tok = self.peek()
            if _reserved(tok) == "esac":
                self.next()
                return
            if tok[0] == "op" and tok[1] == "(":
                self.next()
            # pattern ( | pattern )* )
            while True:
                tok = self.next()
                if tok[0] != "w":
                    raise self.fail(tok)
                assert isinstance(tok[1], Word)
                self.out.append(Words([tok[1]]))
                tok = self.next()
                if tok[0] == "op" and tok[1] == "|":
                    continue
                if tok[0] == "op" and tok[1] == ")":
                    break
                raise self.fail(tok)
            self._body("case arm", frozenset({"esac"}), case=True)
            tok = self.next(ASSIGN)
            if tok[0] == "op" and tok[1] in _CASE_ENDS:
                continue
            if _reserved(tok) == "esac":
                return
            raise self.fail(tok)

    def _cond(self, at: int) -> None:
        """Parse a ``[[ … ]]`` expression with bash's grammar (its substitutions too)."""
        tokens: list[Token] = []
        while True:
            tok = self.next()
            kind, value = tok[0], tok[1]
            if kind == "eof":
                raise Unparsable("has an unterminated `[[`", at)
            if tok[0] == "w" and tok[1].plain == "]]":
                break
            if kind == "op" and value in (";", ";;", "&", ";&", ";;&"):
                raise self.fail(tok)
            tokens.append(tok)
        words = [t[1] for t in tokens if t[0] == "w"]
        if tokens:
            end = _CondParser(tokens, self).parse()
            if end < len(tokens):
                raise self.fail(tokens[end])
        if any(w.plain in _COND_ARITH for w in words):
            self.out.append(Sink(self.src[at : tok[3]]))
        self.out.append(Words(words))

    def simple(self, pipe_from: Cmd | Span | None) -> Cmd:
        """Parse a simple command: assignments, words and redirections."""
        tok = self.peek(ASSIGN)
        cmd = Cmd(self.src, tok[2], self.in_func, self.sub)
        cmd.scope, cmd.looped = self.scope, self.loops > 0
        cmd.pipe_from = pipe_from
        assign = ASSIGN
        assigned = False
        while True:
            tok = self.peek(assign)
            start, end = tok[2], tok[3]
            if tok[0] == "w":
                value = tok[1]
                self.peeked = None  # consume the token just peeked
                self.i = self._after
                if assign in (ASSIGN, SCALAR_ASSIGN) and value.assign is not None:
                    cmd.assigns.append(value)
                    assigned = True
                else:
                    if assign in (ASSIGN, SCALAR_ASSIGN):
                        assign = ARRAY_ARGS if value.plain in _DECLARE_LIKE else NORMAL
                    cmd.words.append(value)
                cmd.end = end
                continue
            if tok[0] == "redir":
                self.peeked = None
                self.i = self._after
                op, fd = tok[1]
                if assign == ASSIGN and assigned:
                    assign = SCALAR_ASSIGN
                redir = self._redirect(op, fd, start)
                cmd.redirs.append(redir)
                if redir.reads_stdin:
                    cmd.stdin = redir
                    cmd.pipe_from = None
                cmd.end = self.i
                continue
            break
        if cmd.words or cmd.assigns or cmd.redirs:
            self.out.append(cmd)
        return cmd

    def _redirect(self, op: str, fd: str, at: int) -> Redir:
        if op in (">&", "<&"):
            m = _FD_TARGET.match(self.src, self.i)
            if m:
                self.i = m.end()
                return Redir(op, fd, None, m.group().strip())
        kind, target, _, _ = self.next()
        if kind != "w":
            raise Unparsable(f"has a redirection `{op}` without a target", at)
        assert isinstance(target, Word)
        redir = Redir(op, fd, target)
        if op in ("<<", "<<-"):
            redir.quoted = any(ch in target.text for ch in "'\"\\")
            self.pending.append(redir)
        return redir


_COND_UNARY = frozenset(
    wordlist("-a -b -c -d -e -f -g -h -k -p -r -s -t -u -w -x -O -G -L -S -N -z -n -o -v -R")
)
_COND_BINARY = frozenset(
    ["==", "=", "!=", "=~", "<", ">", "-eq", "-ne", "-lt", "-le", "-gt", "-ge", "-ef", "-nt", "-ot"]
)


class _CondParser:
    """The expression inside ``[[ … ]]``: ``!``, ``( )``, ``&&``, ``||``, unary and binary tests.

    Newlines may follow ``&&``/``||``; the word after ``=~`` is a regular expression and runs
    to the first unquoted blank outside parentheses.
    """

    def __init__(self, tokens: list[Token], parser: _Parser) -> None:
        self.tokens = tokens
        self.k = 0
        self.parser = parser

    def _text(self, k: int) -> str | None:
        """The operator text of token ``k`` (a word's plain text, an op, a redirection)."""
        if k >= len(self.tokens):
            return None
        tok = self.tokens[k]
        if tok[0] == "w":
            return tok[1].plain
        if tok[0] == "redir":
            return tok[1][0]
        return tok[1]

    def _fail(self) -> Unparsable:
        if self.k < len(self.tokens):
            return self.parser.fail(self.tokens[self.k])
        return Unparsable("has an incomplete `[[ … ]]` test", self.tokens[-1][3])

    def parse(self) -> int:
        self._skip_newlines()
        self._or()
        return self.k

    def _take(self) -> None:
        """Consume a token; newlines may follow `(`, `)`, `!`, `&&` and `||` (not a word)."""
        text = self._text(self.k)
        self.k += 1
        if text in ("(", ")", "!", "&&", "||"):
            self._skip_newlines()

    def _skip_newlines(self) -> None:
        while self.k < len(self.tokens) and self.tokens[self.k][0] == "nl":
            self.k += 1

    def _or(self) -> None:
        self._and()
        while self._text(self.k) == "||":
            self._take()
            if self.k >= len(self.tokens):
                return  # bash accepts a trailing `||` before `]]`
            self._and()

    def _and(self) -> None:
        self._not()
        while self._text(self.k) == "&&":
            self._take()
            if self.k >= len(self.tokens):
                return
            self._not()

    def _not(self) -> None:
        text = self._text(self.k)
        if text == "!" and self.k + 1 < len(self.tokens):
            self._take()
            self._not()
            return
        self._primary()

    def _is_word(self, k: int) -> bool:
        return k < len(self.tokens) and self.tokens[k][0] == "w"

    def _primary(self) -> None:
        tokens, k = self.tokens, self.k
        if k >= len(tokens):
            raise self._fail()
        tok = tokens[k]
        if tok[0] == "op" and tok[1] == "(":
            self._take()
            self._or()
            if self._text(self.k) != ")" or tokens[self.k][0] != "op":
                raise self._fail()
            self._take()
            return
        if tok[0] != "w":
            raise self._fail()
        value = tok[1]
        if value.plain in _COND_UNARY and self._is_word(k + 1):
            self.k = k + 2
            self._skip_newlines()
            return
        if value.plain in _COND_UNARY:
            raise Unparsable(f"has `{value.text}` without an operand", tokens[k][2])
        self.k = k + 1
        op = self._text(self.k)
        if op == "\n":
            raise self._fail()  # after a lone word bash wants an operator, not a newline
        if op not in _COND_BINARY or (op in ("<", ">") and tokens[self.k][0] != "redir"):
            return
        self.k += 1
        if op == "=~":
            self._regex()
        elif self._is_word(self.k):
            self.k += 1
        else:
            raise self._fail()
        self._skip_newlines()

    def _regex(self) -> None:
        """The regular expression after ``=~``: one blank-free run, parentheses may hold blanks."""
        tokens = self.tokens
        if self.k >= len(tokens) or tokens[self.k][0] == "nl":
            raise self._fail()
        depth = 0
        end = tokens[self.k][2]
        while self.k < len(tokens):
            kind, value, start, stop = tokens[self.k]
            if kind == "nl" or (depth == 0 and start != end and self.k and value in ("&&", "||")):
                break
            if depth == 0 and start != end:
                break
            if kind == "op" and value == "(":
                depth += 1
            elif kind == "op" and value == ")":
                if depth == 0:
                    break
                depth -= 1
            end = stop
            self.k += 1
        if depth:
            raise self._fail()
