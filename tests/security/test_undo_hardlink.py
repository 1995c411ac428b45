"""A run cannot write a file through a second name that no watch sees.

undo keeps nothing of an ignored tree over its budget (``undo.ignored_total``) and names a change
there from the watches of its directories (``changes/watch.py``). A write through a hard link
made in another directory reaches the same file with no event in its own directory: the file
would change, the result would name nothing and undo would have nothing to say. So no run makes
a hard link (``seccomp.LINKS``: EXDEV on both backends, as between two mounts), and a write by the
file's own name is still named (the control).
"""

from __future__ import annotations

import pytest

from tests.security.conftest import Host

HOST_CONFIG = {"undo": {"ignored_total": 1000}}  # stands for a large ignored tree (data, .venv)
ORIGINAL = b"N" * 1500


def _project(h: Host) -> None:
    (h.p / ".gitignore").write_text("nm/\n")
    (h.p / "nm" / "pkg").mkdir(parents=True)
    (h.p / "nm" / "pkg" / "f").write_bytes(ORIGINAL)  # over the budget: not kept
    (h.p / "src").mkdir()
    (h.p / "src" / "a.txt").write_text("a\n")
    h.run("true")


def test_a_write_by_the_files_own_name_is_named(host: Host) -> None:
    _project(host)
    r = host.run("echo x > nm/pkg/f")
    assert "not tracked: nm/ (ignored" in r["changes"]["summary"], r


@pytest.mark.parametrize(
    "line",
    [
        "ln nm/pkg/f src/g; echo x > src/g; rm -f src/g",
        "python3 -c \"import os; os.link('nm/pkg/f', 'src/g')\"; echo x > src/g",
        "cp -l nm/pkg/f src/g; echo x > src/g",
    ],
)
def test_no_hard_link_can_be_made_to_write_through(host: Host, line: str) -> None:
    _project(host)
    r = host.run(line + "; echo ran")
    assert "ran" in r["output"], r
    assert "cross-device" in r["output"], r  # the link was refused, as between two mounts
    assert (host.p / "nm/pkg/f").read_bytes() == ORIGINAL
