"""Bash builtins that run code, evaluate values or rebind command names. Pure.

Each is a runner (see :mod:`.runners`): it gets the words after the builtin's name.
"""

from __future__ import annotations

from run_bash.checker.model import Ctx, Walker
from run_bash.checker.options import opts, read
from run_bash.checker.reading import Handler
from run_bash.checker.words import Arg, command_name


def _option_word(args: list[Arg], letter: str) -> Arg:
    """The word holding a short option's value (so a dynamic value stays unknown)."""
    for k, a in enumerate(args):
        v = a.value or ""
        if v.startswith("-") and not v.startswith("--") and letter in v[1:]:
            j = v.index(letter, 1)
            if j + 1 < len(v):
                return Arg.lit(v[j + 1 :])
            return args[k + 1] if k + 1 < len(args) else Arg.lit("")
    return Arg.lit("")


def _name_sink(ana: Walker, args: list[Arg], ctx: Ctx) -> None:
    """Builtins taking variable names: a subscript in a name is evaluated (``read 'a[$(…)]'``)."""
    for a in args:
        if a.value is None or ("[" in a.value and not a.value.startswith("-")):
            ana.sinks.append(ctx.text)
            return


def mapfile(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``mapfile -C CALLBACK``: the callback is code."""
    got = read(args, opts("-dnOsuCc:", exhaustive=True), permute=False)
    if not got.dynamic and got.has("C"):
        ana.code(_option_word(args, "C"), ctx, "`mapfile -C` callback code")
    _name_sink(ana, args, ctx)
    return None


def completion(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``complete -C CMD`` / ``compgen -C CMD``: the command runs to complete."""
    got = read(args, opts("-oAGWFCXPSabcdefgjksuvEDI:", exhaustive=True), permute=False)
    if got.dynamic:
        ana.unknown("passes completion options only known at run time", ctx.text)
    elif got.has("C"):
        ana.code(_option_word(args, "C"), ctx, "completion command code")
    return None


def read_(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``read NAME``: a subscripted name evaluates its subscript."""
    _name_sink(ana, args, ctx)
    return None


def printf(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``printf -v NAME``."""
    if args and args[0].value == "-v":
        _name_sink(ana, args[1:2], ctx)
    return None


def test(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``test -v NAME`` / ``[ -v NAME ]``."""
    if any(a.value == "-v" for a in args):
        _name_sink(ana, [a for a in args if a.value not in ("-v", "]", "!")], ctx)
    return None


def unset(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``unset NAME``."""
    _name_sink(ana, args, ctx)
    return None


def getopts(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``getopts SPEC NAME``."""
    _name_sink(ana, args[1:2], ctx)
    return None


def wait(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``wait -p NAME``."""
    if args and args[0].value == "-p":
        _name_sink(ana, args[1:2], ctx)
    return None


def let(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``let EXPR``: arithmetic evaluates variable values."""
    ana.sinks.append(ctx.text)
    return None


def declare(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``declare``/``typeset``/``local``/``export``/``readonly`` with their evaluating forms."""
    flags = ""
    words = {w.text: w for w in ctx.cmd.words}
    for a in args:
        v = a.value
        if v is not None and v[:1] in "-+" and len(v) > 1 and "=" not in v:
            flags += v[1:]
            continue
        text = v if v is not None else a.prefix
        name, eq, value = text.partition("=")
        if "[" in name or (v is None and not eq):
            ana.sinks.append(ctx.text)
        if not eq:
            continue
        name = name.split("[", 1)[0].rstrip("+")
        word = words.get(a.text)
        if name in ("BASH_CMDS", "BASH_ALIASES") and word is not None:
            ana.rebind_word(name, word, ctx)
            continue
        if value.startswith("(") and ("a" in flags or "A" in flags):
            ana.sinks.append(ctx.text)
        ana.special_variable(name, Arg.lit(value) if v is not None else Arg(a.text, None), ctx)
    if "i" in flags or "n" in flags:
        ana.sinks.append(ctx.text)
    return None


def alias(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``alias NAME=VALUE``: later uses of NAME are judged as VALUE."""
    for a in args:
        if a.value is not None and a.value.startswith("-"):
            continue
        text = a.value if a.value is not None else a.prefix
        name, eq, value = text.partition("=")
        if not eq:
            if a.value is None:
                ana.unknown(f"defines an alias only known at run time (`{a.text}`)", ctx.text)
            continue
        ana.aliases[name] = value if a.value is not None else None
    return None


def hash_(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``hash -p PATH NAME``: NAME runs PATH."""
    got = read(args, opts("-p: -dlrt", exhaustive=True), permute=False)
    if got.dynamic:
        ana.unknown("rebinds commands with `hash` options only known at run time", ctx.text)
        return None
    if not got.has("p"):
        return None
    path = got.get("p")
    word = _option_word(args, "p")
    target = command_name(path) if path and word.value is not None else None
    for a in args[got.first :]:
        if a.value is None:
            ana.unknown(f"rebinds a command name only known at run time (`{a.text}`)", ctx.text)
            continue
        ana.hashed[a.value] = target
    return None


def enable(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``enable -f LIB NAME`` loads a builtin from a shared object."""
    for a in args:
        v = a.value or ""
        if (v.startswith("-") and "f" in v) or (a.value is None and a.may_be_option):
            ana.unknown("loads a builtin command from a shared object", ctx.text)
            break
    return None


def fc(ana: Walker, args: list[Arg], ctx: Ctx) -> list[Arg] | None:
    """``fc -s``, ``fc -e EDITOR``, ``fc``: re-run entries of the shell's history (which the line
    itself may fill with ``history -s``); ``fc -l`` only lists them."""
    for a in args:
        v = a.value
        if v is not None and v[:1] == "-" and not v[1:].isdigit() and "l" in v and v != "--":
            return None
    ana.unknown(
        "re-runs a command from the shell's history (`fc`), only known at run time", ctx.text
    )
    return None


BUILTINS: dict[str, Handler] = {
    "fc": fc,
    "mapfile": mapfile,
    "readarray": mapfile,
    "compgen": completion,
    "complete": completion,
    "read": read_,
    "printf": printf,
    "test": test,
    "[": test,
    "let": let,
    "declare": declare,
    "typeset": declare,
    "local": declare,
    "export": declare,
    "readonly": declare,
    "unset": unset,
    "getopts": getopts,
    "wait": wait,
    "alias": alias,
    "hash": hash_,
    "enable": enable,
}
