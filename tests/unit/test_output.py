"""Output cleaning and agent-sized views."""

from __future__ import annotations

import pytest

from run_bash.output import Capture, cap_text, clean_text, read_since, tail_lines


def test_clean_text_strips_sequences_and_collapses_progress():
    raw = b"\x1b[1;32mgreen\x1b[0m \x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\\n10%\r50%\r100%\n\x07bell\n"
    assert clean_text(raw) == "green link\n100%\nbell\n"


def test_clean_text_replaces_invalid_utf8_and_cuts_long_lines():
    assert clean_text(b"\xc3\x28ok") == "\ufffd(ok"
    line = "a" * 5000
    out = clean_text(line, max_line_chars=100)
    assert len(out) < 200 and "chars cut" in out


def test_cap_text_keeps_head_and_longer_tail():
    text = "".join(f"{i}\n" for i in range(20000))
    out = cap_text(text, 2000, "/tmp/out.log")
    assert len(out) <= 2000
    assert out.startswith("0\n1\n")
    assert out.endswith("19999\n")
    head, _, tail = out.partition("characters cut")
    assert len(tail) > 2 * len(head)
    assert "/tmp/out.log" in out


def test_cap_text_holds_with_a_long_output_path():
    """The cut note names the output file; however long its path, the text stays within the cap
    (a path too long for the room is left out of the note)."""
    text = "".join(f"{i}\n" for i in range(20000))
    for path in ("/" + "d" * 200 + "/out.log", "/" + "d" * 900 + "/out.log"):
        out = cap_text(text, 1000, path)
        assert len(out) <= 1000, (len(path), len(out))
        assert out.startswith("0\n") and out.endswith("19999\n")
    assert "/out.log" in cap_text(text, 1000, "/" + "d" * 200 + "/out.log")


def test_capture_bounds_memory(tmp_path):
    c = Capture(str(tmp_path / "o.log"), cap=1 << 30)
    for _ in range(100):
        c.feed(b"x" * 100_000)
    c.close()
    assert c.total == 10_000_000
    assert len(c.head) <= 64 * 1024 and len(c.tail) <= 512 * 1024
    text = c.agent_text(30000)
    assert len(text) <= 30000 and "not kept in memory" in text


def test_read_since_and_tail(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(b"a\nb\nc\n")
    data, off, left = read_since(str(p), 0, 2)
    assert (data, off, left) == (b"a\n", 2, 4)
    assert read_since(str(p), off)[0] == b"b\nc\n"
    assert tail_lines(str(p), 2) == (b"b\nc\n", 6)


@pytest.mark.parametrize("char", ["é", "€", "😀"])
@pytest.mark.parametrize("page", [5, 6, 7, 8, 9, 10])
def test_read_since_pages_never_split_a_character_or_lose_bytes(tmp_path, char, page):
    p = tmp_path / "f"
    text = "x" + char * 7 + "\nyz" + char * 3
    p.write_bytes(text.encode())
    off, got = 0, b""
    while True:
        data, off, left = read_since(str(p), off, page)
        if not data:
            break
        data.decode("utf-8")  # each page decodes on its own
        got += data
    assert got.decode() == text and left == 0


def test_read_since_stops_a_cut_page_after_its_last_line(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(b"line one\nline two\nline three\n")
    data, off, left = read_since(str(p), 0, 24)
    assert data == b"line one\nline two\n" and off == 18 and left == 11


def short_writer(limit_each: int, fail_after: int | None = None, errno_: int = 28):
    """An os.write that writes at most ``limit_each`` bytes per call, is interrupted every other
    call, and fails with ``errno_`` once ``fail_after`` bytes are in."""
    import errno as E
    import os as _os

    state = {"calls": 0, "done": 0}

    def write(fd, data):
        state["calls"] += 1
        if state["calls"] % 2 == 0:
            raise InterruptedError(E.EINTR, "interrupted")
        if fail_after is not None and state["done"] >= fail_after:
            raise OSError(errno_, _os.strerror(errno_))
        n = _os.write(fd, bytes(data[:limit_each]))
        state["done"] += n
        return n

    return write


def test_capture_retries_short_and_interrupted_writes(tmp_path):
    from run_bash.output import Capture

    c = Capture(str(tmp_path / "o"), 10**6, write=short_writer(7))
    for i in range(50):
        c.feed(f"line {i}\n".encode())
    c.close()
    assert (tmp_path / "o").read_bytes() == b"".join(f"line {i}\n".encode() for i in range(50))
    assert c.stopped is None


@pytest.mark.parametrize(
    ("errno_", "reason"),
    [(28, "no space left on device"), (122, "disk quota exceeded"), (27, "file too large")],
)
def test_a_write_error_stops_the_file_and_output_goes_on_in_memory(tmp_path, errno_, reason):
    from run_bash.output import Capture

    c = Capture(str(tmp_path / "o"), 10**6, write=short_writer(1000, 5000, errno_))
    for i in range(2000):
        c.feed(f"{i:05d}\n".encode())
    size = (tmp_path / "o").stat().st_size
    assert c.stopped == f"output file stopped at {size} bytes: {reason}"
    assert c.written == size and 5000 <= size < 5010
    # The agent's text and reads past the file come from memory.
    stream = b"".join(f"{i:05d}\n".encode() for i in range(2000))
    assert c.agent_text(100000).endswith("01999\n")
    assert c.read(size, 100) == (stream[size : size + 100], size + 100, len(stream) - size - 100)
    head = c.read(0, 100)[0]  # what the file has comes from the file (a page ends at a line)
    assert stream.startswith(head) and len(head) > 90
    assert c.last_lines(2, 4096) == (b"01998\n01999\n", c.total)
    c.freeze(100000)
    assert c.read(c.total - 6, 100)[0] == b"01999\n"  # still readable after the run ended


def test_reads_past_a_stopped_file_say_what_is_gone(tmp_path):
    from run_bash.output import TAIL_BYTES, Capture

    c = Capture(str(tmp_path / "o"), 10**9, write=short_writer(4096, 4096))
    for _ in range(4 * TAIL_BYTES // 1024):
        c.feed(b"y" * 1023 + b"\n")
    data, _new, _left = c.read(c.written, 64)
    assert data.startswith(b"[\xe2\x80\xa6 ") and b"bytes were not saved and are gone" in data


def test_an_output_file_that_cannot_be_created_still_captures_in_memory(tmp_path):
    from run_bash.output import Capture

    c = Capture(str(tmp_path / "missing-dir" / "o"), 10**6)
    c.feed(b"hello\n")
    assert c.stopped == "output file stopped at 0 bytes: no such file or directory"
    assert c.agent_text(1000) == "hello\n"


def test_the_output_budget_stops_a_file_at_the_directory_cap(tmp_path):
    from run_bash.output import Capture, OutputBudget

    budget = OutputBudget(10_000)
    a = Capture(str(tmp_path / "a"), 10**6, budget=budget)
    a.feed(b"a" * 6000)
    b = Capture(str(tmp_path / "b"), 10**6, budget=budget)
    b.feed(b"b" * 6000)
    assert a.stopped is None and budget.used == 10_000
    assert (
        b.stopped
        == "output file stopped at 4000 bytes: the output directory reached its cap of 10000 bytes"
    )
    assert (tmp_path / "b").stat().st_size == 4000
