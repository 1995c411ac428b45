"""What git keeps of lost work lives in ``.git`` only: a commit replaced by ``commit --amend``
(its reflog entry), a version staged and then unstaged or reset (an unreachable object). Undo
never restores ``.git``, so deleting those must ask. ``gc --prune=now`` did; the same effect
written another way ran without a question: a ``--prune`` date other than ``now``
(``1.second.ago``), gc's expiry set for the line (``-c gc.pruneExpire=now``, also through
``GIT_CONFIG_*``, which ``git gc`` and the gc a commit starts on its own read), and ``repack``
dropping what its ``-A`` or ``--cruft`` would keep (``--unpack-unreachable``,
``--cruft-expiration``). Through the host's service on each confining backend; controls: each
line run by the user deletes the objects (the effect is real), and the same commands with git's
own expiry run without asking and keep them."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.security.conftest import Host

LINES = [
    "git -c gc.reflogExpire=now -c gc.reflogExpireUnreachable=now -c gc.pruneExpire=now gc -q",
    "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=gc.pruneExpire GIT_CONFIG_VALUE_0=now git gc -q",
    "git gc -q --prune=1.second.ago",
    "git repack -q -A -d --unpack-unreachable=now",
    "git repack -q -a -d --cruft --cruft-expiration=now",
]
KEEPING = ["git gc -q", "git gc -q --prune=2.weeks.ago", "git repack -q -a -d --cruft"]
HOUR = 3600


def _git(h: Host, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**h.world.env, "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(
        ["git", *args], cwd=h.p, env=env, check=check, capture_output=True, text=True
    )


def _there(h: Host, oid: str) -> bool:
    return _git(h, "cat-file", "-e", oid, check=False).returncode == 0


def _project(h: Host) -> tuple[str, str]:
    """A commit replaced by ``--amend`` (in the reflog only) and a staged version taken out of
    the index (reachable from nothing), both packed and an hour old. Returns their ids."""
    (h.p / "a.txt").write_text("first try\n")
    _git(h, "add", "a.txt")
    _git(h, "commit", "-qm", "work")
    amended = _git(h, "rev-parse", "HEAD").stdout.strip()
    (h.p / "a.txt").write_text("second try\n")
    _git(h, "commit", "-qam", "work", "--amend")
    (h.p / "draft.txt").write_text("a draft only the index had\n")
    _git(h, "add", "draft.txt")
    staged = _git(h, "rev-parse", ":draft.txt").stdout.strip()
    _git(h, "repack", "-q", "-a", "-d")
    _git(h, "rm", "-q", "--cached", "draft.txt")
    (h.p / "draft.txt").unlink()
    old = os.stat(h.p / ".git").st_mtime - HOUR  # older than any date a line names
    for dp, _dns, fns in os.walk(h.p / ".git" / "objects"):
        for n in fns:
            os.utime(os.path.join(dp, n), (old, old))
    assert _there(h, amended) and _there(h, staged)
    h.run("true")
    return amended, staged


@pytest.mark.parametrize("line", LINES)
def test_deleting_what_git_keeps_of_lost_work_asks(host, line):
    amended, staged = _project(host)
    a = host.check(line)
    assert a["needs_approval"] is True and a["effect"] == "irreversible", a
    r = host.run(line)
    assert r.get("status") == "awaiting_approval", r
    assert _there(host, amended) and _there(host, staged)
    # The control: the same line, run by the user, deletes them.
    env = {**host.world.env, "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["bash", "-c", line], cwd=host.p, env=env, check=True, capture_output=True)
    assert not _there(host, staged)


@pytest.mark.parametrize("line", KEEPING)
def test_git_s_own_expiry_runs_and_keeps_them(host, line):
    amended, staged = _project(host)
    a = host.check(line)
    assert a["needs_approval"] is False, a
    r = host.run(line)
    assert r.get("status") == "exited" and r.get("exit_code") == 0, r
    assert _there(host, amended) and _there(host, staged)
