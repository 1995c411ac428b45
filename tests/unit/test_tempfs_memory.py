"""How much memory a run's temp space may take is read from /proc/meminfo
(``tempfs.available_memory``): ``MemAvailable`` plus ``SwapFree``, and no answer when the file
cannot tell. The real file, then written ones for what it may hold."""

from __future__ import annotations

from pathlib import Path

import pytest

from run_bash.sandbox import tempfs


def test_the_real_meminfo_has_an_answer():
    got = tempfs.available_memory()
    assert isinstance(got, int) and got > 0


@pytest.mark.parametrize(
    ("text", "kib"),
    [
        ("MemTotal: 10 kB\nMemAvailable: 5 kB\nSwapTotal: 9 kB\nSwapFree: 2 kB\n", 7),
        ("MemAvailable:    5 kB", 5),  # first and last line
        ("SwapFree: 3 kB\nMemAvailable: 4 kB\n", 7),
        ("MemTotal: 10 kB\nMemAvailable: 5 kB\n", 5),  # no swap
        ("MemTotal: 10 kB\nMemFree: 5 kB\n", None),  # a kernel without MemAvailable
        ("MemTotal: 10 kB\nMemAvailable: many kB\n", None),
        ("MemTotal: 10 kB\nXMemAvailable: 5 kB\n", None),  # a name that only ends the same
        ("", None),
    ],
)
def test_available_memory_reads_mem_available_and_swap_free(tmp_path: Path, text, kib):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text(text)
    assert tempfs.available_memory(str(meminfo)) == (None if kib is None else kib * 1024)


def test_no_meminfo_no_answer(tmp_path: Path):
    assert tempfs.available_memory(str(tmp_path / "missing")) is None
