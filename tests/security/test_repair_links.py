"""The guard's repairs never write through a symbolic link a run planted.

After a run the host moves a git directory back, quarantines what a run left and writes trusted
states back, all inside the project. A run can replace a directory on the way with a link to a
place it cannot even read (``mv emb emb2; ln -s ~/other emb``): a repair by path would then move
``~/other/.git`` away and put the project's repository in its place, on the run's behalf. Each
test checks, byte for byte, that nothing outside the project changed, under every confining
backend; the controls show the same repairs still happen where no link is in the way.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.security.conftest import CONTROL, World, selected_backends
from tests.security.test_guard import run_as_user
from tests.security.test_hostread import git, on_path


def tree(root: Path) -> dict[str, tuple[int, bytes]]:
    """Every entry under ``root`` (itself too) with its type and mode, and its bytes (a link's
    text): what "unchanged" means here."""
    out: dict[str, tuple[int, bytes]] = {}
    for d, dirs, files in os.walk(root):
        for name in ["", *dirs, *files]:
            p = os.path.join(d, name) if name else d
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                data = os.readlink(p).encode()
            elif stat.S_ISREG(st.st_mode):
                data = Path(p).read_bytes()
            else:
                data = b""
            out[os.path.relpath(p, root)] = (st.st_mode, data)
    return out


def repo(world: World, path: Path, message: str) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(world, "init", "-q", cwd=path, check=True)
    git(world, "commit", "-q", "--allow-empty", "-m", message, cwd=path, check=True)
    return path


def log(world: World, path: Path) -> str:
    return git(world, "log", "--format=%s", cwd=path).strip()


def quarantined(world: World) -> list[str]:
    q = world.home / ".local/state/run_bash/quarantine"
    return sorted(p.name for run in q.iterdir() for p in run.iterdir()) if q.exists() else []


def test_no_repair_follows_a_link_over_an_embedded_repository(sbx, world):
    """The run moves an embedded repository away and puts a link to the user's other repository
    (one it cannot read) where it was. The other repository stays exactly as it was; the link
    is moved to the quarantine; the embedded repository stays where the run moved it, with its
    history and its protected files."""
    repo(world, world.project / "emb", "emb-commit")
    other = repo(world, world.home / "other", "OTHER-OWN-COMMIT")
    before = tree(other)
    config = (world.project / "emb/.git/config").read_bytes()
    attack = f"echo planted-by-run > emb/.git/PLANTED && mv emb emb2 && ln -s {other} emb"
    r = sbx.run(f"cat {other}/.git/HEAD; echo {CONTROL}; {attack}; echo done")
    assert CONTROL in r.output and "done" in r.output, r.output
    assert "ref:" not in r.output, r.output  # the sandbox could not even read it
    assert tree(other) == before
    assert log(world, other) == "OTHER-OWN-COMMIT"
    assert not os.path.lexists(world.project / "emb")
    assert any(n.endswith("%proj%emb") for n in quarantined(world)), quarantined(world)
    assert log(world, world.project / "emb2") == "emb-commit"
    assert (world.project / "emb2/.git/config").read_bytes() == config
    note = [n for n in r.notices if "emb/.git" in n]
    assert note and "never follows" in note[0] and "stays at emb2/.git" in note[0], r.notices


def test_no_repair_writes_into_a_read_only_directory_through_a_link(sbx, world):
    """The same with a link to ``~/.config/nvim``, which runs may only read: no ``.git`` appears
    there, nothing in it changes."""
    repo(world, world.project / "emb", "emb-commit")
    nvim = world.home / ".config/nvim"
    before = tree(nvim)
    r = sbx.run(f"echo {CONTROL}; mv emb emb2 && ln -s {nvim} emb; echo done")
    assert CONTROL in r.output and "done" in r.output, r.output
    assert not os.path.lexists(nvim / ".git")
    assert tree(nvim) == before
    assert not os.path.lexists(world.project / "emb")
    assert log(world, world.project / "emb2") == "emb-commit"


def test_a_moved_repository_is_still_moved_back_where_no_link_is_in_the_way(sbx, world):
    """The control: a directory (not a link) where the repository was gets its git directory
    back, as before."""
    repo(world, world.project / "emb", "emb-commit")
    r = sbx.run(f"echo {CONTROL}; mv emb emb2 && mkdir emb; echo done")
    assert CONTROL in r.output and "done" in r.output, r.output
    assert log(world, world.project / "emb") == "emb-commit"
    assert not os.path.lexists(world.project / "emb2/.git")
    assert any("emb/.git" in n and n.endswith("moved back") for n in r.notices), r.notices


def test_a_repository_left_where_the_run_moved_it_keeps_its_protected_files(sbx, world):
    """A repository moved away with nothing in its place stays where it went; a protected file
    created there (``config.worktree``, which did not exist) is removed all the same: its
    protected files are checked where it is now."""
    repo(world, world.project / "emb", "emb-commit")
    attack = "mv emb emb2 && printf '[core]\\n\\tfsmonitor = x\\n' > emb2/.git/config.worktree"
    r = sbx.run(f"echo {CONTROL}; {attack}")
    assert CONTROL in r.output, r.output
    assert not os.path.lexists(world.project / "emb2/.git/config.worktree")
    assert log(world, world.project / "emb2") == "emb-commit"
    assert any("emb2/.git/config.worktree" in n for n in r.notices), r.notices


def test_a_path_directory_reached_through_a_planted_link_is_not_repaired_through_it(sbx, world):
    """A PATH directory in the project whose parent the run replaces with a link to
    ``~/.local``: the user's own programs in ``~/.local/bin`` now look like new ones that
    shadow later commands, yet none is moved; the link is.

    The swap is one call (``renameat2`` exchanging ``tools`` and the link): moving the kept
    directory away stops the run at once, so with ``mv`` and ``ln`` as two steps the run was
    sometimes stopped between them and the link was never made."""
    tools = world.project / "tools/bin"
    tools.mkdir(parents=True)
    local_bin = world.home / ".local/bin"
    local_bin.mkdir(parents=True)
    (local_bin / "ls").write_text('#!/bin/sh\nexec /bin/ls "$@"\n')
    (local_bin / "ls").chmod(0o755)
    before = tree(local_bin), tree(world.home / ".local/share")
    rb = on_path(sbx, world, tools)
    swap = (
        "import ctypes, os, sys; libc = ctypes.CDLL(None, use_errno=True); "
        "ok = libc.renameat2(-100, b'tools.link', -100, b'tools', 2) == 0; "  # RENAME_EXCHANGE
        "print('SWAPPED' if ok else os.strerror(ctypes.get_errno()), flush=True)"
    )
    r = rb.run(f'echo {CONTROL}; ln -s {world.home / ".local"} tools.link && python3 -c "{swap}"')
    assert CONTROL in r.output, r.output
    # (The run may be stopped before it says SWAPPED: the notice says the swap was made.)
    assert any("never follows" in n for n in r.notices), (r.notices, r.output)
    assert (tree(local_bin), tree(world.home / ".local/share")) == before
    assert not os.path.lexists(world.project / "tools")


def test_a_rules_file_behind_a_planted_link_is_not_repaired_through_it(sbx, world):
    """``.github`` made a link to the user's notes, whose ``copilot-instructions.md`` includes
    ``~/.ssh/id_rsa``: the next chat would read it, so something must go, but the notes are the
    user's own and stay as they are; the link goes."""
    notes = world.home / "notes"
    notes.mkdir()
    (notes / "copilot-instructions.md").write_text("see @~/.ssh/id_rsa\n")
    before = tree(notes)
    r = sbx.run(f"echo {CONTROL}; ln -s {notes} .github; echo done")
    assert CONTROL in r.output and "done" in r.output, r.output
    assert tree(notes) == before
    assert not os.path.lexists(world.project / ".github")
    assert any("never follows" in n for n in r.notices), r.notices


LOCKED_LINK = """
from tests.security.test_hostread import git
p = world.project
def tree(root):
    return sorted((str(q.relative_to(root)), q.stat().st_mode, q.read_bytes() if q.is_file() else b"")
                  for q in [root, *root.rglob("*")])
for d, msg in ((p / "emb", "emb-commit"), (world.home / "other", "OTHER-OWN-COMMIT")):
    d.mkdir()
    git(world, "init", "-q", cwd=d, check=True)
    git(world, "commit", "-q", "--allow-empty", "-m", msg, cwd=d, check=True)
other = world.home / "other"
before = repr(tree(other))
r = rb.run(f"echo CONTROL-OK; mv emb emb2 && ln -s {other} emb && chmod 0500 . emb2; echo done")
out["output"] = r.output
out["notices"] = list(r.notices)
out["other_same"] = repr(tree(other)) == before
out["link_gone"] = not os.path.lexists(p / "emb")
out["mode"] = oct(os.stat(p).st_mode & 0o777)
out["emb2_log"] = (p / "emb2").is_dir() and git(world, "log", "--format=%s", cwd=p / "emb2").strip()
rb.close()
"""


@pytest.mark.parametrize("backend", selected_backends())
def test_a_planted_link_in_a_locked_directory_goes_as_its_owner(backend):
    """As a normal user, where file modes apply: the run also makes the project unwritable
    (``chmod 0500 .``). The link is moved away as the project's owner all the same, the mode
    comes back, and the other repository is untouched."""
    out = run_as_user(backend, LOCKED_LINK)
    assert "CONTROL-OK" in out["output"] and "done" in out["output"], out
    assert out["other_same"] and out["link_gone"], out
    assert out["mode"] == "0o500" and out["emb2_log"] == "emb-commit", out
