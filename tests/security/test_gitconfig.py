"""#20 class 1: git config is judged by git, never by a reader of ours.

A repository a run creates may carry only keys known to be inert, as git itself lists them; any
other key quarantines it and the notice names the key. A file that any reachable config includes
(whatever the include's condition) is host-read. Through ``SessionManager`` under every
confining backend, with the outside ``git`` as the judge of the effect, and a differential test
that feeds the same adversarial files to git and to run_bash's verdict.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from run_bash.sandbox.gitask import is_inert_key, judge_config
from tests.security.conftest import CONTROL, World
from tests.security.test_hostread import drop_git_locks, git, payload, pwned, unconfined_fires

MARK = "PWNED-cfg"


def evil(world: World, tag: str) -> str:
    """A command that leaves a file in HOME: what a payload in a config would run."""
    return payload(world, tag)


def adversarial(world: World) -> dict[str, bytes]:
    """Config files a second reader could take for inert while git runs what they hold."""
    cmd = evil(world, "x").encode()
    fs = b'"' + cmd + b'; false"'
    return {
        "plain": b"[core]\n\tfsmonitor = " + fs + b"\n",
        "comment_then_continuation": b"[core]\n\tbare = false # \\\n\tfsmonitor = " + fs + b"\n",
        "semicolon_comment": b"[core]\n\tbare = false ; c \\\n\tfsmonitor = " + fs + b"\n",
        "continued_value_then_key": b"[core]\n\teditor = vi \\\n\n\tfsmonitor = " + fs + b"\n",
        "include_odd_case_spacing": b"[InClUdE]\n  PATH  =   evil.cfg  \n",
        "section_with_inner_spaces": b"[ include ]\n\tpath = evil.cfg\n",
        "include_if": b'[includeIf "gitdir:/"]\n\tpath = evil.cfg\n',
        "include_self": b"[include]\n\tpath = config\n",
        "crlf": b"[core]\r\n\tfsmonitor = " + fs + b"\r\n",
        "section_dot_spelling": b"[core.x]\n\tfsmonitor = " + fs + b"\n",
        "key_after_inert_on_one_line": b"[core] bare = false\n[core] fsmonitor = " + fs + b"\n",
        "nbsp_before_key": b"[core]\n\xc2\xa0fsmonitor = " + fs + b"\n",
        "tab_and_spaces": b"[core]\n \t fsmonitor\t=\t" + fs + b"\n",
        "alias": b"[alias]\n\tst = !" + cmd + b"\n",
        "hooks_path": b"[core]\n\thooksPath = h\n",
        "uppercase_key": b"[CORE]\n\tFSMONITOR = " + fs + b"\n",
        "subsection_with_quotes": b'[remote "a\\"b"]\n\turl = x\n\tuploadpack = ' + cmd + b"\n",
        "inert_only": b"[core]\n\trepositoryformatversion = 0\n\tbare = false\n"
        b'[remote "origin"]\n\turl = https://example.invalid/x\n',
        "broken_syntax": b"[core\n\tfsmonitor = " + fs + b"\n",
        "long_line": b"[core]\n\tbare = false ; "
        + b"x" * 200_000
        + b"\n\tfsmonitor = "
        + fs
        + b"\n",
    }


def host_git(world: World, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**world.env, "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


# -- the differential test: git's own reading against run_bash's verdict -------------------------


@pytest.mark.parametrize("name", sorted(adversarial(World(Path("/h"), Path("/p"), {}))))
def test_verdict_agrees_with_what_git_reads(world, name):
    """Whatever key git lists for the repository (from the repository's own files), run_bash's
    verdict names it or allows it; a repository run_bash calls inert runs nothing for the host's
    git; one git cannot read is not inert."""
    repo = world.home / "judged"
    git(world, "init", "-q", str(repo), cwd=world.home, check=True)
    (repo / ".git/evil.cfg").write_bytes(
        b'[core]\n\tfsmonitor = "' + evil(world, "inc").encode() + b'; false"\n'
    )
    (repo / ".git/config").write_bytes(adversarial(world)[name])
    verdict = judge_config(str(repo / ".git/config"))
    listed = host_git(world, "config", "--list", "--show-origin", "--name-only", "-z", cwd=repo)
    if listed.returncode != 0:
        assert verdict is not None, "git cannot read it, run_bash called it inert"
        return
    records = listed.stdout.split("\0")
    keys = [
        k for origin, k in zip(records[::2], records[1::2], strict=False) if str(repo) in origin
    ]
    for key in keys:
        if not is_inert_key(key):
            assert verdict is not None and key in verdict, (key, verdict)
    if verdict is None:
        host_git(world, "status", cwd=repo)
        host_git(world, "st", cwd=repo)
        assert pwned(world) == [], (name, keys)


def test_a_payload_the_judge_allowed_would_have_run(world):
    """The control of the differential test: the same host git does run a payload in a config
    (so "nothing ran" above can fail)."""
    repo = world.home / "judged"
    git(world, "init", "-q", str(repo), cwd=world.home, check=True)
    (repo / ".git/config").write_bytes(adversarial(world)["comment_then_continuation"])
    host_git(world, "status", cwd=repo)
    assert pwned(world), "git ran no fsmonitor: the differential test proves nothing"


# -- through the sandbox ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["comment_then_continuation", "crlf", "include_odd_case_spacing", "nbsp_before_key"]
)
def test_a_new_repository_with_any_key_but_inert_ones_is_quarantined(sbx, world, name):
    data = adversarial(world)[name]
    (world.project / "cfg.bin").write_bytes(data)
    (world.project / "evil.bin").write_bytes(adversarial(world)["plain"])
    attack = "git init -q emb && cp cfg.bin emb/.git/config && cp evil.bin emb/.git/evil.cfg"
    control = "git init -q plain && git -C plain remote add origin https://example.invalid/x"
    r = sbx.run(f"{control} && echo {CONTROL}; {attack}; echo end")
    assert CONTROL in r.output, r.output
    assert (world.project / "plain/.git/HEAD").is_file()  # inert: kept
    assert not os.path.lexists(world.project / "emb/.git")
    assert any("emb/.git" in n and "not inert" in n for n in r.notices), r.notices
    host_git(world, "status", cwd=world.project / "emb")
    assert pwned(world) == []
    if name != "nbsp_before_key":  # git rejects that file: it has no control to run
        shutil.rmtree(world.project / "emb")
        unconfined_fires(sbx, world, attack, ["status"], git_cwd=world.project / "emb")


def test_the_notice_names_the_key(sbx, world):
    r = sbx.run("git init -q emb && git -C emb config alias.st '!true'; echo end")
    assert any("alias.st" in n for n in r.notices), r.notices


def test_a_symlinked_config_is_not_inert(sbx, world):
    attack = (
        "git init -q emb && printf '[core]\\n\\tbare = false\\n' > ok.cfg && "
        "rm emb/.git/config && ln -s ../../ok.cfg emb/.git/config"
    )
    r = sbx.run(f"{attack}; echo {CONTROL}")
    assert CONTROL in r.output
    assert not os.path.lexists(world.project / "emb/.git")
    assert any("symbolic link" in n for n in r.notices), r.notices


def test_a_huge_config_is_not_judged_by_reading_it_ourselves(sbx, world):
    r = sbx.run(
        "git init -q emb && head -c 6000000 /dev/zero | tr '\\0' '#' >> emb/.git/config; "
        f"echo {CONTROL}"
    )
    assert CONTROL in r.output
    assert not os.path.lexists(world.project / "emb/.git"), r.notices


def test_a_new_worktree_with_a_config_worktree_payload(sbx, world):
    """`git worktree add` inside the sandbox works; its admin dir's config.worktree (read when
    extensions.worktreeConfig is set) is judged like any config."""
    fs = f'[core]\\n\\tfsmonitor = \\"{payload(world, "wt")}; false\\"\\n'
    r = sbx.run(
        f"git worktree add -q wt 2>/dev/null && echo {CONTROL}; "
        f"printf '{fs}' > .git/worktrees/wt/config.worktree; echo end"
    )
    assert CONTROL in r.output, r.output
    assert not (world.project / ".git/worktrees/wt/config.worktree").exists()
    assert any("wt" in n and "config.worktree" in n for n in r.notices), r.notices
    host_git(world, "-c", "extensions.worktreeConfig=true", "status", cwd=world.project / "wt")
    assert pwned(world) == []


def test_a_gitfile_git_reads_differently_from_a_naive_reader(sbx, world):
    """`gitdir: x ` (a trailing space) leads git to "x " whatever a reader that strips
    whitespace thinks: the repository git reaches is the one judged."""
    attack = (
        "for d in 'x ' x; do git init -q t && mv t/.git \"$d\" && rmdir t; done && "
        f"{_fsmonitor_into(world, 'x /config', 'gitfile')} && mkdir -p a && "
        "printf 'gitdir: ../x \\n' > a/.git"
    )
    r = sbx.run(f"{attack}; echo {CONTROL}")
    assert CONTROL in r.output, r.output
    host_git(world, "status", cwd=world.project / "a")
    assert pwned(world) == [], r.notices
    for name in ("a", "x", "x "):
        shutil.rmtree(world.project / name, ignore_errors=True)
    unconfined_fires(sbx, world, attack, ["status"], git_cwd=world.project / "a")


def _fsmonitor_into(world: World, path: str, tag: str) -> str:
    return f"printf '[core]\\n\\tfsmonitor = \"{payload(world, tag)}; false\"\\n' >> '{path}'"


# -- includes of a trusted repository ----------------------------------------------------------------


def test_every_file_a_reachable_config_includes_is_host_read(sbx, world):
    """The user's repository includes a file behind a condition that does not hold today, and
    that file includes another that does not exist yet: neither may be written by a run, even
    after it switches the branch that makes the condition hold."""
    (world.project / "cfg").mkdir()
    (world.project / "cfg/a.cfg").write_text("[include]\n\tpath = b.cfg\n")
    git(world, "config", "includeIf.onbranch:other.path", "../cfg/a.cfg", check=True)
    git(world, "add", "cfg", check=True)
    git(world, "commit", "-qm", "cfg", check=True)
    attack = (
        f"{_fsmonitor_into(world, 'cfg/b.cfg', 'incb')}; {_fsmonitor_into(world, 'cfg/a.cfg', 'inca')}; "
        "git checkout -q -B other"
    )
    r = sbx.run(f"echo ok > other.txt && echo {CONTROL}; {attack}; echo end")
    assert CONTROL in r.output, r.output
    assert not (world.project / "cfg/b.cfg").exists()
    assert (world.project / "cfg/a.cfg").read_text() == "[include]\n\tpath = b.cfg\n"
    drop_git_locks(world.project)
    git(world, "checkout", "-q", "-B", "other", check=True)
    git(world, "status")
    assert pwned(world) == [], r.notices
    git(world, "checkout", "-q", "main")
    unconfined_fires(sbx, world, attack, ["status"])


def test_an_include_that_blocks_git_never_blocks_the_check(sbx, world):
    """A new repository whose config includes a FIFO: git would wait on it forever; the check
    asks with a timeout, quarantines it and names the include."""
    attack = "git init -q emb && mkfifo emb/.git/f.cfg && printf '[include]\\n\\tpath = f.cfg\\n' >> emb/.git/config"
    r = sbx.run(f"{attack}; echo {CONTROL}", timeout=60)
    assert CONTROL in r.output, r.output
    assert not os.path.lexists(world.project / "emb/.git")
    assert any("include.path" in n for n in r.notices), r.notices
