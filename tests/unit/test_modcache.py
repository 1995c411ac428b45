"""The modules a start imports, kept in one file (``run_bash/modcache.py``): a later interpreter
takes them from it and they are the same modules; a source that changed (even to the same size),
a module put where the search would find it first, a different ``sys.path``, a file that is not
ours, and a descriptor a forked process closed and reused all fall back to the usual import,
which gets what is on disk now.

Each case runs a fresh interpreter: installing the finder changes ``sys.meta_path``."""

from __future__ import annotations

import compileall
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

PROGRAM = r"""
import json, os, sys
first, root, kept, mode = sys.argv[1:5]
sys.path[:0] = [p for p in (first, root) if p != "-"]
sys.path.insert(0, os.path.join(sys.argv[5], "python"))
from run_bash import modcache
modcache.install(kept)
out = {}
if mode == "fork":  # a forked child that closed the file and opened another at its number
    fd = modcache._finder.fd if modcache._finder else -1
    pid = os.fork()
    if pid == 0:
        if fd >= 0:
            os.close(fd)
            other = os.open(sys.executable, os.O_RDONLY)  # (long enough to read from)
            assert other == fd, (other, fd)
        import kp.a
        code = 0 if kp.a.f() == 1 and modcache.stats()[0] == 0 else 1
        os._exit(code)
    out["child"] = os.waitpid(pid, 0)[1]
import kp.a
if mode == "b":
    import kp.b
if mode == "touch":  # a directory the search looks through changes while this process runs
    os.utime(root)
out["f"] = kp.a.f()
out["file"] = kp.a.__file__
out["package_path"] = list(sys.modules["kp"].__path__)
out["stats"] = modcache.stats()
out["saved"] = modcache.save()
print(json.dumps(out))
"""


def start(tmp_path: Path, *, first: Path | None = None, mode: str = "") -> dict:
    """A fresh interpreter that imports ``kp.a`` with the modules kept in ``tmp_path/kept``."""
    got = subprocess.run(
        [
            sys.executable,
            "-c",
            PROGRAM,
            str(first) if first else "-",
            str(tmp_path / "root"),
            str(tmp_path / "kept"),
            mode or "-",
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": ""},
        check=False,
    )
    assert got.returncode == 0, got.stderr
    return json.loads(got.stdout)


def package(where: Path, value: int) -> Path:
    (where / "kp").mkdir(parents=True, exist_ok=True)
    (where / "kp" / "__init__.py").write_text("")
    (where / "kp" / "b.py").write_text("B = 2\n")
    a = where / "kp" / "a.py"
    a.write_text(f"def f():\n    return {value}\n")
    compileall.compile_dir(where / "kp", quiet=1)  # as ``make deps`` compiles the plugin
    settled(where, where / "kp")
    return a


def settled(*dirs: Path) -> None:
    """Directories made a while ago (one changed just before a start is not kept then)."""
    for d in dirs:
        os.utime(d, ns=(d.stat().st_atime_ns, d.stat().st_mtime_ns - 5_000_000_000))


def test_a_later_start_takes_the_kept_modules_and_they_are_the_same(tmp_path):
    package(tmp_path / "root", 1)
    one = start(tmp_path)
    assert one["stats"] == [0, 0] and one["saved"] and one["f"] == 1  # (nothing kept yet)
    two = start(tmp_path)
    assert two["stats"] == [2, 0], two  # kp and kp.a, from the kept file
    assert not two["saved"], "nothing new: not written again"
    # The same module: its code, file and package path are the usual import's.
    assert two["f"] == 1 and two["file"] == one["file"]
    assert two["package_path"] == one["package_path"] == [str(tmp_path / "root" / "kp")]


def test_a_changed_source_is_imported_as_it_is_now_even_at_the_same_size(tmp_path):
    a = package(tmp_path / "root", 1)
    start(tmp_path)
    assert start(tmp_path)["stats"] == [2, 0]
    before = a.stat()
    a.write_text("def f():\n    return 3\n")  # the same size
    # (Seconds later: the usual import's own ``.pyc`` check compares whole seconds.)
    os.utime(a, ns=(before.st_atime_ns, before.st_mtime_ns + 2_000_000_000))
    got = start(tmp_path)
    assert got["f"] == 3 and got["stats"] == [1, 1] and got["saved"], got
    # Kept again as it is now (the control: the kept file is used once more).
    again = start(tmp_path)
    assert again["f"] == 3 and again["stats"] == [2, 0], again


def test_a_module_put_where_the_search_finds_it_first_is_the_one_imported(tmp_path):
    package(tmp_path / "root", 1)
    first = tmp_path / "first"
    first.mkdir()
    settled(first)
    start(tmp_path, first=first)
    assert start(tmp_path, first=first)["stats"] == [2, 0]  # the control: kept
    package(first, 9)  # shadows it, earlier on sys.path
    got = start(tmp_path, first=first)
    assert got["f"] == 9 and got["file"] == str(first / "kp" / "a.py"), got
    assert got["stats"] == [0, 0], "the kept modules are not used at all"


def test_another_search_path_does_not_use_the_kept_modules(tmp_path):
    package(tmp_path / "root", 1)
    start(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    settled(elsewhere)
    got = start(tmp_path, first=elsewhere)  # sys.path differs
    assert got["stats"] == [0, 0] and got["f"] == 1, got


@pytest.mark.parametrize(
    "damage",
    [
        lambda b: b"not ours" + b,
        lambda b: b[: len(b) // 2],
        lambda b: b[:40] + b"\xff" * 64 + b[104:],
        lambda b: b"",
    ],
    ids=["header", "cut-short", "garbage", "empty"],
)
def test_a_kept_file_that_is_not_sound_is_ignored_and_written_again(tmp_path, damage):
    package(tmp_path / "root", 1)
    start(tmp_path)
    kept = tmp_path / "kept"
    kept.write_bytes(damage(kept.read_bytes()))
    got = start(tmp_path)
    assert got["f"] == 1 and got["saved"], got
    assert start(tmp_path)["stats"] == [2, 0]  # written again, and used


def test_a_forked_process_whose_descriptor_was_reused_imports_the_usual_way(tmp_path):
    package(tmp_path / "root", 1)
    start(tmp_path)
    got = start(tmp_path, mode="fork")
    assert got["child"] == 0, "the child read no other file as code, and imported kp.a anew"
    assert got["stats"] == [2, 0], "the parent took them from the kept file (the control)"


def test_kept_modules_a_start_did_not_import_stay_kept(tmp_path):
    a = package(tmp_path / "root", 1)
    start(tmp_path, mode="b")
    assert start(tmp_path, mode="b")["stats"] == [3, 0]
    assert not start(tmp_path)["saved"], "all it imported was kept: not written"
    a.write_text("def f():\n    return 22\n")
    os.utime(a, ns=(a.stat().st_atime_ns, a.stat().st_mtime_ns + 2_000_000_000))
    got = start(tmp_path)  # imports kp.a anew, not kp.b
    assert got["f"] == 22 and got["saved"], got
    assert start(tmp_path, mode="b")["stats"] == [3, 0], "kp.b is still kept"


def test_nothing_is_written_when_a_directory_searched_changed_during_the_start(tmp_path):
    package(tmp_path / "root", 1)
    got = start(tmp_path, mode="touch")
    assert got["f"] == 1 and not got["saved"], got
    settled(tmp_path / "root")  # (a while later)
    assert start(tmp_path)["saved"], "the control: written by a start that changed nothing"
