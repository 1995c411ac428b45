"""A rules file a background run rewrites is judged as it is written, not only when the run ends.

CodeCompanion reads its rules files (``CLAUDE.md``, ``AGENTS.md``, …) and the files they include
when a chat starts: a background session (a server, a watcher) that writes ``@~/.ssh/id_rsa``
into ``CLAUDE.md`` while it goes on would have the key read into the next chat long before the
post-run check gives the file back its content. So a write to a rules file of a run's project
(in place, or a new file renamed over it) is judged at once: one whose references lead out stops
the run, and the file gets back what it had. The controls: an include inside the project, written
the same way, stays and stops nothing; the user's own include of the key, made before the run, is
left alone.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def clean(p: Path) -> bool:
    """No reference to the key is left in ``p``, a regular file (or nothing) there now."""
    return not os.path.lexists(p) or (p.is_file() and "id_rsa" not in p.read_text())


# A background session's two steps, each a class of write the guard must see as it happens:
# (the user's files before, the first step (harmless, the control: it stops nothing), what it
# says, the second step (the attack), a name its notice gives, the entry the attack wrote and
# what must become of it ("put back": there, without the reference; "gone"; "clean": either),
# and a file of the user's that must be left as it was).
Case = tuple[dict[str, str], str, str, str, str, tuple[str, str], tuple[str, str] | None]
CASES: dict[str, Case] = {
    "written in place": (
        {"CLAUDE.md": "# notes\n"},
        "echo '@README' >> CLAUDE.md",
        "good-written",
        "echo '@~/.ssh/id_rsa' >> CLAUDE.md && echo bad-written",
        "CLAUDE.md",
        ("CLAUDE.md", "put back"),
        None,
    ),
    # The file is replaced (a new inode) with a harmless one, then that one is written.
    "renamed over, then written": (
        {"AGENTS.md": "# notes\n"},
        "printf '# mine\\n' > t.md && mv t.md AGENTS.md",
        "swapped",
        "echo '@~/.ssh/id_rsa' >> AGENTS.md && echo bad-written",
        "AGENTS.md",
        ("AGENTS.md", "put back"),
        None,
    ),
    # The rules file stays as it is; what it includes (one the run adds a reference to) becomes
    # a FIFO, which would hang the editor when the next chat opens.
    "an include made a FIFO": (
        {"CLAUDE.md": "# notes\n@notes.md\n", "notes.md": "mine\n"},
        "echo '@later.md' >> CLAUDE.md",
        "referenced",
        "mkfifo later.md && echo fifo-made",
        "later.md",
        ("later.md", "gone"),
        ("notes.md", "mine\n"),
    ),
    # CodeCompanion reads a rules directory whole, subdirectories included.
    "deep in a rules directory": (
        {".rules/a.md": "# mine\n"},
        "mkdir -p .rules/sub && echo '# ok' > .rules/sub/ok.md",
        "made",
        "echo '@~/.ssh/id_rsa' > .rules/sub/x.md && echo bad-written",
        ".rules",
        (".rules/sub/x.md", "clean"),
        (".rules/a.md", "# mine\n"),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_rules_write_in_the_background_is_judged_at_once(sbx, world, case):
    files, first, said, second, named, wrong, mine = CASES[case]
    for rel, text in files.items():
        (world.project / rel).parent.mkdir(parents=True, exist_ok=True)
        (world.project / rel).write_text(text)
    r, out = sbx.in_background(first, said, second)
    assert "survived" not in out, out  # stopped while it went on
    assert any(named in n for n in r.notices), r.notices
    p, after = world.project / wrong[0], wrong[1]
    assert not os.path.lexists(p) if after == "gone" else clean(p), (p, r.notices)
    assert after != "put back" or p.is_file()
    if mine is not None:
        assert (world.project / mine[0]).read_text() == mine[1]  # the control: left alone


def test_each_wrong_entry_of_a_rules_directory_is_dealt_with_alone(sbx, world):
    # Not only in the background: the check after a run judges every entry of a rules
    # directory, not the first wrong one. The user's own entry that includes a file outside
    # the project is theirs: a run that adds a good file beside it is not stopped, and one that
    # adds a wrong file has that file (only) moved away; the user's file the run rewrote gets
    # its content back.
    rules = world.project / ".rules"
    (rules / "deep").mkdir(parents=True)
    (rules / "mine.md").write_text("@~/.claude/shared.md\n")  # the user's own
    (rules / "deep/link.md").write_text("@../../k\n")  # and theirs: a link out it includes
    (world.project / "k").symlink_to(world.home / ".ssh/id_rsa")
    (rules / "deep/style.md").write_text("# style\n")
    r = sbx.run("echo '# more' > .rules/deep/more.md && echo done")
    assert "done" in r.output and not r.notices, r  # the control: the user's entry is theirs
    # Both changes from one process, a system call apart, everything they need made first (the
    # new file beside, the old one opened). The watch that stops the run at the first changed
    # rules file usually comes later; when it stopped the run between the two (a loaded machine),
    # only the first is there to deal with, and the run is made again. ``both.done`` says the
    # second one was made.
    done = world.project / "both.done"
    for _attempt in range(5):
        r = sbx.run(
            "printf '@~/.ssh/id_rsa\\n' > x.tmp && python3 -c \"import os; "
            "fd = os.open('.rules/deep/style.md', os.O_WRONLY | os.O_APPEND); "
            "os.rename('x.tmp', '.rules/deep/x.md'); os.write(fd, b'@../../.ssh/id_rsa\\n'); "
            "open('both.done', 'w')\""
        )
        assert not (rules / "deep/x.md").exists(), r.notices
        if done.exists():
            break
    assert done.exists(), "no run made both changes before the watch stopped it"
    assert (rules / "deep/style.md").read_text() == "# style\n"
    assert (rules / "mine.md").read_text() == "@~/.claude/shared.md\n"
    assert (rules / "deep/more.md").read_text() == "# more\n"
    assert any("deep/x.md" in n for n in r.notices), r.notices
    assert (world.project / "k").is_symlink() and (rules / "deep/link.md").is_file()
    assert any("deep/style.md" in n and "put back" in n for n in r.notices), r.notices


def test_the_users_own_outside_include_neither_stops_nor_hides_a_run(sbx, world):
    # The user's CLAUDE.md includes a file outside the project (theirs to decide) and a note
    # in it. A run that rewrites the note (a new file renamed over it, as `sed -i` does) is not
    # stopped for the user's include: the control. One that makes the note a FIFO is, and the
    # FIFO goes, though the user's include is the first thing wrong in the file.
    rules = world.project / "CLAUDE.md"
    rules.write_text("@~/.claude/shared.md\n@notes.md\n")
    (world.project / "notes.md").write_text("notes\n")
    r = sbx.run("printf 'new notes\\n' > n.tmp && mv n.tmp notes.md && sleep 0.5; echo done")
    assert "done" in r.output and not r.notices, r
    assert (world.project / "notes.md").read_text() == "new notes\n"
    r = sbx.run("rm notes.md && mkfifo notes.md; sleep 5; echo end")
    assert "end" not in r.output, r.output  # stopped as it made it
    assert not (world.project / "notes.md").exists() or (world.project / "notes.md").is_file()
    assert any("notes.md" in n for n in r.notices), r.notices
    assert rules.read_text() == "@~/.claude/shared.md\n@notes.md\n"
