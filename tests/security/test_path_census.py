"""The census of PATH's programs (``pathlinks``: another name of one in a writable grant is kept
read-only) is made for the host's first policy by the sandbox launcher's fork server while the
host starts, and taken over with the inotify instance that watches it. What changes between the
census and the first policy must still count: each case runs in a Python of its own, which has
one thread (its launcher is forked from it, as the host's is), and changes things once the fork
server has sent its census and before the first look."""

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
    os.environ["PATH"] = f"{{lb}}:/usr/bin:/bin"
    from run_bash.sandbox import pathlinks
    from run_bash.sandbox.launcher import _readable, launcher
    from run_bash.sandbox.places import Places

    launcher().begin()
    launcher().ensure()  # its ``ready``; the census is the next message
    sent = _readable(launcher()._sock, 30)
    if change == "link":  # another name, in the grant, of a program the census listed
        os.link(os.path.join(lb, "tool1"), os.path.join(proj, "copy"))
    elif change == "program":  # a new program on PATH, with another name in the grant
        with open(os.path.join(lb, "new"), "w") as f:
            f.write("#!/bin/sh\\n")
        os.link(os.path.join(lb, "new"), os.path.join(proj, "copy"))
    listed = []
    real = pathlinks._Programs._list
    def counted(self, d, *args):
        listed.append(d)
        return real(self, d, *args)
    pathlinks._Programs._list = counted
    found = pathlinks.hard_links([lb], [], Places([proj]))
    print(json.dumps({{"sent": sent, "adopted": pathlinks._PROGRAMS.adopted, "listed": listed,
                      "found": [[h.name, h.program] for h in found]}}))
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
