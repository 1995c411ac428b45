"""Helpers for the pause-list tests."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

from run_bash.checker import Verdict


def runs(verdict: Verdict) -> bool:
    """Whether the line runs as far as the checker can tell: it pauses for nothing, or only for
    fetches whose configuration the gate asks git about (``Hit.prunes``: with no tag pruning
    configured, the line runs; tests/unit/test_gate_git_prune_tags.py)."""
    return not verdict.pause or all(h.prunes is not None for h in verdict.hits)


def clone_of_bare(tmp_path: Path, git: Callable[..., str]) -> tuple[Path, Path]:
    """A bare repository ``rem.git`` and a repository ``r`` with one empty commit on ``main`` and
    the bare one as its remote ``origin``, made with the test's own ``git(cwd, *args)``."""
    remote = tmp_path / "rem.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    p = tmp_path / "r"
    p.mkdir()
    git(p, "init", "-q", "-b", "main")
    git(p, "commit", "-q", "--allow-empty", "-m", "a")
    git(p, "remote", "add", "origin", str(remote))
    return remote, p


# Git for the tests' own repositories: no system or global configuration, a fixed author.
GIT_ENV = {
    **os.environ,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
}


def git(cwd: Path, *args: str) -> str:
    """What git says (stdout, stripped) run in ``cwd`` with ``GIT_ENV``; raises when it fails."""
    return subprocess.run(
        ["git", *args], cwd=cwd, env=GIT_ENV, check=True, capture_output=True, text=True
    ).stdout.strip()
