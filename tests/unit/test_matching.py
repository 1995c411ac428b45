"""`wait_for` matching: per line, as output arrives, however the output is split into reads."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from run_bash.errors import UsageError
from run_bash.matching import (
    MATCH_LINE_BYTES,
    LineMatcher,
    PatternTooSlow,
    compile_pattern,
    time_limit,
)
from run_bash.output import strip_controls


def reference(pattern: str, output: bytes) -> str | None:
    """The definition: the first line (``\\n``, ``\\r\\n`` or ``\\r`` ends one), cut to its first
    MATCH_LINE_BYTES bytes and cleaned, that ``re.search`` finds the pattern in."""
    rx = re.compile(pattern)
    lines = output.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()  # a final newline ends the last line; it does not start another
    for raw in lines:
        line = strip_controls(raw[:MATCH_LINE_BYTES]).decode("utf-8", "replace")
        if rx.search(line):
            return line
    return None


def fed(pattern: str, pieces: list[bytes]) -> str | None:
    m = LineMatcher(re.compile(pattern))
    for piece in pieces:
        hit = m.feed(piece)
        if hit is not None:
            return hit
    return m.finish()


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    out, last = [], 0
    for p in [*points, len(data)]:
        out.append(data[last:p])
        last = p
    return out


# Patterns that differ in how lines around a match could change a block search's answer.
PATTERNS = [
    "ready",
    "^ready$",
    r"port \d+",
    r"\bok\b",
    r"a\sb",  # \s could cross a line end in a block
    r"[^x]ready",  # so could a negated class
    r"\Aready",  # per line, \A is every line's start
    r"ready\Z",
    r"(?!.*fail)ok",
    r"(?<!not )ready",
    r"(?<=\n)ready",  # never true on one line
    r"ready(?=\s)",
    r"(?s)ok.*b",
    r"^$",
    "é",
    r"(?i)READY",
]
WORDS = st.sampled_from(
    [
        b"ready",
        b"ok",
        b"a",
        b" ",
        b"b",
        b"not ",
        b"fail",
        b"port 80",
        b"x",
        b"\x1b[32m",
        b"\x1b[0m",
        b"\x1b]0;title\x07",
        b"\x1b]8;;unterminated",
        b"\x07",
        "\u00e9".encode(),
        b"\xc3",  # half of a UTF-8 sequence
        b"\t",
    ]
)
# Some lines start just short of MATCH_LINE_BYTES, so what follows straddles the cut.
LINE = st.tuples(
    st.sampled_from([b"", b"", b"y" * (MATCH_LINE_BYTES - 3)]), st.lists(WORDS, max_size=6)
).map(lambda t: t[0] + b"".join(t[1]))
END = st.sampled_from([b"\n", b"\r", b"\r\n"])
OUTPUT = st.lists(st.tuples(LINE, END), max_size=12).flatmap(
    lambda lines: LINE.map(lambda last: b"".join(a + b for a, b in lines) + last)
)


@settings(max_examples=1000, deadline=None)
@given(
    pattern=st.sampled_from(PATTERNS),
    output=OUTPUT,
    cuts=st.lists(st.integers(min_value=0, max_value=20_000), max_size=6),
)
def test_matcher_finds_the_first_matching_line_however_the_output_is_split(pattern, output, cuts):
    assert fed(pattern, split(output, cuts)) == reference(pattern, output)


def test_a_line_split_across_reads_matches_once_complete():
    m = LineMatcher(compile_pattern("Listening on"))
    assert m.feed(b"starting\nListen") is None
    assert m.feed(b"ing on http://localhost:5173") is None  # not yet a whole line
    assert m.feed(b"\nmore\n") == "Listening on http://localhost:5173"


def test_colour_codes_and_progress_rewrites_are_lines_as_the_user_sees_them():
    m = LineMatcher(compile_pattern(r"^Local:\s+http://\S+$"))
    assert m.feed(b"building 10%\rbuilding 100%\r\n") is None
    assert m.feed(b"  \x1b[32m\x1b[1mLocal\x1b[22m:\x1b[39m   http://localhost:5173/\n") is None
    # The line starts with spaces: ^Local does not match it. Control: the same line without them.
    m = LineMatcher(compile_pattern(r"^Local:\s+http://\S+$"))
    assert m.feed(b"\x1b[32mLocal\x1b[39m:   http://localhost:5173/\n") == (
        "Local:   http://localhost:5173/"
    )


@pytest.mark.parametrize(
    ("pattern", "output", "line"),
    [
        (r"(?s)ok.*b", b"ok\nx\nok b\n", "ok b"),  # the block's first hit spans lines
        (r"a\sb", b"a\nb\na b\n", "a b"),
        (r"[^x]ready", b"\nready\n-ready\n", "-ready"),
        (r"\Aready", b"x\nready\n", "ready"),
        (r"(?<!x)ready", b"x\nready\n", "ready"),
    ],
)
def test_a_line_matches_on_its_own_whatever_the_lines_around_it(pattern, output, line):
    assert fed(pattern, [output]) == line == reference(pattern, output)


def test_a_cr_lf_split_across_reads_ends_one_line_only():
    m = LineMatcher(compile_pattern("^$"))
    assert m.feed(b"progress\r") is None
    assert m.feed(b"\nnext\n") is None
    assert m.feed(b"\n") == ""  # control: a real empty line matches


def test_the_last_line_without_a_newline_matches_at_the_end():
    m = LineMatcher(compile_pattern("done$"))
    assert m.feed(b"work\nall done") is None
    assert m.finish() == "all done"


def test_a_very_long_line_is_matched_on_its_first_bytes_only():
    head = b"x" * (MATCH_LINE_BYTES - 5)
    m = LineMatcher(compile_pattern("ready"))
    assert m.feed(head + b"ready" + b"z" * 100_000 + b"\n") == (head + b"ready").decode()
    m = LineMatcher(compile_pattern("late"))
    assert m.feed(b"x" * MATCH_LINE_BYTES + b"late\n") is None
    assert m.feed(b"late\n") == "late"  # control: on a line of its own it matches
    # The unterminated line is held at the cap, not in full.
    m = LineMatcher(compile_pattern("never"))
    for _ in range(50):
        m.feed(b"y" * 100_000)
    assert len(m._pending) == MATCH_LINE_BYTES


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("(unclosed", "missing ), unterminated subpattern at position 0"),
        ("[a-", "unterminated character set at position 0"),
        ("*x", "nothing to repeat at position 0"),
        ("", "`wait_for` is empty"),
        ("a" * 1001, "the limit is 1000"),
        (5, "`wait_for` should be a string"),
    ],
)
def test_a_bad_pattern_is_one_clear_error(pattern, message):
    with pytest.raises(UsageError) as err:
        compile_pattern(pattern)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("pattern", "line"),
    [
        (r"(a+)+$", "a" * 40 + "b"),
        (r"(a|aa)+$", "a" * 60 + "b"),
        (r"(.*a){25}", "a" * 4000),
        (r"(x+x+)+y", "x" * 40),
    ],
)
def test_a_runaway_pattern_is_stopped_within_its_time_limit(pattern, line):
    m = LineMatcher(compile_pattern(pattern))
    t0 = time.monotonic()
    with pytest.raises(PatternTooSlow), time_limit(0.05):
        m.feed(line.encode() + b"\n")
    assert time.monotonic() - t0 < 2  # without the limit: hours
    # Control: the limit does not fire for work that fits in it, and is disarmed after the block.
    with time_limit(0.05):
        assert LineMatcher(compile_pattern("b$")).feed(b"a" * 40 + b"b\n") == "a" * 40 + "b"
    busy = time.process_time()
    while time.process_time() - busy < 0.1:  # past the limit, outside the block: nothing fires
        pass
