"""What must keep working inside the default sandbox (design section 7, end), in every backend."""

from __future__ import annotations

import os
import shutil

import pytest

from tests.security.conftest import CONTROL


def need(*tools: str) -> None:
    for t in tools:
        if shutil.which(t) is None:
            pytest.skip(f"{t} not installed")


def test_tools_on_path_and_python(sbx):
    r = sbx.run(
        "python3 -c 'import sys; print(sys.version_info[0])'; git --version; ls / >/dev/null"
    )
    assert "3\n" in r.output and "git version" in r.output


def test_tmp_mktemp_tempfile(sbx):
    r = sbx.run(
        'f=$(mktemp) && echo hi > "$f" && cat "$f"; d=$(mktemp -d) && touch "$d/x" && echo dir-ok; '
        'python3 -c \'import tempfile; f=tempfile.NamedTemporaryFile(); f.write(b"x"); '
        'f.flush(); print("tempfile-ok")\'; echo ok > "$TMPDIR/plain" && cat "$TMPDIR/plain"'
    )
    assert "hi\n" in r.output and "dir-ok" in r.output and "tempfile-ok" in r.output
    assert "ok\n" in r.output


def test_tmp_paths(sbx):
    """A hard-coded /tmp path works and lands in the run's private temp dir, never the host's."""
    name = f"rb-file-{os.getpid()}-{sbx.name}"
    r = sbx.run(
        f"echo hi > /tmp/{name} && cat /tmp/{name}; echo rc=$?; "
        f'[ "$(cat $TMPDIR/{name})" = hi ] && echo {CONTROL}; '
        "echo x > /var/tmp/v && echo x > /dev/shm/s && ls /tmp"
    )
    assert not os.path.exists(f"/tmp/{name}")  # never the host's shared /tmp
    assert not os.path.exists("/var/tmp/v") and not os.path.exists("/dev/shm/s")
    assert "hi\nrc=0" in r.output, r.output
    assert CONTROL in r.output, r.output  # $TMPDIR is the same private dir


def test_tar_with_modes_and_a_symlink_into_tmp(sbx):
    need("tar")
    r = sbx.run(
        "mkdir -p tsrc/d && echo a > tsrc/exe && chmod 755 tsrc/exe && echo b > tsrc/priv && "
        "chmod 600 tsrc/priv && chmod 700 tsrc/d && ln -s exe tsrc/link && tar cf a.tar tsrc && "
        "rm -rf tsrc && tar xf a.tar -C /tmp && stat -c '%a %n' /tmp/tsrc/exe /tmp/tsrc/priv "
        "/tmp/tsrc/d && readlink /tmp/tsrc/link && /tmp/tsrc/link; echo rc=$?"
    )
    assert "755 /tmp/tsrc/exe\n600 /tmp/tsrc/priv\n700 /tmp/tsrc/d\nexe\n" in r.output, r.output
    assert not os.path.exists("/tmp/tsrc")


def test_git_workflow(sbx, world):
    r = sbx.run(
        "git status --short && echo a >> README && git diff --stat && git commit -qam two && "
        "git branch feature && git tag v1 && echo b >> README && git stash -q && "
        "git stash list | wc -l && git stash pop -q && git log --oneline | wc -l && echo GIT-OK"
    )
    assert "GIT-OK" in r.output, r.output
    assert (
        "two"
        in __import__("subprocess")
        .run(["git", "log", "--oneline"], cwd=world.project, capture_output=True, text=True)
        .stdout
    )


def test_python_venv_and_pytest(sbx):
    r = sbx.run(
        'python3 -m venv "$TMPDIR/venv" && "$TMPDIR/venv/bin/python" -c "print(\'venv-ok\')"; '
        "printf 'def test_a():\\n    assert 1\\n' > test_x.py && "
        "python3 -m pytest -q -p no:cacheprovider test_x.py 2>&1 | tail -1",
        timeout=90,
    )
    assert "venv-ok" in r.output, r.output
    if "No module named pytest" not in r.output:
        assert "1 passed" in r.output, r.output


def test_make_cc_tar(sbx):
    need("make", "cc", "tar")
    r = sbx.run(
        "printf 'int main(void){return 0;}\\n' > m.c && "
        "printf 'all: m\\nm: m.c\\n\\tcc -o m m.c\\n' > Makefile && make -s && ./m && echo CC-OK; "
        "tar czf $TMPDIR/a.tgz m.c && tar tzf $TMPDIR/a.tgz && echo TAR-OK",
        timeout=60,
    )
    assert "CC-OK" in r.output and "TAR-OK" in r.output, r.output


def test_heredoc_big_output_timeout(sbx, world):
    r = sbx.run(
        "cat > notes.txt <<'EOF'\nline $HOME\nEOF\ncat notes.txt; seq 1 200000 | tail -1; "
        "timeout 0.5 sleep 5; echo timeout=$?"
    )
    assert "line $HOME" in r.output
    assert "200000" in r.output
    assert "timeout=124" in r.output
    assert (world.project / "notes.txt").read_text() == "line $HOME\n"


def test_big_output_is_streamed(sbx):
    r = sbx.run("head -c 3000000 /dev/zero | tr '\\0' 'x'")
    assert r.output_bytes == 3_000_000 and r.truncated
    assert os.path.getsize(r.output_file) == 3_000_000


def test_a_working_directory_named_through_a_symlink(sbx, world):
    """A project reached through a symlink (`~/work -> /data/work`): the run works in the
    project itself, whose files it sees and changes."""
    (world.project / "src").mkdir()
    (world.project / "src" / "a.txt").write_text("a\n")
    link = world.home / "plink"
    os.symlink(world.project, link)
    r = sbx.run("pwd; ls src && rm -rf src && echo removed > gone.txt", cwd=link)
    assert r.exit_code == 0 and "a.txt" in r.output, r.output
    assert not (world.project / "src").exists()
    assert (world.project / "gone.txt").read_text() == "removed\n"
