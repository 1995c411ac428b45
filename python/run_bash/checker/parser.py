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
from itertools import pairwise

from run_bash.checker.lexer import FD_TARGET, MAX_NESTING, NAME_RE, Lexer
from run_bash.checker.syntax import (
    ARRAY_ARGS,
    ASSIGN,
    FED,
    NORMAL,
    SCALAR_ASSIGN,
    Cmd,
    Compound,
    ForVar,
    Item,
    Problem,
    Redir,
    Sink,
    Span,
    Token,
    Unparsable,
    Word,
    Words,
)
from run_bash.checker.words import wordlist

_FUNC_PARENS = re.compile(r"[ \t]*\([ \t]*\)")
# A named coprocess: `coproc NAME` followed by a compound command.
_COPROC_BODY = re.compile(
    r"[ \t]*(?:[({]|(?:while|until|if|for|select|case|\[\[)(?=[ \t\n;&|()<>]|$))"
)
_CASE_ENDS = frozenset({";;", ";&", ";;&"})
# Reserved words that cannot start a command; at command position they end a list or are an error.
_CLOSERS = frozenset({"then", "else", "elif", "fi", "do", "done", "esac", "}", "in", "]]"})
_COMPOUND_STARTS = frozenset({"{", "if", "while", "until", "for", "select", "case", "[["})
# Arithmetic-comparison operators of `[[ … ]]`: their operands are evaluated as arithmetic.
_COND_ARITH = frozenset({"-eq", "-ne", "-lt", "-le", "-gt", "-ge", "-v"})
# Builtins whose arguments may be array assignments (`declare a=(1 2)`).
_DECLARE_LIKE = frozenset({"declare", "typeset", "local", "export", "readonly", "alias", "eval"})


def _reserved(tok: Token) -> str | None:
    """The reserved word a token could be (a word token with one unquoted literal part)."""
    return tok[1].plain if tok[0] == "w" else None


def parse(src: str) -> list[Item]:
    """Parse a script; return its simple commands (including nested ones) and any problems."""
    out: list[Item] = []
    parser = Parser(src, out, 0, 0)
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
    parser = Parser(text, out, 0, 0)
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
    Parser(text, out, 0, nest).expansions()


class Parser(Lexer):
    """The grammar of bash over the lexer's tokens."""

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
                m = NAME_RE.match(self.src, self.i)
                if m and _COPROC_BODY.match(self.src, m.end()):
                    self.i = m.end()
                fed, self.fed = self.fed, True  # the coprocess reads what the script writes to it
                try:
                    return self.command(pipe_from)
                finally:
                    self.fed = fed
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
            if tok[0] != "w" or not isinstance(tok[1], Word) or not NAME_RE.fullmatch(tok[1].text):
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
        cmd.pipe_from = FED if pipe_from is None and self.fed else pipe_from
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
            m = FD_TARGET.match(self.src, self.i)
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

    def __init__(self, tokens: list[Token], parser: Parser) -> None:
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
