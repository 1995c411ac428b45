"""Undo never destroys bytes it cannot give back, through the real host in a real Neovim: what an
undo removes or overwrites must be kept by the undo's own start (undoing the undo brings it
back). A run's output may carry older bytes (``gzip``, ``cp`` then ``rm`` of a file over the
size cap), a file born during a background run may be the user's, and a forced undo whose own
start is not recorded has nothing to keep the user's newer edit in. Each case checks the bytes
on disk before the run, after it and after the undo, beside a control that undo still takes
back what it can keep."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest

from tests.conftest import wait_for
from tests.integration.test_undo import first_available, run, undo, use

pytestmark = pytest.mark.nvim


@pytest.fixture(scope="module")
def ed(module_editor):
    return module_editor


def project(tmp_path: Path, **files: bytes) -> Path:
    p = tmp_path / "proj"
    p.mkdir()
    (p / "Makefile").write_bytes(b"all:\n")  # a project file makes it a project
    for name, data in files.items():
        (p / name.replace("_", ".")).write_bytes(data)
    return p


def plan(ed, rid: str, force: bool = False) -> dict:
    got = ed.lua(
        "local d, e = require('run_bash').undo_plan(...); return { d = d, e = e }",
        rid,
        {"force": force},
    )
    assert got.get("e") is None, got
    return got["d"]


def why(items: list[dict]) -> dict[str, str]:
    return {x["path"]: x["why"] for x in items}


def files(p: Path) -> dict[str, bytes]:
    return {str(f.relative_to(p)): f.read_bytes() for f in sorted(p.rglob("*")) if f.is_file()}


RUN = "echo v2-by-run > config.txt; mkdir gen; for i in $(seq 1 15); do echo $i > gen/f$i; done"
USER = b"v3 USER WORK typed after the run\n"


@pytest.mark.parametrize("max_files", [10, 1000], ids=["undo not recorded", "control"])
def test_a_forced_undo_replaces_a_newer_edit_only_when_it_keeps_it(ed, tmp_path, max_files):
    use(ed, first_available(), max_files=max_files)
    p = project(tmp_path, config_txt=b"v1 original\n")
    run(ed, "true", p)
    r = run(ed, RUN, p)
    assert (p / "config.txt").read_bytes() == b"v2-by-run\n"
    (p / "config.txt").write_bytes(USER)  # the user's newer work
    (p / "data").mkdir()  # and the project grows (past undo.max_files = 10)
    for i in range(20):
        (p / "data" / f"d{i}").write_bytes(b"%d" % i)
    pl = plan(ed, r["id"], force=True)
    done = undo(ed, r["id"], force=True)
    if max_files == 10:
        # Nothing could keep v3: the preview says so, the undo leaves it, byte for byte.
        assert "config.txt" not in why(pl["conflicts"]) and pl["restore"] == []
        left = "left in place: changed since the run, not kept by this undo"
        assert why(pl["not_recovered"])["config.txt"].startswith(left)
        assert (
            "changes not recorded: the project has more than 10 files"
            in (why(pl["not_recovered"])["config.txt"])
        )
        assert done["run"] is None and "more than 10 files" in done["recorded"]
        assert why(done["not_recovered"])["config.txt"].startswith(left)
        assert done["restored"] == [] and (p / "config.txt").read_bytes() == USER
        # What the run made and left as it was is still taken back.
        assert all(f.read_bytes() == f.name[1:].encode() + b"\n" for f in (p / "gen").iterdir())
        assert "gen/f1" in done["removed"] and not (p / "gen" / "f1").exists()
    else:
        assert why(pl["conflicts"]) == {"config.txt": "changed since the run"}
        assert "config.txt" in pl["restore"]
        assert done["restored"] == ["config.txt"] and done["run"]
        assert (p / "config.txt").read_bytes() == b"v1 original\n"
        assert not (p / "gen").exists()
        undo(ed, done["run"])  # the undo of the undo gives v3 back
        assert (p / "config.txt").read_bytes() == USER
    assert {k: v for k, v in files(p).items() if k.startswith("data/")} == {
        f"data/d{i}": b"%d" % i for i in range(20)
    }


@pytest.mark.parametrize(
    ("cmd", "made"),
    [("gzip data.bin", "data.bin.gz"), ("cp data.bin copy.bin && rm data.bin", "copy.bin")],
    ids=["gzip", "cp-rm"],
)
def test_undo_never_removes_the_copy_of_a_file_it_did_not_keep(ed, tmp_path, cmd, made):
    use(ed, first_available(), max_file_size="4K")
    data = os.urandom(20_000)  # over undo.max_file_size: not kept
    p = project(tmp_path, data_bin=data)
    run(ed, "true", p)
    r = run(ed, f"{cmd} && echo small > small.txt", p)
    after = files(p)
    assert "data.bin" not in after and after["small.txt"] == b"small\n"
    if made == "copy.bin":
        assert after[made] == data
    else:
        assert gzip.decompress(after[made]) == data
    left = "left in place: not kept by this undo (over 4 KiB)"
    assert why(plan(ed, r["id"])["not_recovered"])[made] == left
    done = undo(ed, r["id"])
    assert why(done["not_recovered"])[made] == left
    assert why(done["not_recovered"])["data.bin"] == "not recovered: over 4 KiB"
    # The only copy of the user's bytes stays; the control, small.txt, is taken back.
    assert done["removed"] == ["small.txt"], done
    assert files(p) == {"Makefile": b"all:\n", made: after[made]}


def test_a_compressed_copy_undo_keeps_is_removed_and_comes_back(ed, tmp_path):
    """The control of the case above: the run's output is small enough to be kept, so undo
    removes it, and undoing the undo brings it back byte-exact."""
    use(ed, first_available(), max_file_size="4K")
    data = b"a line of text\n" * 2000  # 30 kB, not kept; its gzip is small, kept
    p = project(tmp_path, data_bin=data)
    run(ed, "true", p)
    r = run(ed, "gzip data.bin", p)
    gz = (p / "data.bin.gz").read_bytes()
    assert gzip.decompress(gz) == data and len(gz) < 4096
    done = undo(ed, r["id"])
    assert done["removed"] == ["data.bin.gz"] and done["run"]
    assert files(p) == {"Makefile": b"all:\n"}
    undo(ed, done["run"])
    assert files(p) == {"Makefile": b"all:\n", "data.bin.gz": gz}


def test_undo_of_a_background_run_keeps_a_big_file_saved_meanwhile(ed, tmp_path):
    use(ed, first_available(), max_file_size="4K")
    p = project(tmp_path)
    run(ed, "true", p)
    first = run(ed, "echo started > server.log; sleep 300", p, bg_after=1)
    assert first["status"] == "running"
    wait_for(lambda: (p / "server.log").exists(), timeout=30)
    data = os.urandom(50_000)
    (p / "dataset.bin").write_bytes(data)  # the user's own file, saved while the server runs
    ed.lua(
        "_G.__kill = nil; require('run_bash').kill(..., function(r) _G.__kill = r end)",
        first["id"],
    )
    wait_for(lambda: ed.lua("return _G.__kill"), timeout=30)
    assert files(p) == {"Makefile": b"all:\n", "server.log": b"started\n", "dataset.bin": data}
    done = undo(ed, first["id"])
    assert why(done["not_recovered"])["dataset.bin"] == (
        "left in place: not kept by this undo (over 4 KiB)"
    )
    assert done["removed"] == ["server.log"]  # the control: the run's own small file goes
    assert files(p) == {"Makefile": b"all:\n", "dataset.bin": data}
