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
