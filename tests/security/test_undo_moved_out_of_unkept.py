"""A run that moves content undo does not keep (an ignored tree beyond the budget) to a path it
covers: removing the new path would finish a loss the store cannot give back, so undo leaves
it in place and says where it came from (``mv nm nm2``: same inode as the tree it moved;
``mv nm/pkg src/pkg``: born well before the run). Through the host's service on each
confining backend; controls: a move of covered content and a file the same kind of run made
are taken back byte-exact."""

from __future__ import annotations

import time

import pytest

from tests.security.conftest import Host, tree

MOVES = {
    "mv nm nm2": "nm2/pkg/f",
    "mv nm/pkg src/pkg": "src/pkg/f",
    "mv nm/pkg/f src/f": "src/f",
}
OLDER_S = 2.5  # the tree is older than the run by more than the file system's stamp margin


HOST_CONFIG = {"undo": {"ignored_total": 1000}}


def _project(h: Host) -> None:
    (h.p / ".gitignore").write_text("nm/\n")
    (h.p / "nm" / "pkg").mkdir(parents=True)
    (h.p / "nm" / "pkg" / "f").write_bytes(b"N" * 1500)  # over the budget: not kept
    (h.p / "src").mkdir()
    (h.p / "src" / "a.txt").write_text("a\n")
    time.sleep(OLDER_S)
    h.run("true")


@pytest.mark.parametrize("line", MOVES)
def test_content_moved_out_of_what_undo_does_not_keep_stays(host, line):
    _project(host)
    r = host.run(line)
    assert r["exit_code"] == 0, r
    done = host.undo(r["id"])
    assert not done["errors"], done
    moved = host.p / MOVES[line]
    assert moved.read_bytes() == b"N" * 1500, done
    assert any("moved here" in n["why"] for n in done["not_recovered"]), done


@pytest.mark.parametrize(
    "line", ["mv src src2", "echo n > src/new && rm nm/pkg/f", "mv src/a.txt src/b.txt"]
)
def test_covered_moves_and_what_the_run_made_are_taken_back(host, line):
    _project(host)
    before = tree(host.p)
    r = host.run(line)
    assert r["exit_code"] == 0, r
    done = host.undo(r["id"])
    assert not done["errors"], done
    assert not any("moved here" in n["why"] for n in done["not_recovered"]), done
    after = tree(host.p)
    gone = {k: v for k, v in before.items() if not k.startswith("nm")}
    assert {k: v for k, v in after.items() if not k.startswith("nm")} == gone
