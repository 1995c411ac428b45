"""Helpers for the pause-list tests."""

from __future__ import annotations

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
