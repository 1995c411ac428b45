"""Writes into git's own data by commands other than git (``checker/gitdata.py``): undo never
writes into ``.git``, so they ask, as irreversible. Reading there, and names that only look
alike, do not."""

from __future__ import annotations

import pytest

from run_bash.checker import check

WRITES = [
    ": > .git/HEAD",
    "echo x > .git/packed-refs",
    "echo x >> .git/info/exclude",
    "printf '' > sub/.git/index",
    "{ echo a; } > .git/HEAD",
    "rm -f .git/refs/heads/main",
    "rm .git/index.lock",
    "unlink .git/HEAD",
    "rm -rf .git/refs",
    "rm x .git",
    "mv .git/refs /tmp/r",
    "mv .git .git2",
    "cp /dev/null .git/index",
    "cp -f saved .git/config",
    "ln -sf ../../x .git/hooks/pre-commit",
    "install -m 755 h .git/hooks/pre-commit",
    "dd if=/dev/zero of=.git/index bs=1 count=1",
    "tee .git/HEAD < /dev/null",
    "truncate -s0 .git/HEAD",
    "shred -u .git/ORIG_HEAD",
    "chmod 000 .git/objects",
    "sed -i s/main/x/ .git/HEAD",
    "sed -i -e 's/a/b/' .git/config",
    "perl -pi -e 's/a/b/' .git/config",
    "cd .git && rm HEAD",
    "cd .git; echo x > info/exclude",
    "cd src && rm -f ../.git/index",
    "sudo rm .git/HEAD",
    "find . -name x -exec true \\; ; rm -f .git/FETCH_HEAD",
    "tar -xf refs.tar -C .git",
    "tar xf refs.tar --directory=.git",
    "cd .git && tar xzf ../refs.tgz",
    "unzip -o refs.zip -d .git",
    "cd .git; unzip -o ../refs.zip",
    "touch .git/index.lock",
]

# Controls: the same commands reading git's data, git itself, and names that only look alike.
READS = [
    "cat .git/HEAD",
    "ls -la .git",
    "cp .git/config /tmp/config.bak",
    "cp -r .git /tmp/repo-backup",
    "grep -r main .git/refs",
    "git add .gitignore && git commit -m x",
    "echo .git > .gitignore",
    "rm -f .github/workflows/old.yml",
    "sed -i 's/.git/x/' README.md",
    "mv a.git b.git",
    "cd .git && cat HEAD",
    "rm -rf build",
    "tar -cf /tmp/repo.tar .git",
    "tar -tf a.tar",
    "tar -xf a.tar -C build",
    "unzip -l a.zip",
    "cd .git && unzip -l ../a.zip && tar -tf ../a.tar",
    "unzip a.zip -d build",
    "touch src/.gitkeep",
]


@pytest.mark.parametrize("line", WRITES)
def test_a_write_into_git_data_asks_as_irreversible(line):
    v = check(line, strict=True)
    assert v.pause and v.effect == "irreversible", (line, v.reason)
    assert any("writes into git's own data" in h.reason for h in v.hits), (line, v.hits)


@pytest.mark.parametrize("line", READS)
def test_reading_git_data_and_look_alikes_do_not_count(line):
    v = check(line, strict=True)
    assert not any("git's own data" in h.reason for h in v.hits), (line, v.hits)


@pytest.mark.parametrize(
    ("cmd", "writes"),
    [
        ("rm src/lnk/index", ["src/lnk/index"]),
        ("echo x > out/HEAD", ["out/HEAD"]),
        ("cd src && rm -f lnk/HEAD", ["src/lnk/HEAD"]),
        ("cd src; echo x > lnk/HEAD", ["lnk/HEAD", "src/lnk/HEAD"]),
        ("mv a b/c", ["a", "b/c"]),
        ("cp a b c/d", ["c/d"]),
        ("sed -i s/a/b/ f", ["f"]),
        ("cat a > /dev/null; ls b", []),
        ("rm $X", []),
    ],
)
def test_the_paths_a_line_writes_are_given_for_the_gate_to_ask_the_state(cmd, writes):
    """What a symlink in the project leads to is the gate's to ask (``writes``): the text
    cannot tell ``src/lnk/index`` is ``.git/index``."""
    assert check(cmd).writes == writes
