"""gitignore matching, checked against git itself (``git check-ignore``) over generated
patterns and paths, plus the cases git's documentation spells out."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from run_bash.changes.ignore import Rules, Source, parse

from .changes_util import GIT_ENV

COMPONENTS = ["a", "b", "ab", "a.c", "x y", "\u00e9", "[x]", "d"]
TOKENS = [
    "a",
    "b",
    "c",
    ".",
    "*",
    "?",
    "**",
    "/",
    "[ab]",
    "[!a]",
    "[a-c]",
    "\\*",
    "x y",
    "\u00e9",
    "d",
    "[]a]",
    "[[:alpha:]]",
    "**/",
    "/**",
    "[^b]",
    "[x]",
    "\\ ",
]


def ignored(sources: dict[str, bytes], path: str) -> bool:
    """What the walk decides for ``path`` (a file): parents first, each with the rules of the
    directory that holds it, like scan()."""
    parts = path.split("/")

    def rules_for(dir_rel: str) -> Rules:
        r = Rules()
        acc = ""
        for piece in ["", *dir_rel.split("/")] if dir_rel else [""]:
            acc = piece if not acc else f"{acc}/{piece}" if piece else acc
            if acc in sources:
                r = r.child(Source(acc, parse(sources[acc])))
        return r

    for i in range(1, len(parts) + 1):
        sub = "/".join(parts[:i])
        parent = "/".join(parts[: i - 1])
        if rules_for(parent).ignored(sub, i < len(parts)):
            return True
    return False


def git_ignored(
    sources: dict[str, bytes], paths: list[str], query: list[str] | None = None
) -> set[str]:
    """The paths of ``query`` (default: ``paths``, created as files) that git ignores."""
    d = tempfile.mkdtemp()
    try:
        env = {**os.environ, **GIT_ENV}
        subprocess.run(["git", "init", "-q", d], check=True, env=env)
        for p in paths:
            full = os.path.join(d, p)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            open(full, "wb").close()
        for base, data in sources.items():
            os.makedirs(os.path.join(d, base), exist_ok=True)
            with open(os.path.join(d, base, ".gitignore"), "wb") as f:
                f.write(data)
        out = subprocess.run(
            ["git", "-c", "core.quotePath=false", "check-ignore", "--no-index", "--stdin", "-z"],
            cwd=d,
            input="\0".join(query or paths).encode(),
            capture_output=True,
            env=env,
        )
        assert out.returncode in (0, 1), out.stderr
        return {x.decode() for x in out.stdout.split(b"\0") if x}
    finally:
        shutil.rmtree(d)


def _tree(paths: list[str]) -> list[str]:
    """Drop paths that would need a file to also be a directory."""
    out: list[str] = ["a/.gitignore"]  # "a" holds the second ignore file: a directory
    for p in sorted(set(paths), key=len):
        if not any(p.startswith(q + "/") or q.startswith(p + "/") for q in out):
            out.append(p)
    return out[1:]


patterns = st.lists(
    st.tuples(
        st.booleans(), st.lists(st.sampled_from(TOKENS), min_size=1, max_size=5), st.booleans()
    ),
    min_size=1,
    max_size=5,
).map(
    lambda pats: (
        b"\n".join(
            (b"!" if neg else b"") + "".join(toks).encode() + (b"/" if slash else b"")
            for neg, toks, slash in pats
        )
        + b"\n"
    )
)
paths = st.lists(
    st.lists(st.sampled_from(COMPONENTS), min_size=1, max_size=3).map("/".join),
    min_size=1,
    max_size=12,
).map(_tree)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(root=patterns, sub=patterns, ps=paths)
def test_matches_git_check_ignore(root, sub, ps):
    sources = {"": root, "a": sub}
    want = git_ignored(sources, ps)
    got = {p for p in ps if ignored(sources, p)}
    assert got == want, (root, sub)


@pytest.mark.parametrize(
    "pattern, path, is_dir, want",
    [
        (b"*.log", "x/y/debug.log", False, True),
        (b"/build", "build", True, True),
        (b"/build", "src/build", True, False),
        (b"build/", "src/build", True, True),
        (b"build/", "src/build", False, False),
        (b"doc/*.txt", "doc/a.txt", False, True),
        (b"doc/*.txt", "doc/x/a.txt", False, False),
        (b"**/foo", "a/b/foo", False, True),
        (b"**/foo", "foo", False, True),
        (b"a/**/b", "a/b", False, True),
        (b"a/**/b", "a/x/y/b", False, True),
        (b"abc/**", "abc/x/y", False, True),
        (b"abc/**", "abc", True, False),
        (b"*.o\n!keep.o", "keep.o", False, False),
        (b"\\#x", "#x", False, True),
        (b"#x", "#x", False, False),
        (b"a\\ ", "a ", False, True),
        (b"a ", "a", False, True),
        (b"?.c", "\u00e9.c", False, False),  # ? is one byte, as in git
        (b"??.c", "\u00e9.c", False, True),
        (b"[[:digit:]]x", "1x", False, True),
        (b"[a-", "[a-", False, False),  # unterminated: never matches
        (b"*.txt\r", "a.txt", False, True),  # CRLF files
        # git wildmatches only what follows the literal prefix: a "**" right after it spans
        # slashes, and its "**/" may match nothing ("a**/b" matches "ab").
        (b"a**//", "a", True, True),
        (b"a*//", "a", True, False),
        (b"a**/b", "ab", False, True),
        (b"a**/b", "ax/y/b", False, True),
        (b"x/a**", "x/ab/c", False, True),
        (b"a*/b", "ab", False, False),
    ],
)
def test_documented_rules(pattern, path, is_dir, want):
    assert Rules((Source("", parse(pattern)),)).ignored(path, is_dir) is want
    files = [path + "/f"] if is_dir else [path]
    assert git_ignored({"": pattern + b"\n"}, files, [path]) == ({path} if want else set())


def test_adversarial_patterns_cannot_stall_the_walk(tmp_path):
    """Backtracking regexes take hours on these (git's own matcher too, so it is not asked);
    the walk must stay linear (pytest's timeout fails this test if it does not)."""
    from run_bash.changes import ChangeStore, Token

    proj = tmp_path / "p"
    proj.mkdir()
    (proj / "Makefile").write_text("")
    pats = b"*a*a*a*a*a*a*a*a*a*b\n**/a*a*a*a*a*a*a*c/**/x\n[a]*[a]*[a]*[a]*[a]*[a]*d\n"
    (proj / ".gitignore").write_bytes(pats)
    names = ["a" * 250, "a" * 249 + "b", "a" * 200 + "d"]
    for n in names:
        (proj / n).write_text("x")
    store = ChangeStore(str(tmp_path / "st"), home=str(tmp_path / "home"))
    tok = store.begin("r", str(proj))
    assert isinstance(tok, Token)
    # The matches are right: two names are ignored (and, small, kept within the budget).
    assert set(tok.before.ign) == {"a" * 249 + "b", "a" * 200 + "d"}
    assert all(tok.before.entry(n)[0] == "f" for n in names)
