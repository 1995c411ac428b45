"""What a host's first policy reads of PATH is made by the sandbox launcher's fork server while the
host starts (``headstart.py``): the census of its programs (``pathlinks``: another name of one in
a writable grant is kept read-only), taken over with the inotify instance that watches it, and
where the links of its directories lead (``pathguard.link_reach``: a link into a grant has its
target kept read-only). What changes between then and the first policy must still count: each
case runs in a Python of its own, which has one thread (its launcher is forked from it, as the
host's is), and changes things once the fork server has sent what it made and before the first
look."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from run_bash.sandbox import pathlinks
from tests.conftest import ROOT

SCRIPT = textwrap.dedent(
    """\
    import json, os, sys
    sys.path.insert(0, {python!r})
    tmp, change = sys.argv[1], sys.argv[2]
    lb, proj = os.path.join(tmp, "lb"), os.path.join(tmp, "proj")
    os.makedirs(lb)
    os.makedirs(proj)
    for i in range(3):
        with open(os.path.join(lb, f"tool{{i}}"), "w") as f:
            f.write("#!/bin/sh\\n")
        os.chmod(os.path.join(lb, f"tool{{i}}"), 0o755)
    real = os.path.join(tmp, "real")
    os.makedirs(real)
    for d in (real, proj):
        with open(os.path.join(d, "tool"), "w") as f:
            f.write("#!/bin/sh\\n")
    os.symlink(real, os.path.join(tmp, "hop"))
    os.symlink(os.path.join(tmp, "hop", "tool"), os.path.join(lb, "via"))  # lb/via -> hop/tool
    os.symlink("/usr/bin/true", os.path.join(lb, "sys"))
    os.environ["PATH"] = f"{{lb}}:/usr/bin:/bin"
    from run_bash import fsdeps
    fsdeps.SETTLED_NS = 0  # (the directories here were made just now)
    from run_bash.sandbox import pathguard, pathlinks
    from run_bash.sandbox.launcher import _readable, launcher
    from run_bash.sandbox.places import Places

    from run_bash.sandbox import serverfork
    serverfork.begin_early()  # as the host's start does
    launcher().ensure()  # its ``ready``; the census is the next message
    sent = _readable(launcher()._sock, 30)
    if change == "link":  # another name, in the grant, of a program the census listed
        os.link(os.path.join(lb, "tool1"), os.path.join(proj, "copy"))
    elif change == "program":  # a new program on PATH, with another name in the grant
        with open(os.path.join(lb, "new"), "w") as f:
            f.write("#!/bin/sh\\n")
        os.link(os.path.join(lb, "new"), os.path.join(proj, "copy"))
    elif change == "symlink":  # a new link on PATH into the grant
        os.symlink(os.path.join(proj, "tool"), os.path.join(lb, "evil"))
    elif change == "repoint":  # a directory on an existing link's way now leads into the grant
        os.unlink(os.path.join(tmp, "hop"))
        os.symlink(proj, os.path.join(tmp, "hop"))
    looked = []
    real_targets = pathguard.link_targets
    def targets(pd, *args, **kwargs):
        looked.append(pd.path)
        return real_targets(pd, *args, **kwargs)
    pathguard.link_targets = targets
    kept = pathguard.read_only_dirs(os.environ["PATH"], Places([proj]))
    listed = []
    real = pathlinks._Programs._list
    def counted(self, d, *args):
        listed.append(d)
        return real(self, d, *args)
    pathlinks._Programs._list = counted
    found = pathlinks.hard_links([lb], [], Places([proj]))
    print(json.dumps({{"sent": sent, "adopted": pathlinks._PROGRAMS.adopted, "listed": listed,
                      "found": [[h.name, h.program] for h in found], "looked": looked,
                      "kept": [pd.path for pd in kept], "reach": sorted(pathguard._REACH)}}))
    """
)


def first_look(tmp_path, change: str) -> dict:
    code = SCRIPT.format(python=str(ROOT / "python"))
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path), change],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_first_look_takes_the_fork_servers_census(tmp_path):
    got = first_look(tmp_path, "none")
    assert got["sent"] and got["adopted"] >= 1, got
    assert got["listed"] == [] and got["found"] == [], got  # nothing listed again
    # Where the links lead was taken too: no PATH directory's links were looked at again.
    assert str(tmp_path / "lb") in got["reach"] and got["looked"] == [], got
    assert got["kept"] == [], got


def test_a_link_made_after_the_fork_server_looked_is_followed(tmp_path):
    got = first_look(tmp_path, "symlink")
    assert got["adopted"] >= 1, got  # (the census was taken)
    assert got["kept"] == [str(tmp_path / "lb")] and got["looked"] == [str(tmp_path / "lb")], got


def test_a_link_whose_way_changed_after_the_fork_server_looked_is_followed(tmp_path):
    """``lb/via`` leads through ``hop``, a link in another directory, which now leads into the
    grant: that directory was read for the answer, and its signature moved."""
    got = first_look(tmp_path, "repoint")
    assert got["adopted"] >= 1, got
    assert got["kept"] == [str(tmp_path / "lb")] and got["looked"] == [str(tmp_path / "lb")], got


def test_a_name_made_after_the_census_is_found(tmp_path):
    """The new name changes no PATH directory, only the program's link count: the watch the
    fork server set says so, through the instance the host took over."""
    got = first_look(tmp_path, "link")
    assert got["adopted"] >= 1 and got["listed"] == [], got  # the census was taken over
    lb, proj = tmp_path / "lb", tmp_path / "proj"
    assert got["found"] == [[str(proj / "copy"), str(lb / "tool1")]], got


def test_a_program_added_after_the_census_is_listed_again(tmp_path):
    got = first_look(tmp_path, "program")
    lb, proj = tmp_path / "lb", tmp_path / "proj"
    assert got["adopted"] >= 1 and got["listed"] == [str(lb)], got
    assert got["found"] == [[str(proj / "copy"), str(lb / "new")]], got


def test_a_census_that_does_not_hold_together_is_refused_and_its_descriptor_closed(tmp_path):
    programs = pathlinks._Programs()
    for bad in (
        {"dirs": [["relative", None, []]], "dirty": [], "local": [], "budget": 8},
        {"dirs": [["/bin", None, [["a/b", 1, 1, 1]]]], "dirty": [], "local": [], "budget": 8},
        {"dirs": [["/bin", [1, 2], []]], "dirty": [], "local": [], "budget": 8},
        {"dirs": [], "dirty": [], "local": []},
        ["not", "a", "dict"],
    ):
        fd = os.open(os.devnull, os.O_RDONLY)
        assert not programs.adopt(bad, fd)
        try:
            os.fstat(fd)
        except OSError:
            pass
        else:
            os.close(fd)
            raise AssertionError(f"{bad!r}: its descriptor was left open")
    # Control: a well-formed one is taken.
    fd = os.open(os.devnull, os.O_RDONLY)
    good = {"dirs": [["/bin", [1, 2, 3, 4], [["sh", 5, 1, -1]]]], "dirty": [], "local": []}
    assert programs.adopt({**good, "budget": 8}, fd) and programs.adopted == 1
    assert programs._ino is not None
    programs._ino.close()


def test_answers_about_links_that_do_not_hold_together_are_dropped(tmp_path):
    from run_bash.sandbox import headstart, pathguard

    before = dict(pathguard._REACH)
    try:
        kept = headstart.adopt_links(
            [
                ["relative", [], []],
                [str(tmp_path / "a"), [["/x", [1, 2]]], []],  # a signature of two numbers
                [str(tmp_path / "b"), [["x", None]], []],  # a relative directory
                [str(tmp_path / "c"), [], [1, 2]],  # ends that are not paths
                "not a triple",
                [str(tmp_path / "good"), [[str(tmp_path), [1, 2, 3, 4]]], ["/usr/bin/true"]],
            ]
        )
        assert kept == 1 and set(pathguard._REACH) - set(before) == {str(tmp_path / "good")}
        # Checked at its use: that signature is not the directory's, so the directory (which
        # does not exist) is read again, and nothing is taken from the answer.
        assert pathguard.link_reach(str(tmp_path / "good")) == (None, None)
        assert headstart.adopt_links({"not": "a list"}) == 0
    finally:
        pathguard._REACH.clear()
        pathguard._REACH.update(before)
