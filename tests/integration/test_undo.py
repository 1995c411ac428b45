"""Change sets and undo through the real host in a real Neovim: commands run by the Lua API in
both confining backends, undone through the Lua API, and checked byte-exact (tree hashes with
modes, link targets and empty directories). One Neovim serves the module; each test sets the
options it needs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from run_bash.sandbox.base import CONFINING_BACKENDS
from tests.conftest import open_editor, wait_for
from tests.unit.changes_util import (
    SCENARIO_SETUP,
    SCENARIOS,
    dir_bytes,
    git_repo,
    sh,
    tree_hash,
)

pytestmark = pytest.mark.nvim

IGNORED = ()  # the test repository's ignored files (build/, run.log) are small: covered too


def available(name: str) -> bool:
    from run_bash.config import parse_config
    from run_bash.sandbox.base import get_backend

    return get_backend(name, parse_config({})).availability().ok


def first_available() -> str:
    return next((b for b in CONFINING_BACKENDS if available(b)), "none")


@pytest.fixture(scope="module")
def ed(module_editor):
    module_editor.lua(
        "_G.__msgs = {}; vim.notify = function(m, l) table.insert(_G.__msgs, {m, l}) end"
    )
    return module_editor


def use(ed, backend: str, **undo) -> None:
    if backend != "none" and not available(backend):
        pytest.skip(f"{backend} is not available here")
    ed.lua(
        "require('run_bash').setup(...); assert(require('run_bash').request('sessions'))",
        {"sandbox": {"backend": backend}, "undo": undo or {}},
    )


def run(ed, cmd: str, cwd: Path, **spec) -> dict:
    """Run ``cmd`` through the Lua API with the user's consent (as after the approval window)."""
    backend = ed.lua("return require('run_bash').facts().backend")
    consent = {"unsandboxed_ok": True} if backend == "none" else {"approved": True}
    r = ed.run_sync({"cmd": cmd, "cwd": str(cwd), **consent, **spec}, timeout=60)
    assert r.get("error") is None, r
    return r


def undo(ed, rid: str | None, force: bool = False) -> dict:
    got = ed.lua(
        """
        local done, err = require('run_bash').undo(...)
        return { done = done, err = err }
        """,
        rid,
        {"force": force},
    )
    assert got.get("err") is None, got
    return got["done"]


def repo(tmp_path: Path) -> Path:
    p = tmp_path / "proj"
    git_repo(p)
    sh(SCENARIO_SETUP, p)
    return p


def undone_byte_exact(ed, proj: Path, cmd: str) -> tuple[dict, dict]:
    """Run ``cmd`` in ``proj``, undo it; the project must be back byte-exact and the store must
    not have written the user's ``.git`` (byte for byte, times included)."""
    before = tree_hash(proj, skip=IGNORED)
    git_before = dir_bytes(proj / ".git") if (proj / ".git").exists() else {}
    r = run(ed, cmd, proj)
    assert r["exit_code"] == 0, r["output"]
    assert tree_hash(proj, skip=IGNORED) != before  # the command did change the project
    assert r["changes"]["summary"].startswith("Changed files: "), r["changes"]
    git_after_run = dir_bytes(proj / ".git") if git_before else {}
    done = undo(ed, r["id"])
    assert done["conflicts"] == [] and done["errors"] == [], done
    assert tree_hash(proj, skip=IGNORED) == before
    if git_before:
        assert dir_bytes(proj / ".git") == git_after_run  # undo never writes .git
        if not cmd.startswith("git "):
            assert dir_bytes(proj / ".git") == git_before  # nor did recording the run
    return r, done


@pytest.mark.parametrize("backend", CONFINING_BACKENDS)
@pytest.mark.parametrize("cmd", SCENARIOS.values(), ids=SCENARIOS.keys())
def test_undo_restores_the_project_byte_exact(ed, tmp_path, backend, cmd):
    use(ed, backend)
    undone_byte_exact(ed, repo(tmp_path), cmd)


ODD_NAMES = [b"with space.txt", b"new\nline.txt", b"caf\xe9.txt", b"dir \xff/inner\tname"]


@pytest.mark.parametrize("backend", CONFINING_BACKENDS)
def test_names_with_spaces_newlines_and_non_utf8_bytes(ed, tmp_path, backend):
    use(ed, backend)
    proj = repo(tmp_path)
    for name in ODD_NAMES:
        path = os.path.join(os.fsencode(proj), name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(b"content of " + name)
    cmd = (
        "for f in *.txt; do printf 'more\\n' >> \"$f\"; done; rm -rf $'dir \\xff'; "
        "touch $'added\\x01\\xfe'"
    )
    r, _ = undone_byte_exact(ed, proj, cmd)
    listed = ed.lua("return require('run_bash').changes(...)", r["id"])
    paths = {c["path"] for c in listed}
    assert {'"caf\\351.txt"', '"new\\nline.txt"', '"added\\001\\376"'} <= paths


@pytest.mark.parametrize("backend", CONFINING_BACKENDS)
def test_a_non_git_project(ed, tmp_path, backend):
    use(ed, backend)
    proj = tmp_path / "plain"
    proj.mkdir()
    (proj / "package.json").write_text("{}\n")  # a project file makes it a project
    sh("mkdir -p a/b emptydir && echo 1 > a/b/c && echo 2 > top && chmod +x top", proj)
    undone_byte_exact(ed, proj, "rm -rf a emptydir && echo 3 >> top && mkdir new && echo n > new/f")


@pytest.mark.parametrize("backend", CONFINING_BACKENDS)
def test_git_clean_fdx_brings_back_ignored_files_within_the_budget(ed, tmp_path, backend):
    use(ed, backend, ignored_total="16K")
    proj = repo(tmp_path)
    sh(
        "echo node_modules/ >> .gitignore && mkdir -p node_modules/pkg && "
        "for i in $(seq 1 40); do head -c 1024 /dev/zero > node_modules/pkg/f$i; done",
        proj,
    )
    before = tree_hash(proj, skip=("node_modules",))
    r = run(ed, "git clean -q -fdx", proj)
    summary = r["changes"]["summary"]
    assert "D build/ (1 file)" in summary and "D run.log" in summary, summary
    # Over the budget: named, with its size, as not recoverable.
    assert "not recovered: node_modules/ (ignored, 40 KiB, over undo.ignored_total)" in summary
    done = undo(ed, r["id"])
    assert done["errors"] == [] and done["conflicts"] == [], done
    assert [x["path"] for x in done["not_recovered"]] == ["node_modules"]
    assert tree_hash(proj, skip=("node_modules",)) == before
    assert not (proj / "node_modules").exists()


def test_changes_is_a_diff_buffer_and_the_undo_float_restores_on_confirm(ed, tmp_path):
    use(ed, first_available())
    proj = repo(tmp_path)
    before = tree_hash(proj, skip=IGNORED)
    r = run(ed, "echo appended >> src/app.py && rm docs/index.md && echo new > added.txt", proj)
    rid = r["id"]
    # The completion mirror knows the run; the Lua list says what changed.
    assert rid in ed.nvim.funcs.getcompletion("RunBashUndo ", "cmdline")
    kinds = {c["path"]: c["kind"] for c in ed.lua("return require('run_bash').changes(...)", rid)}
    assert kinds == {"added.txt": "added", "docs/index.md": "deleted", "src/app.py": "modified"}
    ed.nvim.command(f"RunBashChanges {rid}")
    name = f"run_bash://{rid}/changes"
    buf = wait_for(lambda: ed.nvim.funcs.bufnr(name) if ed.nvim.funcs.bufnr(name) > 0 else None)
    assert ed.lua("return vim.bo[...].filetype", buf) == "diff"
    text = "\n".join(ed.lua("return vim.api.nvim_buf_get_lines(..., 0, -1, false)", buf))
    assert "+appended" in text and "-# Title" in text and "+new" in text
    assert f"# run {rid} in {proj}" in text
    # The sessions list has a changes column.
    ed.nvim.command("RunBashSessions")
    rows = ed.lua(
        "return vim.api.nvim_buf_get_lines(vim.fn.bufnr('run_bash://sessions'), 0, -1, false)"
    )
    assert "CHANGES" in rows[0].split()
    assert any(row.startswith(rid) and " A1 M1 D1 " in row for row in rows), rows
    # A buffer showing a file the undo restores is reloaded.
    ed.nvim.command(f"edit {proj / 'src' / 'app.py'}")
    assert ed.nvim.current.buffer[-1] == "appended"
    ed.nvim.command(f"RunBashUndo {rid}")
    lines = wait_for(lambda: float_lines(ed))
    assert lines[0] == f"Undo run {rid} in {proj}"
    assert "Restore (2):" in lines and "  docs/index.md" in lines and "  src/app.py" in lines
    assert "Delete (the run added them) (1):" in lines and "  added.txt" in lines
    ed.nvim.input("a")
    msg = wait_for(lambda: [m for m in ed.lua("return _G.__msgs") if "undid run " + rid in m[0]])
    assert "restored 2, removed 1" in msg[0][0]
    assert tree_hash(proj, skip=IGNORED) == before
    assert ed.nvim.current.buffer[-1] == "changed"  # reloaded by :checktime


def float_lines(ed):
    return ed.lua(
        """
        local win = require('run_bash.approval')._active_win()
        if not win then return nil end
        return vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(win), 0, -1, false)
        """
    )


def test_a_conflict_is_left_alone_unless_forced_with_the_bang(ed, tmp_path):
    use(ed, first_available())
    proj = repo(tmp_path)
    r = run(ed, "echo by-run > notes.md && echo x >> src/pkg/mod.py", proj)
    (proj / "notes.md").write_text("by the user\n")  # changed again after the run
    ed.nvim.command(f"RunBashUndo {r['id']}")
    lines = wait_for(lambda: float_lines(ed))
    assert "Changed since the run, left alone (:RunBashUndo! forces) (1):" in lines
    assert "  notes.md — changed since the run" in lines
    ed.nvim.input("a")
    undone(ed, r["id"])
    assert (proj / "src/pkg/mod.py").read_text() == "x = 1\n"
    assert (proj / "notes.md").read_text() == "by the user\n"
    ed.nvim.command(f"RunBashUndo! {r['id']}")
    lines = wait_for(lambda: float_lines(ed))
    assert "Changed since the run, put back anyway (!) (1):" in lines
    ed.nvim.input("a")
    undone(ed, r["id"], 2)
    assert (proj / "notes.md").read_text() == "draft\n"


def undone(ed, rid, times=1):
    """Wait for the message of the ``times``-th undo of ``rid``."""
    return wait_for(
        lambda: len([m for m in ed.lua("return _G.__msgs") if f"undid run {rid}:" in m[0]]) >= times
    )


def test_cancel_in_the_undo_float_changes_nothing(ed, tmp_path):
    use(ed, first_available())
    proj = repo(tmp_path)
    r = run(ed, "rm -rf src", proj)
    after = tree_hash(proj)
    ed.nvim.command(f"RunBashUndo {r['id']}")
    wait_for(lambda: float_lines(ed))
    ed.nvim.input("q")
    wait_for(lambda: float_lines(ed) is None)
    # The control: the same undo confirmed puts src back.
    assert tree_hash(proj) == after
    done = undo(ed, r["id"])
    assert "src/app.py" in done["restored"]


def test_a_background_session_killed_later_has_its_change_set(ed, tmp_path):
    use(ed, first_available())
    proj = repo(tmp_path)
    first = run(ed, "echo started > server.log.txt; sleep 300", proj, bg_after=1)
    assert first["status"] == "running" and "changes" not in first
    ed.lua(
        "_G.__kill = nil; require('run_bash').kill(..., function(r) _G.__kill = r end)",
        first["id"],
    )
    reply = wait_for(lambda: ed.lua("return _G.__kill"), timeout=30)
    assert reply["result"]["killed"] is True
    assert reply["result"]["changes"]["paths"] == ["A server.log.txt"]
    done = undo(ed, first["id"])
    assert done["removed"] == ["server.log.txt"] and not (proj / "server.log.txt").exists()


def test_retention_keeps_the_last_runs_per_project(ed, tmp_path):
    use(ed, first_available(), keep=2)
    proj = repo(tmp_path)
    ids = [run(ed, f"echo {i} > kept{i}.txt", proj)["id"] for i in range(3)]
    listed = ed.lua("return require('run_bash').undo_runs()")
    mine = [x["run"] for x in listed if x["project"] == str(proj)]
    assert mine == [ids[2], ids[1]]
    got = ed.lua("local d, e = require('run_bash').undo(...); return { d = d, e = e }", ids[0])
    assert got.get("d") is None and "no change set is kept for run" in got["e"]
    assert (proj / "kept0.txt").exists()  # nothing was undone


def test_undo_disabled_records_nothing(ed, tmp_path):
    use(ed, first_available(), enabled=False)
    proj = repo(tmp_path)
    r = run(ed, "echo off > off.txt", proj)
    assert "changes" not in r
    use(ed, first_available())  # the control: recording again
    assert run(ed, "echo on > on.txt", proj)["changes"]["paths"] == ["A on.txt"]


def test_undo_after_neovim_restarts(tmp_path):
    """A second Neovim on the same state dir undoes a run of the first, which has quit."""
    home, proj = tmp_path / "home", repo(tmp_path)
    before = tree_hash(proj, skip=IGNORED)
    with pytest.MonkeyPatch.context() as env:
        with open_editor(home, tmp_path / "w1", env) as first:
            use(first, first_available())
            rid = run(first, "rm -rf src docs && echo n > n.txt", proj)["id"]
        with open_editor(home, tmp_path / "w2", env) as second:
            second.lua("require('run_bash').setup({ sandbox = { backend = 'none' } })")
            # Completion knows the run before anything ran in this Neovim.
            wait_for(lambda: rid in second.nvim.funcs.getcompletion("RunBashUndo ", "cmdline"))
            done = undo(second, rid)
    assert sorted(done["removed"]) == ["n.txt"]
    assert tree_hash(proj, skip=IGNORED) == before


def test_an_unsaved_buffer_is_not_written_over_the_undo(ed, tmp_path):
    """Undo under a buffer with unsaved changes: it warns, names the buffer, and a plain :w is
    refused (it would write the run's content back); :w! writes it; an unmodified buffer of
    another restored file is reloaded (the control)."""
    use(ed, first_available())
    proj = repo(tmp_path)
    app, mod = proj / "src" / "app.py", proj / "src" / "pkg" / "mod.py"
    r = run(ed, "echo by-run >> src/app.py && echo by-run >> src/pkg/mod.py", proj)
    ed.nvim.command(f"edit {mod}")
    mod_buf = ed.nvim.current.buffer.number
    ed.nvim.command(f"edit {app}")
    ed.nvim.current.buffer.append("typed by the user")  # unsaved, on top of the run's content
    assert ed.lua("return vim.bo.modified")
    ed.nvim.command(f"RunBashUndo {r['id']}")
    wait_for(lambda: float_lines(ed))
    ed.nvim.input("a")
    msg = wait_for(
        lambda: [m for m in ed.lua("return _G.__msgs") if f"undid run {r['id']}" in m[0]]
    )
    assert "1 buffer(s) with unsaved changes were not reloaded" in msg[-1][0], msg
    assert "src/app.py" in msg[-1][0]
    assert app.read_text() == "print(1)\nchanged\n"  # restored on disk
    err = ed.lua("local ok, e = pcall(vim.cmd, 'write'); return ok and '' or tostring(e)")
    assert ":RunBashUndo restored this file" in err
    assert app.read_text() == "print(1)\nchanged\n"  # :w refused: the undo stands
    ed.nvim.command("write!")
    assert app.read_text().endswith("typed by the user\n")  # :w! writes the buffer anyway
    assert ed.lua("return vim.api.nvim_buf_get_lines(..., 0, -1, false)", mod_buf) == ["x = 1"]
    ed.nvim.command("bwipeout! " + str(mod_buf))
    ed.nvim.command("enew!")


def test_the_message_after_undo_lists_what_was_not_recovered(ed, tmp_path):
    use(ed, first_available(), ignored_total="1K")
    proj = repo(tmp_path)
    sh("head -c 3000 /dev/zero > big.log", proj)
    r = run(ed, "rm -f big.log && echo x >> notes.md", proj)
    ed.nvim.command(f"RunBashUndo {r['id']}")
    wait_for(lambda: float_lines(ed))
    ed.nvim.input("a")
    msg = wait_for(
        lambda: [m for m in ed.lua("return _G.__msgs") if f"undid run {r['id']}" in m[0]]
    )
    text = msg[-1][0]
    assert "not recovered: big.log (not recovered: ignored, 2.9 KiB, over undo.ignored_total)" in (
        text
    ), text


def test_the_changes_buffer_is_named_as_the_help_says(ed, tmp_path):
    use(ed, first_available())
    proj = repo(tmp_path)
    r = run(ed, "echo x >> notes.md", proj)
    ed.nvim.command(f"RunBash echo {r['id']}")  # an output buffer run_bash://<id2> meanwhile
    ed.nvim.command(f"RunBashChanges {r['id']}")
    name = f"run_bash://{r['id']}/changes"
    buf = wait_for(lambda: ed.lua("return vim.b.run_bash_run and vim.api.nvim_get_current_buf()"))
    assert ed.lua("return vim.fn.bufname(...)", buf) == name
    assert ed.lua("return vim.bo[...].filetype", buf) == "diff"
    ed.nvim.command("close")


@pytest.mark.parametrize("backend", CONFINING_BACKENDS)
def test_gitignore_exposure_never_deletes_secrets_env(ed, tmp_path, backend):
    """The issue's case through the host: a run drops `secrets/` from .gitignore; undo must not
    delete secrets/.env (whether undo kept it within the budget or not)."""
    use(ed, backend, ignored_total=0)  # secrets/ not kept: the dangerous case
    proj = repo(tmp_path)
    sh("mkdir secrets && echo TOKEN=s3cret > secrets/.env && echo secrets/ >> .gitignore", proj)
    r = run(ed, "sed -i '/secrets/d' .gitignore && echo more >> notes.md", proj)
    assert sorted(r["changes"]["paths"]) == ["M .gitignore", "M notes.md"], r["changes"]
    done = undo(ed, r["id"])
    assert done["errors"] == [] and done["removed"] == []
    assert (proj / "secrets" / ".env").read_text() == "TOKEN=s3cret\n"
    assert "secrets/" in (proj / ".gitignore").read_text()


@pytest.mark.parametrize("backend", CONFINING_BACKENDS)
def test_a_write_through_a_shared_mapping_is_in_the_runs_change_set(ed, tmp_path, backend):
    """inotify has no event for a write through a shared mmap, but reports the file when the
    mapping goes, which is before the run's end: the change set has it at once."""
    use(ed, backend)
    proj = repo(tmp_path)
    code = (
        "import mmap, os; fd = os.open('src/app.py', os.O_RDWR); m = mmap.mmap(fd, 0); "
        "os.close(fd); m[0:5] = b'PRINT'; os._exit(0)"
    )
    r = run(ed, f'python3 -c "{code}"', proj)
    assert r["exit_code"] == 0, r["output"]
    assert (proj / "src" / "app.py").read_text().startswith("PRINT")
    assert r["changes"]["paths"] == ["M src/app.py"], r["changes"]
    undo(ed, r["id"])
    assert (proj / "src" / "app.py").read_text() == "print(1)\nchanged\n"
