"""The kept code of start-up (``run_bash/codecache.py``): a second interpreter compiles none of
the dataclass methods and none of the regular expressions of start-up; the classes behave as
dataclasses do and their code is the code dataclasses compile; every kept pattern is equal to
the one ``re`` compiles (same text, flags and program); a pattern given after start-up is never
kept; a file that is not ours (another header, cut short, garbage, a program the engine
refuses) is ignored and rewritten.

Each case runs a fresh interpreter: installing the hook changes the ``dataclasses`` module."""

from __future__ import annotations

import json
import marshal
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

import re
import threading

# Start-up's patterns: the pause list's tables, and patterns compiled by threads at once.
import run_bash.checker  # noqa: F401

PATTERNS = [
    (r"(?P<word>\w+)\s+(?P=word)", re.I),
    (rb"^\x00(?P<n>[0-9]+)$", re.M),
    (r"a # comment\n b", re.X),
    (r"[\u00e9-\u00ff]+|(x)?y", 0),
]
def compile_some(i):
    for j in range(40):
        re.compile(f"(t{i})-(?P<g{j}>[a-z]{{{j % 5 + 1}}})")
threads = [threading.Thread(target=compile_some, args=(i,)) for i in range(6)]
for t in threads:
    t.start()
for p, f in PATTERNS:
    re.compile(p, f)
for t in threads:
    t.join()
noted = dict(codecache._re_used)
re.purge()  # re's own cache holds them too: ask for each again while start-up goes on
kept = {k: re.compile(*k) for k in noted}
hits_before_save = codecache.pattern_stats()
saved = codecache.save() if sys.argv[2] != "-" else None
re.purge()
same = [
    k[0] if isinstance(k[0], str) else k[0].decode()
    for k, pat in kept.items()
    if pat == re.compile(*k)  # equal: the same text, flags and program
    and (pat.groups, dict(pat.groupindex), pat.flags) == (lambda q: (q.groups, dict(q.groupindex), q.flags))(re.compile(*k))
]
re.purge()
re.compile("given later, after start-up: (never kept)")
checks["patterns"] = {
    "same": len(same) == len(kept) and len(kept) == len(noted),
    "matches": [bool(re.compile(p, f).search(t)) for (p, f), t in zip(PATTERNS, ["Hi hi", b"\x00" + b"12", "ab", "y"])],
}
print(json.dumps({
    "stats": codecache.stats(), "patterns": hits_before_save, "after": codecache.pattern_stats(),
    "saved": saved, "unsaved": codecache.save() if sys.argv[2] != "-" else None,
    "checks": checks, "code": code,
}))
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


def test_a_second_start_compiles_nothing_and_gets_the_same_classes_and_patterns(tmp_path):
    kept = tmp_path / "cache" / "startup-code.bin"
    plain = run("-")  # dataclasses and re as they are: the reference
    first = run(kept)
    compiled = first["stats"][1]
    patterns = first["patterns"][1]
    assert compiled >= 6 and first["saved"] is True and kept.exists(), first
    # The pause list's patterns, those of the threads, the four above (re's cache held none).
    assert patterns >= 80 + 240 + 4 and first["patterns"][0] == patterns, first
    second = run(kept)
    assert second["stats"] == [compiled, 0] and second["saved"] is False, second
    # Every pattern found twice (start-up, then asked again), none compiled; none noted later.
    assert second["patterns"] == [2 * patterns, 0] and second["after"] == second["patterns"]
    assert second["unsaved"] is False and first["unsaved"] is False
    for got in (first, second):
        assert got["checks"] == plain["checks"], got
        assert got["code"] == plain["code"]
    assert plain["checks"]["frozen"] is True and plain["checks"]["eq"] is True
    assert plain["checks"]["patterns"]["same"] is True
    assert plain["checks"]["patterns"]["matches"] == [True] * 4


def test_a_file_that_is_not_ours_is_ignored_and_rewritten(tmp_path):
    kept = tmp_path / "startup-code.bin"
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
        assert got["patterns"][1] == good["patterns"][1]
        assert got["checks"] == good["checks"]
        again = run(kept)  # rewritten whole
        assert again["stats"][1] == 0 and again["patterns"][1] == 0, again


def test_a_kept_program_the_engine_refuses_is_compiled_again(tmp_path):
    kept = tmp_path / "startup-code.bin"
    good = run(kept)
    data = kept.read_bytes()
    header_end = data.index(b"\n", data.index(b"\n") + 1) + 1
    methods, patterns = marshal.loads(data[header_end:])
    broken = {k: (v[0], [1, 2, 3], *v[2:]) for k, v in patterns.items()}  # not a program
    kept.write_bytes(data[:header_end] + marshal.dumps((methods, broken)))
    got = run(kept)
    assert got["patterns"][1] == good["patterns"][1] and got["saved"] is True, got
    assert got["checks"] == good["checks"] and got["checks"]["patterns"]["same"] is True
    assert run(kept)["patterns"][1] == 0
