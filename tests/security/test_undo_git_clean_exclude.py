"""``git clean`` without ``-x`` leaves ignored files alone, unless an ``-e`` pattern negates: ``-e
'!*.log'`` takes ``*.log`` out of the ignored files and git deletes them as untracked. Read as
the plain ``git clean -fd``, such a line deleted ignored content undo does not keep without a
question. Through the host's service on each confining backend; controls: ``-e`` with a pattern
that only adds to the ignored files runs without asking and leaves the ignored content alone,
and undo takes it back byte-exact."""

from __future__ import annotations

import subprocess

import pytest

from tests.security.conftest import Host, tree

HOST_CONFIG = {"undo": {"ignored_total": 1000}}
NEGATES = [
    "git clean -f -e '!*.log'",
    "git clean -fd --exclude='!big/'",
    "git clean -fd --exclude '!big'",
    "git clean -fde'!*.log'",
    'p="!*.log"; git clean -fd -e "$p"',
]
ADDS = ["git clean -fd -e '*.tmp'", "git clean -fd --exclude=big/"]


def _project(h: Host) -> None:
    (h.p / ".gitignore").write_text("*.log\nbig/\n")
    env = {**h.world.env, "GIT_CONFIG_NOSYSTEM": "1"}
    for args in (["add", ".gitignore"], ["commit", "-qm", "ignore"]):
        subprocess.run(["git", *args], cwd=h.p, env=env, check=True, capture_output=True)
    (h.p / "run.log").write_bytes(b"log of yours\n" * 300)
    (h.p / "big").mkdir()
    (h.p / "big" / "data").write_bytes(b"kept nowhere else\n" * 300)
    (h.p / "scratch.txt").write_text("untracked\n")
    h.run("true")


@pytest.mark.parametrize("line", NEGATES)
def test_a_negating_exclude_pattern_asks(host, line):
    _project(host)
    before = tree(host.p)
    a = host.check(line)
    assert a["needs_approval"] is True and a["effect"] == "irreversible", a
    r = host.run(line)
    assert r.get("status") == "awaiting_approval", r
    assert tree(host.p) == before


@pytest.mark.parametrize("line", ADDS)
def test_an_exclude_pattern_that_only_adds_runs_and_undo_takes_it_back(host, line):
    _project(host)
    a = host.check(line)
    assert a["needs_approval"] is False and a["undoable"] is True, a
    before = tree(host.p)
    r = host.run(line)
    assert any("ran without asking" in n for n in r["notices"]), r
    assert not (host.p / "scratch.txt").exists()
    assert (host.p / "run.log").exists() and (host.p / "big" / "data").exists()
    done = host.undo(r["id"])
    assert not done["errors"], done
    after = tree(host.p)
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    assert {k for k in changed if not k.startswith(".git/")} == set(), changed
