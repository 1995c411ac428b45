"""A run whose working directory is named through a symlink (``a/lnk -> ../b/c``): the shell's
``cd ..`` and ``$PWD/..`` climb the name (to ``a``), the kernel's ``..`` the directory it is (to
``b``). The gate checks a climb both ways, so ``cd .. && rm -rf x`` does not pass as ``b/x``
(nothing there) while it deletes ``a/x`` (ignored beyond the budget). Through the host's
service on each confining backend, the project granted whole; controls: with both places
covered the same lines run without asking, and from a working directory named as it is the
climb runs and undo takes it back byte-exact."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.security.conftest import Host, tree

CLIMBS = ["cd .. && rm -rf x", 'rm -rf "$PWD/../x"', "cd ..; rm -rf x/big", "cd -L .. && rm -rf x"]


def _config(tmp_path: Path) -> dict:
    project = tmp_path / "home" / "proj"
    return {
        "undo": {"ignored_total": 1000},
        "sandbox": {"rules": {"fs_writable": [str(project)]}},
    }


HOST_CONFIG = _config


def _project(h: Host) -> None:
    p = h.p
    (p / ".gitignore").write_text("x/\n")
    (p / "a" / "x").mkdir(parents=True)
    (p / "a" / "x" / "big").write_bytes(b"B" * 1500)  # over the budget: not kept
    (p / "a" / "y").mkdir()
    (p / "a" / "y" / "f").write_text("covered\n")
    (p / "b" / "c").mkdir(parents=True)
    (p / "b" / "c" / "f").write_text("f\n")
    (p / "b" / "c2").mkdir()
    (p / "b" / "c2" / "g").write_text("g\n")
    os.symlink("../b/c", p / "a" / "lnk")
    h.run("true")


@pytest.mark.parametrize("line", CLIMBS)
def test_a_climb_from_a_directory_named_through_a_symlink_asks(host, line):
    _project(host)
    lnk = host.p / "a" / "lnk"
    a = host.svc.check(line, {"cwd": str(lnk)})
    assert a["needs_approval"] is True and a["effect"] == "reversible", a
    assert "a/x is ignored" in a["undo_why"], a
    started = host.svc.run({"cmd": line, "cwd": str(lnk)})
    assert started.get("status") == "awaiting_approval", started
    assert (host.p / "a" / "x" / "big").exists()


def test_with_both_places_covered_it_runs_and_a_plain_climb_undoes(host):
    _project(host)
    lnk = host.p / "a" / "lnk"
    a = host.svc.check("cd .. && rm -rf y", {"cwd": str(lnk)})
    assert a["needs_approval"] is False and a["undoable"] is True, a
    before = tree(host.p)
    real = host.p / "b" / "c"
    assert host.svc.check("cd .. && rm -rf c2", {"cwd": str(real)})["needs_approval"] is False
    started = host.svc.run({"cmd": "cd .. && rm -rf c2", "cwd": str(real)})
    sid = started["id"]
    host.drive(lambda: host.event("result", "id", sid) is not None)
    r = host.event("result", "id", sid) or {}
    assert any("ran without asking" in n for n in r["notices"]), r
    assert not (host.p / "b" / "c2").exists()
    done = host.undo(r["id"])
    assert not done["errors"] and not done["not_recovered"], done
    assert tree(host.p) == before
