"""Helpers for the pause-list tests."""

from __future__ import annotations

from run_bash.checker import Verdict


def runs(verdict: Verdict) -> bool:
    """Whether the line runs as far as the checker can tell: it pauses for nothing, or only for
    fetches whose configuration the gate asks git about (``Hit.prunes``: with no tag pruning
    configured, the line runs; tests/unit/test_gate_git_prune_tags.py)."""
    return not verdict.pause or all(h.prunes is not None for h in verdict.hits)
