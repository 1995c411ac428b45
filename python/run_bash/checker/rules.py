"""Pause-list rules: the defaults and validation of user rules. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def validate_rules(rules: Mapping[str, Any]) -> list[str]:
    """Return one problem string per invalid ``pauselist`` entry (empty when all are valid)."""
    problems = []
    for name, value in rules.items():
        if not isinstance(value, (bool, dict)):
            problems.append(f"`pauselist.{name}` should be boolean, function or table")
    return problems
