"""The kept code of dataclass methods (``run_bash/codecache.py``): a second interpreter compiles
none of them, the classes behave as dataclasses do, the code is the code dataclasses compile,
and a file that is not ours (another header, cut short, garbage) is ignored and rewritten.

Each case runs a fresh interpreter: installing the hook changes the ``dataclasses`` module."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

PROGRAM = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from run_bash import codecache
if sys.argv[2] != "-":
    codecache.install(sys.argv[2])
import dataclasses
from dataclasses import dataclass, field

@dataclass(frozen=True)
class Point:
    x: int
    y: int = 0
    tags: tuple = field(default_factory=tuple)

@dataclass
class Box:
    items: list
    name: str = "box"

p = Point(1, 2)
checks = {
    "repr": repr(p),
    "eq": p == Point(1, 2) and p != Point(2, 1),
    "hash": hash(p) == hash(Point(1, 2)),
    "replace": repr(dataclasses.replace(p, y=5)),
    "fields": [f.name for f in dataclasses.fields(Point)],
    "box": repr(Box([1])),
}
try:
    p.x = 3
    checks["frozen"] = False
except dataclasses.FrozenInstanceError:
    checks["frozen"] = True
code = {
    f"{c.__name__}.{m}": getattr(c, m).__code__.co_code.hex()
    for c in (Point, Box)
    for m in ("__init__", "__repr__", "__eq__")
}
saved = codecache.save() if sys.argv[2] != "-" else None
print(json.dumps({"stats": codecache.stats(), "saved": saved, "checks": checks, "code": code}))
"""


def run(path: Path | str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(ROOT / "python"), str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(out.stdout)


def test_a_second_start_compiles_no_method_and_gets_the_same_classes(tmp_path):
    kept = tmp_path / "cache" / "dataclass-code.bin"
    plain = run("-")  # dataclasses as they are: the reference
    first = run(kept)
    compiled = first["stats"][1]
    assert compiled >= 6 and first["saved"] is True and kept.exists(), first
    second = run(kept)
    assert second["stats"] == [compiled, 0] and second["saved"] is False, second
    for got in (first, second):
        assert got["checks"] == plain["checks"], got
        assert got["code"] == plain["code"]
    assert plain["checks"]["frozen"] is True and plain["checks"]["eq"] is True


def test_a_file_that_is_not_ours_is_ignored_and_rewritten(tmp_path):
    kept = tmp_path / "dataclass-code.bin"
    good = run(kept)
    data = kept.read_bytes()
    header_end = data.index(b"\n", data.index(b"\n") + 1) + 1
    for bad in (
        b"",
        b"garbage",
        data.replace(sys.version.encode(), b"3.0.0 (another build)"),  # another interpreter
        data[: header_end + 20],  # cut short
        data[:header_end] + b"\x00" * 64,
    ):
        kept.write_bytes(bad)
        got = run(kept)
        assert got["stats"][1] == good["stats"][1] and got["saved"] is True, (bad[:40], got)
        assert got["checks"] == good["checks"]
        assert run(kept)["stats"][1] == 0  # rewritten whole
