"""A git index git accepts can still hold what no run may write in the work tree: a file the
sandbox keeps (``rust-toolchain.toml``, ``.envrc``) or a symbolic link out of the work tree,
staged with ``git update-index --cacheinfo`` without ever being a file there. The user's next
``git restore .``, the usual way to throw away what a run changed, would write it. After the run
such an entry, which only the index has, is taken back to what ``HEAD`` has. Through
``SessionManager`` under every confining backend; each case has its control: the same staging of
an ordinary file or of a link inside the project stays, and a kept file the user committed is
left alone."""

from __future__ import annotations

import os

from tests.security.conftest import CONTROL, SECRET, on_host


def stage(text: str, path: str, mode: str = "100644") -> str:
    """Shell that stages ``text`` as ``path`` without writing it in the work tree."""
    return (
        f"b=$(printf %s '{text}' | git hash-object -w --stdin) && "
        f"git update-index --add --cacheinfo {mode},$b,{path}"
    )


def staged(world) -> list[str]:
    return on_host(world, ["git", "ls-files"]).split()


def test_a_kept_file_staged_without_the_work_tree_is_taken_back(sbx, world):
    toolchain = '[toolchain]\\npath = "/tmp/tc"\\n'
    r = sbx.run(
        f"{stage('ordinary', 'notes.txt')} && echo {CONTROL} && "
        f"{stage(toolchain, 'rust-toolchain.toml')} && {stage('x', 'web/.envrc')}; echo end"
    )
    assert CONTROL in r.output, r.output
    assert "notes.txt" in staged(world)  # the control: an ordinary file stays staged
    assert "rust-toolchain.toml" not in staged(world), r.notices
    assert "web/.envrc" not in staged(world), r.notices
    assert any("rust-toolchain.toml" in n and "taken back" in n for n in r.notices), r.notices
    on_host(world, ["git", "restore", "."])  # the user throws away what the run changed
    assert not (world.project / "rust-toolchain.toml").exists()
    assert not (world.project / "web/.envrc").exists()


def test_a_link_out_of_the_work_tree_staged_is_taken_back(sbx, world):
    key = world.path(".ssh/id_rsa")
    r = sbx.run(
        f"{stage('../README', 'docs/readme', '120000')} && echo {CONTROL} && "
        f"{stage(str(key), 'CLAUDE.md', '120000')} && {stage('../../x', 'a/up', '120000')}"
    )
    assert CONTROL in r.output, r.output
    assert "docs/readme" in staged(world)  # the control: a link inside the project stays
    assert "CLAUDE.md" not in staged(world) and "a/up" not in staged(world), r.notices
    assert any("CLAUDE.md" in n and "leads out" in n for n in r.notices), r.notices
    on_host(world, ["git", "restore", "."])
    assert not os.path.lexists(world.project / "CLAUDE.md")
    assert os.readlink(world.project / "docs/readme") == "../README"
    assert SECRET not in (world.project / "docs/readme").read_text()


def test_a_kept_file_the_user_committed_is_theirs(sbx, world):
    (world.project / ".envrc").write_text("export A=1\n")
    on_host(world, ["git", "add", ".envrc"])
    on_host(world, ["git", "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "envrc"])
    r = sbx.run(f"echo x > other.txt && git add other.txt && echo {CONTROL}")
    assert CONTROL in r.output, r.output
    assert {".envrc", "other.txt"} <= set(staged(world)), r.notices
    assert not any("taken back" in n for n in r.notices), r.notices
