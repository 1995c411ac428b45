"""Words of bash: quotes, escapes, expansions and the code inside them. Pure.

:class:`Lexer` reads one token at a time, like bash (quotes, escapes, ``$'…'``, ``$(…)``,
backticks, ``<(…)``, ``${…}``, ``$((…))``, ``$[…]``, heredocs, comments, line continuations; only
space and tab separate words). The commands inside substitutions are parsed by the grammar
(:mod:`.parser`), whose parser class extends this one.
"""

from __future__ import annotations

import re
from itertools import count, groupby, repeat
from operator import itemgetter

from run_bash.checker.syntax import (
    ARRAY_ARGS,
    ASSIGN,
    NORMAL,
    SCALAR_ASSIGN,
    Item,
    Redir,
    Sink,
    Token,
    Unparsable,
    Word,
)
from run_bash.checker.words import DYN, LIT, PROC, RAW, SPLIT, Part, decode_ansi_c, wordlist

_BLANK = re.compile(r"(?:[ \t]|\\\n)+")
_PLAIN = re.compile(r"[^ \t\n;&|()<>'\"\\$`]+")
_DQ_PLAIN = re.compile(r'[^"\\$`]+')
_HD_PLAIN = re.compile(r"[^\\$`]+")
NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
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
FD_TARGET = re.compile(r"[ \t]*(?:\d+-?|-)(?=[ \t\n;&|()<>]|$)")
_ARITH_NAME = re.compile(r"[A-Za-z_$]")
_OPS = tuple(wordlist(";;& &>> <<< <<- ;; ;& && &> || |& << <> <& >> >& >| ; & | ( ) < >"))
_REDIRS = frozenset({"&>>", "<<<", "<<-", "&>", "<<", "<>", "<&", ">>", ">&", ">|", "<", ">"})
# ${!name} (not ${!prefix*}, ${!name[@]}): indirection. ${name@P}: prompt expansion.
# ${name[sub]} and ${name:offset}: the subscript and offset are arithmetic.
_PARAM_SINK = re.compile(
    r"![A-Za-z_0-9][A-Za-z0-9_]*(?![A-Za-z0-9_*@]|\[[@*]\])|[^}]*@P$"
    r"|#?[A-Za-z_][A-Za-z0-9_]*\[(?![@*]\])[^\]]*[A-Za-z_$]"
    r"|[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?:(?![-=?+])[^}]*[A-Za-z_$]"
)
MAX_NESTING = 40
_IDS = count(1)  # subshell ids; unique within a process is all that is needed


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


class Lexer:
    """Reads tokens and words; :class:`~.parser.Parser` adds the grammar."""

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
        self.fed = False  # its commands read another command's output (`>(…)`, `coproc`)
        if nest > MAX_NESTING:
            raise Unparsable("nests too deeply to analyse", start)

    def compound_list(
        self,
        what: str,
        ends: frozenset[str] = frozenset(),
        *,
        case: bool = False,
        top: bool = False,
    ) -> int:
        """Parse commands (the grammar, in :class:`~.parser.Parser`)."""
        raise NotImplementedError

    def script(self) -> None:
        """Parse a whole script (the grammar, in :class:`~.parser.Parser`)."""
        raise NotImplementedError

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

    def _skip_blanks(self) -> None:
        if self.peeked is None:
            m = _BLANK.match(self.src, self.i)
            if m:
                self.i = m.end()

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
        m = NAME_RE.match(src, i)
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
                    type(self)(src[k + 1 : j], self.out, 0, self.nest + 1).expansions()
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
        sub = type(self)(self.src, self.out, k, self.nest + 1)
        sub.in_func = self.in_func
        sub.scope, sub.loops = (*self.scope, next(self.ids)), self.loops
        sub.sub = True
        sub.fed = self.fed or self.src.startswith(">(", k - 2)
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
        inner = type(self)("".join(buf), self.out, 0, self.nest + 1)
        inner.in_func = self.in_func
        inner.scope, inner.loops = (*self.scope, next(self.ids)), self.loops
        inner.sub = True
        inner.fed = self.fed
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
                type(self)(body, self.out, 0, self.nest + 1).heredoc_expansions()
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
