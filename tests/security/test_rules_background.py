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


def until(name: str) -> str:
    return f"while [ ! -e {name} ]; do sleep 0.05; done"


def test_a_rules_file_written_in_place_in_the_background_is_judged_at_once(sbx, world):
    rules = world.project / "CLAUDE.md"
    rules.write_text("# notes\n")
    s = sbx.start(
        f"echo up; {until('go')}; echo '@README' >> CLAUDE.md && echo good-written; "
        f"{until('go2')}; echo '@~/.ssh/id_rsa' >> CLAUDE.md && echo bad-written; "
        "sleep 20; echo survived",
        bg_after=0.2,
        timeout=120,
    )
    assert not sbx.first_result(s).notices
    (world.project / "go").touch()
    sbx.wait_output(s, "good-written")
    (world.project / "go2").touch()
    r = sbx.wait(s, timeout=120)
    out = sbx.mgr.output(s.id, tail=50).output
    assert "good-written" in out and "survived" not in out, out
    assert any("CLAUDE.md" in n for n in r.notices), r.notices
    assert "id_rsa" not in rules.read_text()


def test_a_rules_file_renamed_over_then_written_is_judged_at_once(sbx, world):
    # The file is replaced (a new inode) with a harmless one, then that one is written.
    rules = world.project / "AGENTS.md"
    rules.write_text("# notes\n")
    s = sbx.start(
        f"echo up; {until('go')}; printf '# mine\\n' > t.md && mv t.md AGENTS.md && echo swapped; "
        f"{until('go2')}; echo '@~/.ssh/id_rsa' >> AGENTS.md && echo bad-written; "
        "sleep 20; echo survived",
        bg_after=0.2,
        timeout=120,
    )
    assert not sbx.first_result(s).notices
    (world.project / "go").touch()
    sbx.wait_output(s, "swapped")
    (world.project / "go2").touch()
    r = sbx.wait(s, timeout=120)
    out = sbx.mgr.output(s.id, tail=50).output
    assert "swapped" in out and "survived" not in out, out
    assert any("AGENTS.md" in n for n in r.notices), r.notices
    assert "id_rsa" not in rules.read_text()


def test_an_include_made_a_fifo_in_the_background_is_judged_at_once(sbx, world):
    # The rules file stays as it is; what it includes (the user's own note, and one the run
    # adds a reference to) becomes a FIFO, which would hang the editor when the next chat opens.
    rules = world.project / "CLAUDE.md"
    rules.write_text("# notes\n@notes.md\n")
    (world.project / "notes.md").write_text("mine\n")
    s = sbx.start(
        f"echo up; {until('go')}; echo '@later.md' >> CLAUDE.md && echo referenced; "
        f"{until('go2')}; mkfifo later.md && echo fifo-made; sleep 20; echo survived",
        bg_after=0.2,
        timeout=120,
    )
    assert not sbx.first_result(s).notices
    (world.project / "go").touch()
    sbx.wait_output(s, "referenced")
    (world.project / "go2").touch()
    r = sbx.wait(s, timeout=120)
    out = sbx.mgr.output(s.id, tail=50).output
    assert "referenced" in out and "survived" not in out, out
    assert any("later.md" in n for n in r.notices), r.notices
    assert not (world.project / "later.md").exists()
    assert (world.project / "notes.md").read_text() == "mine\n"  # the control: left alone


def test_a_file_deep_in_a_rules_directory_is_judged_as_it_is_written(sbx, world):
    # CodeCompanion reads a rules directory whole, subdirectories included.
    (world.project / ".rules").mkdir()
    (world.project / ".rules/a.md").write_text("# mine\n")
    s = sbx.start(
        f"echo up; {until('go')}; mkdir -p .rules/sub && echo '# ok' > .rules/sub/ok.md && "
        f"echo made; {until('go2')}; echo '@~/.ssh/id_rsa' > .rules/sub/x.md && echo bad-written; "
        "sleep 20; echo survived",
        bg_after=0.2,
        timeout=120,
    )
    assert not sbx.first_result(s).notices
    (world.project / "go").touch()
    sbx.wait_output(s, "made")
    (world.project / "go2").touch()
    r = sbx.wait(s, timeout=120)
    out = sbx.mgr.output(s.id, tail=50).output
    assert "made" in out and "survived" not in out, out
    assert any(".rules" in n for n in r.notices), r.notices
    x = world.project / ".rules/sub/x.md"
    assert not x.exists() or "id_rsa" not in x.read_text()
    assert (world.project / ".rules/a.md").read_text() == "# mine\n"  # the control


def test_each_wrong_entry_of_a_rules_directory_is_dealt_with_alone(sbx, world):
    # Not only in the background: the check after a run judges every entry of a rules
    # directory, not the first wrong one. The user's own entry that includes a file outside
    # the project is theirs: a run that adds a good file beside it is not stopped, and one that
    # adds a wrong file has that file (only) moved away; the user's file the run rewrote gets
    # its content back.
    rules = world.project / ".rules"
    (rules / "deep").mkdir(parents=True)
    (rules / "mine.md").write_text("@~/.claude/shared.md\n")  # the user's own
    (rules / "deep/style.md").write_text("# style\n")
    r = sbx.run("echo '# more' > .rules/deep/more.md && echo done")
    assert "done" in r.output and not r.notices, r  # the control: the user's entry is theirs
    r = sbx.run(
        "echo '@~/.ssh/id_rsa' > .rules/deep/x.md; echo '@../../.ssh/id_rsa' >> .rules/deep/style.md"
    )
    assert not (rules / "deep/x.md").exists()
    assert (rules / "deep/style.md").read_text() == "# style\n"
    assert (rules / "mine.md").read_text() == "@~/.claude/shared.md\n"
    assert (rules / "deep/more.md").read_text() == "# more\n"
    assert any("deep/x.md" in n for n in r.notices), r.notices
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
