"""A git index git accepts can still hold what no run may write in the work tree: a file the
sandbox keeps (``rust-toolchain.toml``, ``.envrc``) or a symbolic link out of the work tree,
staged with ``git update-index --cacheinfo`` without ever being a file there. The user's next
``git restore .``, the usual way to throw away what a run changed, would write it. After the run
such an entry, which only the index has, is taken back to what the index staged there before the
run. Through ``SessionManager`` under every confining backend; each case has its control: the
same staging of an ordinary file or of a link inside the project stays, a kept file the user
committed is left alone, and one the user staged in part before the run (``git add -p``) stays
staged while what the run staged itself in the same run is taken back."""

from __future__ import annotations

import os

from run_bash.sandbox import indexbefore
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


def commit(world, *paths: str) -> None:
    on_host(world, ["git", "add", *paths])
    on_host(world, ["git", "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "c"])


def user_stages_envrc_in_part(world) -> str:
    """The user's own ``git add -p .envrc``: the index holds a version that neither HEAD nor the
    work tree has. Its ``ls-files --stage`` line."""
    envrc = world.project / ".envrc"
    envrc.write_text("export A=1\n")
    commit(world, ".envrc")
    envrc.write_text("export A=2\n")
    on_host(world, ["git", "add", ".envrc"])
    envrc.write_text("export A=3\n")
    line = on_host(world, ["git", "ls-files", "--stage", ".envrc"])
    assert line and "M .envrc" in on_host(world, ["git", "status", "--short"]), line
    return line


def test_a_kept_file_the_user_staged_in_part_stays_staged(sbx, world):
    mine = user_stages_envrc_in_part(world)
    r = sbx.run(
        f"echo x > other.txt && git add other.txt && echo {CONTROL} && "
        f"{stage('[toolchain]', 'rust-toolchain.toml')}"
    )
    assert CONTROL in r.output, r.output
    assert on_host(world, ["git", "ls-files", "--stage", ".envrc"]) == mine, r.notices
    assert not any(".envrc" in n for n in r.notices), r.notices
    # The control, in the same run: what the run staged itself is still taken back.
    assert "rust-toolchain.toml" not in staged(world), r.notices
    assert "other.txt" in staged(world), r.notices
    assert any("rust-toolchain.toml" in n and "taken back" in n for n in r.notices), r.notices


def test_a_kept_file_the_user_staged_and_the_run_staged_again_is_put_back(sbx, world):
    mine = user_stages_envrc_in_part(world)
    r = sbx.run(f"{stage('export EVIL=1', '.envrc')} && echo {CONTROL}")
    assert CONTROL in r.output, r.output
    # What the user staged comes back, not HEAD's version: their `git add -p` is not lost.
    assert on_host(world, ["git", "ls-files", "--stage", ".envrc"]) == mine, r.notices
    assert any(".envrc" in n and "before the run" in n for n in r.notices), r.notices
    on_host(world, ["git", "restore", ".envrc"])
    assert (world.project / ".envrc").read_text() == "export A=2\n"  # the control: theirs


def test_the_users_staging_stays_when_the_run_writes_the_index_in_place(sbx, world):
    """The run writes the index file itself, as git never does (``cat > .git/index``): what was
    kept of the index before the run is a copy, not that file."""
    mine = user_stages_envrc_in_part(world)
    r = sbx.run(
        "cp .git/index idx.tmp && export GIT_INDEX_FILE=idx.tmp && "
        f"{stage('[toolchain]', 'rust-toolchain.toml')} && unset GIT_INDEX_FILE && "
        f"git ls-files && cat idx.tmp > .git/index && rm idx.tmp && echo {CONTROL}"
    )
    assert CONTROL in r.output, r.output
    assert "rust-toolchain.toml" not in r.output.split(CONTROL)[0], r.output  # idx.tmp only
    assert on_host(world, ["git", "ls-files", "--stage", ".envrc"]) == mine, r.notices
    assert "rust-toolchain.toml" not in staged(world), r.notices  # the control: the run's
    assert any("rust-toolchain.toml" in n and "taken back" in n for n in r.notices), r.notices


def test_without_the_index_before_the_run_the_notice_tells_how_to_stage_again(
    sbx, world, monkeypatch
):
    """When the index before the run was not kept (over ``indexbefore.MAX_COPY``), every such
    entry is taken back, as the run's may be, and the notice names each one's mode and blob,
    with which the user stages theirs again."""
    monkeypatch.setattr(indexbefore, "MAX_COPY", 0)
    mine = user_stages_envrc_in_part(world)
    r = sbx.run(f"echo x > other.txt && git add other.txt && echo {CONTROL}")
    assert CONTROL in r.output, r.output
    assert on_host(world, ["git", "ls-files", "--stage", ".envrc"]) != mine, r.notices
    mode, oid = mine.split()[:2]
    told = [n for n in r.notices if f"{mode},{oid}" in n and "your own staging" in n]
    assert told, r.notices
    on_host(world, ["git", "update-index", "--cacheinfo", f"{mode},{oid},.envrc"])
    assert on_host(world, ["git", "ls-files", "--stage", ".envrc"]) == mine


def test_a_link_out_staged_and_left_in_the_work_tree_too_is_taken_back(sbx, world):
    """The link the run leaves in the work tree goes to the quarantine (links that lead out);
    the same link staged beside it would come back with the user's next ``git restore``."""
    key = world.path(".ssh/id_rsa")
    r = sbx.run(
        f"mkdir -p docs && ln -s ../README docs/readme && ln -s {key} docs/key && "
        f"git add docs/readme docs/key && echo {CONTROL}"
    )
    assert CONTROL in r.output, r.output
    assert "docs/readme" in staged(world)  # the control: a link inside the project stays
    assert "docs/key" not in staged(world), r.notices
    assert any("docs/key" in n and "leads out" in n for n in r.notices), r.notices
    on_host(world, ["git", "restore", "."])
    assert not os.path.lexists(world.project / "docs/key")
    assert os.readlink(world.project / "docs/readme") == "../README"
