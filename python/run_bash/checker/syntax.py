"""The nodes of a parsed script, shared by the lexer and the parser. Pure."""

from __future__ import annotations

from typing import Literal

from run_bash.checker.words import RAW, Part

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


# What a command reads when another command's output feeds it in a way the checker does not
# follow: a write-side process substitution (`echo … > >(bash)`) or a coprocess (`coproc bash`).
FED = Span("", 0, 0)


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
        """True when this redirection replaces standard input (``<&3`` too: another file's)."""
        if self.fd not in ("", "0"):
            return False
        return self.op in ("<", "<<", "<<-", "<<<", "<>") or (
            self.op == "<&" and self.dup not in ("0", "-")
        )

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
