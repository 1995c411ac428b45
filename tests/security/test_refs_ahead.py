"""A host's first policy in a repository has git list its refs beside the rest of that policy
(``RefsGuard.refs_ahead``); the run's guard takes that list only when the refs' signature is still
the one taken before git was asked. Each case runs in a Python of its own (a fresh host's state)
and drives the product's own path: a real first run through ``SessionManager``, whose policy names
the repository; the user's commit, when the case makes one, lands after the list was made and
before the run's guard looks."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import ROOT

SCRIPT = textwrap.dedent(
    """\
    import asyncio, json, os, subprocess, sys, tempfile
    sys.path.insert(0, {python!r})
    repo, change, backend = sys.argv[1], sys.argv[2], sys.argv[3]
    os.chdir(repo)
    from run_bash import fsdeps
    from run_bash.sandbox import reftips
    fsdeps.SETTLED_NS = reftips.SETTLED_NS = 0  # (the repository was made just now)
    from run_bash.sandbox import guard

    def git(*args):
        subprocess.run(["git", "-c", "user.name=u", "-c", "user.email=u@x", *args], check=True,
                       capture_output=True)

    ahead, listed, looking = [], [], []
    real_ahead, real_list, real_before = (
        guard.Keeper.refs_ahead, reftips.ask, guard.Keeper._refs_before)

    def refs_ahead(self, git_dir, common_dir):
        real_ahead(self, git_dir, common_dir)
        made = self._ahead.get(git_dir)
        ahead.append(made is not None)
        if made is not None:
            made.result(30)  # the list is made
        if change == "commit":  # then the user commits a kept file, and edits it
            with open(os.path.join(repo, ".envrc"), "w") as f:
                f.write("export A=1\\n")
            git("add", ".envrc")
            git("commit", "-qm", "env")
            with open(os.path.join(repo, ".envrc"), "w") as f:
                f.write("export A=2\\n")

    def list_refs(*a, **k):
        import threading
        listed.append("ahead" if threading.current_thread().name == "run_bash-refs"
                      else "before" if looking else "after")
        return real_list(*a, **k)

    def before(self, *a, **k):
        looking.append(1)
        try:
            return real_before(self, *a, **k)
        finally:
            looking.pop()

    guard.Keeper.refs_ahead, reftips.ask, guard.Keeper._refs_before = (
        refs_ahead, list_refs, before)
    from run_bash.config import parse_config
    from run_bash.sessions import SessionManager
    loop = asyncio.new_event_loop()
    m = SessionManager(parse_config({{"sandbox": {{"backend": backend, "prepare": False}}}}),
                       loop=loop, state_dir=tempfile.mkdtemp())
    out = {{}}
    chosen = m.choice()
    why = chosen.error or ("" if chosen.backend.availability().ok else chosen.unavailable)
    if why:
        out["skip"] = why
    else:
        s = m.start("git branch side && echo ran", cwd=repo)
        r = loop.run_until_complete(asyncio.wait_for(m.wait_result(s.id), 60))
        out.update(output=r.output, notices=list(r.notices), ahead=ahead,
                   listed_ahead=listed.count("ahead"), listed_before=listed.count("before"))
        out["tips"] = [subprocess.run(["git", "rev-parse", "-q", "--verify", ref],
                                      capture_output=True, text=True).stdout.strip()
                       for ref in ("HEAD", "refs/heads/side")]
        out["envrc_committed"] = subprocess.run(
            ["git", "cat-file", "-e", "HEAD:.envrc"], capture_output=True).returncode == 0
    loop.run_until_complete(m.shutdown())
    print(json.dumps(out))
    """
)


def first_run(tmp_path, change: str, backend: str) -> dict:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "README").write_text("hi\n")
    for args in (["init", "-q"], ["add", "README"], ["commit", "-qm", "first"]):
        subprocess.run(
            ["git", "-c", "user.name=u", "-c", "user.email=u@x", *args], cwd=repo, check=True
        )
    code = SCRIPT.format(python=str(ROOT / "python"))
    out = subprocess.run(
        [sys.executable, "-c", code, str(repo), change, backend],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    if "skip" in got:
        pytest.skip(f"{backend}: {got['skip']}")
    return got


@pytest.mark.parametrize("backend", ["sandlock", "bubblewrap"])
def test_the_first_runs_guard_takes_the_refs_listed_beside_its_policy(tmp_path, backend):
    """The control of the case below: nothing changed after the list was made, so the guard's
    first look lists no ref itself; the run's own new branch is judged after it, and stays (it
    holds nothing kept)."""
    got = first_run(tmp_path, "none", backend)
    assert "ran" in got["output"] and not got["notices"], got
    assert got["ahead"] == [True] and got["listed_ahead"] == 1, got
    assert got["listed_before"] == 0, got
    assert got["tips"][0] == got["tips"][1], got


@pytest.mark.parametrize("backend", ["sandlock", "bubblewrap"])
def test_a_commit_the_user_makes_after_the_list_is_not_taken_for_the_runs(tmp_path, backend):
    """The user commits a kept file (``.envrc``) after git listed the refs ahead and before the
    run's guard looks: that list does not hold any more, so the guard lists them itself, and the
    commit is the user's. (Had the guard taken the list made ahead, the run, which moves refs,
    would look like it had made that commit, and it would be taken back.)"""
    got = first_run(tmp_path, "commit", backend)
    assert "ran" in got["output"] and not got["notices"], got
    assert got["ahead"] == [True] and got["listed_ahead"] == 1, got
    # (Both are the user's commit: the run's branch names it, and nothing was taken back.)
    assert got["envrc_committed"] and got["tips"][0] == got["tips"][1], got
    assert got["listed_before"] == 1, got
