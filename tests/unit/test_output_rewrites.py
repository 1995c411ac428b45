"""Property tests: a ``\\r`` rewrite collapses progress updates but never hides other text."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from run_bash.output import CR_MARK, clean_text

# Text that is not progress output: words of letters with ordinary punctuation (no digits, bars,
# or spinner frames), e.g. "rm -rf ~ done" has none of those either once `-rf` has a letter.
WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ~.,:!'", min_size=1)
MESSAGE = st.lists(WORD, min_size=1, max_size=6).map(" ".join)

N = st.integers(min_value=0, max_value=100)


def tqdm(label: str, n: int) -> str:
    bar = "█" * (n // 10) + " " * (10 - n // 10)
    return f"{label}: {n:3d}%|{bar}| {n}/100 [00:{n % 60:02d}<00:{(n * 7) % 60:02d}, {n + 0.5:.2f}it/s]"


def percent(label: str, n: int) -> str:
    return f"{label} {n}%"


def wget(label: str, n: int) -> str:
    arrow = "=" * (n // 10) + ">"
    return f"{label} [{arrow:<11}] {n * 13}K/1300K {n // 3}.{n % 10}MB/s eta 0:{n % 60:02d}"


def curl(_label: str, n: int) -> str:
    return f" {n:3d}  1024k  {n:3d}  {n * 10}k    0     0  {n * 12}k      0 --:--:-- --:--:-- --:--:-- {n}k"


TEMPLATES = [tqdm, percent, wget, curl]
# One progress line: a template, its label, and a run of updates of it.
PROGRESS = st.tuples(st.sampled_from(TEMPLATES), MESSAGE, st.lists(N, min_size=1, max_size=5)).map(
    lambda t: [t[0](t[1], n) for n in t[2]]
)
# A line: progress runs and messages in any order.
SEGMENTS = st.lists(
    st.one_of(PROGRESS.map(lambda p: ("progress", p)), MESSAGE.map(lambda m: ("message", [m]))),
    min_size=1,
    max_size=6,
)


def line_of(groups: list[tuple[str, list[str]]]) -> str:
    return "\r".join(seg for _kind, segs in groups for seg in segs)


@settings(max_examples=400, deadline=None)
@given(SEGMENTS)
def test_overwritten_text_that_is_not_progress_is_never_hidden(groups):
    out = clean_text(line_of(groups), max_line_chars=10**6)
    kept = out.split(CR_MARK)
    for kind, segs in groups:
        if kind == "message":
            assert segs[0] in kept, (segs[0], out)
    assert "\r" not in out


@settings(max_examples=300, deadline=None)
@given(PROGRESS)
def test_updates_of_one_progress_line_collapse_to_the_last(updates):
    assert clean_text("\r".join(updates), max_line_chars=10**6) == updates[-1]


@settings(max_examples=400, deadline=None)
@given(SEGMENTS)
def test_a_mixed_line_keeps_one_state_per_progress_run_in_order(groups):
    out = clean_text(line_of(groups), max_line_chars=10**6)
    kept = out.split(CR_MARK)
    flat = [seg for _kind, segs in groups for seg in segs]
    assert kept[-1] == flat[-1]  # what a terminal shows last is always there
    # Each run contributes at most its last update: earlier ones are overwritten by the same line.
    assert len(kept) <= len(groups), out
    # Nothing is invented, nothing reordered.
    it = iter(flat)
    assert all(any(k == f for f in it) for k in kept), out


def test_the_reported_example_keeps_the_hidden_command():
    out = clean_text(b"rm -rf ~ done\rAll 42 tests passed")
    assert out == f"rm -rf ~ done{CR_MARK}All 42 tests passed"


def test_a_number_that_is_not_a_progress_token_is_not_collapsed():
    assert (
        clean_text("Tests failed: 3\rTests failed: 0") == f"Tests failed: 3{CR_MARK}Tests failed: 0"
    )


def test_spinner_frames_and_blanking_collapse():
    assert clean_text("|\r/\r-\r\\\rdone") == "done"
    assert clean_text("working 10%\r          \rdone") == f"working 10%{CR_MARK}done"
    assert clean_text("10%\r50%\r100%\n") == "100%\n"
