"""Every benchmark of ``make bench`` imports (a module moved or renamed in the runtime breaks the
bench, which the suite does not otherwise run)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent.parent / "bench"


@pytest.mark.parametrize("name", sorted(p.stem for p in BENCH.glob("*.py")))
def test_bench_module_imports(name, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    monkeypatch.setattr(sys, "argv", ["bench"])
    importlib.import_module(name)
