"""Reasons whose effect follows symlinks under their targets (``find -L``/``-H``/``-follow``,
``truncate``/``shred`` of a glob's names, ``rm -r`` of a glob with more after it or a final
``/``) act where a symlink points: the approval gate must not let them run without asking when
a symlink is there. Through the host's service (gate, run, undo) on each confining backend,
with controls: the same lines with no symlink, and ``rm -rf src/*`` / ``find src -delete``
beside the symlinks (which they never follow), run without asking and undo byte-exact."""

from __future__ import annotations

import asyncio
import hashlib
import os
import stat
from pathlib import Path

import pytest

from run_bash.config import parse_config
from tests.security.conftest import backend_or_skip, make_world, selected_backends

FOLLOWING = [
    "rm -rf src/*/",
    "rm -rf src/*/heads",
    "truncate -s0 src/*",
    "shred -n1 src/*.txt",
    "find -L src -name main -delete",
    "find src -follow -name main -delete",
    "find -H src/* -name main -delete",
]


def tree(root: Path) -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for dp, dns, fns in os.walk(root):
        for n in dns + fns:
            p = os.path.join(dp, n)
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                v: tuple[str, ...] = ("l", os.readlink(p))
            elif stat.S_ISREG(st.st_mode):
                v = ("f", oct(st.st_mode), hashlib.sha1(Path(p).read_bytes()).hexdigest())
            else:
                v = ("d", oct(st.st_mode))
            out[os.path.relpath(p, root)] = v
    return out


class Host:
    """The host's service in one world, on one backend, recording change sets."""

    def __init__(self, root: Path, backend: str, config: dict | None = None) -> None:
        from run_bash.service import Service

        backend_or_skip(backend, parse_config({"sandbox": {"backend": backend}}))
        self.world = make_world(root)
        self.p = self.world.project
        self.events: list[tuple[str, dict]] = []
        self.loop = asyncio.new_event_loop()
        state = root / "state"
        state.mkdir(mode=0o700)
        env = {**self.world.env, "RUN_BASH_UNDO": str(root / "undo")}
        self.svc = Service(
            self.loop, lambda n, p: self.events.append((n, p)), environ=env, state_dir=str(state)
        )
        sandbox = {**(config or {}).get("sandbox", {}), "backend": backend}
        self.svc.setup({**(config or {}), "sandbox": sandbox})

    def drive(self, cond) -> None:
        async def wait() -> None:
            while not cond():
                await asyncio.sleep(0.02)

        self.loop.run_until_complete(asyncio.wait_for(wait(), 120))

    def event(self, name: str, key: str, value: str) -> dict | None:
        for n, p in self.events:
            if n == name and p.get(key) == value and p.get("status") != "running":
                return p
        return None

    def check(self, cmd: str) -> dict:
        return self.svc.check(cmd, {"cwd": str(self.p)})

    def run(self, cmd: str) -> dict:
        started = self.svc.run({"cmd": cmd, "cwd": str(self.p)})
        if started.get("status") == "awaiting_approval":
            return started  # held for the user
        sid = started["id"]
        self.drive(lambda: self.event("result", "id", sid) is not None)
        return self.event("result", "id", sid) or {}

    def undo(self, rid: str) -> dict:
        token = f"undo-{rid}"
        self.svc.undo(rid, {"cwd": str(self.p)}, token)
        self.drive(lambda: self.event("reply", "token", token) is not None)
        return (self.event("reply", "token", token) or {})["result"]

    def close(self) -> None:
        self.svc.shutdown()
        self.loop.run_until_complete(asyncio.sleep(0.2))
        self.loop.close()


@pytest.fixture(params=selected_backends())
def host(request, tmp_path):
    h = Host(tmp_path, request.param)
    try:
        yield h
    finally:
        h.close()


def _src(p: Path, links: bool) -> None:
    (p / "src").mkdir()
    (p / "src" / "a.txt").write_text("a\n")
    (p / "src" / "d").mkdir()
    (p / "src" / "d" / "heads").mkdir()
    (p / "src" / "d" / "heads" / "main").write_text("mine\n")
    if links:
        os.symlink("../.git/refs", p / "src" / "lnk")
        os.symlink("../.git/HEAD", p / "src" / "lf.txt")


def test_an_effect_that_follows_a_symlink_asks(host):
    _src(host.p, links=True)
    host.run("true")  # the index
    git_before = tree(host.p / ".git")
    for line in FOLLOWING:
        a = host.check(line)
        assert a["needs_approval"] is True and a["effect"] == "reversible", (line, a)
        assert "is a symlink" in a["undo_why"], (line, a)
    assert tree(host.p / ".git") == git_before
    # Controls beside the same symlinks: these never follow one (rm and find remove the link).
    for line in ("rm -rf src/*", "find src -name main -delete"):
        a = host.check(line)
        assert a["needs_approval"] is False and a["undoable"] is True, (line, a)
    before = tree(host.p)
    r = host.run("rm -rf src/*")
    assert any("ran without asking" in n for n in r["notices"]), r
    assert not (host.p / "src" / "a.txt").exists() and tree(host.p / ".git") == git_before
    done = host.undo(r["id"])
    assert not done["errors"] and not done["not_recovered"], done
    assert tree(host.p) == before


@pytest.mark.parametrize("line", FOLLOWING)
def test_with_no_symlink_the_same_line_runs_and_undo_takes_it_back(host, line):
    _src(host.p, links=False)
    host.run("true")
    a = host.check(line)
    assert a["needs_approval"] is False and a["undoable"] is True, a
    before = tree(host.p)
    r = host.run(line)
    assert any("ran without asking" in n for n in r["notices"]), r
    assert tree(host.p) != before, r
    done = host.undo(r["id"])
    assert not done["errors"] and not done["not_recovered"], done
    assert tree(host.p) == before


def test_while_another_run_of_the_project_runs_an_effect_that_follows_asks(host):
    """A run still going in the project (a background session) may make a symlink under what
    the effect follows after undo looked: such an effect asks while it runs. What follows no
    symlink still runs without asking beside it, and once it ended the same line is covered."""
    _src(host.p, links=False)
    host.run("true")
    line = "rm -rf src/*/"
    assert host.check(line)["needs_approval"] is False  # the control: nothing else runs
    started = host.svc.run({"cmd": "sleep 120", "cwd": str(host.p), "bg_after": 0.1})
    sid = started["id"]
    host.drive(lambda: any(n == "result" and p.get("id") == sid for n, p in host.events))
    a = host.check(line)
    assert a["needs_approval"] is True and a["effect"] == "reversible", a
    assert f"session {sid} still runs in this project" in a["undo_why"], a
    assert host.check("rm -rf src/*")["needs_approval"] is False  # follows nothing
    host.svc.kill(sid)
    host.drive(lambda: host.event("exited", "id", sid) is not None)
    assert host.check(line)["needs_approval"] is False
